"""Issue 14 item 0, catalog changes: a REGISTER or an entity's knob write waits for the input before it to be
processed without freezing the server (dsms/runtime/barrier.py, EnginePump.drain), input sent while it waits
is held and seen by it exactly as if it had completed first, and concurrent changes keep their arrival order.

The backlog is the self-join of tests/overload/test_responsive.py: 20,000 rows of ten keys paired in
4 * 10^7 pairs take seconds of engine slices; before the barrier, a REGISTER sent meanwhile ran the engine to
idle on the event loop and every other request waited those seconds."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from httpkit import Server, bag_by_ts, elements, wait_for  # noqa: E402
from oracle.reference import Reference  # noqa: E402

BIG = ("REGISTER QUERY big AS SELECT COUNT(*) AS n FROM S [RANGE 100000] X, S [RANGE 100000] Y "
       "WHERE X.a = Y.a")


def _backlog(srv: Server, n: int) -> list[int]:
    """Push ``n`` rows of ten keys into S and a heartbeat: the self-join ``big`` has seconds of work."""
    a = np.random.default_rng(7).integers(0, 10, n).tolist()
    r = srv.post("/streams/S/elements", json_body={"ts": list(range(n)), "cols": {"a": a, "b": [1.0] * n}})
    assert r.status == 200, r
    assert srv.ndjson("S", [{"heartbeat": n}]).status == 200
    return a


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run one request in a thread; ``out`` gets its response and when it was sent and answered."""
    out: dict[str, Any] = {}

    def run() -> None:
        out["t0"] = time.perf_counter()
        out["response"] = fn(*args)
        out["t1"] = time.perf_counter()
    t = threading.Thread(target=run)
    t.start()
    return t, out


def _barrier(srv: Server) -> dict[str, int]:
    return srv.get("/system").json()["runtime"]["barrier"]


def _exact_big(srv: Server, a: list[int]) -> None:
    want = sum(c * c for c in Counter(a).values())
    items = srv.wait_results("big", lambda its: any(i.get("row", {}).get("n") == want for i in its), timeout=240)
    assert elements(items)[-1]["row"]["n"] == want and elements(items)[-1]["sign"] == 1, items[-3:]


