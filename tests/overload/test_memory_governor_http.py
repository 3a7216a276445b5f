"""The memory governor against a real server (issue 14 item 3): a DISTINCT query over a big window, and a
memory budget it is over. With the governor off, input is refused (503); with ``mem:0``'s ``auto_kind`` on,
the same input is accepted, the row state switches to a Bloom filter, memory falls under the budget and the
results say they are approximate; once the window has turned over and memory is low, the state goes back to
exact and results are exact again. Bad knob values are refused over HTTP and change nothing."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))

from httpkit import Server, wait_for  # noqa: E402

N = 20000          # distinct rows in the window
RANGE = 30000


def test_over_the_budget_the_governor_switches_to_bloom_instead_of_refusing_and_back(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        srv.cql("REGISTER STREAM S (a INT, b INT); "
                f"REGISTER QUERY d AS SELECT DISTINCT a, b FROM S [RANGE {RANGE}]")
        rows = [{"ts": t, "row": {"a": t, "b": 7 * t}} for t in range(N)]
        assert srv.ndjson("S", rows).status in (200, 202)
        ents = {e["id"]: e for e in srv.get("/entities?query=d").json()["entities"]}
        (syn,) = [i for i, e in ents.items() if "in_effect" in e]          # the row_state synopsis
        wait_for(lambda: srv.get(f"/entities/{syn}").json()["size"] >= N - 1
                 and srv.get("/system").json()["backlog"] == 0, what="the rows are in the DISTINCT state")
        held = srv.get("/system").json()["memory_bytes"]
        state = srv.get(f"/entities/{syn}").json()["bytes"]
        budget = held - state // 2                      # a Bloom filter of the state fits, the exact one not
        assert srv.request("PATCH", "/system", json_body={"memory_budget": budget}).status == 200

        more = [{"ts": N + k, "row": {"a": -k - 1, "b": 0}} for k in range(100)]
        r = srv.ndjson("S", more)
        assert r.status == 503 and "memory_budget" in r.body.decode(), r       # governor off: refused

        gov = srv.get("/entities/mem:0").json()
        for bad in ({"auto_kind": "on"}, {"auto_kind": 1}, {"low_water": 1.5}, {"low_water": 0},
                    {"low_water": 0.3, "auto_kind": "yes"}, {"switches": 1}):
            assert srv.request("PATCH", "/entities/mem:0", json_body=bad).status == 400, bad
        assert srv.get("/entities/mem:0").json() == gov                         # nothing changed
        r = srv.request("PATCH", "/entities/mem:0", json_body={"auto_kind": True})
        assert r.status == 200 and r.json()["auto_kind"] is True, r

        r = srv.ndjson("S", more)
        assert r.status in (200, 202), r                                        # accepted: switched instead
        wait_for(lambda: srv.get(f"/entities/{syn}").json()["in_effect"] == "bloom", what="the switch to bloom")
        wait_for(lambda: srv.get("/system").json()["memory_bytes"] <= budget, what="memory under the budget")
        gov = srv.get("/entities/mem:0").json()
        assert gov["switched"] and gov["last_switch"].endswith("exact -> bloom") and gov["switches"] == 1, gov
        assert gov["bytes_before"] > budget >= gov["bytes_after"], gov
        assert srv.get(f"/entities/{syn}").json()["kind"] == "bloom"
        approx = srv.get("/queries/d").json()["approximation"]
        assert approx["exact"] is False and approx["approx"]["rel_error"] > 0, approx
        assert srv.ndjson("S", [{"heartbeat": N + 200}]).status in (200, 202)
        items = srv.wait_results("d", lambda its: any(i.get("ts") == N + 99 for i in its), timeout=30)
        late = [i for i in items if i.get("ts", 0) >= N]
        assert late and all("approx" in i for i in late), late[:3]              # marked approximate
        assert all("approx" not in i for i in items if i.get("ts", N) < N - 1)  # earlier results exact

        # the window turns over: the filter empties, memory is low, the governor asks for exact again
        assert srv.ndjson("S", [{"heartbeat": N + RANGE + 1000}]).status in (200, 202)
        wait_for(lambda: srv.get("/entities/mem:0").json()["last_switch"].endswith("bloom -> exact"),
                 what="the switch back to exact")
        end = N + RANGE + 2000
        assert srv.ndjson("S", [{"ts": end, "row": {"a": 1, "b": 1}}, {"heartbeat": end + 1}]).status in (200, 202)
        wait_for(lambda: srv.get(f"/entities/{syn}").json()["in_effect"] == "exact", what="exact again")
        approx = srv.get("/queries/d").json()["approximation"]
        assert approx["exact"] is True and approx["since"] is not None, approx
        items = srv.wait_results("d", lambda its: any(i.get("ts") == end for i in its), timeout=30)
        assert [i for i in items if i.get("ts") == end] == [{"ts": end, "sign": 1, "row": {"a": 1, "b": 1}}]
        gov = srv.get("/entities/mem:0").json()
        assert gov["switched"] == [] and gov["switches"] == 2, gov
    finally:
        srv.stop()
