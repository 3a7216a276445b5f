"""Issue 14 item 0: the server stays responsive whatever the queries do. A self-join that pairs 20,000 rows of
ten keys (4 * 10^7 pairs) runs against a real server while another client polls ``/system`` and a light
query's results (and writes a system knob): every one of those requests is answered quickly (p99 under
100 ms), and the join's answer is still exact."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))

from httpkit import Server  # noqa: E402


def test_a_huge_self_join_does_not_freeze_the_server(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql("REGISTER STREAM S (a INT, b FLOAT); REGISTER STREAM L (k INT);"
                "REGISTER QUERY big AS SELECT COUNT(*) AS n FROM S [RANGE 100000] X, S [RANGE 100000] Y "
                "WHERE X.a = Y.a; REGISTER QUERY light AS SELECT ISTREAM(k) FROM L")
        n = 20_000
        a = np.random.default_rng(7).integers(0, 10, n)
        body = {"ts": list(range(n)), "cols": {"a": a.tolist(), "b": [1.0] * n}}
        r = srv.post("/streams/S/elements", json_body=body)
        assert r.status in (200, 201, 202), r
        assert srv.ndjson("S", [{"heartbeat": n}]).status in (200, 201, 202)
        lat: list[float] = []
        writes: list[float] = []
        stop = threading.Event()

        def poll() -> None:
            k = 0
            while not stop.is_set():
                for path in ("/system", "/queries/light/results?follow=false"):
                    t0 = time.perf_counter()
                    got = srv.get(path, timeout=30)
                    lat.append(time.perf_counter() - t0)
                    assert got.status == 200, got
                srv.ndjson("L", [{"ts": k, "row": {"k": k}}])
                t0 = time.perf_counter()        # a system knob write (logged to disk) is answered soon too
                got = srv.request("PATCH", "/system", json_body={"load_threshold": 0.5 + (k % 2) / 10})
                writes.append(time.perf_counter() - t0)
                assert got.status == 200, got
                k += 1

        t = threading.Thread(target=poll)
        t.start()
        deadline = time.monotonic() + 240
        try:
            while time.monotonic() < deadline:
                sysr = srv.get("/system").json()
                # done, and enough requests timed for a p99 (a fast machine finishes the join in fewer)
                if sysr["backlog"] == 0 and sysr["runtime"]["engine"]["slices"] > 0 and len(lat) >= 50:
                    items = [i for i in srv.results("big") if "row" in i]
                    if items:
                        break
                time.sleep(0.2)
        finally:
            stop.set()
            t.join()
        items = [i for i in srv.results("big") if "row" in i]
        counts = Counter(a.tolist())
        want = sum(c * c for c in counts.values())
        assert items and items[-1]["sign"] == 1 and items[-1]["row"]["n"] == want, items[-3:]
        lat.sort()
        assert len(lat) >= 50, len(lat)
        p99 = lat[int(0.99 * (len(lat) - 1))]
        assert p99 < 0.1, f"p99 {p99 * 1000:.1f} ms over {len(lat)} requests; worst {lat[-1] * 1000:.1f} ms"
        assert writes and max(writes) < 1.0, max(writes)       # the engine is not run to idle first
        eng = srv.get("/system").json()["runtime"]["engine"]
        assert eng["slice_ms_max"] < 1000, eng         # 12,902 ms before runs were bounded (issue 14)
    finally:
        srv.stop()


def test_over_the_memory_budget_input_is_refused_with_503_and_nothing_is_applied(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql("REGISTER STREAM S (a INT); REGISTER QUERY w AS SELECT COUNT(*) AS n FROM S [RANGE 1000000]")
        assert srv.ndjson("S", [{"ts": t, "row": {"a": t}} for t in range(2000)]).status in (200, 202)
        held = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and held == 0:
            held = srv.get("/system").json()["memory_bytes"]
            time.sleep(0.05)
        assert held > 0
        assert srv.request("PATCH", "/system", json_body={"memory_budget": held // 2}).status == 200
        r = srv.ndjson("S", [{"ts": 5000, "row": {"a": 1}}])
        assert r.status == 503 and r.headers.get("retry-after") == "1", r
        assert "memory_budget" in r.json()["detail"] or "memory_budget" in r.json()["error"], r.json()
        assert srv.request("PATCH", "/system", json_body={"memory_budget": None}).status == 200
        assert srv.ndjson("S", [{"ts": 5000, "row": {"a": 1}}, {"heartbeat": 5001}]).status in (200, 202)
        items = srv.wait_results("w", lambda its: any(i.get("ts") == 5000 for i in its))
        assert [i["row"]["n"] for i in items if i.get("ts") == 5000 and i["sign"] == 1] == [2001], items[-3:]
    finally:
        srv.stop()


def test_with_shedding_on_overload_is_shed_and_results_say_they_are_approximate(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql("REGISTER STREAM S (g INT, v FLOAT); REGISTER QUERY agg AS "
                "SELECT ISTREAM(g, COUNT(*) AS c) FROM S [RANGE 100000] GROUP BY g")
        rows = [{"ts": t, "row": {"g": t % 5, "v": 1.0}} for t in range(3000)]
        assert srv.ndjson("S", rows).status in (200, 202)
        exact = srv.wait_results("agg", lambda its: len([i for i in its if "row" in i]) >= 5)
        assert all("approx" not in i for i in exact)                  # exact: nothing extra
        q = srv.get("/queries/agg").json()["approximation"]
        assert q["exact"] is True and q["approx"] is None
        for bad in (0, -1, "x"):
            assert srv.request("PATCH", "/queries/agg", json_body={"weight": bad}).status == 400
        r = srv.request("PATCH", "/queries/agg", json_body={"weight": 2.5})
        assert r.status == 200 and r.json()["weight"] == 2.5, r
        held = srv.get("/system").json()["memory_bytes"]
        r = srv.request("PATCH", "/system", json_body={"shedding": True, "memory_budget": max(1, held // 4)})
        assert r.status == 200, r
        deadline = time.monotonic() + 30
        t = 3000
        while time.monotonic() < deadline:
            batch = [{"ts": t + k, "row": {"g": k % 5, "v": 1.0}} for k in range(500)]
            assert srv.ndjson("S", batch).status in (200, 202)      # accepted: shed, not refused
            t += 500
            if any(e.get("kind") == "shedder" for e in srv.get("/entities").json()["entities"]):
                break
            time.sleep(0.1)
        sheds = [e for e in srv.get("/entities").json()["entities"] if e.get("kind") == "shedder"]
        assert sheds and 0 < sheds[0]["sampling_rate"] < 1, sheds
        assert srv.ndjson("S", [{"ts": t + k, "row": {"g": k % 5, "v": 1.0}} for k in range(500)]).status \
            in (200, 202)
        items = srv.wait_results("agg", lambda its: any("approx" in i for i in its))
        a = next(i for i in items if "approx" in i)["approx"]
        assert set(a) == {"rel_error", "confidence", "sampling_rate"} and a["confidence"] == 0.95
        xml = srv.get("/queries/agg/results?follow=false&format=xml").body.decode()
        assert 'rel_error="' in xml and 'sampling_rate="' in xml
        q = srv.get("/queries/agg").json()["approximation"]
        assert q["exact"] is False and q["since"] is not None and q["approx"]["sampling_rate"] < 1
    finally:
        srv.stop()


def test_with_shedding_on_but_nothing_sheddable_input_over_budget_is_refused(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql("REGISTER STREAM S (a INT); REGISTER QUERY m AS SELECT MAX(a) AS top FROM S [RANGE 1000000]")
        assert srv.ndjson("S", [{"ts": t, "row": {"a": t}} for t in range(2000)]).status in (200, 202)
        assert srv.request("PATCH", "/system", json_body={"shedding": True, "memory_budget": 1}).status == 200
        r = srv.ndjson("S", [{"ts": 5000, "row": {"a": 1}}])
        assert r.status == 503 and r.headers.get("retry-after") == "1", r     # MAX has no error bound
    finally:
        srv.stop()
