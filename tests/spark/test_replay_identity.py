"""Replay on Spark equals the live run (SPEC section 9), per instant as bags, for every parallel strategy and
partition counts 1, 2 and 7.

Live: the workload runs through the embedded engine while ``archived.archive_and_run`` writes the archive and
the catalog log the server would write. Replay: ``dsms.spark.replay`` on the shared ``local[2]`` session.
Workloads: the papers' worked examples (tests/oracle/examples.py) and hypothesis-generated plans over generated
streams with relation updates and heartbeats (tests/oracle/generators.py).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from archived import archive_and_run, dense_workload, replay_rows
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle.examples import cases
from oracle.generators import Workload, compare, workloads

from dsms.spark import KEY, SINGLE, TIME, ReplayError
from dsms.spark.replay import prepare, run

CASES = cases()


def _replay(spark, data_dir: Path, qid: str, partitions: int, strategy: str | None = None, **kw):
    p = prepare(str(data_dir), query_id=qid, master="local[2]", partitions=partitions, strategy=strategy, **kw)
    summary, result = run(p, spark=spark)
    return summary, replay_rows(result, p.names)


@pytest.mark.parametrize("ex,check", [(e, c) for _, e, c in CASES], ids=[i for i, _, _ in CASES])
def test_worked_example_replays_as_live(spark, tmp_path, ex, check):
    live, qid = archive_and_run(tmp_path, Workload(ex.statements, check.query, ex.actions, ex.until))
    compare(check.expected, live)                    # the live run is right (the oracle's expectation) ...
    summary, replayed = _replay(spark, tmp_path, qid, 2)
    compare(live, replayed)                          # ... and the replay equals it
    assert summary["warnings"] == []


def _check_strategy(spark, w: Workload, strategy: str, partitions: int, window: tuple | None = None) -> int:
    """Replay ``w`` with ``strategy``; 1 when compared, hypothesis' ``assume`` rejects plans it does not fit."""
    d = Path(tempfile.mkdtemp(prefix="dsms-replay-"))
    try:
        live, qid = archive_and_run(d, w)
        kw = {}
        if window is not None:
            kw = {"from_ts": window[0], "to_ts": window[1]}
            live = [e for e in live if window[0] <= e[0] < window[1]]
        try:
            summary, replayed = _replay(spark, d, qid, partitions, strategy, **kw)
        except ReplayError as e:
            assume("cannot be replayed" not in str(e) and "no archived input" not in str(e))
            raise
        assert summary["strategy"] == strategy
        assert summary["partitions"] == (1 if strategy == SINGLE else partitions)
        compare(live, replayed)
        return 1
    finally:
        shutil.rmtree(d, ignore_errors=True)


_FAMILIES = {KEY: st.sampled_from(["aggregate", "join", "aggregate"]),
             TIME: st.sampled_from(["window", "aggregate", "join", "setop", "streamop"]),
             SINGLE: st.sampled_from(["window", "aggregate", "join", "setop", "streamop", "subquery"])}


@pytest.mark.parametrize("partitions", [1, 2, 7])
@pytest.mark.parametrize("strategy", [KEY, TIME, SINGLE])
def test_generated_plans_replay_as_live(spark, strategy, partitions):
    compared = []

    @settings(max_examples=6, database=None)
    @given(st.data())
    def check(data):
        family = data.draw(_FAMILIES[strategy])
        w = data.draw(workloads(family, max_events=16))
        compared.append(_check_strategy(spark, w, strategy, partitions))

    check()
    assert len(compared) >= 4, f"only {len(compared)} generated plans could be replayed {strategy}"


