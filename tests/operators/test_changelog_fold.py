"""``fold_changelog`` (a view's live copies from its emitted changelog, with numpy) equals the row-by-row fold
(``_fold_rows``: a delete undoes the latest live copy) on random valid changelogs, NaN and -0.0 included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.batch import Batch
from dsms.operators.netting import _fold_rows, fold_changelog

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


@settings(max_examples=300, deadline=None)
@given(changelogs())
def test_vectorised_fold_equals_row_fold(b):
    fast, slow = fold_changelog(b, DT), _fold_rows(b, DT)
    assert (fast.sign == 1).all()
    assert np.all(np.diff(fast.ts) >= 0)
    assert _key(fast) == _key(slow)
