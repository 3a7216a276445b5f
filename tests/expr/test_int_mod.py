"""INT % by a constant (``dsms.expr.compile._mod_by_constant``, issue 15): a multiply and a shift instead of
numpy's division for values in [0, 2**31), and ``np.fmod`` otherwise; both must equal ``np.fmod`` exactly,
and the compiled expression must give the same answer below and above ``MOD_BY_MULTIPLY_ROWS`` rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.expr import compile as C

EDGE = [0, 1, 2, 3, 122, 123, 124, 2**16, 2**30, 2**31 - 2, 2**31 - 1]
DIVISORS = st.one_of(
    st.integers(1, 2**31 - 1),
    st.sampled_from([1, 2, 3, 7, 123, 1000, 2**16, 2**16 + 1, 2**30, 2**30 + 1, 2**31 - 1, 2**31, 2**40, 2**63 - 1]),
).flatmap(lambda d: st.sampled_from([d, -d]))


@settings(max_examples=300, deadline=None)
@given(d=DIVISORS, seed=st.integers(0, 2**32 - 1), hi=st.sampled_from([2, 1000, 2**20, 2**31, 2**33, 2**62]),
       neg=st.booleans())
def test_mod_by_constant_equals_fmod(d, seed, hi, neg):
    rng = np.random.default_rng(seed)
    a = rng.integers(-hi if neg else 0, hi, 5000, dtype=np.int64)
    a[: len(EDGE)] = EDGE
    # the values next to multiples of |d|, where a quotient off by one shows
    k = rng.integers(0, max(1, (2**31 - 1) // abs(d)), 100, dtype=np.int64)
    near = np.clip(np.concatenate([k * abs(d) - 1, k * abs(d), k * abs(d) + 1]), 0, 2**31 - 1)
    a[len(EDGE):len(EDGE) + len(near)] = near
    got = C._mod_by_constant(a, d)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.fmod(a, d))


def test_every_value_below_two_to_the_31_for_hard_divisors():
    """The divisors just above a power of two have the largest multiplier (m close to 2**32): checked over a
    dense sweep of the whole range plus the top values."""
    a = np.concatenate([np.arange(0, 2**31, 9973, dtype=np.int64), np.arange(2**31 - 5000, 2**31, dtype=np.int64)])
    for d in (3, 5, 7, 2**10 + 1, 2**20 + 1, 2**30 + 1, 2**31 - 1, 641, 6700417):
        assert np.array_equal(C._mod_by_constant(a, d), np.fmod(a, d)), d


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.sampled_from([-7, 1, 123, 2**31 - 1, 2**40]))
def test_the_compiled_expression_is_the_same_on_both_sides_of_the_threshold(seed, d):
    from dsms.cql.parser import parse_expr
    e = C.compile_expr(parse_expr(f"x % {d}"), lambda ref: ("$0", "INT"))
    rng = np.random.default_rng(seed)
    for n in (C.MOD_BY_MULTIPLY_ROWS - 1, C.MOD_BY_MULTIPLY_ROWS, 3 * C.MOD_BY_MULTIPLY_ROWS):
        a = rng.integers(0, 2**31, n, dtype=np.int64)
        assert np.array_equal(e({"$0": a}, n), np.fmod(a, d))
