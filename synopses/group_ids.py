"""Dense group ids for one integer GROUP BY column, at a cost per batch that does not grow with the number of
groups already known (the aggregate's group table when millions of user ids or addresses are grouped).

Ids are handed out in the order the vectorised aggregate's output order depends on: the keys new in a batch
get the next ids in ascending key order. Every key is in an ``IntIds`` hash table, probed for a whole batch at
once; while the known keys span a small range, a direct lookup table (key - lo -> id) answers a batch that
brings no new key with one gather. Both grow geometrically, so a batch costs O(batch) amortised: a sorted key
table re-sorted whenever a batch brings a new key, or state arrays concatenated per batch, cost O(groups).
"""

from __future__ import annotations

import numpy as np

from synopses.rowcodes import IntIds
from synopses.sort_order import search

LUT_SPAN = 1 << 16       # a lookup table may always span this many values
LUT_KEEP = 8             # ... and up to this many slots per known key; beyond that it is dropped
LUT_BUILD = 4            # ... and built again only when the keys span at most this many slots per key
I64_MIN = -(2**63)


class IntGroupIds:
    """Ids 0 .. n-1 for int64 keys, persistent across batches.

    >>> t = IntGroupIds()
    >>> t.ids(np.array([30, 10, 30])).tolist(), t.ids(np.array([20, 10, -5])).tolist()
    ([1, 0, 1], [3, 0, 2])
    """

    def __init__(self) -> None:
        self.table = IntIds()
        self.lut = np.empty(0, dtype=np.int64)      # id of key lo + i, -1 for none; covers every known key
        self.lo = 0
        self.kmin: int | None = None                 # smallest and largest known key
        self.kmax: int | None = None

    @property
    def n(self) -> int:
        return self.table.n

    def nbytes(self) -> int:
        return self.table.nbytes() + self.lut.nbytes

    def ids(self, keys: np.ndarray) -> np.ndarray:
        """The id of every key; keys never seen get new ids, in ascending key order."""
        keys = keys.astype(np.int64, copy=False)
        if not len(keys):
            return np.empty(0, dtype=np.int64)
        kmin, kmax = int(keys.min()), int(keys.max())
        lut, lo = self.lut, self.lo
        if len(lut) and kmin >= lo and kmax < lo + len(lut):
            out = lut[keys - lo]                     # the table covers every known key: -1 means new
        elif len(lut):
            # the table covers every known key, so a key outside it is new (keys rising past it: new
            # auctions, each batch): no hash probe for the batch
            inside = (keys >= lo) & (keys <= min(lo + len(lut) - 1, 2**63 - 1))
            out = np.full(len(keys), -1, dtype=np.int64)
            out[inside] = lut[keys[inside] - lo]
        else:
            out = self.table.find(keys)
        miss = np.flatnonzero(out < 0)
        if len(miss):
            new = np.unique(keys[miss])
            start = self.n
            self.table.append(new)
            out[miss] = start + search(new, keys[miss])
            self._cover(new, start, min(kmin, int(new[0])), max(kmax, int(new[-1])))
        return out

    def _cover(self, new: np.ndarray, start: int, kmin: int, kmax: int) -> None:
        """Enter the new keys (ids start ..) into the lookup table, widening it geometrically, or drop it when
        the keys have grown too sparse for it (and build it again once they are dense enough)."""
        self.kmin = kmin if self.kmin is None else min(self.kmin, kmin)
        self.kmax = kmax if self.kmax is None else max(self.kmax, kmax)
        lut, lo, n = self.lut, self.lo, self.n
        if len(lut) and self.kmin >= lo and self.kmax < lo + len(lut):
            lut[new - lo] = np.arange(start, n, dtype=np.int64)
            return
        span = self.kmax - self.kmin + 1
        if span > max(LUT_SPAN, (LUT_KEEP if len(lut) else LUT_BUILD) * n):
            self.lut = np.empty(0, dtype=np.int64)
            return
        size = min(max(span, 2 * len(lut)), max(LUT_SPAN, LUT_KEEP * n))
        lo = self.kmin if not len(lut) or self.kmax >= lo + len(lut) else max(self.kmax - size + 1, I64_MIN)
        self.lut = np.full(size, -1, dtype=np.int64)
        self.lo = lo
        keys = self.table.key_of()
        self.lut[keys - lo] = np.arange(n, dtype=np.int64)
