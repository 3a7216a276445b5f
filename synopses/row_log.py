"""The rows of one join input in arrival order (the first-in-first-out form of ``SortedRunIndexSynopsis``),
numbered consecutively, with their key codes: appended at the tail, dropped at the head (digest-002a section
2.15: a window's deletes retract its rows first in, first out).

The key codes sit in one buffer with spare capacity (row ``seq`` at ``seq - base``), since index runs and scans
read them as one array. The columns sit in segments, oldest first:

- a release of at least ``ADOPT_ROWS`` rows is kept as the arrays it came in, with no copy: batches in queues
  are never written after they are made (their readers share them), and the log never writes into such a
  segment. A tumbling window's turnover (NEXMark q7: 92,000 bids every ten seconds) is then appended and, a
  window later, dropped whole without one row being moved;
- fewer rows are copied into an open segment with spare capacity that grows by doubling, and that moves its
  live rows to its front when they fill at most half of it (reusing memory already paged in).

Appending and dropping the oldest rows thus move only those rows (amortised O(1) a row), and a large release
moves none. The price: an adopted segment holds the objects of its dropped rows until all of its rows are
dropped (``nbytes`` counts them), while the open segment lets them go at once.
"""

from __future__ import annotations

import numpy as np

from synopses.base import array_bytes
from synopses.column_segments import take_rows

ADOPT_ROWS = 4096        # rows from which an appended release's arrays become a segment of their own
_EMPTY = np.empty(0, dtype=np.int64)


class _Segment:
    """Columns of the rows numbered ``seq0`` to ``seq0 + n`` (their first ``cleared`` rows dropped and let
    go); ``owned``: the log made the arrays (open for appending, and writable), else they are a release's."""

    __slots__ = ("seq0", "n", "cols", "owned", "cleared")

    def __init__(self, seq0: int, n: int, cols: list[np.ndarray], owned: bool) -> None:
        self.seq0, self.n, self.cols, self.owned, self.cleared = seq0, n, cols, owned, 0

    @property
    def end(self) -> int:
        return self.seq0 + self.n


