"""DISTINCT's row counts reuse the row ids of a batch whose column arrays come back (a tumbling join deletes a
window's pairs as the arrays it inserted them with): the counts and changes must be exactly those of batches
with fresh arrays of the same values, through compactions that renumber the ids."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.operators import distinct
from dsms.operators.distinct import RowCounts, _positive

NAMES = np.array(["a", "b", "ab", ""], dtype=object)

# a step: a new batch (rows as (int, name index)), or the arrays of an earlier batch again, with signs
new_batch = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=80)
step = st.one_of(st.tuples(st.just("new"), new_batch, st.booleans()),
                 st.tuples(st.just("again"), st.integers(0, 10), st.booleans()))


@settings(max_examples=150, deadline=None)
@given(st.lists(step, min_size=1, max_size=25))
def test_reused_arrays_count_as_fresh_ones(steps):
    old_min, old_recent = distinct.COMPACT_MIN, distinct.RECENT_MIN_ROWS
    distinct.COMPACT_MIN, distinct.RECENT_MIN_ROWS = 4, 1     # compact and reuse often
    try:
        dtypes = [np.dtype(np.int64), np.dtype(object)]
        reused, fresh = RowCounts(dtypes, 1), RowCounts(dtypes, 1)
        seen: list[list[np.ndarray]] = []
        for kind, arg, negative in steps:
            if kind == "new":
                cols = [np.array([a for a, _ in arg], dtype=np.int64), NAMES[[n for _, n in arg]]]
                seen.append(cols)
            elif seen:
                cols = seen[arg % len(seen)]
            else:
                continue
            n = len(cols[0])
            sign = np.full(n, -1 if negative else 1, dtype=np.int64)
            got = reused.changes(cols, [sign], _positive)
            want = fresh.changes([c.copy() for c in cols], [sign], _positive)
            assert got.tolist() == want.tolist()
            assert reused.live == fresh.live
    finally:
        distinct.COMPACT_MIN, distinct.RECENT_MIN_ROWS = old_min, old_recent


def test_the_arrays_of_a_batch_are_coded_once():
    """The second pass of the same arrays (their deletes) takes the ids kept from the first, with no lookup."""
    r = RowCounts([np.dtype(np.int64), np.dtype(object)], 1)
    cols = [np.arange(100, dtype=np.int64), np.array([f"n{i % 7}" for i in range(100)], dtype=object)]
    r.changes(cols, [np.ones(100, dtype=np.int64)], _positive)
    seen = r.rowids.n
    r.rowids.ids = None                      # a lookup now would fail
    d = r.changes(cols, [-np.ones(100, dtype=np.int64)], _positive)
    assert d.tolist() == [-1] * 100 and r.rowids.n == seen and r.live == 0
