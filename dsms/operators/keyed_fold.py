"""The live rows of a keyed relation's changelog: the last change of each key, when it is an insert.

Source: SPEC section 3 and the contract's "Registration time" (a view's contents, stamped with the instants the
rows entered). ``fold_changelog`` (netting.py) folds any changelog: per distinct row, a suffix minimum of its
running count over the rows coded by a hash of every column. Above an aggregate (through filters and
projections that keep its group columns, ``physical.unique_key``) the relation holds at most one row per key
at any instant, and each instant's change of a key is its old row's delete followed by its new row's insert
(the order the aggregate emits and the sink keeps). The live rows are then the keys whose last change in the
log is an insert, each stamped with that insert's instant: one sort of the key column alone (NEXMark q9's
``GROUP BY id``: the auction id itself, no hashing), the last position of each run of equal keys.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from synopses.rowcodes import hash_runs


def fold_keyed(b: Batch, key: tuple[int, ...]) -> Batch | None:
    """The live rows of changelog ``b`` (rows in time order, signed; per instant and key a delete before an
    insert) of a relation in which the columns ``key`` identify a row, as inserts stamped with the instant
    they entered, in time order. None when two different keys share a hash (the caller then folds row by
    row, ``fold_changelog``).

    >>> b = Batch(np.array([1, 1, 2, 2, 3]), np.array([1, 1, -1, 1, -1], dtype=np.int8),
    ...           [np.array([7, 8, 7, 7, 8]), np.array([10, 20, 10, 11, 20])])
    >>> out = fold_keyed(b, (0,))
    >>> out.ts.tolist(), [c.tolist() for c in out.cols], out.sign.tolist()
    ([2], [[7], [11]], [1])
    """
    n = len(b)
    if not n:
        return b
    if not key:                                        # one row at most: the last change decides
        last = np.array([n - 1], dtype=np.int64)
    else:
        cols = [b.cols[k] for k in key]
        if len(cols) > 1:                              # integer columns packed into one int64 when they fit
            one = _packed(cols)
            cols = [one] if one is not None else cols
        last = _last_by_span(cols[0]) if len(cols) == 1 and cols[0].dtype.kind == "i" else None
        if last is None:
            if len(cols) == 1 and cols[0].dtype.kind in "iub":    # the key itself: no hashing
                order = np.argsort(cols[0])            # unstable: the last position is taken per run
                hs = cols[0][order]
                start = np.ones(n, dtype=bool)
                start[1:] = hs[1:] != hs[:-1]
            elif (runs := hash_runs(cols)) is not None:
                order, start = runs
            else:
                return None
            last = np.maximum.reduceat(order, np.flatnonzero(start))
    last = last[b.sign[last] > 0]
    last.sort()
    out = b.take(last)
    out.sign = np.ones(len(out), dtype=np.int8)
    return out


def _packed(cols: list[np.ndarray]) -> np.ndarray | None:
    """One int64 per row for a key of several signed integer columns, by mixed radix over each column's range
    in this batch (equal keys, and only they, get equal codes), so the fold sorts the key itself instead of
    hashing every column (NEXMark q4's view, ``GROUP BY A.id, A.category``: a third of its cost); None when a
    column is not a signed integer or the ranges' product does not fit below 2**62.

    >>> _packed([np.array([5, 7, 5]), np.array([-1, 3, 3])]).tolist()
    [0, 14, 4]
    >>> _packed([np.array([0, 2**62]), np.array([0, 1])]) is None
    True
    """
    if any(c.dtype.kind != "i" for c in cols):
        return None
    los, spans, total = [], [], 1
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        los.append(lo)
        spans.append(hi - lo + 1)
        total *= hi - lo + 1
        if total >= 2**62:
            return None
    out = cols[0].astype(np.int64) - los[0]
    for c, lo, span in zip(cols[1:], los[1:], spans[1:]):
        out *= span
        out += c.astype(np.int64, copy=False) - lo
    return out


SPAN_ROWS = 4            # keys spanning at most this many slots per row (plus 1,024) are folded with no sort


def _last_by_span(key: np.ndarray) -> np.ndarray | None:
    """The last position of each distinct value of an integer key column whose values span a small range
    against its length (a view's categories; auction ids, packed with their category): one slot per value,
    each the largest position that holds it (``np.maximum.at``), no sort. None when the span is too wide.

    >>> _last_by_span(np.array([7, 3, 7, 5, 3])).tolist()
    [4, 3, 2]
    """
    lo, hi = int(key.min()), int(key.max())
    if hi - lo > SPAN_ROWS * len(key) + 1024:
        return None
    pos = np.full(hi - lo + 1, -1, dtype=np.int64)
    np.maximum.at(pos, key.astype(np.int64, copy=False) - lo, np.arange(len(key), dtype=np.int64))
    return pos[pos >= 0]
