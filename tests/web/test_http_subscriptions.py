"""A reader of a relation-valued query starts from its current contents (a snapshot), then the changelog; SSE
events carry ids, and a client whose connection drops resumes with Last-Event-ID without losing or repeating an
element (issue 17; docs/http-api.md, "GET /queries/{id}/results")."""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter

from httpkit import Server, elements
from oracle.reference import Reference

DDL = "REGISTER STREAM {s} (item INT, price FLOAT)"
BUSY = "SELECT item, COUNT(*) AS n, MAX(price) AS top FROM {s} [RANGE 10] GROUP BY item"
FIRST = [(1, 1, 2.0), (2, 1, 3.0), (3, 2, 5.0), (6, 3, 1.0)]          # (ts, item, price)
LATER = [(12, 2, 4.0), (13, 1, 9.0)]


class Reader:
    """A streaming HTTP reader of a query's results that can drop its connection as a browser does when the
    network goes: the socket is closed with results still unread."""

    def __init__(self, server: Server, path: str, headers: dict[str, str] | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
        self.conn.request("GET", path, headers=headers or {})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        self.buf = b""

    def events(self, until, timeout: float = 20.0) -> list[dict]:
        """SSE events (``{"id": .., "data": {...}}``) until ``until(events)`` holds."""
        out: list[dict] = []
        deadline = time.monotonic() + timeout
        while not until(out):
            assert time.monotonic() < deadline, f"events so far: {out}"
            while b"\n\n" not in self.buf:
                self.buf += self.resp.read1(65536)
            block, self.buf = self.buf.split(b"\n\n", 1)
            ev: dict = {}
            for line in block.decode().splitlines():
                if line.startswith("id: "):
                    ev["id"] = int(line[4:])
                elif line.startswith("data: "):
                    ev["data"] = json.loads(line[6:])
            if "data" in ev:
                out.append(ev)
        return out

    def lines(self, until, timeout: float = 20.0) -> list[dict]:
        """NDJSON items until ``until(items)`` holds."""
        out: list[dict] = []
        deadline = time.monotonic() + timeout
        while not until(out):
            assert time.monotonic() < deadline, f"items so far: {out}"
            while b"\n" not in self.buf:
                self.buf += self.resp.read1(65536)
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))
        return out

    def drop(self) -> None:
        self.conn.sock.close()
        self.conn.close()


def _push(server: Server, s: str, rows, heartbeat: int) -> None:
    items = [{"ts": t, "row": {"item": i, "price": p}} for t, i, p in rows] + [{"heartbeat": heartbeat}]
    assert server.ndjson(s, items).status == 200


def _reference_contents(s: str, rows, until: int) -> Counter:
    """R(until - 1) of BUSY by the reference evaluator: its changelog summed up to that instant."""
    ref = Reference()
    ref.execute(DDL.format(s=s))
    name = ref.execute("REGISTER QUERY busy_ref AS " + BUSY.format(s=s))
    for t, i, p in rows:
        ref.push(s, [{"item": i, "price": p}], ts=[t])
    contents: Counter = Counter()
    for _ts, sign, row in ref.results(name, until):
        contents[tuple(sorted(row.items()))] += sign
    return +contents


def _bag(rows) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in rows)


def test_a_relation_reader_starts_from_the_contents_then_the_changelog(server: Server, uniq: str) -> None:
    s = uniq
    server.cql(f"{DDL.format(s=s)}; REGISTER QUERY {s}_busy AS {BUSY.format(s=s)}")
    _push(server, s, FIRST, heartbeat=8)
    server.wait_results(f"{s}_busy", lambda it: any(e.get("ts") == 6 for e in it))
    reader = Reader(server, f"/queries/{s}_busy/results")
    head = reader.lines(lambda it: it and "snapshot" in it[0] and len(it) == 1 + it[0]["snapshot"]["rows"])
    assert head[0] == {"snapshot": {"ts": 7, "rows": 3}}                   # R(7): everything below 8 is final
    snap = head[1:]
    assert all(e["snapshot"] is True and e["ts"] == 7 and e["sign"] == 1 for e in snap)
    assert _bag(e["row"] for e in snap) == _reference_contents(s, FIRST, 8)
    # then the changelog: what changes after 8, applied to the snapshot, gives the reference's contents
    _push(server, s, LATER, heartbeat=20)
    contents = Counter(_bag(e["row"] for e in snap))
    changes = reader.lines(lambda it: any(e.get("heartbeat", 0) >= 20 for e in it))
    assert not any("snapshot" in e for e in changes)
    for e in elements(changes):
        contents[tuple(sorted(e["row"].items()))] += e["sign"]
    assert +contents == _reference_contents(s, FIRST + LATER, 20)
    reader.drop()
    # follow=false: the retained changelog, as before (no snapshot unless asked for)
    retained = server.results(f"{s}_busy")
    assert elements(retained) and not any("snapshot" in e for e in retained)
    asked = server.results(f"{s}_busy", snapshot="true")
    assert asked[0]["snapshot"]["ts"] == 19 and len(asked) == 1 + asked[0]["snapshot"]["rows"]
    assert _bag(e["row"] for e in asked[1:]) == _reference_contents(s, FIRST + LATER, 20)


