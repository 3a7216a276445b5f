"""The multiset of one group's MIN or MAX argument, with its extreme at O(log n) amortised per change.

Source: digest-004 R-PLAN-06 (MIN/MAX must keep their window; when the extreme expires, look again). Scanning
the whole multiset on every instant (``min(counter)``) costs O(window) per instant: a MAX over a window of
10^5 rows then runs at a few hundred rows a second. Here, once a group holds more than a few distinct values
(below that a scan is cheaper), a heap holds every value present, with lazy deletion: a value that left stays
in the heap until it reaches the top, and the heap is rebuilt from the values present once stale entries
outnumber them, so it never holds more than about twice the multiset.

The answer is exactly ``min(counts)`` (or ``max``): the value object returned is the one the count table keeps
as its key (-0.0 versus 0.0 included). A NaN present makes the extreme NaN (IEEE 754 propagation, as numpy's
``min`` and ``max`` and as SUM give it); every NaN is kept as one value, so that its count is exact.
"""

from __future__ import annotations

import heapq
from collections import Counter

SCAN = 16                # up to this many distinct values a scan is cheaper than keeping a heap
NAN = float("nan")       # every NaN is counted under this one object (dict lookups match it by identity)


class _Rev:
    """Reverses the order of a value that cannot be negated (a string), for the MAX heap."""

    __slots__ = ("v",)

    def __init__(self, v) -> None:
        self.v = v

    def __lt__(self, other: _Rev) -> bool:
        return other.v < self.v

    def __eq__(self, other) -> bool:
        return self.v == other.v


class ExtremeBag:
    """Counts per value (a value is present while its count is nonzero, negative inside an instant
    included) and the least (``want_max=False``) or greatest present value.

    >>> b = ExtremeBag(want_max=True)
    >>> for v, s in [(3, 1), (7, 1), (7, 1), (7, -1)]: b.add(v, s)
    >>> b.extreme()
    7
    >>> b.add(7, -1); b.extreme()
    3
    """

    __slots__ = ("counts", "heap", "born", "serial", "want_max", "nan")

    def __init__(self, want_max: bool) -> None:
        self.counts: Counter = Counter()
        self.heap: list[tuple] | None = None   # (order key, serial, value), stale once the value left; None
        self.born: dict = {}                    # while the multiset is small enough to scan
        self.serial = 0                         # born: value present -> serial of its live heap entry
        self.want_max = want_max
        self.nan = 0                            # NaN values present (no total order: scan), with a heap

    def __len__(self) -> int:
        return len(self.counts)

    def add(self, v, s: int) -> None:
        if v != v:
            v = NAN
        counts = self.counts
        c = counts.get(v, 0)
        heap = self.heap
        if c == 0 and heap is not None:       # a new value: counts keeps this object as its key
            if v != v:
                self.nan += 1
            else:
                self.serial += 1
                self.born[v] = self.serial
                heapq.heappush(heap, (self._order(v), self.serial, v))
        c += s
        if c:
            counts[v] = c
            if heap is None and len(counts) > SCAN:
                self._rebuild()
        else:
            del counts[v]
            if heap is not None:
                if v != v:
                    self.nan -= 1
                else:
                    del self.born[v]
                    if len(heap) > 2 * len(counts) + 32:
                        self._rebuild()

    def _order(self, v):
        if not self.want_max:
            return v
        return -v if isinstance(v, int | float) else _Rev(v)

    def _rebuild(self) -> None:
        """A heap of the values present (dropping stale entries), each with a fresh serial."""
        self.heap, self.born, self.nan = [], {}, 0
        for v in self.counts:
            if v != v:
                self.nan += 1
            else:
                self.serial += 1
                self.born[v] = self.serial
                self.heap.append((self._order(v), self.serial, v))
        heapq.heapify(self.heap)

    def extreme(self):
        """The least or greatest value present (ValueError when none is, as ``min`` of nothing); NaN when a NaN
        is present."""
        if NAN in self.counts:
            return NAN
        heap, born = self.heap, self.born
        if heap is None:
            return max(self.counts) if self.want_max else min(self.counts)
        while heap:
            _, serial, v = heap[0]
            if born.get(v) == serial:
                return v
            heapq.heappop(heap)
        raise ValueError("extreme of an empty multiset")
