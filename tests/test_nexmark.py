"""The NEXMark benchmark's generator and queries on a few thousand events: dsms, the plain-Python loop and
DuckDB give the same answer on every query, at two push sizes, so that ``bench/nexmark.py`` cannot rot.

The windows are shrunk to 100 ms (q5 hops by 20 ms) so that, at 10 events per ms, a few thousand events close
dozens of windows; a push of 37 events cuts windows and the person/auction/bid mix at odd places.
"""

from __future__ import annotations

import pytest

from bench import nexmark
from bench.nexmark_gen import SCHEMAS, generate, last_auction
from bench.nexmark_queries import QUERIES, Windows

N = 3000
W = Windows(q5_range=100, q5_slide=20, q7=100, q8=100)


@pytest.fixture(scope="module")
def data():
    ev = generate(N)
    return ev, nexmark.merged_events(ev), nexmark.duckdb_connection(ev)


def test_generator_follows_nexmark_constants():
    """Kinds by id % 50, 10 events per ms, auction ids from lastBase0AuctionId, and every event a function of its
    id alone (generating from a later first id gives the same events)."""
    ev = generate(1000)
    assert [len(ev[s]["ts"]) for s in ("Person", "Auction", "Bid")] == [20, 60, 920]
    assert (ev["Person"]["event"] % 50 == 0).all() and (ev["Bid"]["event"] % 50 >= 4).all()
    assert int(ev["Bid"]["ts"][-1] - ev["Person"]["ts"][0]) == 99
    assert ev["Auction"]["id"].tolist()[:4] == [1000, 1001, 1002, 1003]
    assert (ev["Auction"]["id"] == last_auction(ev["Auction"]["event"]) + 1000).all()
    assert (ev["Auction"]["expires"] > ev["Auction"]["dateTime"]).all()
    later = generate(500, first=500)
    for s, cols in SCHEMAS.items():
        k = len(later[s]["ts"])
        for c, _ in cols:
            assert later[s][c].tolist() == ev[s][c][-k:].tolist(), (s, c)


@pytest.mark.parametrize("q", QUERIES, ids=[q.name for q in QUERIES])
def test_dsms_equals_loop_and_duckdb(q, data):
    ev, events, con = data
    want = nexmark.canonical_loop(q, nexmark.run_loop(q, events, W)[1])
    assert want, f"{q.name}: the workload gives an empty answer, which would check nothing"
    nexmark.compare(q.name, nexmark.canonical_duckdb(q, nexmark.run_duckdb(q, con, N, W)[1]), want, "the loop")
    for per_push in (37, 1000):
        got = nexmark.canonical_dsms(q, nexmark.run_dsms(q, ev, N, per_push, W)[1])
        nexmark.compare(q.name, got, want, f"the plain loop (pushes of {per_push})")


@pytest.mark.parametrize("name", ["q2", "q4", "q5"])
def test_server_over_http_gives_the_same_answer(name, data):
    """The bench's HTTP column (a real ``dsms serve`` on loopback, columnar msgpack in, NDJSON out) answers as
    the plain loop does: a stream answer (q2, q5, windows included) and a relation answer read as a changelog
    (q4)."""
    from bench.nexmark_http import run_http

    ev, events, _ = data
    q = next(q for q in QUERIES if q.name == name)
    want = nexmark.canonical_loop(q, nexmark.run_loop(q, events, W)[1])
    last = int(max(ev[s]["ts"][-1] for s in SCHEMAS))
    _, _, got = run_http(q, nexmark._pushes(ev, N, 500), ev, N, W, nexmark.final_heartbeat(last, W))
    nexmark.compare(name, got, want, "the plain loop")


def test_operator_run_times_are_reported_and_the_operator_left_as_it_was(capsys, monkeypatch):
    """``bench/nexmark_op_runs.py`` (the per-run figures of docs/benchmarks.md) times every run of the operator
    class named and restores its ``run`` afterwards."""
    import sys

    from bench import nexmark_op_runs
    from dsms.operators.join import JoinOp

    before = JoinOp.__dict__["run"]
    monkeypatch.setattr(sys, "argv", ["nexmark_op_runs.py", "q3", "1000", "3000", "JoinOp", "1"])
    nexmark_op_runs.main()
    out = capsys.readouterr().out
    import re

    assert re.fullmatch(r"q3 at 1000 per push: JoinOp median [0-9.]+ us, mean [0-9.]+ us per run, [0-9.]+ ms over "
                        r"[1-9][0-9]* runs \(3000 events\)\n", out), out
    assert JoinOp.__dict__["run"] is before
