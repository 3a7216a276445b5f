"""What a replay runs: the query and the catalog it reads, rebuilt from a data directory's catalog log
(``catalog.snapshot`` + ``catalog.log``, or the older ``catalog.json``; ``read_catalog_entries``)
(SPEC section 9; the log's format is the server runtime's, docs/server.md).

The log holds every catalog change in the order the server applied it (CQL statements, drops, knob writes),
each stamped ``at`` with the archive position (per input, the next frame's sequence number) when it happened.
Replaying the log's statements into a fresh :class:`dsms.Engine` gives the same catalog and the same query ids
(``q3``) the server had, without reading any input: that is how ``--query-id`` is resolved and how the planner
gets the query's logical plan. Only what the query reads (its streams, relations, views and named queries, at
any depth) is kept for the engines that run the replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsms.cql import ast
from dsms.cql.parser import parse
from dsms.errors import DsmsError
from dsms.runtime.catalog_log import (
    CATALOG_NAME,
    LEGACY_NAME,
    SNAPSHOT_NAME,
    CatalogDamaged,
    read_catalog_entries,
)

CATALOG_FILES = (SNAPSHOT_NAME, CATALOG_NAME, LEGACY_NAME)


class ReplayError(DsmsError):
    """A replay that cannot run as asked: bad data directory, unknown query, CQL that does not parse, empty
    range, unreachable master. The message names what and where."""


class UnknownQuery(ReplayError):
    """``--query-id`` names no query of the catalog (HTTP 404)."""


@dataclass(frozen=True)
class ReplaySpec:
    """Everything a Spark task needs to rebuild the engine and feed it (plain data: it is pickled to executors).

    ``setup``: CQL statements run before the query, in catalog order (the streams, relations, views and named
    queries it reads). ``inputs``: archive input name (lower case) -> ``"stream"`` or ``"relation"``.
    ``start_seq``: per stream input, the first frame the query saw live (its registration position; a query
    given as text sees everything). ``from_ts``/``to_ts``: the instants whose results are written,
    ``[from_ts, to_ts)``, either may be None."""

    data_dir: str
    setup: tuple[str, ...]
    query: str
    query_id: str | None
    inputs: dict[str, str]
    start_seq: dict[str, int] = field(default_factory=dict)
    from_ts: int | None = None
    to_ts: int | None = None

    def engine(self) -> Any:
        """A fresh engine with the catalog and the query registered: ``(engine, query)``."""
        from dsms import Engine

        eng = Engine()
        for text in self.setup:
            eng.execute(text)
        return eng, eng.execute(self.query)


def _read_log(data_dir: Path) -> list[dict[str, Any]]:
    if not data_dir.exists():
        raise ReplayError(f"data directory '{data_dir}' does not exist")
    if not data_dir.is_dir():
        raise ReplayError(f"data directory '{data_dir}' is not a directory")
    if not any((data_dir / n).exists() for n in CATALOG_FILES) and not (data_dir / "archive").is_dir():
        raise ReplayError(f"'{data_dir}' is not a dsms data directory (no {', '.join(CATALOG_FILES)}, no archive/)")
    try:
        return read_catalog_entries(data_dir)
    except CatalogDamaged as e:
        raise ReplayError(str(e)) from None


def _defined_name(stmt: Any) -> str | None:
    if isinstance(stmt, ast.RegisterStream | ast.RegisterRelation | ast.RegisterView):
        return stmt.name.lower()
    if isinstance(stmt, ast.RegisterQuery) and stmt.name:
        return stmt.name.lower()
    return None


def load_spec(data_dir: str | Path, *, query: str | None = None, query_id: str | None = None,
              from_ts: int | None = None, to_ts: int | None = None) -> tuple[ReplaySpec, Any, Any]:
    """Resolve a replay request against a data directory: ``(spec, engine, query)``, where ``engine`` is the
    catalog rebuilt without input and ``query`` the registered query in it (for the planner and EXPLAIN).

    Exactly one of ``query`` (CQL text) and ``query_id`` (an id such as ``q3``, or a query's name)."""
    from dsms import Engine

    if (query is None) == (query_id is None):
        raise ReplayError("give exactly one of a query (CQL text) and a query id")
    if from_ts is not None and to_ts is not None and to_ts <= from_ts:
        raise ReplayError(f"empty time range: --from {from_ts} is not below --to {to_ts}")
    data_dir = Path(data_dir)
    entries = _read_log(data_dir)
    eng = Engine()
    texts: dict[str, str] = {}          # defined name -> its statement, as last registered
    order: dict[str, int] = {}          # defined name -> log position (statements keep catalog order)
    registered_at: dict[str, dict[str, int]] = {}     # query id -> archive position at its registration
    for i, entry in enumerate(entries):
        op = entry.get("op") if isinstance(entry, dict) else None
        try:
            if op == "cql":
                text = entry["cql"]
                before = {q.id for q in eng.queries()}
                eng.execute(text)
                stmts = parse(text)
                name = _defined_name(stmts[0]) if len(stmts) == 1 else None
                if name is not None:
                    texts[name], order[name] = text, i
                for q in eng.queries():
                    if q.id not in before:
                        registered_at[q.id] = dict(entry.get("at") or {})
            elif op == "drop":
                eng.drop(entry["name"], entry.get("kind"))
        except (DsmsError, KeyError, TypeError) as e:
            # the server skipped it too when it recovered (it logs the same entry as not re-applicable)
            del e
        if isinstance(entry, dict) and entry.get("ids"):
            eng.advance_id_counters(entry["ids"])    # ids as the server had them, whatever failed to apply
    if query_id is not None:
        try:
            q = eng.query(query_id)
        except DsmsError:
            known = ", ".join(f"{x.id}{f' ({x.name})' if x.name else ''}" for x in eng.queries()) or "none"
            raise UnknownQuery(f"no query '{query_id}' in the catalog of '{data_dir}' (registered: {known})") from None
        text = q.text
        if not text:
            raise ReplayError(f"query '{query_id}' was loaded from a plan file and has no CQL text to replay")
        start = registered_at.get(q.id, {})
    else:
        text = query
        try:
            q = eng.execute(query)
        except DsmsError as e:
            raise ReplayError(f"the query does not compile: {e}") from None
        if isinstance(q, list) or not hasattr(q, "drain"):
            raise ReplayError("--query takes one query (SELECT ..., ISTREAM(...), REGISTER QUERY/VIEW ... AS ...)")
        start = {}
    needed = _closure(eng, q)
    setup = tuple(texts[n] for n in sorted((n for n in needed if n in texts), key=order.__getitem__)
                  if n != (q.name or "").lower())
    inputs = {n: eng.sources[n].obj.kind for n in needed if n in eng.sources}
    start_seq = {n: int(start[n]) for n in inputs if inputs[n] == "stream" and int(start.get(n, 0)) > 0}
    spec = ReplaySpec(str(data_dir), setup, text, q.id if query_id is not None else None, inputs, start_seq,
                      from_ts, to_ts)
    return spec, eng, q


def _closure(eng: Any, q: Any) -> set[str]:
    """Lower-case names of every catalog object the query reads, through views and named queries."""
    seen: set[str] = set()
    todo = list(q.definition.depends_on)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in eng.sources:
            try:
                todo.extend(eng.query(name).definition.depends_on)
            except DsmsError:
                pass
    return seen