@pytest.mark.parametrize("strategy", [KEY, TIME, SINGLE])
def test_time_range_replays_those_instants_as_live(spark, strategy):
    """``--from``/``--to`` write the instants in range, equal to the live run's, whatever came before (the
    slices warm up; unbounded state is read from the start)."""
    compared = []

    @settings(max_examples=6, database=None)
    @given(st.data())
    def check(data):
        w = data.draw(workloads(data.draw(_FAMILIES[strategy]), max_events=16))
        lo = data.draw(st.integers(-20, 40))
        hi = lo + data.draw(st.integers(1, 40))
        compared.append(_check_strategy(spark, w, strategy, data.draw(st.sampled_from([1, 2, 7])), (lo, hi)))

    check()
    assert len(compared) >= 4, f"only {len(compared)} generated plans could be replayed {strategy} in a range"


def test_planner_choices_are_the_documented_ones(tmp_path):
    """The strategy each plan shape gets (docs/replay.md's table), checked on the planner alone."""
    from dsms import Engine
    from dsms.spark import choose

    def pick(q):
        eng = Engine()
        for s in ("REGISTER STREAM S (a INT, b INT, c STRING)", "REGISTER STREAM T (a INT, d FLOAT)",
                  "REGISTER RELATION R (a INT, e STRING)"):
            eng.execute(s)
        s = choose(eng, eng.execute(q), 4)
        return s.kind, s.keys, s.warmup

    assert pick("SELECT a, COUNT(*) AS n FROM S [RANGE 10] GROUP BY a") == (KEY, {"s": "a"}, 12)
    assert pick("SELECT a, COUNT(*) AS n FROM S [ROWS 10] GROUP BY a")[0] == SINGLE
    assert pick("SELECT a, COUNT(*) AS n FROM S [PARTITION BY a ROWS 3] GROUP BY a")[:2] == (KEY, {"s": "a"})
    assert pick("SELECT X.a, R.e FROM S [RANGE 5] X, R WHERE X.a = R.a")[:2] == (KEY, {"s": "a", "r": "a"})
    assert pick("SELECT X.b, Y.d FROM S [RANGE 5] X, T [RANGE 3] Y WHERE X.a = Y.a")[0] == TIME   # FLOAT rows
    assert pick("SELECT X.b, X.c FROM S [RANGE 5] X, T [RANGE 3] Y WHERE X.a = Y.a")[:2] == \
        (KEY, {"s": "a", "t": "a"})                                   # key dropped: netted on the driver
    assert pick("SELECT ISTREAM(COUNT(*)) FROM S [RANGE 10] GROUP BY a")[:2] == (KEY, {"s": "a"})
    assert pick("SELECT b FROM S WHERE a > 1")[0] == TIME             # never deletes: ISTREAM emits at once
    assert pick("SELECT ISTREAM(COUNT(*)) FROM S [RANGE 10 SLIDE 5]") == (TIME, {}, 10 + 5 + 1 + 1)
    assert pick("SELECT * FROM S WHERE a > 1") == (TIME, {}, 0)
    assert pick("SELECT COUNT(*) FROM S") == (SINGLE, {}, None)
    assert pick("RSTREAM(SELECT a, COUNT(*) AS n FROM S [ROWS 3] GROUP BY a)")[0] == SINGLE


DENSE = {
    KEY: ["SELECT X.a, COUNT(*) AS n, SUM(X.b) AS s FROM S [RANGE 17] X GROUP BY X.a",
          "SELECT X.a, R.e, X.b FROM S [RANGE 9] X, R WHERE X.a = R.a",
          "SELECT DISTINCT X.a, X.c FROM S [PARTITION BY X.a ROWS 2] X",
          # the key projected away: partitions' changes netted on the driver before ISTREAM / DSTREAM
          "SELECT ISTREAM(COUNT(*) AS n) FROM S [RANGE 13] X GROUP BY X.a",
          "DSTREAM(SELECT MAX(X.b) AS m FROM S [RANGE 9] X GROUP BY X.a)",
          "SELECT X.b, X.c FROM S [RANGE 7] X, T [RANGE 11] Y WHERE X.a = Y.a",
          "SELECT COUNT(*) AS n FROM S [RANGE 13] X GROUP BY X.a"],
    TIME: ["SELECT ISTREAM(COUNT(*) AS n, MAX(X.b) AS m) FROM S [RANGE 23 SLIDE 5] X",
           "SELECT X.b, Y.d FROM S [RANGE 7] X, T [RANGE 11] Y WHERE X.a = Y.a",
           "RSTREAM(SELECT X.a, COUNT(*) AS n FROM S [RANGE 13] X GROUP BY X.a)"],
    SINGLE: ["SELECT COUNT(*) AS n, SUM(X.b) AS s FROM S [ROWS 7] X",
             "DSTREAM(SELECT X.a FROM S [ROWS 4] X, R WHERE X.a = R.a)"],
}


