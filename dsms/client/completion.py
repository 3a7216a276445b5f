"""Tab completion for the shell: the names of the server's streams, relations, views and queries and their
columns (fetched over HTTP, refreshed after each statement), CQL keywords, and the shell's own commands."""

from __future__ import annotations

import re
from collections.abc import Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from dsms.client.http import DsmsClient, ServerError, Unreachable

KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "DISTINCT", "AS", "AND", "OR", "NOT", "IN", "BETWEEN", "LIKE",
    "EXISTS", "CASE", "WHEN", "THEN", "ELSE", "END", "UNION", "EXCEPT", "INTERSECT", "ALL", "ISTREAM", "DSTREAM",
    "RSTREAM", "RANGE", "ROWS", "SLIDE", "NOW", "UNBOUNDED", "PARTITION BY", "SECONDS", "MINUTES", "HOURS", "DAYS",
    "MILLISECONDS", "JOIN", "INNER JOIN", "CROSS JOIN", "ON", "COUNT", "SUM", "AVG", "MIN", "MAX", "LOWER", "UPPER",
    "LENGTH", "ABS", "REGISTER", "STREAM", "RELATION", "QUERY", "VIEW", "DROP", "SHOW", "STREAMS", "RELATIONS",
    "VIEWS", "QUERIES", "DESCRIBE", "EXPLAIN", "INT", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP", "PUBLISH TO MQTT",
    "FROM MQTT", "FORMAT", "SAMPLE",
)
COMMANDS = ("\\help", "\\follow", "\\quit", "\\q")
_WORD = re.compile(r"[\\\w.]*$")
_PREVIOUS = re.compile(r"([\\\w]+)\s+[\\\w.]*$")
# after these words only a catalog name makes sense
_NAME_CONTEXT = frozenset({"FROM", "JOIN", "DESCRIBE", "DESC", "EXPLAIN", "STREAM", "RELATION", "QUERY", "VIEW",
                           "\\FOLLOW"})


class CatalogCompleter(Completer):
    """Completes the word before the cursor; ``alias.`` completes column names."""

    def __init__(self, client: DsmsClient) -> None:
        self.client = client
        self.names: list[str] = []
        self.columns: list[str] = []

    def refresh(self) -> None:
        """Fetch the names again (quietly keeps the old ones when the server does not answer)."""
        try:
            streams = self.client.get("/streams")["streams"]
            relations = self.client.get("/relations")["relations"]
            queries = self.client.get("/queries")["queries"]
        except (ServerError, Unreachable, KeyError, TypeError):
            return
        names: list[str] = []
        columns: list[str] = []
        for obj in [*streams, *relations]:
            names.append(obj["name"])
            columns += [c["name"] for c in obj.get("columns", [])]
        for q in queries:
            names.append(q["name"] or q["id"])
            columns += [c["name"] for c in q.get("schema", [])]
        self.names = list(dict.fromkeys(names))
        self.columns = list(dict.fromkeys(columns))

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        word = _WORD.search(document.text_before_cursor).group()
        if word.startswith("\\"):
            candidates: list[tuple[str, str]] = [(c, "command") for c in COMMANDS]
            prefix = word
        elif "." in word:
            prefix = word.rsplit(".", 1)[1]
            candidates = [(c, "column") for c in self.columns]
        else:
            prefix = word
            if not prefix and not complete_event.completion_requested:
                return
            before = _PREVIOUS.search(document.text_before_cursor)
            if before is not None and before.group(1).upper() in _NAME_CONTEXT:
                candidates = [(n, "name") for n in self.names]
                for text, meta in candidates:
                    if text.lower().startswith(prefix.lower()):
                        yield Completion(text, start_position=-len(prefix), display_meta=meta)
                return
            lower = prefix.islower()
            candidates = [(n, "name") for n in self.names] + [(c, "column") for c in self.columns] + [
                (k.lower() if lower else k, "keyword") for k in KEYWORDS]
        seen = set()
        for text, meta in candidates:
            if text.lower().startswith(prefix.lower()) and text not in seen:
                seen.add(text)
                yield Completion(text, start_position=-len(prefix), display_meta=meta)
