"""``ExtremeFold`` (``dsms/operators/extreme_fold.py``), the fold of ``JoinExtremeOp``, against a row-at-a-time
model of SPEC section 3's grouped MIN/MAX over rows that only arrive: per final instant and group whose row
changed, its old row as a delete (unless the group is new) and its new row as an insert, in (instant, group id)
order. The join's own property tests (``test_join_extreme.py``) run a few rows per instant through the
reference evaluator; these run batches of thousands of rows (the sorted fold, its packed sort and its
cut of held rows by ``finish``), with ties, values at both ends of int64, MIN and MAX together, and rows held
past ``HOLD`` (filtered as they are offered)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsms.operators.extreme_fold as ef
from dsms.operators.extreme_fold import ExtremeFold, GroupTable

I64 = np.int64
LO, HI = -(2**63), 2**63 - 1


def _model(funcs, chunks, finishes):
    """Row at a time: the changes each ``finish(f)`` emits, as (ts, sign, key, values) tuples."""
    best: dict[int, list[int]] = {}
    pending: list[tuple[int, int, list[int]]] = []
    outs = []
    chunks = list(chunks)
    for upto, f in finishes:
        while chunks and chunks[0][0] < upto:
            _, ts, keys, vals = chunks.pop(0)
            pending += [(t, k, [int(v[i]) for v in vals]) for i, (t, k) in enumerate(zip(ts.tolist(), keys.tolist()))]
        done = [p for p in pending if p[0] < f]
        pending = [p for p in pending if p[0] >= f]
        out = []
        by_instant: dict[int, list] = {}
        for p in done:
            by_instant.setdefault(p[0], []).append(p)
        for t in sorted(by_instant):
            before = {k: best.get(k) for _, k, _ in by_instant[t]}
            for _, k, vs in by_instant[t]:
                cur = best.get(k)
                best[k] = list(vs) if cur is None else [max(c, v) if fn == "MAX" else min(c, v)
                                                        for fn, c, v in zip(funcs, cur, vs)]
            for k, old in before.items():
                if old != best[k]:
                    out.append((t, k, old, best[k]))
        outs.append(out)
    return outs


def _fold_rows(out, gid_of_key):
    rows = []
    for t, k, old, new in out:
        if old is not None:
            rows.append((t, -1, k, *old))
        rows.append((t, 1, k, *new))
    return sorted(rows, key=lambda r: (r[0], gid_of_key[r[2]]))     # (instant, group id); stable: delete first


def _run(funcs, chunks, finishes, hold):
    table = GroupTable(1)
    fold = ExtremeFold(funcs, table, [I64, *([I64] * len(funcs))])
    saved, ef.HOLD = ef.HOLD, hold
    outs = []
    try:
        chunks = list(chunks)
        for upto, f in finishes:
            while chunks and chunks[0][0] < upto:
                _, ts, keys, vals = chunks.pop(0)
                gid = table.ids([keys])
                fold.offer(ts, gid, vals)
            b = fold.finish(f)
            outs.append([] if b is None else list(zip(b.ts.tolist(), b.sign.tolist(), *[c.tolist() for c in b.cols])))
    finally:
        ef.HOLD = saved
    return outs, table


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), funcs=st.sampled_from([["MAX"], ["MIN"], ["MAX", "MIN"], ["MIN", "MIN"]]),
       spread=st.sampled_from(["ties", "wide", "edges"]), hold=st.sampled_from([1 << 16, 50]),
       groups=st.sampled_from([3, 40, 2000]))
def test_the_fold_emits_what_row_at_a_time_extremes_change(seed, funcs, spread, hold, groups):
    rng = np.random.default_rng(seed)
    chunks, t = [], 0
    for i in range(int(rng.integers(1, 6))):
        n = int(rng.integers(1, 3000))
        ts = np.sort(rng.integers(t, t + 40, n)).astype(I64)
        t = int(ts[-1])                       # the next chunk may share this chunk's last instant
        keys = rng.integers(-5, groups, n).astype(I64)
        vals = []
        for _ in funcs:
            if spread == "ties":
                v = rng.integers(0, 4, n)
            elif spread == "wide":
                v = rng.integers(-10**12, 10**12, n)
            else:
                v = rng.choice(np.array([LO, LO + 1, -1, 0, 1, HI - 1, HI], dtype=I64), n)
            vals.append(v.astype(I64))
        chunks.append((i, ts, keys, vals))
    # finish after each chunk at a frontier that may cut it (its last instants stay held), and at the end
    finishes = []
    for i, (_, ts, _, _) in enumerate(chunks):
        cut = int(ts[int(rng.integers(0, len(ts)))]) if rng.random() < 0.5 else int(ts[-1]) + 1
        finishes.append((i + 1, cut))
    finishes.append((len(chunks) + 1, t + 1))
    finishes = [(u, max(f for _, f in finishes[:j + 1])) for j, (u, f) in enumerate(finishes)]   # frontiers rise
    got, table = _run(funcs, chunks, finishes, hold)
    gid_of_key = {k: i for i, k in enumerate(table.keys[0][:table.n].tolist())}
    want = [_fold_rows(o, gid_of_key) for o in _model(funcs, chunks, finishes)]
    assert got == want


def test_a_min_at_the_smallest_int64_and_a_max_at_the_largest_are_kept():
    """``best`` starts at the smallest int64 (MAX's identity); a MIN is folded as MAX of ``~v``, so its
    largest value is that start: a group's first row must still found it."""
    table = GroupTable(1)
    fold = ExtremeFold(["MIN", "MAX"], table, [I64, I64, I64])
    ts = np.array([1, 1, 2], dtype=I64)
    fold.offer(ts, table.ids([np.array([7, 8, 7])]), [np.array([HI, 5, LO]), np.array([LO, LO, HI])])
    b = fold.finish(3)
    rows = list(zip(b.ts.tolist(), b.sign.tolist(), *[c.tolist() for c in b.cols]))
    assert rows == [(1, 1, 7, HI, LO), (1, 1, 8, 5, LO), (2, -1, 7, HI, LO), (2, 1, 7, LO, HI)]


@pytest.mark.parametrize("n", [1, 300, 5000])
def test_rows_that_cannot_change_the_answer_emit_nothing(n):
    table = GroupTable(1)
    fold = ExtremeFold(["MAX"], table, [I64, I64])
    g = table.ids([np.zeros(1, dtype=I64)])
    fold.offer(np.array([0], dtype=I64), g, [np.array([100], dtype=I64)])
    assert fold.finish(1) is not None
    ts = np.arange(1, n + 1, dtype=I64)
    fold.offer(ts, np.zeros(n, dtype=I64), [np.full(n, 100, dtype=I64)])       # ties with the extreme
    assert fold.finish(n + 1) is None and not fold.held
