"""``FifoExtremes`` against a model (the live rows as a list): the extreme after and before every instant, over
batches whose deletes retract the oldest rows (a tumbling window's turnover, a hopping or sliding window's
expiry, deletes of rows inserted earlier in the same batch, many instants a batch with every instant's live
rows inside the batch's own inserts), and batches that break that order (a delete of another row, a delete
arriving before the insert it retracts), after which the counts per value must take over with the right
multiset."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses import fifo_extremes
from synopses.fifo_extremes import FifoExtremes, _prefix_max, _range_max, _records

values = st.one_of(st.integers(-3, 3), st.integers(-2**63, 2**63 - 1))


@st.composite
def workloads(draw, fifo_only: bool):
    """Batches of instants, each a list of (value, sign); the model is a list of live values, oldest first.
    Deletes take the oldest live row, except (unless ``fifo_only``) now and then another one, or a value
    whose insert comes later in the same instant."""
    live: list[int] = []
    batches = []
    for _ in range(draw(st.integers(1, 8))):
        segs = []
        for _ in range(draw(st.integers(1, 4))):
            ops = []
            shape = draw(st.integers(0, 5))
            if shape == 0 and live:                       # a turnover: every row out, then new ones in
                ops += [(x, -1) for x in live]
                live.clear()
            for _ in range(draw(st.integers(0, 10))):
                if live and draw(st.booleans()):
                    if not fifo_only and draw(st.integers(0, 15)) == 0:
                        x = live.pop(draw(st.integers(0, len(live) - 1)))     # not the oldest
                    else:
                        x = live.pop(0)
                    ops.append((x, -1))
                else:
                    x = draw(values)
                    live.append(x)
                    ops.append((x, 1))
            if not fifo_only and draw(st.integers(0, 15)) == 0:
                x = draw(values)                          # deleted before its insert, in the same instant
                ops += [(x, -1), (x, 1)]
            if ops:
                segs.append(ops)
        if segs:
            batches.append(segs)
    return batches


def _check(want_max: bool, batches) -> FifoExtremes:
    x = FifoExtremes(want_max)
    x.grow(1)
    bag: Counter = Counter()
    best = max if want_max else min
    for segs in batches:
        v = np.array([a for ops in segs for a, _ in ops], dtype=np.int64)
        sign = np.array([s for ops in segs for _, s in ops], dtype=np.int64)
        ends = np.cumsum([len(ops) for ops in segs]) - 1
        cnt = sum(bag.values())
        had, new_cnt, exp_new, exp_old = [], [], [], []
        for ops in segs:
            had.append(cnt > 0)
            exp_old.append(best(+bag) if +bag else 0)
            for a, s in ops:
                bag[a] += s
                cnt += s
            new_cnt.append(cnt)
            exp_new.append(best(+bag) if +bag else 0)
        new, old = x.step(v, sign, np.zeros(len(v), dtype=np.int64), ends, np.array(had), np.array(new_cnt))
        assert new.tolist() == exp_new
        assert old.tolist() == exp_old
    return x


@pytest.mark.parametrize("want_max", [True, False])
@settings(max_examples=200, deadline=None)
@given(batches=workloads(fifo_only=True))
def test_fifo_deletes_stay_on_the_fast_path_and_equal_a_model(want_max, batches):
    x = _check(want_max, batches)
    assert x.general is None


@pytest.mark.parametrize("want_max", [True, False])
@settings(max_examples=200, deadline=None)
@given(batches=workloads(fifo_only=False))
def test_any_deletes_equal_a_model(want_max, batches):
    _check(want_max, batches)


def test_a_delete_out_of_order_hands_over_the_live_rows():
    """Rows 5, 9, 7 held; deleting 9 (not the oldest) switches to counts per value holding {5, 7}."""
    batches = [[[(5, 1), (9, 1), (7, 1)]], [[(9, -1)]], [[(7, -1)], [(5, -1), (1, 1)]]]
    x = _check(True, batches)
    assert x.general is not None


def test_a_delete_before_its_insert_hands_over():
    """In one instant a join may deliver a delete before the insert it retracts: not first in, first out."""
    x = _check(True, [[[(4, 1)]], [[(6, -1), (6, 1), (4, -1), (2, 1)]]])
    assert x.general is not None


def test_an_input_that_never_deletes_hands_over_past_its_bound(monkeypatch):
    """A stream without a window: past ``UNBOUNDED_ROWS`` rows and no delete, the counts per value keep it."""
    monkeypatch.setattr(fifo_extremes, "UNBOUNDED_ROWS", 5)
    x = _check(False, [[[(3, 1), (1, 1)]], [[(2, 1), (0, 1)], [(8, 1)]], [[(-4, 1)]]])
    assert x.general is not None
    monkeypatch.setattr(fifo_extremes, "UNBOUNDED_ROWS", 5)
    y = _check(False, [[[(3, 1), (1, 1)]], [[(3, -1)]], [[(2, 1), (0, 1)], [(8, 1)]], [[(-4, 1)]]])
    assert y.general is None                          # deletes seen: a window, bounded by its range


def test_many_instants_inside_one_batch():
    """A sliding window over a batch spanning more than its range: each instant's rows are a stretch of the
    batch's own inserts (``_range_max``), descending values (every row is a record)."""
    rng = np.random.default_rng(7)
    for vals in (rng.integers(-50, 50, 300), np.arange(300, 0, -1), np.arange(300)):
        vals = vals.tolist()
        segs, live = [], []
        for i, a in enumerate(vals):
            ops = []
            if len(live) >= 4:
                ops.append((live.pop(0), -1))
            live.append(a)
            ops.append((a, 1))
            segs.append(ops)
            if i % 97 == 96:
                segs.append([(live.pop(0), -1) for _ in range(len(live))])
                live = []
        for want_max in (True, False):
            x = _check(want_max, [segs[:150], segs[150:]])
            assert x.general is None


def test_helpers_against_plain_numpy():
    rng = np.random.default_rng(3)
    for n in (1, 2, 17, 400):
        a = rng.integers(-5, 5, n)
        lo = np.sort(rng.integers(0, n, 30))
        hi = np.minimum(lo + rng.integers(1, n + 1, 30), n)
        assert _range_max(a, lo, hi).tolist() == [int(a[i:j].max()) for i, j in zip(lo, hi)]
        ends = np.sort(rng.integers(1, n + 1, 9))
        assert _prefix_max(a, ends).tolist() == [int(a[:e].max()) for e in ends]
        rec = [i for i in range(n) if all(a[i] > a[j] for j in range(i + 1, n))]
        assert _records(a).tolist() == rec
    for a in (np.repeat(np.arange(30, 0, -1), 3), np.repeat(np.arange(30, 0, -1), [1, 2] * 15),
              np.concatenate([np.arange(40, 0, -1), [40, 40]]), np.full(50, 4)):
        n = len(a)                                      # more records than the loop takes, with ties
        rec = [i for i in range(n) if all(a[i] > a[j] for j in range(i + 1, n))]
        assert _records(a).tolist() == rec
