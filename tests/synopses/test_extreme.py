"""MIN and MAX state (``synopses.extreme.ExtremeBag``) gives exactly what a scan of a Counter gives, value
object included, through inserts, deletes (counts dipping below zero inside an instant), values leaving and
coming back, heap rebuilds, strings, -0.0 beside 0.0; a NaN present makes the extreme NaN (IEEE 754
propagation, docs/contract-engine-api.md), and every NaN is one value."""

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses import extreme
from synopses.extreme import ExtremeBag


@pytest.fixture(params=[0, 3, extreme.SCAN], ids=lambda n: f"scan{n}", autouse=True)
def scan_limit(request, monkeypatch):
    """Every test runs with a heap from the first value on, from a few values on, and as configured."""
    monkeypatch.setattr(extreme, "SCAN", request.param)

VALUES = {
    "int": st.integers(-5, 5) | st.sampled_from([-2**63, 2**63 - 1]),
    "float": st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e300, -math.inf, math.inf]),
    "str": st.sampled_from(["", "a", "ab", "b", "é"]),
    "nan": st.sampled_from([0.0, -0.0, 1.5, float("nan"), -float("nan")]),
}


def replay(steps, want_max: bool):
    bag, ref = ExtremeBag(want_max), Counter()
    for v, s in steps:
        bag.add(v, s)
        if v != v:
            v = extreme.NAN                # every NaN is one value
        c = ref[v] + s                     # the aggregate's former state: a Counter scanned on every instant
        if c:
            ref[v] = c
        else:
            del ref[v]
        assert len(bag) == len(ref)
        if ref:
            want = extreme.NAN if extreme.NAN in ref else max(ref) if want_max else min(ref)
            got = bag.extreme()
            assert got is want or (got == want and repr(got) == repr(want)), (got, want)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(VALUES)), st.booleans(), st.data())
def test_extreme_equals_a_counter_scan(kind, want_max, data):
    vals = data.draw(st.lists(VALUES[kind], min_size=1, max_size=6, unique_by=repr))
    steps = data.draw(st.lists(st.tuples(st.sampled_from(vals), st.sampled_from([1, 1, -1])), max_size=80))
    replay(steps, want_max)


def test_a_value_that_left_and_came_back_as_an_equal_object():
    """0.0 leaves and -0.0 (equal, another object) arrives: the stale 0.0 entry must not answer for it."""
    for want_max in (False, True):
        replay([(0.0, 1), (5.0 if not want_max else -5.0, 1), (0.0, -1), (-0.0, 1)], want_max)
        replay([(-0.0, 1), (0.0, 1), (-0.0, -1), (0.0, -1), (0.0, 1)], want_max)


@pytest.mark.parametrize("want_max", [False, True])
@pytest.mark.parametrize("step", [1, -1])
def test_sliding_window_keeps_the_heap_small(want_max, step):
    """A window sliding over rising or falling values. One way the extreme leaves at every step (the case a
    cached extreme would rescan the window for); the other way the values leaving are never the extreme and
    stay in the heap as stale entries until a rebuild. Each answer is right and the heap stays within a
    constant factor of the values present."""
    window = 1000
    bag = ExtremeBag(want_max)
    for i in range(20_000):
        bag.add(step * i, 1)
        if i >= window:
            bag.add(step * (i - window), -1)
        present = [step * j for j in (max(0, i - window + 1), i)]
        assert bag.extreme() == (max(present) if want_max else min(present))
        assert len(bag.heap or ()) <= 2 * len(bag) + 33
        assert bag.heap is not None or len(bag) <= extreme.SCAN     # a large multiset is never scanned
