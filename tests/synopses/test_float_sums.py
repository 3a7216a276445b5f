"""FloatSums (synopses/float_sums.py), the vectorised aggregate's exact FLOAT SUM state, against exact rational
arithmetic: per group, after every row of every batch, the value is the correctly rounded sum of the values
present (IEEE rules for inf and nan), in its double-double form, across the switch to limbs, and after it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.float_sums import FloatSums, _dd_running


def expected(values: list[float]) -> float:
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values:
        return math.inf
    if -math.inf in values:
        return -math.inf
    s = sum((Fraction(v) for v in values), Fraction(0))
    try:
        return float(s)
    except OverflowError:
        return math.inf if s > 0 else -math.inf


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


narrow = st.one_of(st.integers(-1000, 1000).map(lambda i: i / 8),
                   st.floats(min_value=-100, max_value=100).map(lambda x: round(x * 2.0**40) / 2.0**40),
                   st.sampled_from([0.1, -0.1, 1.0, 2.5]))
wide = st.one_of(narrow, st.floats(allow_nan=False, allow_infinity=False),
                 st.sampled_from([1e17, -1e17, 2.0**-1074, 1.7976931348623157e308, math.inf, -math.inf,
                                  math.nan]))


def run_batches(batches, rnd, groups: int = 3):
    """Feed ``batches`` (lists of values) with deletes of present values mixed in; check every row."""
    fs = FloatSums()
    fs.grow(groups)
    present: list[list[float]] = [[] for _ in range(groups)]
    forms = []
    for batch in batches:
        rows = [(rnd.randrange(groups), v, 1) for v in batch]
        pool = [(g, v) for g in range(groups) for v in present[g]] + [(g, v) for g, v, _ in rows]
        rows += [(g, v, -1) for g, v in rnd.sample(pool, rnd.randint(0, len(pool)))]
        # deletes must follow their inserts within a group: sort by group, inserts first (stable)
        rows.sort(key=lambda r: (r[0], -r[2]))
        g_s = np.array([r[0] for r in rows], dtype=np.int64)
        v = np.array([r[1] for r in rows], dtype=np.float64)
        sign = np.array([r[2] for r in rows], dtype=np.int64)
        grp_start = np.ones(len(rows), dtype=bool)
        grp_start[1:] = g_s[1:] != g_s[:-1]
        starts_idx = np.nonzero(grp_start)[0]
        got = fs.step(v, sign, g_s, grp_start, starts_idx, np.arange(len(rows)))
        for i, (g, x, s) in enumerate(rows):
            if s > 0:
                present[g].append(x)
            else:
                present[g].remove(x) if not math.isnan(x) else present[g].remove(
                    next(y for y in present[g] if math.isnan(y)))
            assert same(got[i], expected(present[g])), (g, present[g], got[i])
        last = np.nonzero(np.append(grp_start[1:], True))[0]
        fs.commit(g_s[last], last, np.array([bool(present[g]) for g in g_s[last]]))
        forms.append(fs.exact_form)
    return forms


@settings(max_examples=200)
@given(st.lists(st.lists(narrow, min_size=1, max_size=10), min_size=1, max_size=5), st.randoms())
def test_narrow_data_stays_double_double_and_exact(batches, rnd):
    forms = run_batches(batches, rnd)
    assert set(forms) == {"double-double"}


@settings(max_examples=300)
@given(st.lists(st.lists(wide, min_size=1, max_size=10), min_size=1, max_size=5), st.randoms())
def test_any_data_exact_across_the_switch_to_limbs(batches, rnd):
    forms = run_batches(batches, rnd)
    assert forms == sorted(forms)            # double-double, then limbs for good


def test_the_cancellation_that_a_float_sum_gets_wrong():
    """{1e17, 1.0} minus 1e17 is 1.0 (a float running sum leaves 0.0); narrow enough for double-double."""
    fs = FloatSums()
    fs.grow(1)
    g = np.zeros(3, dtype=np.int64)
    start = np.array([True, False, False])
    out = fs.step(np.array([1e17, 1.0, 1e17]), np.array([1, 1, -1]), g, start, np.array([0]), np.arange(3))
    assert out.tolist() == [1e17, 1e17, 1.0]
    assert fs.exact_form == "double-double"


def test_the_bound_refuses_what_double_double_cannot_hold():
    """1e17 and 2**-60 need about 117 bits: no double-double grid holds them, so the check says no."""
    x = np.array([1e17, 2.0**-60])
    assert _dd_running(x, np.zeros(2, dtype=np.int64), np.array([0]), np.zeros(1), np.zeros(1), -60) is None
    assert _dd_running(x[:1], np.zeros(1, dtype=np.int64), np.array([0]), np.zeros(1), np.zeros(1), 17) \
        is not None
