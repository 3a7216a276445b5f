"""``fold_changelog`` (a view's live copies from its emitted changelog, with numpy) equals the row-by-row fold
(``_fold_rows``: a delete undoes the latest live copy) on random valid changelogs, NaN and -0.0 included; and
a changelog that only inserts, kept without a fold, gives the same snapshot."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.batch import Batch, concat
from dsms.operators.netting import ChangelogOp, _fold_rows, fold_changelog
from dsms.queues import Queue
from synopses import rowcodes

DT = [np.dtype(np.int64), np.dtype(np.float64), np.dtype(object)]
rows = st.tuples(st.integers(0, 2), st.sampled_from([0.5, float("nan"), -0.0, 0.0]), st.sampled_from(["a", "b"]))


@st.composite
def changelogs(draw):
    live: list[tuple] = []
    ts, sign, out = [], [], []
    t = 0
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.integers(0, 2))
        if live and draw(st.booleans()):
            r = live.pop(draw(st.integers(0, len(live) - 1)))
            s = -1
        else:
            r = draw(rows)
            live.append(r)
            s = 1
        ts.append(t)
        sign.append(s)
        out.append(r)
    cols = [np.array([r[j] for r in out], dtype=DT[j]) for j in range(3)]
    return Batch(np.array(ts, dtype=np.int64), np.array(sign, dtype=np.int8), cols)


def _key(b: Batch):
    """Rows per instant; -0.0 and 0.0 are one value (contract), and which of two equal rows' spellings a
    fold keeps is not specified: the row fold keeps the first one seen, the vectorised one the survivor's."""
    return sorted((t, repr(tuple(v + 0.0 if isinstance(v, float) else v for v in r)))
                  for t, r in zip(b.ts.tolist(), b.rows()))


@pytest.mark.parametrize("hashes", ["row", "colliding"])
@settings(max_examples=300, deadline=None)
@given(changelogs())
def test_vectorised_fold_equals_row_fold(hashes, b):
    """Rows are told apart by their hashes (``hashed_codes``); with hashes that collide for unequal rows (the
    first column mod 2) the fold must notice and code the rows column by column instead."""
    saved = rowcodes.row_hashes
    if hashes == "colliding":
        rowcodes.row_hashes = lambda cols: (cols[0].astype(np.int64) % 2).astype(np.uint64)
    try:
        fast = fold_changelog(b, DT)
    finally:
        rowcodes.row_hashes = saved
    slow = _fold_rows(b, DT)
    assert (fast.sign == 1).all()
    assert np.all(np.diff(fast.ts) >= 0)
    assert _key(fast) == _key(slow)


def test_changelog_snapshot_inserts_only_then_deletes():
    """A view's changelog that only inserts (a view over an unbounded join) is kept by concatenating what it
    emitted, with no fold; once deletes arrive it folds again. At every step the snapshot a late reader gets
    equals the row fold of everything emitted so far (equal rows included: every copy is a row)."""
    rng = np.random.default_rng(5)
    dt = [np.dtype(np.int64), np.dtype(np.int64)]
    op = ChangelogOp([Queue()], Queue(), dt, eager=True)
    emitted, live, t = [], [], 0
    for step in range(12):
        n = int(rng.integers(1, 3000))
        ins = [(int(a), int(b)) for a, b in zip(rng.integers(0, 50, n), rng.integers(-3, 3, n))]
        dels = []
        if step >= 6:                                      # deletes from the seventh batch on
            for i in sorted(rng.choice(len(live), size=len(live) // 4, replace=False).tolist(), reverse=True):
                dels.append(live.pop(i))
        live += ins
        t += 1
        rows = dels + ins
        b = Batch(np.full(len(rows), t, dtype=np.int64), np.array([-1] * len(dels) + [1] * n, dtype=np.int8),
                  [np.array([r[j] for r in rows], dtype=np.int64) for j in range(2)])
        op.on_batch(0, b)
        emitted.append(b)
        snap = op.snapshot()
        assert (snap.sign == 1).all() and np.all(np.diff(snap.ts) >= 0)
        assert _key(snap) == _key(_fold_rows(concat(emitted), dt))
        assert sorted(snap.rows()) == sorted(live)
