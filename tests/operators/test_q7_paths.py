"""The paths NEXMark q7 (highest bid) takes, against the reference evaluator (tests/oracle), on inputs that steer
them (issue 15):

- MIN/MAX of INT without GROUP BY whose deletes retract the oldest rows (``synopses/fifo_extremes.py``):
  tumbling, hopping and sliding RANGE windows, ROWS and NOW windows, several instants a run; and inputs whose
  deletes do not (a PARTITION BY window, a relation updated at random, a join's output, a window whose size
  changed), which must hand over to the counts per value before anything goes wrong;
- q7's whole shape: the window joined with its own MAX on the price (planned as one operator,
  ``WindowExtremeJoinOp``; its own tests are in test_window_extreme_join.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, compare, run_engine, run_reference

from dsms import Engine
from dsms.operators import range_window, vector_aggregate
from synopses.fifo_extremes import FifoExtremes
from synopses.int_value_counts import IntValueCounts

CATALOG = ("REGISTER STREAM S (a INT, v INT)", "REGISTER RELATION R (a INT, v INT)",
           "REGISTER STREAM T (a INT, w INT)")
FIFO = {                                  # deletes first in, first out: the fast path holds throughout
    "tumbling max": "SELECT MAX(v) AS hi FROM S [RANGE 4 SLIDE 4]",
    "tumbling min, count": "SELECT MIN(v) AS lo, COUNT(*) AS n FROM S [RANGE 3 SLIDE 3]",
    "hopping min and max": "SELECT MIN(v) AS lo, MAX(v) AS hi FROM S [RANGE 6 SLIDE 2]",
    "hopping, range not a multiple": "SELECT MAX(v) AS hi FROM S [RANGE 5 SLIDE 2]",
    "sliding max": "SELECT MAX(v) AS hi FROM S [RANGE 3]",
    "rows min": "SELECT MIN(v) AS lo FROM S [ROWS 3]",
    "now max": "SELECT ISTREAM(MAX(v) AS hi) FROM S [NOW]",
    "unbounded max": "SELECT MAX(v) AS hi FROM S",
}
OTHER = {                                 # deletes in another order (or none in order): handed over
    "partitioned max": "SELECT MAX(v) AS hi FROM S [PARTITION BY a ROWS 1]",
    "relation min": "SELECT MIN(v) AS lo, COUNT(*) AS n FROM R",
    "join max": "SELECT MAX(S.v) AS hi FROM S [RANGE 4], T [RANGE 2] WHERE S.a = T.a",
    "join with a relation": "SELECT MAX(S.v) AS hi FROM S [RANGE 3 SLIDE 3], R WHERE S.a = R.a",
}
Q7 = ("SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
      "(SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 4]) M WHERE B.v = M.m")
CLOSE = st.integers(-3, 3)
WIDE = st.one_of(CLOSE, st.sampled_from([100_000, -(2**63), 2**63 - 1, 2**40]))


@st.composite
def actions(draw, values, streams=("S",), relation=False):
    """Pushes of a few rows (several instants a run, sometimes more than a window's range), heartbeats, runs,
    and (``relation``) updates of R that delete rows at random."""
    out, t, live = [], 0, []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(streams + (("R",) if relation else ())))
        if kind == "R":
            t += draw(st.integers(0, 2))
            ins = [{"a": draw(st.integers(0, 2)), "v": draw(values)} for _ in range(draw(st.integers(0, 4)))]
            dels = [r for r in live if draw(st.integers(0, 2)) == 0]
            for r in dels:
                live.remove(r)
            live += ins
            out.append(("update", "R", ins, dels, t))
        else:
            ts = []
            for _ in range(draw(st.integers(1, 10))):
                t += draw(st.integers(0, 2))
                ts.append(t)
            col = "v" if kind == "S" else "w"
            out.append(("push", kind, [{"a": draw(st.integers(0, 2)), col: draw(values)} for _ in ts], ts))
        if draw(st.booleans()):
            t += draw(st.integers(0, 3))
            out.append(("heartbeat", t))
        if draw(st.booleans()):
            out.append(("run",))
    return tuple(out), t


def _extremes(eng: Engine) -> list:
    return [x for op in eng.ops if isinstance(op, vector_aggregate.VectorAggregateOp)
            for x in op.extremes.values()]


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_fifo_extremes_agree_with_the_reference(data):
    name = data.draw(st.sampled_from(sorted(FIFO)))
    acts, t = data.draw(actions(data.draw(st.sampled_from([CLOSE, WIDE]))))
    w = Workload(CATALOG, FIFO[name], acts, t + 10)
    expected = run_reference(w)
    compare(expected, run_engine(w))
    with pytest.MonkeyPatch.context() as m:        # the counts per value on the same windows, as before
        m.setattr(vector_aggregate, "FifoExtremes", IntValueCounts)
        compare(expected, run_engine(w))


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_other_deletes_agree_with_the_reference(data):
    name = data.draw(st.sampled_from(sorted(OTHER)))
    streams = ("S", "T") if name == "join max" else ("S",)
    acts, t = data.draw(actions(data.draw(st.sampled_from([CLOSE, WIDE])), streams,
                                relation=name in ("relation min", "join with a relation")))
    w = Workload(CATALOG, OTHER[name], acts, t + 10)
    compare(run_reference(w), run_engine(w))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_q7_shape_agrees_with_the_reference(data):
    acts, t = data.draw(actions(data.draw(st.sampled_from([CLOSE, st.integers(0, 1)]))))
    w = Workload(CATALOG, Q7, acts, t + 10)
    compare(run_reference(w), run_engine(w))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_windows_passing_releases_on_as_slices_agree_with_the_reference(data):
    """Every release of a window passed on as slices of its delete and insert batches (``PASS_ROWS`` = 1; by
    default only releases of 65,536 rows or more: a tumbling window's turnover, the final flush), under the
    aggregates and joins above it."""
    queries = {**FIFO, **OTHER, "q7": Q7}
    name = data.draw(st.sampled_from(sorted(queries)))
    streams = ("S", "T") if name == "join max" else ("S",)
    acts, t = data.draw(actions(CLOSE, streams, relation=name in ("relation min", "join with a relation")))
    w = Workload(CATALOG, queries[name], acts, t + 10)
    expected = run_reference(w)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(range_window, "PASS_ROWS", 1)
        compare(expected, run_engine(w))


def _pushes(eng: Engine, n: int, start: int = 0) -> None:
    for t in range(start, start + n):
        eng.push("S", [{"a": t % 3, "v": (7 * t) % 11}, {"a": 1, "v": (5 * t) % 13}], ts=[t, t])
        if t % 5 == 4:
            eng.run()


def test_a_tumbling_window_stays_on_the_fifo_path():
    """The path is really taken: a tumbling window keeps its MAX as the live rows and their deque throughout,
    with the same answers as the reference (q7's shape itself is one operator now, with no aggregate)."""
    acts = tuple(("push", "S", [{"a": t % 3, "v": (7 * t) % 11}, {"a": 1, "v": (5 * t) % 13}], [t, t])
                 for t in range(40))
    for query in (FIFO["tumbling max"], FIFO["hopping min and max"], Q7):
        w = Workload(CATALOG, query, acts, 60)
        expected = run_reference(w)
        assert len(expected) > 10
        compare(expected, run_engine(w))
        eng = Engine()
        for s in CATALOG:
            eng.execute(s)
        eng.execute(query)
        _pushes(eng, 40)
        eng.heartbeat(60)
        eng.run()
        if query == Q7:        # planned as one operator: no aggregate (tests/operators/test_window_extreme_join.py)
            assert not _extremes(eng) and [op.kind for op in eng.ops].count("window_extreme_join") == 1
            continue
        assert _extremes(eng) and all(type(x) is FifoExtremes and x.general is None for x in _extremes(eng))


def test_a_partitioned_window_hands_over():
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    eng.execute(OTHER["partitioned max"])
    _pushes(eng, 20)
    eng.run()
    assert all(x.general is not None for x in _extremes(eng))


def _range_change_run(shrink_at: int) -> tuple[list, list]:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute("SELECT MAX(v) AS hi, MIN(v) AS lo FROM S [RANGE 8]")
    window = next(op for op in eng.ops if op.kind == "range_window")
    _pushes(eng, shrink_at)
    eng.run()
    eng.set(window.id, "range", 2)           # newer tuples now leave before older ones
    _pushes(eng, 30, shrink_at)
    eng.heartbeat(shrink_at + 60)
    eng.run()
    return [(e.ts, e.sign, e.row) for e in q.drain()], _extremes(eng)


def test_a_window_whose_size_changed_equals_the_general_path(monkeypatch):
    """The reference evaluator has no knobs: after the window shrinks, its deletes come out of arrival order,
    and the answers must be those of the counts per value (the general path, forced here)."""
    for at in (3, 10, 17):
        fast, ext = _range_change_run(at)
        assert all(x.general is not None for x in ext)      # it noticed and handed over
        with monkeypatch.context() as m:
            m.setattr(vector_aggregate, "FifoExtremes", IntValueCounts)
            general, ext2 = _range_change_run(at)
        assert all(type(x) is IntValueCounts for x in ext2)
        assert len(fast) > 20 and fast == general
