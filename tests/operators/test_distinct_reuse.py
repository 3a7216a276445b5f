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


# a step of a relation that turns over whole, or not quite: rows (int, name index) inserted or deleted, either
# new arrays or the very arrays of an earlier step; ints far apart sometimes (the sorted check, not the table)
turn_rows = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=40)
turn_step = st.tuples(st.sampled_from(["new", "again"]), turn_rows, st.integers(0, 10), st.booleans(),
                      st.sampled_from([1, 10**12]))


@settings(max_examples=200, deadline=None)
@given(st.lists(turn_step, min_size=1, max_size=20))
def test_uncoded_turnover_counts_as_a_dict_does(steps):
    """Batches of distinct rows held uncoded (``RowCounts.turnover``) and deleted as the same arrays, mixed
    with any other batch (repeated rows, deletes of rows held, arrays seen before), each offered to
    ``turnover`` first and to ``changes`` when it declines, as DISTINCT does: every change is the one a count
    per row in a dict gives, delta by delta in arrival order."""
    old_recent = distinct.RECENT_MIN_ROWS
    distinct.RECENT_MIN_ROWS = 1                # the turnover path for batches of any size
    try:
        r = RowCounts([np.dtype(np.int64), np.dtype(object)], 1)
        model: dict = {}
        seen: list[list[np.ndarray]] = []
        for kind, rows, back, negative, scale in steps:
            if kind == "again" and seen:
                cols = seen[back % len(seen)]
            else:
                cols = [np.array([a * scale for a, _ in rows], dtype=np.int64), NAMES[[n for _, n in rows]]]
                seen.append(cols)
            n = len(cols[0])
            sign = np.full(n, -1 if negative else 1, dtype=np.int64)
            want = []
            for row, d in zip(zip(cols[0].tolist(), cols[1].tolist()), sign.tolist()):
                before = model.get(row, 0)
                model[row] = before + d
                want.append(int(before + d > 0) - int(before > 0))
            got = r.turnover(cols, sign, _positive)
            if got is None:
                got = r.changes(cols, [sign], _positive)
            assert got.tolist() == want
            assert r.live == sum(1 for c in model.values() if c)
            if r.uncoded is not None:        # held uncoded: exactly the rows with a count, each at 1
                held = sorted(zip(r.uncoded[0].tolist(), r.uncoded[1].tolist()))
                assert held == sorted(k for k, c in model.items() if c) and all(c in (0, 1) for c in model.values())
    finally:
        distinct.RECENT_MIN_ROWS = old_recent