class RowLog:
    """Rows in arrival order, numbered consecutively from ``head`` to ``tail``, with their key codes.

    >>> big = np.arange(ADOPT_ROWS)
    >>> log = RowLog([big])
    >>> log.append(big % 7, [big])                  # adopted: the log holds ``big`` itself
    >>> log.append(np.array([1, 2]), [np.array([-1, -2])])
    >>> log.segs[0].cols[0] is big, log.take(np.array([ADOPT_ROWS + 1, 3])), log.tail - log.head
    (True, [array([-2,  3])], 4098)
    >>> log.drop(ADOPT_ROWS)                        # the adopted segment goes whole
    >>> len(log.segs), log.live_cols()
    (1, [array([-1, -2])])
    """

    def __init__(self, like: list[np.ndarray]) -> None:
        self.codes = _EMPTY
        self.start = self.end = 0
        self.base = 0
        self.dtypes = [c.dtype for c in like]
        self.segs: list[_Segment] = []

    def __len__(self) -> int:
        return self.end - self.start

    @property
    def head(self) -> int:
        """Sequence number of the oldest live row."""
        return self.base + self.start

    @property
    def tail(self) -> int:
        """Sequence number the next row appended gets."""
        return self.base + self.end

    def nbytes(self) -> int:
        """The buffers whole (spare capacity and adopted arrays included), plus the objects the rows held
        point to (an adopted segment's dropped rows too: they are held until the segment goes)."""
        total = self.codes.nbytes
        head = self.head
        for s in self.segs:
            lo = max(head - s.seq0, 0) if s.owned else 0
            for c in s.cols:
                total += c.nbytes
                if c.dtype.kind == "O":
                    part = c[lo:s.n]
                    total += array_bytes(part) - part.nbytes
        return total

    def empty_cols(self) -> list[np.ndarray]:
        return [np.empty(0, dtype=d) for d in self.dtypes]

    def live_codes(self, n: int | None = None) -> np.ndarray:
        return self.codes[self.start:self.end if n is None else self.start + n]

    def seq_codes(self, a: int, b: int) -> np.ndarray:
        """The codes of the rows numbered ``a`` to ``b`` (a view)."""
        return self.codes[a - self.base:b - self.base]

    def live_cols(self, n: int | None = None) -> list[np.ndarray]:
        """The columns of the oldest ``n`` live rows (all when None): views when one segment holds them."""
        a = self.head
        b = self.tail if n is None else a + n
        parts = [(s, max(a, s.seq0) - s.seq0, min(b, s.end) - s.seq0) for s in self.segs
                 if s.end > a and s.seq0 < b]
        if not parts:
            return self.empty_cols()
        if len(parts) == 1:
            s, lo, hi = parts[0]
            return [c[lo:hi] for c in s.cols]
        return [np.concatenate([s.cols[j][lo:hi] for s, lo, hi in parts]) for j in range(len(self.dtypes))]

    def take(self, seq: np.ndarray) -> list[np.ndarray]:
        """The columns of the rows with these sequence numbers, in that order."""
        segs = [s for s in self.segs if s.end > self.head]
        if not segs:
            return [np.empty(len(seq), dtype=d) for d in self.dtypes]
        return take_rows([s.cols for s in segs], [s.seq0 for s in segs], seq)

    def drop(self, n: int) -> None:
        """Drop the ``n`` oldest rows: segments all of whose rows are gone go (with the objects they point
        to); the open segment lets go of its dropped rows' objects at once."""
        self.start += n
        head = self.head
        while self.segs and self.segs[0].end <= head:
            self.segs.pop(0)
        if self.segs and self.segs[0].owned:
            s = self.segs[0]
            upto = head - s.seq0
            if upto > s.cleared:
                for c in s.cols:
                    if c.dtype.kind == "O":
                        c[s.cleared:upto] = None
                s.cleared = upto

    def append(self, codes: np.ndarray, cols: list[np.ndarray], idx: np.ndarray | None = None) -> None:
        """Append the rows at ``idx`` of ``codes`` and ``cols`` (every row when None)."""
        n = len(codes) if idx is None else len(idx)
        if not n:
            return
        seq0 = self.tail
        self._append_codes(codes if idx is None else codes[idx], n)
        if n >= ADOPT_ROWS:
            self.segs.append(_Segment(seq0, n, list(cols) if idx is None else [c[idx] for c in cols], False))
        else:
            self._append_open(cols, idx, n, seq0)
        dtypes = self.dtypes
        for j, c in enumerate(cols):
            if c.dtype != dtypes[j]:
                dtypes[j] = np.result_type(dtypes[j], c.dtype)

    def _append_codes(self, codes: np.ndarray, n: int) -> None:
        if self.end + n > len(self.codes) and 2 * (len(self) + n) <= len(self.codes):
            live = len(self)                   # move to the front: reuse what is paged in already
            self.codes[:live] = self.codes[self.start:self.end]
            self.base += self.start
            self.start, self.end = 0, live
        if self.end + n > len(self.codes):
            live = len(self)
            fresh = np.empty(max(64, 2 * (live + n)), dtype=np.int64)
            fresh[:live] = self.codes[self.start:self.end]
            self.codes = fresh
            self.base += self.start
            self.start, self.end = 0, live
        self.codes[self.end:self.end + n] = codes
        self.end += n

    def _append_open(self, cols: list[np.ndarray], idx: np.ndarray | None, n: int, seq0: int) -> None:
        """Copy the rows into the open segment (the last one, if the log owns it), growing or compacting it."""
        s = self.segs[-1] if self.segs and self.segs[-1].owned else None
        if s is not None and (not s.cols or s.n + n <= len(s.cols[0])) and all(
                a.dtype == c.dtype for a, c in zip(s.cols, cols)):
            pass                                        # room, and the same types: the usual case
        elif s is not None:
            same = all(a.dtype == c.dtype or np.result_type(a.dtype, c.dtype) == a.dtype
                       for a, c in zip(s.cols, cols))
            lo = max(self.head - s.seq0, 0)            # its first live row
            live = s.n - lo
            cap = len(s.cols[0]) if s.cols else 1 << 62
            if same and s.n + n > cap and 2 * (live + n) <= cap:
                for c in s.cols:                        # move to the front
                    c[:live] = c[lo:s.n]
                    if c.dtype.kind == "O":
                        c[max(live, lo):s.n] = None
                s.seq0, s.n, s.cleared = s.seq0 + lo, live, 0
            elif s.n + n > cap or not same:
                capacity = max(64, 2 * (live + n))
                moved = []
                for c, new in zip(s.cols, cols):
                    col = np.empty(capacity, dtype=np.result_type(c.dtype, new.dtype))
                    col[:live] = c[lo:s.n]
                    moved.append(col)
                s.cols, s.seq0, s.n, s.cleared = moved, s.seq0 + lo, live, 0
        else:
            capacity = max(64, 2 * n)
            s = _Segment(seq0, 0, [np.empty(capacity, dtype=np.result_type(d, c.dtype))
                                   for d, c in zip(self.dtypes, cols)], True)
            self.segs.append(s)
        at = s.n
        for b, c in zip(s.cols, cols):
            b[at:at + n] = c if idx is None else c[idx]
        s.n += n
