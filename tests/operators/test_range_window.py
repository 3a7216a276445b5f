"""The time-based window ``[RANGE T [SLIDE S]]`` (and ``[NOW]``, which is ``[RANGE 1]``): an element stamped ts
is in the window at the instants τ whose evaluation point e (the last multiple of S at or before τ) has
e - T < ts <= e (SPEC section 3). The operator emits that relation's inserts and deletes in time order as soon
as its input frontier reaches them, so a heartbeat alone expires tuples (digest-004 P-7). Checked on
hand-worked cases and, on random input, against the definition evaluated instant by instant."""

from collections import Counter

import numpy as np
import pytest
from harness import Harness
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.batch import Batch
from dsms.operators import range_window
from dsms.operators.range_window import RangeWindowOp
from dsms.queues import Queue

TYPES = ["STRING"]


def window(range_: int, slide: int | None = None) -> Harness:
    return Harness(lambda inp, out: RangeWindowOp(range_, slide, inp, out))


def test_an_element_enters_at_its_timestamp_and_leaves_T_later():
    h = window(5)
    h.push([1, 3], [("x",), ("y",)], TYPES)
    assert h.run() == [(1, 1, ("x",)), (3, 1, ("y",))]          # deletes wait for the frontier to reach them
    h.heartbeat(6)
    assert h.run() == [(6, -1, ("x",))]                         # in the window at 1..5, gone at 6
    h.heartbeat(20)
    assert h.run() == [(8, -1, ("y",))] and h.frontier == 20
    assert h.op.window_rows == 0


def test_now_keeps_an_element_for_its_own_instant():
    h = window(1)
    h.push([4, 4, 5], [("a",), ("b",), ("c",)], TYPES)
    h.heartbeat(9)
    assert h.run() == [(4, 1, ("a",)), (4, 1, ("b",)), (5, -1, ("a",)), (5, -1, ("b",)), (5, 1, ("c",)),
                       (6, -1, ("c",))]


def test_a_sliding_window_moves_in_steps_of_S():
    # T = 10, S = 5: at e = 5 the window is (-5, 5], at 10 it is (0, 10], at 15 (5, 15], at 20 (10, 20]
    h = window(10, 5)
    h.push([3, 5, 7], [("a",), ("b",), ("c",)], TYPES)
    h.heartbeat(30)
    assert h.run() == [(5, 1, ("a",)), (5, 1, ("b",)), (10, 1, ("c",)), (15, -1, ("a",)), (15, -1, ("b",)),
                       (20, -1, ("c",))]


def test_a_hopping_window_never_holds_elements_that_fall_between_two_windows():
    # T = 5, S = 10: the windows are (5, 10], (15, 20], ...; an element at 3 or 13 is in none of them
    h = window(5, 10)
    h.push([3, 7, 13, 20], [("gap",), ("in",), ("gap2",), ("in2",)], TYPES)
    h.heartbeat(40)
    assert h.run() == [(10, 1, ("in",)), (20, -1, ("in",)), (20, 1, ("in2",)), (30, -1, ("in2",))]


def test_a_smaller_range_applies_to_elements_after_the_frontier_only():
    # PIPES (digest-002b Q-3): x, stamped before the write, keeps T = 10; y, after it, gets T = 3
    h = window(10)
    h.push([1], [("x",)], TYPES)
    h.run()
    h.op.set("range", 3)
    assert h.op.range_from == 2
    h.push([2], [("y",)], TYPES)
    h.heartbeat(30)
    assert h.run() == [(2, 1, ("y",)), (5, -1, ("y",)), (11, -1, ("x",))]


