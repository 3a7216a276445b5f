"""MIN or MAX of an INT column over one group (an aggregate without GROUP BY) whose deletes retract its rows
first in, first out, as a RANGE window over a stream delivers them: the live rows in arrival order and their
suffix records (a monotonic deque), a batch at a time with numpy (issue 15, NEXMark q7).

Source: digest-004 R-PLAN-06 (MIN/MAX must keep their window); the deque is the sliding-window maximum
(each row is a candidate while no later row is at least as large). A tumbling window's turnover deletes every
row it holds and inserts the next window's: under ``IntExtremes`` that is a general multiset update (resets
checked, logs dropped and appended), here it is one comparison of the deleted values with the oldest live ones
and one running maximum of the inserted ones.

Exactness does not rest on the plan: every delete is checked, value for value, to be the oldest row still held
(the deletes of a batch, in arrival order, against the live rows followed by the batch's inserts). Then the
multiset after each instant is a contiguous stretch of that sequence (the deleted values are those of its
head, so as a multiset the rows left are the rest), and its extreme is the first deque entry in it (rows held
before the batch) combined with a running maximum over the batch's inserts. The first batch whose deletes
are not so (a relation updated at random, a window whose size changed, a join's output) hands the live
multiset to ``IntValueCounts`` for good, before anything of that batch is applied; so does an input that has
never deleted and holds more than ``UNBOUNDED_ROWS`` rows (a stream without a window: the counts per value or
the netted log of the general structure are what bound its memory, not a copy of every row).

Values are handled as keys, ``v`` for MAX and ``~v`` (= -v - 1: order reversed, no overflow) for MIN, so both
are a maximum of keys.
"""

from __future__ import annotations

import numpy as np

from synopses.int_value_counts import IntValueCounts

I64 = np.int64
UNBOUNDED_ROWS = 1 << 20     # live rows held with no delete ever seen before handing over to the general form


class _Run:
    """A first-in, first-out run of int64 values in a buffer that doubles when full and moves its live part
    to the front when that frees half of it: appending and popping cost O(rows moved), amortised."""

    __slots__ = ("buf", "lo", "hi")

    def __init__(self) -> None:
        self.buf = np.empty(0, dtype=I64)
        self.lo = self.hi = 0

    def __len__(self) -> int:
        return self.hi - self.lo

    def view(self) -> np.ndarray:
        return self.buf[self.lo:self.hi]

    def push(self, a: np.ndarray) -> None:
        n, live = len(a), self.hi - self.lo
        if self.hi + n > len(self.buf):
            if live + n <= len(self.buf) // 2:
                self.buf[:live] = self.buf[self.lo:self.hi]
            else:
                buf = np.empty(max(2 * (live + n), 64), dtype=I64)
                buf[:live] = self.buf[self.lo:self.hi]
                self.buf = buf
            self.lo, self.hi = 0, live
        self.buf[self.hi:self.hi + n] = a
        self.hi += n

    def pop(self, n: int) -> None:
        self.lo += n
        if self.lo == self.hi:
            self.lo = self.hi = 0

    def keep(self, n: int) -> None:
        """Keep the first ``n`` values (drop the rest from the back)."""
        self.hi = self.lo + n

    def clear(self) -> None:
        self.buf = np.empty(0, dtype=I64)
        self.lo = self.hi = 0


