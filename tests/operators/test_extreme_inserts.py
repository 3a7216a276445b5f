"""Grouped MIN/MAX over an input that never deletes (dsms/operators/extreme_inserts.py, the lean path; and
``IntExtremes`` without its multiset when other aggregates share the operator), against the reference
evaluator (tests/oracle) and against the general path of the same operator, batch for batch.

The inputs steer the path's cases: several rows per instant and batches spanning several instants (segments),
groups new in a batch and groups seen before, ties, values at the ends of int64 (the running extreme then goes
by value ranks), keys of two INT columns (packed) and of one, and q9's first view (MAX per auction over the
join). NEXMark q4's shape (MAX over an unbounded join, AVG over that view) folds its MAX into the join
(dsms/plan/join_extreme.py); its answers are checked here all the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, compare, run_engine, run_reference

from dsms import Engine
from dsms.batch import Batch
from dsms.operators.vector_aggregate import VectorAggregateOp
from dsms.queues import Queue

CATALOG = ("REGISTER STREAM S (a INT, b INT, v INT, t TIMESTAMP)",
           "REGISTER STREAM A (id INT, cat INT)",
           "REGISTER STREAM B (auction INT, price INT)")
I64 = (-2**63, 2**63 - 1)
VALUES = st.one_of(st.integers(-3, 3), st.integers(-3, 3), st.integers(-50, 50), st.sampled_from(list(I64)))

LEAN = {
    "two keys": "SELECT a, b, MAX(v) AS hi, MIN(v) AS lo FROM S GROUP BY a, b",
    "one key": "SELECT a, MIN(v) AS lo FROM S [RANGE UNBOUNDED] GROUP BY a",
    "timestamp": "SELECT b, MAX(t) AS last, MIN(v) AS lo FROM S GROUP BY b",
    "filtered": "SELECT a, MAX(v) AS hi FROM S WHERE v > -2 GROUP BY a",
}
# straight over an insert-only join the MAX is folded into the join instead (dsms/plan/join_extreme.py); the
# answers are checked here all the same (join_workloads)
JOIN = ("SELECT A.id AS id, A.cat AS cat, MAX(B.price) AS final FROM A [RANGE UNBOUNDED] A, "
        "B [RANGE UNBOUNDED] B WHERE A.id = B.auction GROUP BY A.id, A.cat")
# the general path with the extremes kept without their multiset (inserts only, other aggregates too)
MIXED = "SELECT a, b, MAX(v) AS hi, COUNT(*) AS c, MIN(v) AS lo FROM S GROUP BY a, b"
# q4's shape: the lean MAX as a view, an AVG over it (a relation whose rows are replaced)
Q4_VIEW = ("REGISTER VIEW W AS SELECT A.id AS id, A.cat AS cat, MAX(B.price) AS final FROM A [RANGE UNBOUNDED] A, "
           "B [RANGE UNBOUNDED] B WHERE A.id = B.auction GROUP BY A.id, A.cat")
Q4 = "SELECT cat, AVG(final) AS avg_final FROM W GROUP BY cat"


def _ops(statements, query):
    eng = Engine()
    for s in statements:
        eng.execute(s)
    eng.execute(query)
    return [op for op in eng.ops if isinstance(op, VectorAggregateOp)]


@pytest.mark.parametrize("name", sorted(LEAN))
def test_min_max_over_an_input_that_never_deletes_take_the_lean_path(name):
    ops = _ops(CATALOG, LEAN[name])
    assert len(ops) == 1 and ops[0].lean_extremes


@pytest.mark.parametrize("query", [
    "SELECT a, MAX(v) AS hi FROM S [RANGE 5] GROUP BY a",          # a window deletes
    "SELECT MAX(v) AS hi FROM S",                                   # no GROUP BY: counts per value
    MIXED,                                                          # COUNT needs the general path
])
def test_other_aggregates_stay_on_the_general_path(query):
    ops = _ops(CATALOG, query)
    assert len(ops) == 1 and not ops[0].lean_extremes
    if query == MIXED:     # inserts only: the extremes keep no multiset
        assert ops[0].insert_only and not any(x.keep_log for x in ops[0].extremes.values())


def test_q4_shape_folds_its_max_into_the_join_below_the_average():
    eng = Engine()
    for s in CATALOG + (Q4_VIEW,):
        eng.execute(s)
    eng.execute(Q4)
    assert [op.lean_extremes for op in eng.ops if isinstance(op, VectorAggregateOp)] == [False]   # the AVG
    assert [op.kind for op in eng.ops].count("join_extreme") == 1


@st.composite
def stream_workloads(draw, query: str):
    """Batches of S rows over a few keys, several rows per instant, instants repeated across batches."""
    actions, t = [], 0
    keys = draw(st.sampled_from([st.integers(0, 3), st.integers(-2, 40), st.sampled_from([0, 1, I64[1], I64[0]])]))
    for _ in range(draw(st.integers(1, 5))):
        rows, ts = [], []
        for _ in range(draw(st.integers(1, 14))):
            t += draw(st.sampled_from([0, 0, 1, 2]))
            rows.append({"a": draw(keys), "b": draw(st.integers(0, 2)), "v": draw(VALUES),
                         "t": draw(st.integers(0, 10**6))})
            ts.append(t)
        actions.append(("push", "S", rows, ts))
        if draw(st.booleans()):
            actions.append(("run",))
    return Workload(CATALOG, query, tuple(actions), t + 5)


@st.composite
def join_workloads(draw, view: bool):
    """Auctions and bids, bids before and after their auction, several bids per auction and instant."""
    actions, t = [], 0
    ids = list(range(draw(st.integers(1, 8))))
    for _ in range(draw(st.integers(1, 6))):
        t += draw(st.integers(0, 2))
        if draw(st.booleans()) and ids:
            new = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
            for i in new:
                ids.remove(i)
            actions.append(("push", "A", [{"id": i, "cat": i % 3} for i in new], [t] * len(new)))
        bids = draw(st.lists(st.tuples(st.integers(0, 7), st.integers(-5, 30), st.integers(0, 1)), max_size=12))
        rows, ts = [], []
        for auction, price, gap in bids:
            t += gap
            rows.append({"auction": auction, "price": price})
            ts.append(t)
        if rows:
            actions.append(("push", "B", rows, ts))
        if draw(st.booleans()):
            actions.append(("run",))
    statements = CATALOG + ((Q4_VIEW,) if view else ())
    return Workload(statements, Q4 if view else JOIN, tuple(actions), t + 5)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_stream_extremes_agree_with_the_reference(data):
    query = data.draw(st.sampled_from([LEAN["two keys"], LEAN["one key"], LEAN["timestamp"], LEAN["filtered"],
                                       MIXED]))
    w = data.draw(stream_workloads(query))
    compare(run_reference(w), run_engine(w))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_max_over_an_unbounded_join_and_the_average_above_agree_with_the_reference(data):
    w = data.draw(join_workloads(data.draw(st.booleans())))
    compare(run_reference(w), run_engine(w))


def _op(insert_only: bool) -> tuple[VectorAggregateOp, list[Batch]]:
    i64 = np.dtype(np.int64)
    op = VectorAggregateOp((0, 1), (("MAX", 2, False), ("MIN", 2, False)), [None, None, "INT", "INT"],
                           Queue(), Queue(), [i64] * 4, insert_only=insert_only)
    out: list[Batch] = []
    op.emit = out.append
    return op, out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), VALUES, st.integers(0, 2)),
                         min_size=1, max_size=30), min_size=1, max_size=5))
def test_lean_path_emits_what_the_general_path_emits(batches):
    """The same batches through the lean path and the general path (the same operator told its input may
    delete): the same output batches, row for row and in the same order."""
    lean, out_lean = _op(True)
    general, out_general = _op(False)
    assert lean.lean_extremes and not general.lean_extremes
    t = 0
    for rows in batches:
        ts = []
        for *_, gap in rows:
            t += gap
            ts.append(t)
        cols = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(3)]
        b = Batch(np.array(ts, dtype=np.int64), np.ones(len(rows), dtype=np.int8), cols)
        lean.process(b)
        general.process(b)
        t += 1
    assert len(out_lean) == len(out_general)
    for x, y in zip(out_lean, out_general):
        assert x.ts.tolist() == y.ts.tolist() and x.sign.tolist() == y.sign.tolist()
        assert [c.tolist() for c in x.cols] == [c.tolist() for c in y.cols]
    assert lean.count[:lean.n].tolist() == general.count[:general.n].tolist()


def test_a_delete_on_the_lean_path_is_an_error_not_a_wrong_answer():
    op, _ = _op(True)
    b = Batch(np.array([1, 2]), np.array([1, -1], dtype=np.int8), [np.array([0, 0]), np.array([0, 0]),
                                                                     np.array([5, 5])])
    with pytest.raises(RuntimeError, match="never deletes"):
        op.process(b)