def test_sse_resumes_after_a_dropped_connection_without_loss_or_repeats(server: Server, uniq: str) -> None:
    s = uniq
    server.cql(f"{DDL.format(s=s)}; REGISTER QUERY {s}_all AS SELECT item, price FROM {s}")
    _push(server, s, FIRST, heartbeat=8)
    url = f"/queries/{s}_all/results?from=0"                  # a page's EventSource URL, kept on reconnect
    first = Reader(server, url, {"Accept": "text/event-stream"})
    got = first.events(lambda ev: len(ev) == 2)
    first.drop()                                              # the network goes after two events
    _push(server, s, LATER, heartbeat=20)
    again = Reader(server, url, {"Accept": "text/event-stream", "Last-Event-ID": str(got[-1]["id"])})
    got += again.events(lambda ev: any(e["data"].get("row", {}).get("price") == 9.0 for e in ev))
    again.drop()
    items = [e for e in got if "row" in e["data"]]
    assert [e["id"] for e in items] == [1, 2, 3, 4, 5, 6]     # every element once, in order
    assert [(e["data"]["ts"], e["data"]["row"]["item"]) for e in items] == [(t, i) for t, i, _ in FIRST + LATER]


def test_sse_relation_resume_and_a_position_that_left_the_retention(server: Server, uniq: str) -> None:
    s = uniq
    server.cql(f"{DDL.format(s=s)}; REGISTER QUERY {s}_busy AS {BUSY.format(s=s)};"
               f"REGISTER QUERY {s}_all AS SELECT item FROM {s}")
    _push(server, s, FIRST, heartbeat=8)
    server.wait_results(f"{s}_busy", lambda it: any(e.get("ts") == 6 for e in it))
    url = f"/queries/{s}_busy/results?format=sse"
    first = Reader(server, url)
    snap = first.events(lambda ev: ev and len(ev) == 1 + ev[0]["data"]["snapshot"]["rows"])
    last_id = snap[-1]["id"]                                  # only the snapshot's last event has an id
    assert all("id" not in e for e in snap[:-1]) and last_id == len(server.results(f"{s}_busy"))
    first.drop()
    _push(server, s, LATER, heartbeat=20)
    again = Reader(server, url, {"Last-Event-ID": str(last_id)})
    # below 20 the last change is item 3 leaving the window at 16
    changes = again.events(lambda ev: any(e["data"].get("ts") == 16 for e in ev))
    again.drop()
    assert not any("snapshot" in e["data"] for e in changes)
    contents = _bag(e["data"]["row"] for e in snap[1:])
    for e in changes:
        if "row" in e["data"]:
            contents[tuple(sorted(e["data"]["row"].items()))] += e["data"]["sign"]
    assert +contents == _reference_contents(s, FIRST + LATER, 20)
    # positions the server no longer retains: a stream's reader is told what it missed, a relation's starts over
    for q in (f"{s}_all", f"{s}_busy"):
        assert server.request("PATCH", f"/queries/{q}", json_body={"retention": 1}).status == 200
    lost = Reader(server, f"/queries/{s}_all/results?format=sse", {"Last-Event-ID": "1"})
    ev = lost.events(lambda ev: any("row" in e["data"] for e in ev))
    lost.drop()
    assert ev[0]["data"] == {"gap": {"missed": 4, "from_ts": None, "to_ts": None}} and ev[1]["id"] == 6
    fresh = Reader(server, url, {"Last-Event-ID": "1"})
    ev = fresh.events(lambda ev: ev and len(ev) == 1 + ev[0]["data"]["snapshot"]["rows"])
    fresh.drop()
    assert _bag(e["data"]["row"] for e in ev[1:]) == _reference_contents(s, FIRST + LATER, 20)
