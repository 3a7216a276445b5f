"""The vectorised aggregate's lean path for COUNT/SUM/AVG of INT over one integer group column by (instant,
group) cells (``dsms/operators/sums_by_instant.py``): the same output, batch for batch and row for row, and the
same state as the general path on random changelogs of a relation (deletes of rows present only, groups that
empty and come back, values at the edges of the exactness bound, many instants, keys far apart, where it must
decline), and answers against the reference evaluator for queries of that shape, NEXMark q4's AVG over its view
among them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import check_query, two_stream_actions

from dsms.batch import Batch
from dsms.operators import sums_by_instant
from dsms.operators.vector_aggregate import VectorAggregateOp
from dsms.queues import Queue

AGGS = {
    "avg": (("AVG", 1, False),),
    "sum_count": (("SUM", 1, False), ("COUNT", None, False)),
    "avg_sum_two_columns": (("AVG", 1, False), ("SUM", 2, False), ("COUNT", None, False)),
}
OUT = {"AVG": np.float64, "SUM": np.int64, "COUNT": np.int64}


def _op(aggs, lean: bool) -> VectorAggregateOp:
    op = VectorAggregateOp((0,), aggs, ["INT"] * len(aggs), Queue(), Queue(),
                           [np.int64] + [OUT[f] for f, _, _ in aggs])
    assert op.lean_sums
    op.lean_sums = lean
    op.out_reader = op.output.reader()        # before any output: a reader starts at the queue's end
    return op


@st.composite
def changelogs(draw):
    """Batches of complete instants: inserts of (key, v, w), and deletes of rows inserted before and not yet
    deleted (so counts never go below zero); keys from a few values or far apart, values small or near the
    bound past which the lean path declines."""
    keys = draw(st.sampled_from([[0, 1, 2], [-3, 7], [5], [0, 10**6]]))
    big = draw(st.sampled_from([10, 2**40, 2**50]))
    live: list[tuple] = []
    batches, t = [], 0
    for _ in range(draw(st.integers(1, 6))):
        ts, sign, rows = [], [], []
        for _ in range(draw(st.integers(1, 30))):
            t += draw(st.sampled_from([0, 0, 1, 3]))
            if live and draw(st.booleans()):
                row = live.pop(draw(st.integers(0, len(live) - 1)))
                ts.append(t), sign.append(-1), rows.append(row)
            else:
                row = (draw(st.sampled_from(keys)), draw(st.integers(-big, big)), draw(st.integers(-5, 5)))
                live.append(row)
                ts.append(t), sign.append(1), rows.append(row)
        cols = [np.array(c, dtype=np.int64) for c in zip(*rows)]
        batches.append(Batch(np.array(ts, dtype=np.int64), np.array(sign, dtype=np.int8), cols))
        t += 1
    return batches


def _drain(op) -> list[Batch]:
    r = op.out_reader
    out = []
    while (x := r.get()) is not None:
        out.append(x)
    return out


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(AGGS)), changelogs())
def test_the_lean_path_outputs_what_the_general_path_does_row_for_row(aggs, batches):
    ops = [_op(AGGS[aggs], False), _op(AGGS[aggs], True)]
    for op in ops:
        for b in batches:
            op.process(b)
    general, lean = (_drain(op) for op in ops)
    assert general and len(general) == len(lean)
    for x, y in zip(general, lean):
        assert x.ts.tolist() == y.ts.tolist() and x.sign.tolist() == y.sign.tolist()
        for c, d in zip(x.cols, y.cols):
            assert c.dtype == d.dtype and c.tolist() == d.tolist()
    a, b = ops
    assert a.n == b.n and a.count[:a.n].tolist() == b.count[:b.n].tolist()
    for col in a.sums:
        assert a.sums[col][:a.n].tolist() == b.sums[col][:b.n].tolist()


def test_it_declines_past_its_bounds_and_the_general_path_answers():
    op = _op(AGGS["avg"], True)
    far = Batch(np.array([1, 1]), np.array([1, 1], dtype=np.int8), [np.array([0, 10**9]), np.array([1, 2])])
    assert not sums_by_instant.fold(op, far)                  # keys too far apart for the cells
    huge = Batch(np.array([1, 2]), np.array([1, 1], dtype=np.int8), [np.array([0, 0]), np.array([2**53, 1])])
    assert not sums_by_instant.fold(op, huge)                 # a float64 sum would round
    low = Batch(np.array([1]), np.array([1], dtype=np.int8), [np.array([0]), np.array([-2**63])])
    assert not sums_by_instant.fold(op, low)                  # |INT64_MIN| itself is past the bound
    op.process(huge)                                          # the general path, exact
    [out] = _drain(op)
    # the group founded at 1 with 2**53, then at 2 its old row out and (2**53 + 1) / 2 in
    assert out.ts.tolist() == [1, 2, 2] and out.sign.tolist() == [1, -1, 1]
    assert out.cols[1].tolist() == [float(2**53), float(2**53), float(2**52)]


CATALOG = ("REGISTER STREAM A (id INT, t INT, e INT, c INT)", "REGISTER STREAM B (k INT, t INT, p INT)")
VIEW = ("REGISTER VIEW W AS SELECT X.id AS id, X.c AS c, MAX(Y.p) AS final FROM A [RANGE UNBOUNDED] X, "
        "B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND Y.t BETWEEN X.t AND X.e GROUP BY X.id, X.c")
QUERIES = ["SELECT c, AVG(final) AS a, SUM(final) AS s, COUNT(*) AS n FROM W GROUP BY c",
           "SELECT p, AVG(t) AS a FROM B [RANGE 3] GROUP BY p",
           "SELECT k, SUM(p) AS s FROM B [ROWS 2] GROUP BY k"]
row_a = st.fixed_dictionaries({"id": st.integers(0, 3), "t": st.integers(0, 6), "e": st.integers(-1, 8),
                               "c": st.integers(0, 1)})
row_b = st.fixed_dictionaries({"k": st.integers(0, 3), "t": st.integers(0, 8), "p": st.integers(-3, 3)})


@pytest.mark.parametrize("query", QUERIES)
@settings(max_examples=40, deadline=None)
@given(acts=two_stream_actions(row_a, row_b, max_steps=14, max_rows=5))
def test_queries_of_the_shape_answer_as_the_reference_says(query, acts):
    check_query(CATALOG + (VIEW,), query, *acts)
