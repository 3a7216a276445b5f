"""``IntExtremes`` against a model (a Counter per group): the extreme after and before every (group, instant)
segment, over batches of inserts and deletes that include deletes of rows inserted in the same instant, groups
that empty and refill (in one instant too: a tumbling window's turnover, which drops the group's log instead
of netting it; or a row replaced, the new row inserted before the old ones are deleted, sometimes with a value
they share), and groups large enough for the netted-log recomputation (and its widening partition)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.extremes_model import check_step

from synopses import int_extremes
from synopses.int_extremes import IntExtremes

values = st.one_of(st.integers(-3, 3), st.integers(-2**63, 2**63 - 1))


@st.composite
def workloads(draw):
    """Batches of segments (group, [(value, sign)]) in (group, instant) order; every delete removes a value
    present at that point of the segment, so each segment ends with a valid multiset."""
    model: dict[int, Counter] = {}
    batches = []
    for _ in range(draw(st.integers(1, 5))):
        segs = []
        for g in sorted(draw(st.sets(st.integers(0, 3), min_size=1, max_size=3))):
            for _ in range(draw(st.integers(1, 3))):
                bag = model.setdefault(g, Counter())
                ops = []
                if draw(st.integers(0, 3)) == 0:              # a row replaced, the new one arriving first:
                    prior = list((+bag).elements())             # insert, then delete all held before (q9)
                    for _ in range(draw(st.integers(1, 2))):
                        v = draw(st.sampled_from(prior)) if prior and draw(st.booleans()) else draw(values)
                        bag[v] += 1
                        ops.append((v, 1))
                    for v in prior:
                        bag[v] -= 1
                        ops.append((v, -1))
                    segs.append((g, ops))
                    continue
                if draw(st.integers(0, 3)) == 0:              # a tumbling window's turnover: empty, refill
                    for v, c in list((+bag).items()):
                        ops.extend([(v, -1)] * c)
                        bag[v] = 0
                for _ in range(draw(st.integers(1, 8))):
                    present = sorted(+bag)
                    if present and draw(st.booleans()):
                        v = draw(st.sampled_from(present))
                        bag[v] -= 1
                        ops.append((v, -1))
                    else:
                        v = draw(values)
                        bag[v] += 1
                        ops.append((v, 1))
                if draw(st.integers(0, 4)) == 0:              # sometimes empty the group in the same instant
                    for v, c in list((+bag).items()):
                        ops.extend([(v, -1)] * c)
                        bag[v] = 0
                if draw(st.integers(0, 6)) == 0:              # sometimes a wide group
                    for v in range(40):
                        bag[v * 7] += 1
                        ops.append((v * 7, 1))
                segs.append((g, ops))
        batches.append(segs)
    return batches


@pytest.mark.parametrize("small,net_min,small_vec", [(int_extremes.SMALL, int_extremes.NET_MIN, int_extremes.SMALL_VEC),
                                               (int_extremes.SMALL, int_extremes.NET_MIN, 0), (0, 0, 0)],
                         ids=["defaults", "small-groups-all-at-once", "numpy-walk-and-netting-every-batch"])
@pytest.mark.parametrize("want_max", [True, False])
@settings(max_examples=150, deadline=None)
@given(batches=workloads())
def test_extremes_equal_a_model(want_max, small, net_min, small_vec, batches):
    """(0, 0, 0): no one-sort groups, no small groups, netting every batch; ``small_vec`` 0: small groups
    walked all at once with numpy (``_small_all``) rather than in Python (``_small``)."""
    saved = int_extremes.SMALL, int_extremes.NET_MIN, int_extremes.SINGLE_MAX, int_extremes.SMALL_VEC
    int_extremes.SMALL, int_extremes.NET_MIN, int_extremes.SMALL_VEC = small, net_min, small_vec
    int_extremes.SINGLE_MAX = int_extremes.SINGLE_MAX if small else 0
    try:
        x = IntExtremes(want_max)
        x.grow(4)
        bags: dict[int, Counter] = {}
        for segs in batches:
            check_step(x, bags, segs, want_max)
    finally:
        int_extremes.SMALL, int_extremes.NET_MIN, int_extremes.SINGLE_MAX, int_extremes.SMALL_VEC = saved


@pytest.mark.parametrize("want_max", [True, False])
def test_running_extreme_at_the_ends_of_int64(want_max):
    """Inserts only, several groups, values at the ends of int64: the running extreme's offsets (lo - 1,
    hi + 1) lie outside int64 and must not be formed (an OverflowError before 2026-11-26)."""
    lo, hi = -2**63, 2**63 - 1
    for vals in ([lo, lo, lo + 1, lo], [hi, hi - 1, hi, hi], [lo, 0, hi, lo]):
        x = IntExtremes(want_max)
        x.grow(2)
        g = np.array([0, 0, 1, 1])
        new, old = x.step(np.array(vals, dtype=np.int64), np.ones(4, dtype=np.int64), g, np.array([0, 1, 3]),
                          np.array([False, True, False]), np.array([1, 2, 2]))
        best = max if want_max else min
        assert new.tolist() == [vals[0], best(vals[:2]), best(vals[2:])]
        assert old.tolist() == [0, vals[0], 0]


@pytest.mark.parametrize("want_max", [True, False])
def test_zero_count_at_the_last_delete_is_no_reset_when_a_value_went_below_zero(want_max):
    """One instant of a join's output where a value's delete arrives before the insert it retracts: held
    {0, -1}, then +0 -0 +(-1) -(-1) -0 -0 +0. The count is zero right after the last delete, but the multiset
    there is {-1: 1, 0: -1}, not empty; the group ends as {-1}."""
    x = IntExtremes(want_max)
    x.grow(1)
    g = np.zeros(2, dtype=np.int64)
    x.step(np.array([0, -1]), np.array([1, 1]), g, np.array([1]), np.array([False]), np.array([2]))
    v = np.array([0, 0, -1, -1, 0, 0, 0])
    sign = np.array([1, -1, 1, -1, -1, -1, 1])
    new, old = x.step(v, sign, np.zeros(7, dtype=np.int64), np.array([6]), np.array([True]), np.array([1]))
    assert new.tolist() == [-1]
    assert old.tolist() == [0 if want_max else -1]
