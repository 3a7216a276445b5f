"""Exact float sums in int64 limbs (synopses/exact_sums.py) against exact rational arithmetic.

The expected value of a sum is computed with ``fractions.Fraction`` (exact) and converted to float by Python
(correctly rounded, ties to even; beyond the float range, infinity), so every bit of the limb arithmetic, the
carries and the rounding is checked, on values from 2**-1074 to the top of the float range.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.exact_sums import LimbLayout, deltas, normalise, pad, to_float


def rounded(values) -> float:
    s = sum((Fraction(v) for v in values), Fraction(0))
    try:
        return float(s)
    except OverflowError:
        return math.inf if s > 0 else -math.inf


def limb_sum(values, layout: LimbLayout | None = None) -> float:
    layout = layout or LimbLayout()
    d, _ = deltas(np.array(values, dtype=np.float64), np.ones(len(values), dtype=np.int8), layout)
    return float(to_float(d.sum(axis=1, keepdims=True), layout.lo)[0])


finite = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False),
    st.sampled_from([1e17, -1e17, 1.0, 0.1, -0.1, 2.0**-1074, -2.0**-1074, 2.0**-1022, 2.0**53, 1.0 + 2**-52,
                     1.7976931348623157e308, -1.7976931348623157e308, 0.0, -0.0]),
)


@settings(max_examples=300)
@given(st.lists(st.lists(finite, min_size=1, max_size=8), min_size=1, max_size=4), st.randoms())
def test_running_sums_with_deletes_equal_exact_rounding(batches, rnd):
    """Batches of inserts, each followed by deletes of earlier values: every prefix (a running sum, as the
    aggregate reads it) rounds to what exact arithmetic gives, and stored sums stay exact across batches
    (padded when the layout widens, normalised when stored)."""
    layout = LimbLayout()
    stored = np.zeros((layout.width, 1), dtype=np.int64)
    present: list[float] = []
    for batch in batches:
        vals, signs = list(batch), [1] * len(batch)
        pool = present + batch
        for v in rnd.sample(pool, rnd.randint(0, len(pool))):
            vals.append(v)
            signs.append(-1)
        d, grown = deltas(np.array(vals), np.array(signs, dtype=np.int8), layout)
        stored = pad(stored, *grown)
        running = np.cumsum(d, axis=1) + stored
        got = to_float(running, layout.lo)
        for i, (v, s) in enumerate(zip(vals, signs)):
            if s > 0:
                present.append(v)
            else:
                present.remove(v)
            assert got[i] == rounded(present), (present, got[i])
        stored = normalise(running[:, -1:].copy())


def test_rounding_ties_and_cancellation():
    assert limb_sum([2.0**53, 1.0]) == 2.0**53                       # a tie rounds to even
    assert limb_sum([2.0**53, 1.0, 2.0**-100]) == 2.0**53 + 2        # just above the tie: the sticky bit
    assert limb_sum([2.0**53, 3.0]) == 2.0**53 + 4
    assert limb_sum([-(2.0**53), -1.0, -(2.0**-100)]) == -(2.0**53) - 2
    assert limb_sum([1e17, 1.0, -1e17]) == 1.0                      # no residue of the large value
    assert limb_sum([0.1] * 10) == rounded([0.1] * 10) == 1.0
    assert limb_sum([2.0**-1074] * 3) == 3 * 2.0**-1074             # subnormal results, exact
    assert limb_sum([2.0**-1022, -(2.0**-1074)]) == rounded([2.0**-1022, -(2.0**-1074)])
    big = 1.7976931348623157e308
    assert limb_sum([big, big * 2.0**-53]) == math.inf               # rounds beyond the float range
    assert limb_sum([big, big * 2.0**-54]) == big                    # a tie below it rounds back


def test_layout_grows_only_as_the_values_need():
    layout = LimbLayout()
    limb_sum([1.0, 2.5, 100.0], layout)
    small = layout.width
    assert small <= 4
    limb_sum([2.0**-1074], layout)
    assert layout.lo <= -1074 and layout.width > small
