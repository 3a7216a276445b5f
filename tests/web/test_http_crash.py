"""Crash safety of the server (SPEC sections 9 and 10): ``kill -9`` mid-stream, restart on the same data
directory, and check that nothing acknowledged was lost, the catalog is back, and a RANGE-window aggregate
carries on with the values an in-process engine computes from everything that was accepted."""

from __future__ import annotations

import http.client
import threading
import time
from pathlib import Path

from httpkit import Server, bag_by_ts, elements

from dsms import Engine
from dsms.archive import Archive

DDL = "REGISTER STREAM s (k INT, v INT)"
AGG = "REGISTER QUERY agg AS SELECT k, SUM(v) AS total, COUNT(*) AS n FROM s [RANGE 500] GROUP BY k"
HOT = "REGISTER QUERY hot AS SELECT ISTREAM(k, COUNT(*) AS n) FROM s [RANGE 100 SLIDE 50] GROUP BY k"
ROWS = 40


def batch(b: int) -> tuple[list[int], dict[str, list[int]]]:
    ts = [b * 10] * ROWS
    return ts, {"k": [(b + i) % 5 for i in range(ROWS)], "v": [b * 100 + i for i in range(ROWS)]}


def archived_rows(data_dir: Path) -> list[tuple[int, int, int]]:
    with Archive(data_dir, read_only=True) as a:
        return [(t, row["k"], row["v"]) for rec in a.read("s") for t, _, row in rec.rows()]


def test_kill_9_mid_stream_then_recover(make_server) -> None:
    srv: Server = make_server().start()
    srv.cql(f"{DDL}; {AGG}; {HOT}")
    ids = {q["name"]: q["id"] for q in srv.get("/queries").json()["queries"]}
    # a reader is streaming results when the server dies
    reader = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    reader.request("GET", f"/queries/{ids['agg']}/results")
    resp = reader.getresponse()
    assert resp.status == 200
    acked: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        b = 0
        while not stop.is_set():
            ts, cols = batch(b)
            try:
                r = srv.post("/streams/s/elements", json_body={"ts": ts, "cols": cols}, timeout=10)
            except OSError:
                return
            if r.status != 200:
                return
            acked.append(b)
            b += 1

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert resp.read1(100)                 # results were flowing
    srv.kill()
    stop.set()
    t.join(15)
    reader.close()
    assert len(acked) >= 40
    # nothing acknowledged is lost; at most the one request in flight got in besides
    rows = archived_rows(srv.data_dir)
    want = [(ts, k, v) for b in acked for ts, k, v in zip(batch(b)[0], *batch(b)[1].values())]
    assert rows[:len(want)] == want
    extra = len(rows) - len(want)
    assert extra in (0, ROWS)
    n_batches = len(rows) // ROWS
    # restart on the same data directory
    srv2: Server = make_server(data_dir=srv.data_dir).start()
    back = {q["name"]: q for q in srv2.get("/queries").json()["queries"]}
    assert {n: q["id"] for n, q in back.items()} == ids
    assert back["agg"]["text"] == AGG
    rec = srv2.get("/system").json()["runtime"]["recovery"]
    assert rec["frames"] >= n_batches and rec["entries"] == 3
    # carry on
    for b in range(n_batches, n_batches + 10):
        ts, cols = batch(b)
        assert srv2.post("/streams/s/elements", json_body={"ts": ts, "cols": cols}).status == 200
    end = (n_batches + 10) * 10 + 1000
    assert srv2.post("/streams/s/elements", json_body=[{"heartbeat": end}]).status == 200
    eng = Engine()
    eng.execute(DDL)
    qa, qh = eng.execute(AGG), eng.execute(HOT)
    for b in range(n_batches + 10):
        ts, cols = batch(b)
        eng.push("s", cols, ts)
    eng.heartbeat(end)
    eng.run()
    for q, name in ((qa, "agg"), (qh, "hot")):
        expected = q.drain()
        n = len(expected)
        got = srv2.wait_results(ids[name], lambda items, n=n: len(elements(items)) >= n)
        assert bag_by_ts(elements(got)) == bag_by_ts(expected), name
    srv2.stop()


def test_torn_archive_tail_is_cut_on_restart(make_server) -> None:
    srv: Server = make_server().start()
    srv.cql(f"{DDL}; {AGG}")
    for b in range(5):
        ts, cols = batch(b)
        assert srv.post("/streams/s/elements", json_body={"ts": ts, "cols": cols}).status == 200
    srv.kill()
    seg = sorted((srv.data_dir / "archive" / "s").iterdir())[-1]
    with open(seg, "ab") as f:
        f.write(b"\x40\x00\x00\x00garbage-of-a-torn-write")
    srv2: Server = make_server(data_dir=srv.data_dir).start()
    rec = srv2.get("/system").json()["runtime"]["recovery"]
    assert rec["truncated_bytes"] > 0
    ts, cols = batch(5)
    assert srv2.post("/streams/s/elements", json_body={"ts": ts, "cols": cols}).status == 200
    srv2.stop()
    assert len(archived_rows(srv.data_dir)) == 6 * ROWS
