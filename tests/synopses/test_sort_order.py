"""``stable_argsort`` and ``stable_lexsort2`` give exactly numpy's stable orderings, on every path: short
arrays, arrays already in order, 16-bit spans (radix), keys packed with their positions, and spans too wide to
pack (sorted by ranks among the distinct keys); signed, unsigned and extreme int64 values included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.sort_order import search, search_both, stable_argsort, stable_lexsort2

DTYPES = (np.int64, np.int32, np.uint64, np.int8)


@st.composite
def int_arrays(draw, dtype=None):
    dtype = dtype or draw(st.sampled_from(DTYPES))
    info = np.iinfo(dtype)
    n = draw(st.sampled_from([0, 1, 5, 255, 256, 300, 2000]))
    lo = draw(st.sampled_from([int(info.min), 0, -5 if info.min < 0 else 0, int(info.max) - 10]))
    span = draw(st.sampled_from([0, 3, 1 << 15, 1 << 16, 1 << 40, int(info.max)]))
    hi = min(int(info.max), lo + span)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = rng.integers(lo, hi, size=n, dtype=dtype, endpoint=True)
    if draw(st.booleans()):
        v.sort()
    if n and draw(st.booleans()):
        v[rng.integers(0, n, size=n // 3)] = v[0]          # many ties
    return v


@settings(max_examples=150, deadline=None)
@given(int_arrays())
def test_stable_argsort_is_numpys_stable_argsort(v):
    assert stable_argsort(v).tolist() == np.argsort(v, kind="stable").tolist()


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_stable_lexsort2_is_numpys_lexsort(data):
    major = data.draw(int_arrays(np.int64))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    hi = data.draw(st.sampled_from([1, 7, 1 << 20, 2**62]))
    minor = rng.integers(0, hi, size=len(major), dtype=np.int64)
    assert stable_lexsort2(minor, major).tolist() == np.lexsort((minor, major)).tolist()


def test_floats_fall_back_to_the_stable_sort():
    v = np.array([0.5, -0.0, 0.0, np.nan, -1.0] * 100)
    assert stable_argsort(v).tolist() == np.argsort(v, kind="stable").tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 5), st.sampled_from([-2**63, 2**63 - 1])), max_size=40),
       st.lists(st.one_of(st.integers(-6, 6), st.sampled_from([-2**63, 2**63 - 1])), max_size=300),
       st.booleans())
def test_search_is_numpys_searchsorted(table, probes, in_order):
    """``search`` and ``search_both`` (probes sorted first when many) give numpy's positions on both sides,
    for probes in random order and in order, with repeats and int64 extremes."""
    table = np.sort(np.array(table, dtype=np.int64))
    probes = np.array(sorted(probes) if in_order else probes, dtype=np.int64)
    left, right = np.searchsorted(table, probes, "left"), np.searchsorted(table, probes, "right")
    assert search(table, probes).tolist() == left.tolist()
    assert search(table, probes, "right").tolist() == right.tolist()
    lo, hi = search_both(table, probes)
    assert lo.tolist() == left.tolist() and hi.tolist() == right.tolist()