@pytest.mark.parametrize("partitions", [1, 2, 7])
@pytest.mark.parametrize("strategy", [KEY, TIME, SINGLE])
def test_dense_workloads_replay_as_live(spark, strategy, partitions):
    for i, q in enumerate(DENSE[strategy]):
        _check_strategy(spark, dense_workload(q, i), strategy, partitions)
        _check_strategy(spark, dense_workload(q, i), strategy, partitions, (40 + i, 150 + 3 * i))


def test_query_registered_mid_stream_replays_from_its_registration(spark, tmp_path):
    """A query registered while input flows saw only the stream input after it (contract, "Registration
    time"); ``--query-id`` replays it from the archive position its catalog entry was stamped with."""
    import json

    from dsms import Engine
    from dsms.archive import Archive

    query = "SELECT X.a, COUNT(*) AS n FROM S [RANGE 50] X GROUP BY X.a"
    eng, log = Engine(), []
    with Archive(tmp_path, fsync="never") as arch:
        def push(t):
            rows = {"a": [t % 3, (t + 1) % 3], "b": [t, -t], "c": ["x", "y"]}
            arch.append_batch("s", [t, t], None, rows)
            eng.push("S", rows, [t, t])
        eng.execute("REGISTER STREAM S (a INT, b INT, c STRING)")
        log.append({"op": "cql", "cql": "REGISTER STREAM S (a INT, b INT, c STRING)", "at": {}})
        for t in range(0, 30, 3):
            push(t)
        eng.run()
        q = eng.execute(query)
        log.append({"op": "cql", "cql": query, "at": {n: r.next_seq for n, r in arch.ranges().items()}})
        for t in range(30, 120, 4):
            push(t)
        arch.append_heartbeat("s", 200)
        eng.heartbeat(200)
        eng.run()
    (tmp_path / "catalog.json").write_text(json.dumps({"version": 1, "log": log}))
    live = [(e.ts, e.sign, dict(e.row)) for e in q.drain()]
    for strategy in (KEY, TIME, SINGLE):
        summary, replayed = _replay(spark, tmp_path, q.id, 2, strategy)
        compare(live, replayed)
    # the same text given as --query sees all the input: a different (longer) history
    p = prepare(str(tmp_path), query=query, master="local[2]", partitions=2)
    assert p.spec.start_seq == {} and prepare(str(tmp_path), query_id=q.id).spec.start_seq == {"s": 10}


def test_progress_reports_tasks_rows_and_results(spark, tmp_path):
    """The progress callback (the CLI's bar, the server's GET /replays/{id}) sees the job's tasks (one per
    archive segment, then one per partition) and, at the end, every row read and every result."""
    w = dense_workload(DENSE[KEY][0], 9)
    live, qid = archive_and_run(tmp_path, w)
    p = prepare(str(tmp_path), query_id=qid, master="local[2]", partitions=3)
    seen: list = []
    summary, _ = run(p, spark=spark, on_progress=seen.append)
    segments = sum(len(s) for s in p.index.segments.values())
    assert seen[-1]["tasks"] == seen[-1]["tasks_done"] == segments + 3
    rows_of_s = sum(len(a[2]) for a in w.actions if a[0] == "push" and a[1] == "S")   # the query reads S alone
    assert seen[-1]["rows"] == summary["rows_read"] == summary["rows_in"] == rows_of_s
    assert seen[-1]["results"] == summary["results"] == len(live)