def test_register_and_knob_write_during_a_big_backlog_do_not_freeze_the_server(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql(f"REGISTER STREAM S (a INT, b FLOAT); REGISTER STREAM L (k INT); {BIG}; "
                "REGISTER QUERY light AS SELECT ISTREAM(k) FROM L")
        ops = [e["id"] for e in srv.get("/entities?query=light").json()["entities"] if e["id"].startswith("op:")]
        assert ops
        a = _backlog(srv, 20_000)
        lat: list[tuple[float, float]] = []         # (sent, seconds) of every poll
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                for path in ("/system", "/queries/light/results?follow=false"):
                    t0 = time.perf_counter()
                    got = srv.get(path, timeout=60)
                    lat.append((t0, time.perf_counter() - t0))
                    assert got.status == 200, got

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            wait_for(lambda: len(lat) >= 4, 30, "a few polls answered before the changes are sent")
            reg, reg_out = _in_thread(lambda: srv.post("/queries", timeout=120, json_body={
                "cql": "REGISTER QUERY light2 AS SELECT ISTREAM(k) FROM L"}))
            knob, knob_out = _in_thread(lambda: srv.request("PATCH", f"/entities/{ops[0]}",
                                                            json_body={"priority": 3}, timeout=120))
            wait_for(lambda: _barrier(srv)["changes_waiting"] == 2, 30, "the REGISTER and the knob write waiting")
            t0 = time.perf_counter()        # the system entity changes no result: written at once
            sys_write = srv.request("PATCH", "/entities/sys:0", json_body={"load_threshold": 0.7})
            sys_seconds = time.perf_counter() - t0
            assert sys_write.status == 200 and sys_write.json()["load_threshold"] == 0.7, sys_write
            assert _barrier(srv)["changes_waiting"] == 2
            reg.join(150)
            knob.join(150)
        finally:
            stop.set()
            poller.join()
        assert reg_out["response"].status == 201, reg_out["response"]
        assert knob_out["response"].status == 200 and knob_out["response"].json()["priority"] == 3, \
            knob_out["response"]
        assert srv.get(f"/entities/{ops[0]}").json()["priority"] == 3
        # the REGISTER waited for the backlog (seconds), and the server kept answering meanwhile
        start, end = reg_out["t0"], reg_out["t1"]
        during = sorted(d for t0, d in lat if start <= t0 and t0 + d <= end)
        assert end - start > 0.5, f"the REGISTER took {end - start:.2f} s: no backlog to wait for"
        assert len(during) >= 20, f"{len(during)} polls answered in the {end - start:.1f} s the REGISTER waited"
        p99 = during[int(0.99 * (len(during) - 1))]
        assert p99 < 0.1, f"p99 {p99 * 1000:.1f} ms over {len(during)} polls; worst {during[-1] * 1000:.1f} ms"
        assert sys_seconds < 1.0, sys_seconds
        every = sorted(d for _, d in lat)
        assert every[int(0.99 * (len(every) - 1))] < 0.1, every[-5:]
        _exact_big(srv, a)
        # the new query reads what comes after it
        assert srv.ndjson("L", [{"ts": 1, "row": {"k": 42}}, {"heartbeat": 2}]).status == 200
        got = srv.wait_results("light2", lambda its: len(elements(its)) == 1)
        assert [(e["ts"], e["row"]) for e in elements(got)] == [(1, {"k": 42})]
    finally:
        srv.stop()


def _reference(rows: list[tuple[int, int]], until: int) -> list[tuple[int, int, dict]]:
    """The reference evaluator's answer of the query registered while the backlog is worked off, over M."""
    ref = Reference()
    ref.execute("REGISTER STREAM M (k INT)")
    name = ref.execute("REGISTER QUERY late AS SELECT ISTREAM(k, COUNT(*) AS n) FROM M [RANGE 5] GROUP BY k")
    for t, k in rows:
        ref.push("M", [{"k": k}], ts=[t])
    return ref.results(name, until)


def test_input_sent_while_a_register_waits_is_held_and_seen_by_it(tmp_path: Path) -> None:
    """A push sent after a REGISTER that is still waiting is applied after it (the new query sees it, as if
    the REGISTER had completed first); REGISTERs sent one after another while the backlog is worked off keep
    that order in the catalog, and a restart (which replays the catalog between the archived input) gives
    the same ids and results."""
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql(f"REGISTER STREAM S (a INT, b FLOAT); REGISTER STREAM M (k INT); {BIG}")
        n = 20_000
        a = _backlog(srv, n)
        threads: list[tuple[threading.Thread, dict[str, Any]]] = []
        names = ["late", "c1", "c2", "c3"]
        late = "REGISTER QUERY late AS SELECT ISTREAM(k, COUNT(*) AS n) FROM M [RANGE 5] GROUP BY k"
        threads.append(_in_thread(srv.cql, late))
        wait_for(lambda: _barrier(srv)["changes_waiting"] >= 1, 30, "the REGISTER waiting for the backlog")
        # input sent now is held behind the REGISTER: on M (read only by the new query) and on S
        m_rows = [(n + 1 + t, t % 3) for t in range(12)]
        push_m = _in_thread(srv.ndjson, "M", [{"ts": t, "row": {"k": k}} for t, k in m_rows]
                            + [{"heartbeat": n + 40}])
        # (without the hold it would reach the engine before "late" exists, and "late" would see none of it)
        wait_for(lambda: _barrier(srv)["inputs_held"] >= 1, 30, "the push to M held behind the REGISTER")
        push_s = _in_thread(srv.ndjson, "S", [{"ts": n + 5, "row": {"a": 99, "b": 2.0}}, {"heartbeat": n + 6}])
        wait_for(lambda: _barrier(srv)["inputs_held"] >= 2, 30, "the push to S held behind the REGISTER")
        # more REGISTERs, each sent once the one before is waiting: the catalog keeps this order
        for k, name in enumerate(names[1:], start=2):
            threads.append(_in_thread(srv.cql, f"REGISTER QUERY {name} AS SELECT a, b FROM S WHERE b > 1.5"))
            wait_for(lambda k=k: _barrier(srv)["changes_waiting"] >= k, 30, f"REGISTER {name} waiting")
        assert _barrier(srv)["changes_waiting"] == 4 and _barrier(srv)["inputs_held"] == 2
        assert _barrier(srv)["rows_held"] == 13          # counted in the backlog that admission judges
        metrics = srv.get("/metrics").body.decode().splitlines()
        assert "dsms_catalog_changes_waiting 4" in metrics and "dsms_input_held_tuples 13" in metrics
        for t, _ in [*threads, push_m, push_s]:
            t.join(240)
        assert [out["response"][0]["name"] for _, out in threads] == names
        assert push_m[1]["response"].status == 200 and push_s[1]["response"].status == 200
        assert _barrier(srv) == {"changes_waiting": 0, "inputs_held": 0, "rows_held": 0}
        ids = {q["name"]: q["id"] for q in srv.get("/queries").json()["queries"]}
        assert [ids[name] for name in names] == ["q2", "q3", "q4", "q5"], ids
        _exact_big(srv, a + [99])
        want = bag_by_ts([{"ts": ts, "sign": sign, "row": row} for ts, sign, row in _reference(m_rows, n + 40)])
        assert len(want) > 12
        got: list[dict] = []
        try:
            got = srv.wait_results("late", lambda its: bag_by_ts(elements(its)) == want)
        finally:
            assert bag_by_ts(elements(got)) == want, got[-5:]
        # the push to S was sent before c1..c3 and held behind "late": applied before them, so none sees it
        for name in names[1:]:
            assert elements(srv.results(name)) == [], name
        assert srv.ndjson("S", [{"ts": n + 50, "row": {"a": 1, "b": 3.0}}]).status == 200
        for name in names[1:]:
            srv.wait_results(name, lambda its: [e["row"] for e in elements(its)] == [{"a": 1, "b": 3.0}])
        before = {name: bag_by_ts(elements(srv.results(name))) for name in names}
        srv.stop()
        srv = Server(tmp_path / "data").start(timeout=180)       # recovery replays the join
        ids2 = {q["name"]: q["id"] for q in srv.get("/queries").json()["queries"]}
        assert ids2 == ids
        for name in names:
            assert bag_by_ts(elements(srv.results(name, **{"from": 0}))) == before[name], name
    finally:
        srv.stop()

