"""The join's ``kind`` knob over HTTP on a real server (docs/approximate-synopses.md, docs/control-tables.md):
bad values are refused with 400 naming the attribute and change nothing; ``reservoir`` makes the results of a
self-join COUNT approximate, flagged in NDJSON with the sampling rate, and scaled."""

from __future__ import annotations

from httpkit import Server, elements


def test_join_kind_knob_over_http(server: Server, uniq: str) -> None:
    s = f"{uniq}_s"
    server.cql(f"REGISTER STREAM {s} (a INT, b INT);"
               f"REGISTER QUERY {uniq}_q AS SELECT COUNT(*) AS c FROM {s} [RANGE 100000] X, {s} [RANGE 100000] Y "
               "WHERE X.a = Y.a")
    ents = server.get(f"/entities?query={uniq}_q").json()["entities"]
    sides = [e["id"] for e in ents if e["id"].startswith("syn:") and "reservoir_rows" in e]
    assert len(sides) == 2, ents
    before = server.get(f"/entities/{sides[0]}").json()
    for body, attr in (({"kind": "bloom"}, "kind"), ({"kind": 7}, "kind"), ({"reservoir_rows": 0}, "reservoir_rows"),
                       ({"reservoir_rows": 1 << 30}, "reservoir_rows"), ({"reservoir_rows": "9"}, "reservoir_rows")):
        r = server.request("PATCH", f"/entities/{sides[0]}", json_body=body)
        assert r.status == 400 and r.json()["error"] == "refused" and r.json()["attribute"] == attr, r
    after = server.get(f"/entities/{sides[0]}").json()
    assert {k: after[k] for k in ("kind", "reservoir_rows", "in_effect")} == \
        {k: before[k] for k in ("kind", "reservoir_rows", "in_effect")} == \
        {"kind": "exact", "reservoir_rows": 10_000, "in_effect": "exact"}
    for syn in sides:
        r = server.request("PATCH", f"/entities/{syn}", json_body={"reservoir_rows": 50, "kind": "reservoir"})
        assert r.status == 200 and r.json()["kind"] == "reservoir", r
    rows = [{"ts": t, "row": {"a": t % 4, "b": t}} for t in range(1, 401)]
    assert server.ndjson(s, rows + [{"heartbeat": 1000}]).status in (200, 202)
    items = server.wait_results(f"{uniq}_q", lambda it: any("approx" in e for e in elements(it)))
    last = [e for e in elements(items) if e.get("sign", 1) > 0][-1]
    approx = last["approx"]
    assert 0 < approx["sampling_rate"] < 0.1 and approx["confidence"] == 0.95 and approx["rel_error"] > 0
    exact = 4 * 100 * 100                                    # 400 rows, four keys of 100 rows each
    assert abs(last["row"]["c"] - exact) <= max(approx["rel_error"], 0.5) * exact, (last, exact)
    assert server.get(f"/entities/{sides[0]}").json()["in_effect"] == "reservoir"
    assert server.get(f"/queries/{uniq}_q").json()["approximation"]["exact"] is False
