"""The statistics the GUI shows (web/telemetry.py), computed by the server from a real runtime: memory totals
that count a shared window store once, result rates between samples, a bounded history; and the HTTP
endpoints that serve them (/stats/stream, /stats/history, /entities/{id}/attributes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from httpkit import Server

from dsms.runtime import Runtime
from web.telemetry import Telemetry


def make(tmp_path: Path) -> Runtime:
    return Runtime({"data_dir": str(tmp_path / "data"), "archive.fsync": "never"})


async def settle(rt: Runtime) -> None:
    for _ in range(10_000):
        await asyncio.sleep(0)
        if rt.backlog() == 0 and not rt.pump.work.is_set():
            return


def test_memory_counts_a_shared_window_store_once(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path)
        await rt.start()
        try:
            rt.execute("REGISTER STREAM s (a INT, b FLOAT); "
                       "REGISTER QUERY q1 AS SELECT a, COUNT(*) AS n FROM s [RANGE 1000] GROUP BY a; "
                       "REGISTER QUERY q2 AS SELECT a, MAX(b) AS m FROM s [RANGE 2000] GROUP BY a")
            await rt.ingest("s", {"a": list(range(50)), "b": [float(i) for i in range(50)]}, list(range(50)))
            await settle(rt)
            per, totals = Telemetry(rt).memory()
            syn = [e for e in rt.entities() if e["id"].startswith("syn:")]
            stores = [e for e in syn if e["kind"] == "shared_store"]
            windows = [e for e in syn if e["kind"] == "window"]
            assert len(stores) == 1 and stores[0]["windows"] == 2 and len(windows) == 2
            assert all(w["bytes"] > 0 for w in windows)
            # both windows hold views of the same arrays: the store counts them once, the total takes the store
            assert totals["synopses"] == sum(e["bytes"] for e in syn) - sum(w["bytes"] for w in windows)
            queues = [e for e in rt.entities() if e["id"].startswith("queue:")]
            assert totals["queues"] == sum(q["bytes"] for q in queues)
            assert totals["total"] == totals["queues"] + totals["synopses"]
            assert per == {e["id"]: e["bytes"] for e in syn + queues}
        finally:
            await rt.stop()
    asyncio.run(main())


def test_result_rate_and_bounded_history(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path)
        await rt.start()
        try:
            rt.execute("REGISTER STREAM s (a INT); REGISTER QUERY q AS SELECT a FROM s WHERE a >= 5")
            tel = Telemetry(rt, keep=3)
            tel.sample()
            assert tel.result_rates == {}
            await rt.ingest("s", {"a": list(range(10))}, list(range(10)))
            await settle(rt)
            await asyncio.sleep(0.05)
            tel.sample()
            assert tel.result_rates["q1"] > 0              # 5 results since the first sample
            tel.sample()
            assert tel.result_rates["q1"] == 0.0            # nothing new since
            tel.sample()
            assert len(tel.samples) == 3                    # keep=3
            hist = tel.series(["queue:0", "nope"])
            assert len(hist["t"]) == 3 and hist["series"]["nope"] == [None, None, None]
            summary = tel.query_summary("q")
            assert summary["results_out"] == 5 and summary["exact"] is True and summary["kind"] == "stream"
        finally:
            await rt.stop()
    asyncio.run(main())


def test_stats_endpoints(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT); REGISTER QUERY {uniq}q AS SELECT a FROM {uniq} [RANGE 10]")
    r = server.get(f"/stats/stream?query={uniq}q&follow=false")
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.body.decode().split("\n\n") if e.strip()]
    assert len(events) == 1 and events[0].startswith("data: ")
    snap = json.loads(events[0][len("data: "):])
    plan = server.get(f"/queries/{uniq}q/plan").json()
    ids = {x["id"] for x in plan["operators"] + plan["queues"] + plan["synopses"]}
    assert set(snap["plan_ids"]) == ids == set(snap["entities"])
    assert snap["query"]["name"] == f"{uniq}q"
    over = server.get("/stats/stream?follow=false").body.decode()
    assert any(s["name"] == uniq for s in json.loads(over.split("\n\n")[0][len("data: "):])["sources"])
    assert server.get("/stats/stream?query=nope&follow=false").status == 404
    assert server.get("/stats/stream?interval_ms=1&follow=false").status == 400
    hist = server.get(f"/stats/history?query={uniq}q").json()
    assert set(hist["kinds"]) == {x["id"] for x in plan["queues"] + plan["synopses"]}
    assert set(hist["series"]) == set(hist["kinds"]) and all(len(v) == len(hist["t"]) for v in hist["series"].values())
    assert set(server.get("/stats/history").json()["series"]) == {"total", "queues", "synopses"}
    window = next(op["id"] for op in plan["operators"] if op["kind"] == "range_window")
    attrs = server.get(f"/entities/{window}/attributes").json()
    rng = next(a for a in attrs["attributes"] if a["name"] == "range")
    assert rng["writable"] and rng["value"] == 10 and rng["range"] == {"ge": 1} and rng["unit"] == "ticks"
    assert attrs["history"] == []
    assert server.get("/entities/op:999999/attributes").json()["error"] == "not found"
    page = server.get("/")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert server.get("/static/vendor/cytoscape/LICENSE").status == 200
    assert server.get("/static/../routes.py").status == 404
