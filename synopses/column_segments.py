"""The columns of rows that are only ever appended (an insert-only join input), in segments: a batch of at least
``ADOPT_ROWS`` rows is kept as the arrays it came in (batches are never written after they are made, and their
readers share them), fewer rows are copied into an open segment that grows by doubling up to ``OPEN_ROWS``.

Why not one array per column that doubles: every doubling moves the rows held into fresh memory, and on this
kind of machine a first touch of fresh memory costs more than the copy (NEXMark q4's 276,000 bids: copying
them into doubling arrays took longer than the whole join does now, docs/benchmarks.md). Adopting a large
batch moves nothing. A gather of rows from several segments groups them by segment with one radix sort of
their segment numbers, then gathers each segment's rows with one fancy index per column (a mask per segment
would cost segments x rows).
"""

from __future__ import annotations

import bisect

import numpy as np

from synopses.base import array_bytes

ADOPT_ROWS = 4096        # rows from which an appended batch's arrays become a segment of their own
OPEN_ROWS = 1 << 16      # rows the open (copied-into) segment holds at most before a new one is opened


class ColumnSegments:
    """Rows numbered 0 .. n-1 in arrival order, their columns in segments.

    >>> cs = ColumnSegments()
    >>> cs.append([np.arange(5000)], 5000); cs.append([np.array([-1, -2])], 2); cs.append([np.array([-3])], 1)
    >>> [c.tolist() for c in cs.take(np.array([5001, 3, 5002, 4999]))], len(cs.segs)
    ([[-2, 3, -3, 4999]], 2)
    """

    def __init__(self) -> None:
        self.n = 0
        self.width = 0                         # columns per row (known from the first batch)
        self.starts: list[int] = []            # first row number of each segment
        self.segs: list[list[np.ndarray]] = []  # each segment's columns (an open one has spare capacity)
        self.open = False                      # the last segment is the log's own, with spare capacity
        self.fill = 0                          # rows in the open segment

    def __len__(self) -> int:
        return self.n

    def nbytes(self) -> int:
        """The buffers whole, plus the objects that object columns point to."""
        total = 0
        for k, seg in enumerate(self.segs):
            used = (self.fill if self.open and k == len(self.segs) - 1 else len(seg[0])) if seg else 0
            for c in seg:
                total += c.nbytes + (array_bytes(c[:used]) - 8 * used if c.dtype.kind == "O" else 0)
        return total

    def append(self, cols: list[np.ndarray], m: int) -> None:
        """Add a batch of ``m`` rows (its columns; none for an input whose columns nobody reads)."""
        if not m:
            return
        self.width = len(cols)
        if not cols:
            self.n += m
            return
        if m >= ADOPT_ROWS:
            self._new(list(cols))
            self.open = False
        else:
            self._copy(cols, m)
        self.n += m

    def _new(self, cols: list[np.ndarray]) -> None:
        self.starts.append(self.n)
        self.segs.append(cols)

    def _copy(self, cols: list[np.ndarray], m: int) -> None:
        seg = self.segs[-1] if self.open else None
        if seg is not None and self.fill + m <= len(seg[0]):
            # the common case (a small batch of the types held, room left): copied with no other check; a
            # column of another type stops it, and the general path below writes every column again
            fill, end = self.fill, self.fill + m
            for a, c in zip(seg, cols):
                if a.dtype != c.dtype:
                    break
                a[fill:end] = c
            else:
                self.fill = end
                return
        if seg is not None and not all(a.dtype == c.dtype or np.result_type(a.dtype, c.dtype) == a.dtype
                                       for a, c in zip(seg, cols)):
            seg = None                                  # a wider type: a new segment of that type
        if seg is not None and self.fill + m > len(seg[0]):
            if self.fill + m > OPEN_ROWS:
                seg = None
            else:
                cap = max(2 * len(seg[0]), self.fill + m)
                wider = []
                for a in seg:
                    w = np.empty(cap, dtype=a.dtype)
                    w[:self.fill] = a[:self.fill]
                    wider.append(w)
                self.segs[-1] = seg = wider
        if seg is None:
            seg = [np.empty(max(256, 2 * m), dtype=c.dtype) for c in cols]
            self._new(seg)
            self.open, self.fill = True, 0
        for a, c in zip(seg, cols):
            a[self.fill:self.fill + m] = c
        self.fill += m

    def take(self, rows: np.ndarray, which: list[int] | None = None) -> list[np.ndarray]:
        """The columns of these rows (those numbered in ``which``, default all), in that order."""
        segs = self.segs
        if not segs:
            return []
        if which is not None:
            segs = [[seg[j] for j in which] for seg in segs]
        if len(segs) == 1:
            return [c[rows] for c in segs[0]]
        if not len(rows):
            return [c[:0].copy() for c in segs[0]]
        return take_rows(segs, self.starts, rows)


def take_rows(segs: list[list[np.ndarray]], starts: list[int], rows: np.ndarray) -> list[np.ndarray]:
    """The columns of the rows numbered ``rows`` (in that order) from segments of columns whose first rows are
    numbered ``starts`` (ascending): the rows grouped by segment with one radix sort of their segment numbers,
    then one fancy index per segment and column. Shared by ``ColumnSegments`` and ``RowLog``."""
    if len(segs) == 1:
        base = starts[0]
        return [c[rows - base] if base else c[rows] for c in segs[0]]
    lo, hi = 0, len(segs) - 1
    if len(rows):
        lo = bisect.bisect_right(starts, int(rows.min())) - 1
        hi = bisect.bisect_right(starts, int(rows.max())) - 1
        if lo == hi:
            base = starts[lo]
            return [c[rows - base] if base else c[rows] for c in segs[lo]]
    k = np.searchsorted(np.asarray(starts[lo + 1:hi + 1], dtype=np.int64), rows, side="right")   # segment - lo
    order = np.argsort(k.astype(np.uint16) if hi - lo < 1 << 16 else k, kind="stable")
    bounds = np.concatenate([[0], np.bincount(k, minlength=hi - lo + 1).cumsum()]).tolist()
    out = [np.empty(len(rows), dtype=np.result_type(*[segs[s][j].dtype for s in range(lo, hi + 1)]))
           for j in range(len(segs[0]))]
    for s in range(lo, hi + 1):
        a, b = bounds[s - lo], bounds[s - lo + 1]
        if a == b:
            continue
        idx = order[a:b]
        pos = rows[idx] - starts[s]
        for o, c in zip(out, segs[s]):
            o[idx] = c[pos]
    return out
