"""MIN or MAX of an INT column over one group (an aggregate without GROUP BY) as a count per value over a dense
range of values, while the values stay close together: NEXMark q5's ``MAX(num)`` over the bid counts per
auction, a relation whose rows nearly all change at every slide (issue 15).

``IntExtremes`` keeps a log of (group, value, count) that it nets by sorting and, when a delete removes the
last copy of the extreme, recomputes the extreme from the group's netted log: over a relation that turns over
at every slide that is a sort and a recomputation per slide. Counts per value need neither: a batch adds its
signed rows with one ``bincount`` per instant, and the extreme is the highest (lowest) value whose count is
above zero, found by a scan of the range, which is short while the values are close together.

One-way switch: when the values no longer fit a dense range (a span beyond ``SPAN``), or a batch brings more than ``SEGMENTS`` instants (a window without a slide,
a scan per instant), the live multiset goes into an ``IntExtremes`` and everything after goes through it.
"""

from __future__ import annotations

import numpy as np

from synopses.int_extremes import IntExtremes

I64 = np.int64
SPAN = 1 << 16      # the widest range of values counted (a scan of it per instant: tens of microseconds)
SEGMENTS = 16       # instants a batch may bring (each is a bincount and a scan of the range)


class IntValueCounts:
    """MIN (``want_max=False``) or MAX of one INT argument of a single group (group id 0), with the
    interface of ``IntExtremes``.

    >>> x = IntValueCounts(want_max=True); x.grow(1)
    >>> g = np.zeros(3, dtype=np.int64)
    >>> x.step(np.array([5, 9, 7]), np.array([1, 1, 1]), g, np.array([2]), np.array([False]), np.array([3]))[0].tolist()
    [9]
    >>> new, old = x.step(np.array([9]), np.array([-1]), g[:1], np.array([0]), np.array([True]), np.array([2]))
    >>> new.tolist(), old.tolist()
    ([7], [9])
    """

    def __init__(self, want_max: bool) -> None:
        self.want_max = want_max
        self.lo = 0
        self.counts = np.zeros(0, dtype=I64)      # rows of value lo + i
        self.rows = 0                              # rows held (the sum of counts)
        self.ext = 0                               # the extreme while rows > 0
        self.general: IntExtremes | None = None    # after the switch, everything goes here

    def grow(self, size: int) -> None:
        if self.general is not None:
            self.general.grow(size)

    def nbytes(self) -> int:
        return self.general.nbytes() if self.general is not None else self.counts.nbytes

    def step(self, v: np.ndarray, sign: np.ndarray, g_s: np.ndarray, ends: np.ndarray, had: np.ndarray,
             new_cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As ``IntExtremes.step``, for a batch whose rows all belong to group 0 (segments are instants)."""
        if self.general is None and not self._fits(v, len(ends)):
            self._switch()
        if self.general is not None:
            return self.general.step(v, sign, g_s, ends, had, new_cnt)
        v = v.astype(I64, copy=False)
        nseg = len(ends)
        new = np.zeros(nseg, dtype=I64)
        old = np.zeros(nseg, dtype=I64)
        start = 0
        span = len(self.counts)
        for s, end in enumerate(ends.tolist()):
            old[s] = self.ext if self.rows else 0
            part = v[start:end + 1] - self.lo
            self.counts += np.bincount(part, weights=sign[start:end + 1], minlength=span).astype(I64)
            self.rows = int(new_cnt[s])
            if self.rows:
                nz = np.flatnonzero(self.counts)
                self.ext = self.lo + int(nz[-1] if self.want_max else nz[0])
                new[s] = self.ext
            start = end + 1
        return new, old

    def _fits(self, v: np.ndarray, nseg: int) -> bool:
        """Whether the batch can go through the counts (widening their range to its values if need be)."""
        if nseg > SEGMENTS:
            return False
        if not len(v):
            return True
        vmin, vmax = int(v.min()), int(v.max())
        if len(self.counts):
            vmin, vmax = min(vmin, self.lo), max(vmax, self.lo + len(self.counts) - 1)
        span = vmax - vmin + 1
        if span > SPAN:
            return False
        if not len(self.counts) or vmin < self.lo or vmax >= self.lo + len(self.counts):
            # the range grows to cover the values, with room on the side they grew by (geometrically)
            old_lo, old = self.lo, self.counts
            room = min(max(span, 2 * len(old), 64), SPAN)
            lo = vmin if not len(old) or vmin >= old_lo else vmax - room + 1
            lo = max(min(lo, 2**63 - room), -(2**63))          # the range stays within int64
            counts = np.zeros(room, dtype=I64)
            if len(old):
                counts[old_lo - lo:old_lo - lo + len(old)] = old
            self.lo, self.counts = lo, counts
        return True

    def _switch(self) -> None:
        """Hand the live multiset to an ``IntExtremes`` (one insert-only segment), for good."""
        x = IntExtremes(self.want_max)
        x.grow(1)
        nz = np.flatnonzero(self.counts)
        if self.rows:
            vals = np.repeat(self.lo + nz, self.counts[nz])
            n = len(vals)
            x.step(vals, np.ones(n, dtype=I64), np.zeros(n, dtype=I64), np.array([n - 1]),
                   np.array([False]), np.array([n]))
        self.general = x
        self.counts = np.zeros(0, dtype=I64)
