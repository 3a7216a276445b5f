"""The paths NEXMark q5 (hot items) takes, against the reference evaluator (tests/oracle), on inputs that steer
them (issue 15):

- COUNT alone over a batch of few instants (``VectorAggregateOp._counts_by_instant``): a hopping window's
  slide, a relation's update, keys dense or spread too wide for the counts over the id span (the general
  path then), groups emptied and refilled, with and without GROUP BY;
- MIN/MAX of INT without GROUP BY as counts per value (``synopses/int_value_counts.py``): a hopping window,
  a relation updated at random, values close together, and values that force the one-way switch to
  ``IntExtremes`` (a range wider than ``SPAN``, values at the ends of int64, a batch of many instants);
- q5's whole shape: a hopping count per key, its MAX as a view, and the join of the two with ``>=``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, compare, run_engine, run_reference

CATALOG = ("REGISTER STREAM S (a INT, v INT)", "REGISTER RELATION R (a INT, v INT)")
DENSE = st.integers(0, 5)
SPREAD = st.sampled_from([0, 1, 3, 10**6, -(10**9), 2**62])

COUNTS = {
    "hopping": "SELECT a, COUNT(*) AS n FROM S [RANGE 6 SLIDE 2] GROUP BY a",
    "hopping, no group": "SELECT COUNT(*) AS n FROM S [RANGE 6 SLIDE 3]",
    "tumbling, two counts": "SELECT a, COUNT(*) AS n, COUNT(v) AS m FROM S [RANGE 4 SLIDE 4] GROUP BY a",
    "relation": "SELECT a, COUNT(*) AS n FROM R GROUP BY a",
    "istream": "SELECT ISTREAM(a, COUNT(*) AS n) FROM S [RANGE 6 SLIDE 2] GROUP BY a",
}
EXTREMES = {
    "hopping max": "SELECT MAX(v) AS hi, COUNT(*) AS n FROM S [RANGE 6 SLIDE 2]",
    "hopping min and max": "SELECT MIN(v) AS lo, MAX(v) AS hi FROM S [RANGE 4 SLIDE 2]",
    "sliding max": "SELECT MAX(v) AS hi FROM S [RANGE 3]",
    "relation min": "SELECT MIN(v) AS lo FROM R",
    "relation max": "SELECT MAX(v) AS hi FROM R",
}
CLOSE = st.integers(-4, 4)
SMALL_V = st.integers(-2, 2)
WIDE = st.one_of(CLOSE, st.sampled_from([100_000, -(2**63), 2**63 - 1, 2**40]))
Q5_VIEWS = ("REGISTER VIEW Cnt AS SELECT a, COUNT(*) AS num FROM S [RANGE 6 SLIDE 2] GROUP BY a",
            "REGISTER VIEW Mx AS SELECT MAX(num) AS maxn FROM Cnt")
Q5 = "SELECT ISTREAM(C.a, C.num) FROM Cnt C, Mx M WHERE C.num >= M.maxn"


@st.composite
def stream_actions(draw, keys, values=SMALL_V):
    actions, t = [], 0
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 12))
        ts = []
        for _ in range(n):
            t += draw(st.integers(0, 2))
            ts.append(t)
        rows = [{"a": draw(keys), "v": draw(values)} for _ in range(n)]
        actions.append(("push", "S", rows, ts))
        if draw(st.booleans()):
            t += draw(st.integers(0, 3))                  # later elements may not go below it
            actions.append(("heartbeat", t))
        if draw(st.booleans()):
            actions.append(("run",))
    return tuple(actions), t


@st.composite
def relation_actions(draw, keys, values=SMALL_V):
    live: list[dict] = []
    actions, t = [], 0
    for _ in range(draw(st.integers(1, 6))):
        t += draw(st.integers(1, 3))
        ins = [{"a": draw(keys), "v": draw(values)} for _ in range(draw(st.integers(0, 6)))]
        dels = [r for r in live if draw(st.integers(0, 2)) == 0]
        for r in dels:
            live.remove(r)
        live += ins
        actions.append(("update", "R", ins, dels, t))
        if draw(st.booleans()):
            actions.append(("run",))
    return tuple(actions), t


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_counts_by_instant_agree_with_the_reference(data):
    name = data.draw(st.sampled_from(sorted(COUNTS)))
    keys = data.draw(st.sampled_from([DENSE, SPREAD, st.one_of(DENSE, SPREAD)]))
    actions, t = data.draw(relation_actions(keys) if name == "relation" else stream_actions(keys))
    w = Workload(CATALOG, COUNTS[name], actions, t + 10)
    compare(run_reference(w), run_engine(w))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_extremes_without_group_by_agree_with_the_reference(data):
    name = data.draw(st.sampled_from(sorted(EXTREMES)))
    values = data.draw(st.sampled_from([CLOSE, WIDE]))
    make = relation_actions if name.startswith("relation") else stream_actions
    actions, t = data.draw(make(DENSE, values))
    w = Workload(CATALOG, EXTREMES[name], actions, t + 10)
    compare(run_reference(w), run_engine(w))


def test_extremes_switch_for_many_instants():
    """A batch of more instants than ``SEGMENTS`` (one run after many pushes), then values close together
    again: the counts hand over to ``IntExtremes`` and the answers go on agreeing."""
    actions = [("push", "S", [{"a": 0, "v": (7 * t) % 11}], [t]) for t in range(40)]
    actions += [("run",), ("push", "S", [{"a": 0, "v": 3}, {"a": 0, "v": 20}], [41, 42]), ("run",)]
    for name in ("sliding max", "hopping min and max"):
        w = Workload(CATALOG, EXTREMES[name], tuple(actions), 60)
        expected = run_reference(w)
        assert len(expected) > 10
        compare(expected, run_engine(w))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_q5_shape_agrees_with_the_reference(data):
    actions, t = data.draw(stream_actions(data.draw(st.sampled_from([DENSE, st.integers(0, 2)]))))
    w = Workload(CATALOG + Q5_VIEWS, Q5, actions, t + 10)
    compare(run_reference(w), run_engine(w))


def test_hopping_counts_fixed_workload():
    """Keys entering, leaving (a group emptied at a slide) and coming back, over several slides."""
    rows = [(0, [1, 2, 2]), (1, [2, 3]), (3, [7]), (5, [1]), (9, [2, 2]), (12, [1, 10**6])]
    actions = tuple(("push", "S", [{"a": a, "v": 0} for a in keys], [t] * len(keys)) for t, keys in rows)
    w = Workload(CATALOG, COUNTS["hopping"], actions, 30)
    expected = run_reference(w)
    assert len(expected) > 10
    compare(expected, run_engine(w))
    w5 = Workload(CATALOG + Q5_VIEWS, Q5, actions, 30)
    expected5 = run_reference(w5)
    assert expected5
    compare(expected5, run_engine(w5))
