"""Dense group ids for one integer GROUP BY column, at a cost per batch that does not grow with the number of
groups already known (the aggregate's group table when millions of user ids or addresses are grouped).

Ids are handed out in the order the vectorised aggregate's output order depends on: the keys new in a batch
get the next ids in ascending key order. While the known keys span a small range, a direct lookup table
(key - lo -> id) answers a batch with one gather, and the new keys of a batch are found by marking them in a
bitmap over their span (sorted and distinct without a sort: NEXMark's auctions, new ones in every batch);
otherwise every key is in an ``IntIds`` hash table, probed for a whole batch at once, which is only filled
once the lookup table has been given up. Both grow geometrically, so a batch costs O(batch) amortised: a sorted
key table re-sorted whenever a batch brings a new key, or state arrays concatenated per batch, cost O(groups).

Keys of several integer columns get ids the same way once packed into one int64 (``PackedIntGroupIds``).
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
        self.table = IntIds()                        # the hash table, filled only while there is no lut
        self.keys = np.zeros(64, dtype=np.int64)     # the key of each id (capacity grows by doubling)
        self.n = 0
        self.lut = np.empty(0, dtype=np.int64)      # id of key lo + i, -1 for none; covers every known key
        self.lo = 0
        self.kmin: int | None = None                 # smallest and largest known key
        self.kmax: int | None = None
        self.fresh = False       # the last batch's keys were all new, distinct and ascending: ids in row order

    def nbytes(self) -> int:
        return self.table.nbytes() + self.lut.nbytes + self.keys.nbytes

    def key_of(self) -> np.ndarray:
        """The key of every id (a view)."""
        return self.keys[:self.n]

    def _hashed(self) -> IntIds:
        """The hash table, holding every known key (the keys added while a lookup table answered go in now)."""
        t = self.table
        if t.n < self.n:
            t.append(self.keys[t.n:self.n])
        return t

    def ids(self, keys: np.ndarray) -> np.ndarray:
        """The id of every key; keys never seen get new ids, in ascending key order."""
        keys = keys.astype(np.int64, copy=False)
        if not len(keys):
            return np.empty(0, dtype=np.int64)
        kmin, kmax = int(keys.min()), int(keys.max())
        self.fresh = (self.kmax is not None and kmin > self.kmax
                      and (len(keys) == 1 or bool((keys[1:] > keys[:-1]).all())))
        if self.fresh:
            # every key new, distinct and ascending (NEXMark's auctions, each batch): the next ids in order,
            # with no lookup
            start = self.n
            self._append(keys)
            self._cover(keys, start, kmin, kmax)
            return np.arange(start, self.n, dtype=np.int64)
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
            out = self._hashed().find(keys)
        miss = np.flatnonzero(out < 0)
        if len(miss):
            mk = keys[miss]
            new = _distinct_sorted(mk)
            start = self.n
            self._append(new)
            self._cover(new, start, min(kmin, int(new[0])), max(kmax, int(new[-1])))
            if len(self.lut):
                out[miss] = self.lut[mk - self.lo]
            else:
                out[miss] = start + search(new, mk)
        return out

    def _append(self, new: np.ndarray) -> None:
        n, m = self.n, len(new)
        if n + m > len(self.keys):
            keys = np.zeros(max(n + m, 2 * len(self.keys)), dtype=np.int64)
            keys[:n] = self.keys[:n]
            self.keys = keys
        self.keys[n:n + m] = new
        self.n = n + m

    def rekey(self, keys: np.ndarray) -> None:
        """Replace the key of every id (distinct, in the same order as the old keys: packed keys re-packed
        with wider fields, ``PackedIntGroupIds``)."""
        keys = keys.astype(np.int64)
        self.keys = np.concatenate([keys, np.zeros(max(64 - len(keys), 1), dtype=np.int64)])
        self.n = len(keys)
        self.table = IntIds()
        self.lut = np.empty(0, dtype=np.int64)
        self.kmin = self.kmax = None
        if self.n:
            self._cover(keys[:0], self.n, int(keys.min()), int(keys.max()))

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
        self.lut[self.key_of() - lo] = np.arange(n, dtype=np.int64)


def _distinct_sorted(k: np.ndarray) -> np.ndarray:
    """The distinct keys in ascending order: marked in a bitmap over their span when it is small against their
    number (keys close together: no sort), else ``np.unique``.

    >>> _distinct_sorted(np.array([7, 3, 7, 5])).tolist()
    [3, 5, 7]
    """
    lo, hi = int(k.min()), int(k.max())
    if hi - lo <= 4 * len(k) + 1024:
        mark = np.zeros(hi - lo + 1, dtype=bool)
        mark[k - lo] = True
        return np.flatnonzero(mark) + lo
    return np.unique(k)


I64_MAX = 2**63 - 1
PACK_SPACE = 2**62        # packed keys stay within +-2**62: their differences fit an int64 as well


class PackedIntGroupIds:
    """Ids for keys of several integer columns, as ``IntGroupIds`` gives them to one column: each key packed
    into one int64 by mixed radix, ``(c0 - lo0) * K + (c1 - lo1) * k2 * ... + (cm - lom)``, with every column
    after the first held to a range lo .. lo + k - 1. Packed keys sort as the key tuples do, so new groups get
    their ids in the same order as through a dict of tuples; the radixes are the ranges seen, not bit fields,
    so keys close together (an auction id and its category) pack into a dense span the lookup table covers.

    A value outside its column's range widens the range (at least doubling it) and re-packs every known key
    (``IntGroupIds.rekey``: the ids stay). ``ids`` returns None, for good, once the packed keys would no longer
    fit within +-2**62: the caller then keeps tuples.

    >>> t = PackedIntGroupIds(2)
    >>> t.ids([np.array([5, 5, -2**63]), np.array([1, 2, 2**63 - 1])]) is None
    True
    >>> t = PackedIntGroupIds(2)
    >>> t.ids([np.array([5, 5, 7]), np.array([1, 2, 1])]).tolist(), t.ids([np.array([5, 6]), np.array([9, 2])]).tolist()
    ([0, 1, 2], [3, 4])
    >>> [c.tolist() for c in t.key_cols(0)]
    [[5, 5, 7, 5, 6], [1, 2, 1, 9, 2]]
    """

    def __init__(self, ncols: int) -> None:
        self.ids_of = IntGroupIds()
        self.lo: list[int] | None = None          # per column its smallest value (the first: an origin)
        self.k: list[int] = []                    # per column after the first: its radix (range width)
        self.span0 = (0, 0)                       # the first column's smallest and largest value so far
        self.ncols = ncols
        self.failed = False

    @property
    def n(self) -> int:
        return self.ids_of.n

    def nbytes(self) -> int:
        return self.ids_of.nbytes()

    def ids(self, cols: list[np.ndarray]) -> np.ndarray | None:
        """The id of every key (new keys: the next ids, ascending); None when the keys no longer pack."""
        if self.failed:
            return None
        if not len(cols[0]):
            return np.empty(0, dtype=np.int64)
        mins = [int(c.min()) for c in cols]
        maxs = [int(c.max()) for c in cols]
        if self.lo is None:
            lo, k, s0 = mins, [hi - lo + 1 for lo, hi in zip(mins[1:], maxs[1:])], (mins[0], maxs[0])
        else:
            lo, k = list(self.lo), list(self.k)
            s0 = (min(self.span0[0], mins[0]), max(self.span0[1], maxs[0]))
            for j in range(1, self.ncols):
                a, b = lo[j], lo[j] + k[j - 1] - 1
                if mins[j] < a or maxs[j] > b:               # widen: at least double, toward the new values
                    a2, b2 = min(a, mins[j]), max(b, maxs[j])
                    w = max(b2 - a2 + 1, 2 * k[j - 1])
                    if mins[j] < a:
                        a2 = max(b2 - w + 1, -2**63)
                    else:
                        b2 = min(a2 + w - 1, I64_MAX)
                    lo[j], k[j - 1] = a2, b2 - a2 + 1
        if not self._fits(lo, k, s0):
            self.failed = True
            return None
        if self.lo is not None and (lo != self.lo or k != self.k):
            old = self.key_cols(0)
            self.lo, self.k = lo, k
            self.ids_of.rekey(self._pack(old))
        self.lo, self.k, self.span0 = lo, k, s0
        return self.ids_of.ids(self._pack(cols))

    def _fits(self, lo: list[int], k: list[int], s0: tuple[int, int]) -> bool:
        space = 1
        for w in k:
            space *= w
        return (-2**63 <= s0[0] and s0[1] <= I64_MAX
                and max(s0[1] - lo[0], lo[0] - s0[0]) * space + space <= PACK_SPACE
                and all(a + w - 1 <= I64_MAX for a, w in zip(lo[1:], k)))

    def _pack(self, cols: list[np.ndarray]) -> np.ndarray:
        out = cols[0].astype(np.int64) - self.lo[0]
        for c, a, w in zip(cols[1:], self.lo[1:], self.k):
            out *= w
            out += c.astype(np.int64, copy=False) - a
        return out

    def key_cols(self, start: int) -> list[np.ndarray]:
        """The columns of the keys of ids start .. n-1."""
        keys = self.ids_of.key_of()[start:]
        out = []
        for a, w in zip(reversed(self.lo[1:]), reversed(self.k)):
            q, r = np.divmod(keys, w)
            out.append(r + a)
            keys = q
        out.append(keys + self.lo[0])
        return out[::-1]