def definition(elements: list[tuple[int, int]], range_: int, slide: int, until: int) -> Counter:
    """Net change per (instant, value) of the window's contents, evaluated at every instant below ``until``."""
    def contents(tau: int) -> Counter:
        e = (tau // slide) * slide
        return Counter(v for ts, v in elements if e - range_ < ts <= e)
    changes: Counter = Counter()
    before: Counter = Counter()
    for tau in range(min(ts for ts, _ in elements), until):
        now = contents(tau)
        for v in set(now) | set(before):
            if now[v] != before[v]:
                changes[(tau, v)] = now[v] - before[v]
        before = now
    return changes


@pytest.mark.parametrize("pass_rows", [range_window.PASS_ROWS, 1], ids=["merged", "batches-passed-on"])
@pytest.mark.parametrize("range_,slide", [(1, None), (4, None), (7, 3), (6, 6), (3, 8), (25, 4), (8, 4), (9, 3)])
def test_the_output_is_the_definition_instant_by_instant(range_, slide, pass_rows, monkeypatch):
    """Also with every release in time order passed on as its batches (``PASS_ROWS`` = 1; by default only
    releases of 65,536 rows or more, a tumbling window's turnover, skip the copy into one batch)."""
    monkeypatch.setattr(range_window, "PASS_ROWS", pass_rows)
    rng = np.random.default_rng(range_ * 10 + (slide or 0))
    h = window(range_, slide)
    elements, got, t = [], [], 0
    for _ in range(30):
        n = int(rng.integers(1, 5))
        ts = sorted((t + rng.integers(0, 4, n)).tolist())
        t = ts[-1]
        vals = [(int(v),) for v in rng.integers(0, 4, n)]
        elements += [(s, v[0]) for s, v in zip(ts, vals)]
        h.push(ts, vals, ["INT"])
        if rng.random() < 0.3:
            t += 1                                  # a heartbeat: nothing below t comes any more
            h.heartbeat(t)
        got += h.run()
    until = t + range_ + (slide or 1) + 2
    h.heartbeat(until)
    got += h.run()
    assert [g[0] for g in got] == sorted(g[0] for g in got)          # released in time order
    net: Counter = Counter()
    for ts, sign, (v,) in got:
        net[(ts, v)] += sign
    assert {k: v for k, v in net.items() if v} == dict(definition(elements, range_, slide or 1, until))


NEVER = range_window.NEVER


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-2**62, 2**62), st.integers(-40, 40), st.integers(2**62 - 60, 2**62)),
                min_size=1, max_size=12),
       st.one_of(st.integers(1, 40), st.integers(2**62 - 50, 2**62 + 50), st.integers(2**63 - 50, 2**63 - 1)),
       st.one_of(st.none(), st.integers(1, 12), st.just(2**61)), st.integers(1, 4))
def test_each_elements_entry_and_exit_are_the_definitions_near_the_ends_of_time(ts, size, slide, mult):
    """The instants at which a batch's elements enter the window and leave it (the window's pending inserts
    and deletes), by the definition in Python integers: enter at the first multiple of S at or after ts, leave
    at the first at or after ts + T, or never (NEVER) once ts + T reaches it; with T a multiple of S too (the
    tumbling and hopping windows' shortcut, ``RangeWindowOp.on_batch``), timestamps at the ends of the range
    the API takes (|ts| <= 2**62) and sizes up to 2**63 - 1."""
    s = slide or 1
    if mult > 1 and size * mult < 2**63:
        size = size * mult                      # with the sizes and slides above, often a multiple of S
    if slide and mult == 4 and s * mult < 2**63:
        size = s * mult
    ts = sorted(ts)
    op = RangeWindowOp(size, slide, Queue(), Queue())
    op.on_frontier = lambda f: None             # nothing released: every entry and exit stays pending
    op.on_batch(0, Batch(np.array(ts, dtype=np.int64), np.ones(len(ts), np.int8),
                         [np.arange(len(ts), dtype=np.int64)]))

    def ceil(x):
        return -((-x) // s) * s

    held = [(int(t), int(r)) for b in op.pending_ins for t, r in zip(b.ts.tolist(), b.cols[0].tolist())]
    gone = [(int(t), int(r)) for b in op.pending_del for t, r in zip(b.ts.tolist(), b.cols[0].tolist())]
    want_in, want_out = [], []
    for r, t in enumerate(ts):
        end = t + size
        out = NEVER if end >= NEVER else ceil(end)
        if ceil(t) < out:
            want_in.append((ceil(t), r))
            want_out.append((out, r))
    assert sorted(held) == sorted(want_in)
    assert sorted(gone) == sorted(want_out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=5), max_size=5),
       st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=5), max_size=5))
def test_interleaved_slices_give_the_merged_order(a_ts, b_ts):
    """``_interleaved`` (a large release passed on as slices) orders the rows as ``merge_by_ts`` of the two
    lists does, which is a stable sort by timestamp of the first list's rows, then the second's."""
    def batches(lists, tag):
        out, t = [], 0
        for k, ts in enumerate(lists):
            ts = sorted(t + x for x in ts)
            t = ts[-1]
            out.append(Batch(np.array(ts, dtype=np.int64), np.ones(len(ts), dtype=np.int8),
                             [np.array([f"{tag}{k}.{i}" for i in range(len(ts))], dtype=object)]))
        return out
    a, b = batches(a_ts, "a"), batches(b_ts, "b")
    rows = [(int(t), r) for bt in a + b for t, r in zip(bt.ts, bt.cols[0])]
    expected = sorted(rows, key=lambda x: x[0])                       # stable: a's rows first at a tie
    pieces = range_window._interleaved(a, b, 1000)
    assert [(int(t), r) for p in pieces for t, r in zip(p.ts, p.cols[0])] == expected
    if a and b:
        merged = range_window.merge_by_ts(a + b)
        assert [(int(t), r) for t, r in zip(merged.ts, merged.cols[0])] == expected
    few = range_window._interleaved(a, b, len(a) + len(b))
    assert few is None or [(int(t), r) for p in few for t, r in zip(p.ts, p.cols[0])] == expected
