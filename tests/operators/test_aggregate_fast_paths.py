"""The vectorised aggregate's fast paths against the reference evaluator (tests/oracle), on the inputs that
steer them:

- GROUP BY two INT columns, keys packed into one int64 by mixed radix (``PackedIntGroupIds``): small keys
  first (a dense span), then keys outside the ranges seen (the ranges widen and every key is re-packed), then
  keys at the ends of int64 (they no longer pack: every group moves to the dict of tuples, for good);
- MIN/MAX over an input that only inserts for several batches, then deletes (a relation's rows removed,
  its extreme among them), with ties (equal values in one group, deleted one copy at a time);
- MIN over the rows at each group's MAX (NEXMark q9's shape): when the maximum moves, the new row arrives
  before the old one leaves, in the same instant (``IntExtremes._resets``, the second kind of reset), sometimes
  with a value both deleted and inserted (the reset must then step aside).

(dsms has no NULL: an INT column always holds an int64.)"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, compare, run_engine, run_reference

from dsms import Engine

CATALOG = ("REGISTER STREAM S (a INT, b INT, v INT)", "REGISTER RELATION R (a INT, b INT, v INT)")
I64 = (-2**63, 2**63 - 1)
SMALL = st.integers(-3, 3)
WIDER = st.sampled_from([-1000, -70, 40, 900, 70_000])
EXTREME = st.sampled_from([I64[0], I64[1], I64[0] + 1, I64[1] - 1, -2**40, 2**40])
VALUES = st.one_of(st.integers(-3, 3), st.integers(-3, 3), st.sampled_from(list(I64)))

QUERIES = {
    "stream": "SELECT a, b, MAX(v) AS hi, MIN(v) AS lo, COUNT(*) AS c FROM S [RANGE UNBOUNDED] GROUP BY a, b",
    "stream window": "SELECT a, b, MAX(v) AS hi, COUNT(*) AS c FROM S [RANGE 5] GROUP BY a, b",
    "relation": "SELECT a, b, MAX(v) AS hi, MIN(v) AS lo, COUNT(*) AS c FROM R GROUP BY a, b",
    "min at max": "SELECT X.a AS a, MIN(X.b) AS t FROM R X, (SELECT a, MAX(v) AS m FROM R GROUP BY a) M "
                  "WHERE X.a = M.a AND X.v = M.m GROUP BY X.a",
}


@st.composite
def key_phases(draw):
    """Batches of (a, b) keys, widening phase by phase: small, wider, at the ends of int64."""
    phases = [SMALL, st.one_of(SMALL, WIDER)]
    if draw(st.booleans()):
        phases.append(st.one_of(SMALL, WIDER, EXTREME))
    out = []
    for keys in phases:
        for _ in range(draw(st.integers(1, 2))):
            out.append(draw(st.lists(st.tuples(keys, keys), min_size=1, max_size=8)))
    return out


@st.composite
def stream_workloads(draw, query: str):
    actions, t = [], 0
    for keys in draw(key_phases()):
        rows = [{"a": a, "b": b, "v": draw(VALUES)} for a, b in keys]
        ts = []
        for _ in rows:
            t += draw(st.integers(0, 2))
            ts.append(t)
        actions.append(("push", "S", rows, ts))
        actions.append(("run",))
    return Workload(CATALOG, QUERIES[query], tuple(actions), t + 10)


@st.composite
def relation_workloads(draw, query: str):
    """Inserts only for a few batches, then deletes mixed in (the extreme, a tie's copy, whole groups); for
    "min at max" a new row with a higher v is inserted in the instant its group's old maximum is deleted."""
    live: list[dict] = []
    actions, t = [], 0
    phases = draw(key_phases())
    for i, keys in enumerate(phases):
        t += draw(st.integers(1, 3))
        ins = [{"a": a, "b": b, "v": draw(VALUES)} for a, b in keys]
        dels = []
        if i >= len(phases) // 2 and live:
            for row in list(live):
                if draw(st.integers(0, 2)) == 0:
                    dels.append(row)
                    live.remove(row)
                    if query == "min at max" and draw(st.booleans()):      # the replacement, same instant
                        ins.append({"a": row["a"], "b": draw(st.sampled_from([row["b"], row["b"] + 1])),
                                    "v": draw(st.sampled_from([row["v"], min(row["v"] + 1, I64[1])]))})
        live += ins
        actions.append(("update", "R", ins, dels, t))
        if draw(st.booleans()):
            actions.append(("run",))
    return Workload(CATALOG, QUERIES[query], tuple(actions), t + 5)


def _vectorised(query: str) -> bool:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    eng.execute(query)
    return "VectorAggregateOp" in {type(op).__name__ for op in eng.ops}


def test_the_queries_take_the_vectorised_aggregate():
    assert all(_vectorised(q) for q in QUERIES.values())


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_stream_aggregates_by_two_int_columns_agree_with_the_reference(data):
    w = data.draw(stream_workloads(data.draw(st.sampled_from(["stream", "stream window"]))))
    compare(run_reference(w), run_engine(w))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_relation_extremes_inserts_then_deletes_agree_with_the_reference(data):
    w = data.draw(relation_workloads(data.draw(st.sampled_from(["relation", "min at max"]))))
    compare(run_reference(w), run_engine(w))


def test_keys_widen_then_stop_packing():
    """A fixed workload through every phase: dense small keys, a wider second column (re-packed), and a key at
    the end of int64 (the dict from then on), with groups from every phase updated afterwards."""
    rows = [[(0, 0), (1, 2), (2, 1)], [(1, 900), (-70, 2), (0, 0)], [(I64[1], I64[0]), (1, 900), (2, 1)],
            [(0, 0), (I64[1], I64[0]), (-70, 2)]]
    actions = []
    for i, keys in enumerate(rows):
        actions.append(("push", "S", [{"a": a, "b": b, "v": 10 * i - j} for j, (a, b) in enumerate(keys)],
                        [i * 3] * len(keys)))
    w = Workload(CATALOG, QUERIES["stream"], tuple(actions), 20)
    expected = run_reference(w)
    assert len(expected) > 10
    compare(expected, run_engine(w))


def test_counts_by_key_at_both_ends_of_int64():
    """COUNT(*) per INT key over a relation whose keys lie at both ends of int64, updated across several
    instants in one release: the per-instant counts (``_counts_by_instant``) must decline such a span, not
    overflow computing its cells (an OverflowError before)."""
    updates = [([(I64[0], 0), (I64[1], 1)], [], 1), ([(I64[1], 2)], [(I64[0], 0)], 2),
               ([(0, 3), (I64[0], 4)], [(I64[1], 1)], 3)]
    actions = tuple(("update", "R", [{"a": a, "b": b, "v": 0} for a, b in ins],
                     [{"a": a, "b": b, "v": 0} for a, b in dels], t) for ins, dels, t in updates)
    w = Workload(CATALOG, "SELECT a, COUNT(*) AS n FROM R GROUP BY a", actions, 10)
    expected = run_reference(w)
    assert len(expected) >= 6
    compare(expected, run_engine(w))
