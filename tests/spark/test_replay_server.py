"""Replay through a real server (``dsms serve`` on loopback): ``POST /replays``, ``GET /replays/{id}`` and its
NDJSON results equal the live results the same server produced; bad requests get 400/404 at once; and the
server's own data directory (its archive and ``catalog.json`` as the runtime writes them) replays identically
from ``dsms.spark.replay`` too."""

from __future__ import annotations

import sys
from pathlib import Path

from archived import dense_workload
from oracle.generators import compare

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))

from httpkit import Server, wait_for  # noqa: E402

from dsms.spark.replay import prepare, run  # noqa: E402

QUERIES = {
    "key-partitioned": "SELECT X.a, COUNT(*) AS n, SUM(X.b) AS s FROM S [RANGE 17] X GROUP BY X.a",
    "time-sliced": "SELECT X.b, Y.d FROM S [RANGE 7] X, T [RANGE 11] Y WHERE X.a = Y.a",
    "single": "DSTREAM(SELECT X.a FROM S [ROWS 4] X, R WHERE X.a = R.a)",
}
INPUTS = {"S": "streams", "T": "streams", "R": "relations", "P": "relations"}


def _feed(srv: Server, w) -> None:
    """The workload's actions as HTTP requests, as a client would send them."""
    def hb(h):
        for name, kind in INPUTS.items():
            path = f"/{kind}/{name}/{'elements' if kind == 'streams' else 'updates'}"
            r = srv.post(path, json_body=[{"heartbeat": h}])
            assert r.status == 200, r

    for a in w.actions:
        if a[0] == "push":
            r = srv.post(f"/streams/{a[1]}/elements", json_body=[{"ts": t, "row": row} for row, t in zip(a[2], a[3])])
        elif a[0] == "update":
            r = srv.post(f"/relations/{a[1]}/updates", json_body=[{"ts": a[4], "insert": a[2], "delete": a[3]}])
        else:
            hb(a[1])
            continue
        assert r.status == 200, r
    hb(w.until)


def _elements(text: str) -> list:
    import json
    return [(o["ts"], o["sign"], o["row"]) for o in map(json.loads, text.splitlines()) if "row" in o]


def test_post_replays_equals_the_live_results(spark, tmp_path):
    srv = Server(tmp_path / "data").start()
    try:
        w = dense_workload(QUERIES["key-partitioned"], 3)
        srv.cql(";\n".join(w.statements))
        ids = {}
        for kind, q in QUERIES.items():
            r = srv.post("/queries", json_body={"cql": q})
            assert r.status == 201, r
            ids[kind] = r.json()["id"]
        _feed(srv, w)
        live = {}
        for kind, qid in ids.items():
            def final(qid=qid):              # the query's output heartbeat passed the last instant: all is out
                hb = srv.get(f"/queries/{qid}").json()["stats"].get("last_heartbeat")
                return hb is not None and hb >= w.until
            wait_for(final, timeout=30, what=f"the output of {qid} passed {w.until}")
            items = srv.results(qid)
            live[kind] = [(i["ts"], i["sign"], i["row"]) for i in items if "row" in i]
            assert live[kind], f"{kind}: the live query produced nothing"

        # bad requests: refused at once, nothing started
        assert srv.post("/replays", json_body={"query_id": "q99"}).status == 404
        r = srv.post("/replays", json_body={"query": "SELECT a FROM"})
        assert r.status == 400 and "does not compile" in r.json()["detail"], r
        r = srv.post("/replays", json_body={"query_id": ids["single"], "from": 10**6, "to": 2 * 10**6})
        assert r.status == 400 and "no archived input in the range" in r.json()["detail"], r
        r = srv.post("/replays", json_body={"query_id": ids["single"], "strategy": "key-partitioned"})
        assert r.status == 400 and "cannot be replayed key-partitioned" in r.json()["detail"], r
        assert srv.post("/replays", json_body={"query_id": ids["single"], "nope": 1}).status == 400
        assert srv.get("/replays/r999").status == 404
        assert srv.get("/replays").json() == []

        started = {}
        for kind, qid in ids.items():
            r = srv.post("/replays", json_body={"query_id": qid, "master": "local[2]", "partitions": 2})
            assert r.status == 202, r
            job = r.json()
            assert job["plan"]["strategy"] == kind and r.headers["location"] == f"/replays/{job['id']}"
            started[kind] = job["id"]
        for kind, rid in started.items():
            job = wait_for(lambda rid=rid: (j := srv.get(f"/replays/{rid}").json())["state"] in ("done", "failed")
                           and j, timeout=180, what=f"replay {rid} finished")
            assert job["state"] == "done", job
            assert job["summary"]["strategy"] == kind and job["summary"]["results"] == len(live[kind])
            r = srv.get(f"/replays/{rid}/results")
            assert r.status == 200 and r.headers["content-type"].startswith("application/x-ndjson")
            compare(live[kind], _elements(r.body.decode()))
        assert [j["id"] for j in srv.get("/replays").json()] == list(started.values())
    finally:
        assert srv.stop() == 0

    # the server's own archive and catalog, replayed in this process
    for kind, qid in ids.items():
        p = prepare(str(tmp_path / "data"), query_id=qid, master="local[2]", partitions=7)
        assert p.strategy.kind == kind
        _, result = run(p, spark=spark)
        from archived import replay_rows
        compare(live[kind], replay_rows(result, p.names))