class FifoExtremes:
    """MIN (``want_max=False``) or MAX of one INT argument of a single group (group id 0), with the interface
    of ``IntExtremes``, while deletes retract the oldest rows.

    >>> x = FifoExtremes(want_max=True); x.grow(1)
    >>> g = np.zeros(3, dtype=np.int64)
    >>> x.step(np.array([5, 9, 7]), np.array([1, 1, 1]), g, np.array([2]), np.array([False]), np.array([3]))[0].tolist()
    [9]
    >>> new, old = x.step(np.array([5, 9]), np.array([-1, -1]), g[:2], np.array([1]), np.array([True]), np.array([1]))
    >>> new.tolist(), old.tolist(), x.general is None
    ([7], [9], True)
    >>> new, old = x.step(np.array([9]), np.array([1]), g[:1], np.array([0]), np.array([True]), np.array([2]))
    >>> x.step(np.array([9]), np.array([-1]), g[:1], np.array([0]), np.array([True]), np.array([1]))[0].tolist()
    [7]
    >>> x.general is not None                    # 9 was not the oldest row: the counts per value took over
    True
    """

    def __init__(self, want_max: bool) -> None:
        self.want_max = want_max
        self.vals = _Run()            # keys of the live rows, oldest first; absolute positions start .. end - 1
        self.start = 0                # absolute position of the oldest live row (rows deleted so far)
        self.dpos = _Run()            # the deque: positions of the rows no later row reaches (ascending) ...
        self.dkey = _Run()            # ... and their keys (strictly descending); the first is the extreme
        self.deleted = False          # a delete has been seen
        self.general: IntValueCounts | None = None

    def grow(self, size: int) -> None:
        if self.general is not None:
            self.general.grow(size)

    def nbytes(self) -> int:
        if self.general is not None:
            return self.general.nbytes()
        return self.vals.buf.nbytes + self.dpos.buf.nbytes + self.dkey.buf.nbytes

    def step(self, v: np.ndarray, sign: np.ndarray, g_s: np.ndarray, ends: np.ndarray, had: np.ndarray,
             new_cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As ``IntExtremes.step``, for a batch whose rows all belong to group 0 (segments are instants)."""
        if self.general is None:
            out = self._fifo(v, sign, ends)
            if out is not None:
                return out
            self._switch()
        return self.general.step(v, sign, g_s, ends, had, new_cnt)

    def _key(self, v: np.ndarray) -> np.ndarray:
        v = v.astype(I64, copy=False)
        return v if self.want_max else ~v

    def _value(self, k: np.ndarray) -> np.ndarray:
        return k if self.want_max else ~k

    def _fifo(self, v, sign, ends) -> tuple[np.ndarray, np.ndarray] | None:
        """The step while every delete retracts the oldest row; None, having changed nothing, otherwise."""
        key = self._key(v)
        m = len(self.vals)
        h0 = self.start                                   # positions held before the batch: h0 .. t0 - 1
        t0 = h0 + m
        is_del = sign < 0
        nd = int(np.count_nonzero(is_del))
        nseg = len(ends)
        if nd:
            if np.count_nonzero(is_del[:nd]) == nd:        # deletes first (a window's turnover): views
                dk, ik = key[:nd], key[nd:]
            else:
                dk, ik = key[is_del], key[~is_del]
            k = min(nd, m)
            if nd > m + len(ik) or not np.array_equal(dk[:k], self.vals.view()[:k]) \
                    or (nd > m and not np.array_equal(dk[m:], ik[:nd - m])):
                return None
            if nseg == 1:
                dcnt = np.array([nd], dtype=I64)
            else:
                cd = np.cumsum(is_del, dtype=I64)
                dcnt = cd[ends]
            icnt = ends + 1 - dcnt
        else:
            if not self.deleted and m + len(key) > UNBOUNDED_ROWS:
                return None
            ik = key
            dcnt = np.zeros(nseg, dtype=I64)
            icnt = (ends + 1).astype(I64, copy=False)
        h = h0 + dcnt                                      # each instant's rows: positions h .. t - 1
        t = t0 + icnt
        if (t < h).any():
            return None
        best = np.full(nseg, np.iinfo(I64).min, dtype=I64)
        old_part = h < t0                                  # some of the rows held before the batch are left
        if old_part.any():
            dpos = self.dpos.view()
            best[old_part] = self.dkey.view()[np.searchsorted(dpos, h[old_part], side="left")]
        ins_part = (t > t0) & (h <= t0)                    # all of the batch's inserts so far are left
        if ins_part.any():
            best[ins_part] = np.maximum(best[ins_part], _prefix_max(ik, t[ins_part] - t0))
        inner = (t > h) & (h > t0)                         # only a later part of the batch's inserts is left
        if inner.any():
            best[inner] = _range_max(ik, h[inner] - t0, t[inner] - t0)
        live = t > h
        new = np.where(live, self._value(best), 0)
        old = np.empty(nseg, dtype=I64)
        old[0] = self._value(self.dkey.view()[:1])[0] if m else 0
        old[1:] = new[:-1]
        # the state after the batch
        if nd:
            self.deleted = True
        if len(ik):
            mx = ik.max()
            self.dkey.keep(_count_above(self.dkey.view(), mx))
            self.dpos.keep(len(self.dkey))
            at = _records(ik)
            self.dpos.push(at + t0)
            self.dkey.push(ik[at])
            self.vals.push(ik)
        self.vals.pop(nd)
        self.start += nd
        if nd:
            gone = int(np.searchsorted(self.dpos.view(), self.start, side="left"))
            self.dpos.pop(gone)
            self.dkey.pop(gone)
        return new, old

    def _switch(self) -> None:
        """Hand the live multiset to an ``IntValueCounts`` (one insert-only segment), for good."""
        x = IntValueCounts(self.want_max)
        x.grow(1)
        m = len(self.vals)
        if m:
            vals = self._value(self.vals.view()).copy()
            x.step(vals, np.ones(m, dtype=I64), np.zeros(m, dtype=I64), np.array([m - 1]), np.array([False]),
                   np.array([m]))
        self.general = x
        self.vals.clear()
        self.dpos.clear()
        self.dkey.clear()


def _count_above(a: np.ndarray, x) -> int:
    """How many entries of the strictly descending ``a`` are above ``x`` (a binary search in Python: O(log n)
    whatever the length, no copy)."""
    n = len(a)
    if not n or a[0] <= x:
        return 0
    if a[n - 1] > x:
        return n
    lo, hi = 1, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] > x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _prefix_max(a: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """max(a[:e]) for each of the ascending ``ends`` (each at least 1): the maximum of each stretch between
    two ends, then a running maximum over the stretches (no running maximum over ``a``, which costs ten times
    a maximum).

    >>> _prefix_max(np.array([3, 1, 4, 1, 5]), np.array([1, 2, 2, 5])).tolist()
    [3, 3, 3, 5]
    >>> _prefix_max(np.array([3, 1, 4, 1, 5]), np.array([1, 3, 3])).tolist()
    [3, 4, 4]
    """
    if len(ends) == 1:
        return a[:int(ends[0])].max(keepdims=True)
    a = a[:int(ends[-1])]
    starts = np.concatenate([[0], ends[:-1]])
    full = starts < ends                  # each non-empty stretch ends where the next non-empty one starts
    step = np.full(len(ends), np.iinfo(I64).min, dtype=I64)
    step[full] = np.maximum.reduceat(a, starts[full])
    return np.maximum.accumulate(step)


def _records(a: np.ndarray) -> np.ndarray:
    """The positions of the entries of ``a`` that no later entry reaches (strict suffix records), ascending:
    the maximum, then the records after it, a maximum at a time while few are found (random values have a few
    records, each cutting what is left by half on average; of equal maxima the last), then one running maximum
    over what is left (descending values: every entry is a record).

    >>> _records(np.array([5, 1, 5, 2, 3, 1])).tolist()
    [2, 4, 5]
    >>> _records(np.array([7] * 40 + [6, 7, 2])).tolist()
    [41, 42]
    """
    n = len(a)
    out: list[int] = []
    lo = 0
    for _ in range(16):
        if lo >= n:
            return np.array(out, dtype=I64)
        p = lo + int(a[lo:].argmax())                  # the first of the maxima left
        if out and a[out[-1]] == a[p]:
            out[-1] = p                                 # a later copy of the same value: only it is strict
        else:
            out.append(p)
        lo = p + 1
    if lo >= n:
        return np.array(out, dtype=I64)
    rest = a[lo:]
    rec = np.ones(len(rest), dtype=bool)
    rec[:-1] = rest[:-1] > np.maximum.accumulate(rest[::-1])[::-1][1:]
    more = lo + np.flatnonzero(rec)
    if out and a[out[-1]] == a[more[0]]:
        out.pop()
    return np.concatenate([np.array(out, dtype=I64), more])


def _range_max(a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(a[lo[i]:hi[i]]) for each query (every range non-empty), by a sparse table over the part of ``a``
    the queries reach: O(n log n) to build, O(1) a query.

    >>> _range_max(np.array([3, 1, 4, 1, 5, 9, 2]), np.array([0, 1, 3, 6]), np.array([2, 3, 5, 7])).tolist()
    [3, 4, 5, 2]
    """
    base = int(lo.min())
    a = a[base:int(hi.max())]
    lo, hi = lo - base, hi - base
    length = hi - lo
    out = np.empty(len(lo), dtype=I64)
    table = a
    j = 0
    while True:
        q = np.flatnonzero((length >= (1 << j)) & (length < (2 << j)))
        if len(q):
            out[q] = np.maximum(table[lo[q]], table[hi[q] - (1 << j)])
        if (2 << j) > int(length.max()):
            return out
        table = np.maximum(table[:-(1 << j)], table[(1 << j):])
        j += 1
