"""A query's results as a live table: for a stream, one row per element with its ts and sign (the latest
ones); for a relation, its current contents: the server's snapshot, then the changelog applied to it (a sign -1
removes one copy).
Ctrl-C stops following; the query keeps running on the server."""

from __future__ import annotations

import threading
from collections import Counter, deque
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from dsms.client.http import OLDEST, DsmsClient
from dsms.client.render import table


class ResultView:
    """What the live table shows; fed one NDJSON item at a time (``apply``), drawn by rich (``__rich__``)
    from its refresh thread, hence the lock."""

    def __init__(self, label: str, kind: str, schema: list[dict[str, str]], max_rows: int) -> None:
        self.label = label
        self.kind = kind
        self.names = [c["name"] for c in schema]
        self.max_rows = max(max_rows, 3)
        self.recent: deque[tuple[int, int, tuple]] = deque(maxlen=self.max_rows)
        self.contents: Counter[tuple] = Counter()
        self.elements = 0
        self.last_ts: int | None = None
        self.final: int | None = None
        self.missed = 0
        self.lock = threading.Lock()

    def apply(self, item: dict[str, Any]) -> None:
        with self.lock:
            if "row" in item:
                row = tuple(item["row"].get(n) for n in self.names)
                sign = int(item.get("sign", 1))
                self.elements += 1
                self.last_ts = item.get("ts")
                if self.kind == "relation":
                    self.contents[row] += sign
                    if self.contents[row] <= 0:
                        del self.contents[row]
                else:
                    self.recent.append((item.get("ts"), sign, row))
            elif "snapshot" in item:          # the contents follow: they replace what is held
                self.contents.clear()
                self.last_ts = item["snapshot"].get("ts")
            elif "heartbeat" in item:
                self.final = item["heartbeat"]
            elif "gap" in item:
                self.missed += int(item["gap"].get("missed", 0))

    def __rich__(self) -> Group:
        with self.lock:
            if self.kind == "relation":
                rows = [list(r) for r, n in self.contents.items() for _ in range(n)]
                shown = rows[: self.max_rows]
                t = table(self.names, shown)
                size = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
                more = f", {len(rows) - len(shown)} not shown" if len(rows) > len(shown) else ""
                status = f"{self.label} (relation): {size}{more}"
            else:
                t = table(["ts", "sign", *self.names], [[ts, sign, *row] for ts, sign, row in self.recent])
                status = f"{self.label} (stream): {self.elements} element{'s' if self.elements != 1 else ''}"
                if self.elements > len(self.recent):
                    status += f", the last {len(self.recent)} shown"
            if self.last_ts is not None:
                status += f"; {'as of' if self.kind == 'relation' else 'last element at'} ts {self.last_ts}"
            if self.final is not None:
                status += f"; final below {self.final}"
            if self.missed:
                status += f"; {self.missed} missed (reader too slow)"
            return Group(t, Text(status + ". Ctrl-C stops following.", style="dim"))


def follow(console: Console, client: DsmsClient, query_id: str, label: str, kind: str,
           schema: list[dict[str, str]]) -> None:
    """Show the results of ``query_id`` as they come until Ctrl-C or the query is dropped: a relation from
    its current contents (the server's snapshot), a stream from the oldest result the server retains."""
    view = ResultView(label, kind, schema, max_rows=max(console.size.height - 8, 5))
    items = client.results(query_id, from_ts=None if kind == "relation" else OLDEST)
    try:
        with Live(view, console=console, refresh_per_second=8, auto_refresh=True):
            for item in items:
                view.apply(item)
        console.print(Text(f"{label}: the server ended the results (the query was dropped)", style="dim"))
    except KeyboardInterrupt:
        console.print(Text(f"stopped following {label}; it keeps running (DROP QUERY {label} stops it, "
                           f"\\follow {label} shows it again)", style="dim"))
    finally:
        items.close()
