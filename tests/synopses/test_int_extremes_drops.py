"""``IntExtremes`` over many batches of group resets (a group's rows all deleted, then new ones inserted, in
one instant: NEXMark q9's MIN over the rows at each auction's maximum), against a model: the log rows of a
reset group are dropped lazily (marked by position, dropped when the log is next read or netted), so later
batches that read the log (deletes that do not empty the group) must see exactly the live multiset; and the
reset test's shortcut (``_apart``: deleted and inserted values in ranges that do not meet) must step aside when
a value is both deleted and inserted."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.extremes_model import check_step

from synopses import int_extremes
from synopses.int_extremes import IntExtremes

VALUES = st.one_of(st.integers(0, 6), st.integers(-2**63, 2**63 - 1))


@st.composite
def batches(draw):
    model: dict[int, Counter] = {}
    out = []
    for _ in range(draw(st.integers(4, 12))):
        segs = []
        for g in sorted(draw(st.sets(st.integers(0, 5), min_size=1, max_size=4))):
            bag = model.setdefault(g, Counter())
            held = list((+bag).elements())
            kind = draw(st.sampled_from(["reset", "reset", "replace", "partial", "insert"]))
            ops = []
            if kind in ("reset", "replace") and held:
                new = [draw(st.sampled_from(held)) if draw(st.booleans()) else draw(VALUES)
                       for _ in range(draw(st.integers(1, 2)))]
                dels = [(v, -1) for v in held]
                ins = [(v, 1) for v in new]
                ops = dels + ins if kind == "reset" else ins + dels
            elif kind == "partial" and len(held) > 1:
                for v in held[:draw(st.integers(1, len(held) - 1))]:
                    ops.append((v, -1))
                ops.append((draw(VALUES), 1))
            else:
                ops = [(draw(VALUES), 1) for _ in range(draw(st.integers(1, 3)))]
            for v, s in ops:
                bag[v] += s
            segs.append((g, ops))
        out.append(segs)
    return out


@pytest.mark.parametrize("net_min", [int_extremes.NET_MIN, 0], ids=["defaults", "netting-every-batch"])
@pytest.mark.parametrize("want_max", [True, False])
@settings(max_examples=120, deadline=None)
@given(work=batches())
def test_resets_then_reads_of_the_log_equal_a_model(want_max, net_min, work):
    saved = int_extremes.NET_MIN
    int_extremes.NET_MIN = net_min
    try:
        x = IntExtremes(want_max)
        x.grow(6)
        bags: dict[int, Counter] = {}
        for segs in work:
            check_step(x, bags, segs, want_max)
        # the log, once read, holds exactly the live multiset of every group
        x._join_tail()
        logged: Counter = Counter()
        for gid, val, c in zip(x.lg.tolist(), x.lv.tolist(), x.lc.tolist()):
            logged[(gid, val)] += c
        live = Counter({(gid, val): c for gid, bag in bags.items() for val, c in bag.items()})
        assert {k: c for k, c in logged.items() if c} == {k: c for k, c in live.items() if c} and not x.dropped
    finally:
        int_extremes.NET_MIN = saved


def test_apart_tells_overlapping_ranges():
    seg = np.array([0, 0, 0, 1, 1])
    a = np.array([1, 1, 0, 1, 0], dtype=bool)
    b = ~a
    assert int_extremes._apart(np.array([1, 2, 5, 7, 3]), seg, a, b)
    assert not int_extremes._apart(np.array([1, 6, 5, 7, 3]), seg, a, b)      # 5 lies within 1 .. 6
    assert int_extremes._apart(np.array([1, 6, 5, 7, 3]), seg, a, np.zeros(5, dtype=bool))
