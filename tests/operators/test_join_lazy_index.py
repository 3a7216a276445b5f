"""The lazy index of an insert-only join (``AppendJoin.lazy``, ``AppendIndexSynopsis.defer``/``find_above``):
when the join's predicate has a band's lower bound ``a >= b`` over INT or TIMESTAMP columns of its two inputs
(``dsms.plan.physical.band_bound``), the side of ``a`` holds its released rows without indexing them, and a
release of the other side probes only those at or above its smallest ``b``. Checked against the reference
evaluator (tests/oracle/): band edges at equal values, bounds far below the rows held (the rows are then
indexed, also with a small ``FLUSH_ROWS``), releases cut by the pair budget, a bound only on the left
input; and that EXPLAIN says when the index is lazy and when not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, check_query, diff, run_engine, run_reference, two_stream_actions

import dsms.operators.join as join_mod
import synopses.append_index as append_index
from dsms import Engine
from dsms.operators.join import JoinOp

CATALOG = ("REGISTER STREAM A (id INT, t INT, e INT, f FLOAT)",
           "REGISTER STREAM B (k INT, t INT, p INT, f FLOAT)")
RIGHT = "SELECT X.id, Y.p, Y.t FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND Y.t >= X.t"
LEFT = "SELECT X.id, Y.p FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND X.e > Y.t"
BAND = ("SELECT X.id, MAX(Y.p) AS m FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y "
        "WHERE X.id = Y.k AND Y.t BETWEEN X.t AND X.e GROUP BY X.id")
FLOAT = "SELECT X.id, Y.p FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND Y.f >= X.f"


def _join(query: str) -> JoinOp:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    eng.execute(query)
    return next(op for op in eng.ops if isinstance(op, JoinOp))


@pytest.mark.parametrize(("query", "lazy", "label"), [
    (RIGHT, (1, 1, 1), "[lazy R index: t#3 >= t#1]"),
    (LEFT, (0, 1, 1), "[lazy L index: e >= t]"),
    (BAND, (1, 1, 1), "[lazy R index: t#4 >= t#1]"),
    (FLOAT, None, None),                            # FLOAT columns: no bound is derived
    ("SELECT X.id, Y.p FROM A [RANGE 5] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND Y.t >= X.t", None, None),
])
def test_the_lazy_side_is_derived_from_a_band_bound_and_shown(query, lazy, label):
    join = _join(query)
    assert (join.append.lazy if join.append is not None else None) == lazy
    if label is None:
        assert "lazy" not in join.detail
    else:
        assert join.detail.endswith(label), join.detail


def test_rows_at_the_bound_join_and_rows_below_it_do_not():
    """A held bid whose t equals a new auction's t passes (>=); one below it is never probed; a late auction
    with a bound below every held bid reaches all of them."""
    acts = (
        ("push", "B", [{"k": 1, "t": 5, "p": 1, "f": 0.0}, {"k": 1, "t": 4, "p": 2, "f": 0.0},
                       {"k": 2, "t": 5, "p": 3, "f": 0.0}], [5, 5, 5]),
        ("run",),
        ("push", "A", [{"id": 1, "t": 5, "e": 9, "f": 0.0}], [6]),
        ("run",),
        ("push", "B", [{"k": 3, "t": 6, "p": 4, "f": 0.0}], [7]),
        ("push", "A", [{"id": 2, "t": 0, "e": 9, "f": 0.0}, {"id": 3, "t": 6, "e": 6, "f": 0.0}], [8, 8]),
    )
    for query in (RIGHT, BAND, LEFT):
        check_query(CATALOG, query, acts, 12)


small = st.integers(0, 3)
row_a = st.fixed_dictionaries({"id": small, "t": st.integers(0, 6), "e": st.integers(-1, 8),
                               "f": st.sampled_from([0.5, 1.0])})
row_b = st.fixed_dictionaries({"k": small, "t": st.integers(0, 8), "p": st.integers(0, 3),
                               "f": st.sampled_from([0.5, 1.0])})


def actions():
    """Pushes to A and B, runs and heartbeats in between; bands at equal values and bounds below rows held."""
    return two_stream_actions(row_a, row_b, max_steps=16, max_rows=6)


def _check(query: str, acts: tuple, until: int) -> None:
    w = Workload(CATALOG, query, acts, until)
    problem = diff(run_reference(w), run_engine(w))
    assert problem is None, f"{w!r}\n{problem}"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([RIGHT, LEFT, BAND]), actions(), st.sampled_from([0, 2, 4096]),
       st.sampled_from([2, 1 << 16]))
def test_lazy_joins_equal_reference(query, acts, flush_rows, budget):
    """Also with rows indexed after a few reached (``FLUSH_ROWS``) and releases cut by the pair budget."""
    saved = append_index.FLUSH_ROWS, join_mod.PAIR_BUDGET
    append_index.FLUSH_ROWS, join_mod.PAIR_BUDGET = flush_rows, budget
    try:
        _check(query, *acts)
    finally:
        append_index.FLUSH_ROWS, join_mod.PAIR_BUDGET = saved
