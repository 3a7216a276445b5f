"""An index of an insert-only join input (a stream under ``[RANGE UNBOUNDED]``, a view that never deletes): its
rows in arrival order and, per key, the numbers of the rows holding it, in blocks that grow by doubling
(digest-004 R-PLAN-06, one synopsis per join input, hashed on the join key).

An input that never deletes needs none of what ``SortedRunIndexSynopsis`` keeps for deletes (rows matched
first in, first out, lifetimes, a signed form), and its rows never leave, so nothing is ever merged or
re-sorted: each key is given a dense slot (``KeySlots``, shared by the join's two inputs: the code itself, offset, while
the codes are dense, else numbered by a table) keeps its first row in ``head`` and any later ones in a block of a pool of row numbers (a
key held once, an auction by its id, needs no block). A batch of distinct keys in ascending order (new ids)
is added with a few gathers; any other is grouped by slot with one sort of its slots; a slot whose block is
full moves to a new block of twice the size at the end of the pool (so a row number is moved O(1) times on average), and the pool is compacted once the
blocks left behind hold as many entries as the live ones. A probe is a gather of each slot's block start and
length and one expansion into (probe, row) pairs: a few numpy calls whatever the number of rows held or of
keys probed, and no binary search (numpy's is slow on probes in random order, ``sort_order.search``).

The columns sit in segments (``ColumnSegments``): a large batch is kept as the arrays it came in, small ones are
copied into an open segment.
"""

from __future__ import annotations

import numpy as np

from control_tables import Stat
from synopses.base import Synopsis
from synopses.column_segments import ColumnSegments
from synopses.key_slots import KeySlots
from synopses.sort_order import stable_argsort

_EMPTY = np.empty(0, dtype=np.int64)
FLUSH_ROWS = 4096        # rows not indexed that one probe may reach by their band values before they are indexed


def expand(lo: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probe index, position) of every match, given each probe's first position and match count.

    >>> [a.tolist() for a in expand(np.array([4, 0, 1]), np.array([2, 0, 1]))]
    [[0, 0, 2], [4, 5, 1]]
    """
    total = int(cnt.sum())
    if not total:
        return _EMPTY, _EMPTY
    pidx = np.arange(len(lo)).repeat(cnt)
    pos = np.arange(total) + (lo + cnt - cnt.cumsum()).repeat(cnt)
    return pidx, pos


def _grow(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` with room for at least ``n`` entries (doubling), new entries zero. Resized in place (``realloc``:
    a large buffer's pages are remapped, not copied into fresh memory, whose first touch costs more than the
    copy); the index's arrays are its own, and no view of them is ever kept."""
    if n > len(a):
        a.resize(max(n, 2 * len(a), 64), refcheck=False)
    return a


class AppendIndexSynopsis(Synopsis):
    """One insert-only input of a join: every row it ever delivered, found by key.

    >>> slots = KeySlots()
    >>> ix = AppendIndexSynopsis(slots)
    >>> ix.append([np.array([10, 20, 10])], slots.of(np.array([10, 20, 10])))
    0
    >>> p, rows = ix.find(slots.of(np.array([10, 30, 20])))
    >>> sorted(zip(p.tolist(), rows.tolist())), ix.gather(rows)[0].tolist(), ix.counts(np.array([10, 20, 30])).tolist()
    ([(0, 0), (0, 2), (2, 1)], [10, 20, 10], [2, 1, 0])
    """

    kind = "append_index"
    distinct_keys = Stat(int, compute="key_count", name="keys", unit="keys",
                         doc="distinct join keys among the rows held")

    def __init__(self, slots: KeySlots) -> None:
        self.slots = slots                       # key code -> slot, shared with the join's other input
        self.n = 0                               # rows held, numbered 0 .. n-1 in arrival order
        self.cols = ColumnSegments()
        self.head = np.zeros(0, dtype=np.int64)      # per slot: its first row
        self.count = np.zeros(0, dtype=np.int64)     # ... how many rows it holds
        self.start = np.zeros(0, dtype=np.int64)     # ... where the block of its later rows begins in ``pool``
        self.cap = np.zeros(0, dtype=np.int64)       # ... and how many rows that block can hold
        self.pool = np.zeros(0, dtype=np.int64)      # row numbers, block by block (entries up to ``used``)
        self.used = 0
        self.stale = 0                           # entries of blocks left behind when their slot moved
        self.most = 0                            # rows of the slot that holds the most
        self.keys_held = 0
        # rows held but not indexed yet (``defer``): (first row, key slots, band values) per batch, contiguous
        # from row ``pending_from``, and each batch's largest band value
        self.pending: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.pending_from = 0
        self.pending_max = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return self.n

    def rows(self) -> int:
        return self.n

    def key_count(self) -> int:
        self.flush()
        return self.keys_held

    def nbytes(self) -> int:
        return (self.cols.nbytes() + self.head.nbytes + self.start.nbytes + self.count.nbytes + self.cap.nbytes
                + self.pool.nbytes + self.pending_max.nbytes + sum(p[1].nbytes for p in self.pending))

    def most_per_key(self) -> int:
        """The most rows any one key holds: no probe finds more."""
        self.flush()
        return self.most

    # ---------------------------------------------------------------- adding rows

    def append(self, cols: list[np.ndarray], slots: np.ndarray) -> int:
        """Add a batch (its columns and its rows' key slots); returns the number of its first row."""
        self.flush()
        m, r0 = len(slots), self.n
        if not m:
            return r0
        self.cols.append(cols, m)
        self.n = r0 + m
        self._index(slots, r0)
        return r0

    def defer(self, cols: list[np.ndarray], slots: np.ndarray, band: np.ndarray) -> None:
        """Add a batch whose rows are held but not indexed yet (``find_above`` reaches them through ``band``,
        the integer values of the column a probe's band bound compares with); any other probe, count or
        statistic indexes them first (``flush``)."""
        m = len(slots)
        if not m:
            return
        r0 = self.n
        self.cols.append(cols, m)
        self.n = r0 + m
        if not self.pending:
            self.pending_from = r0
        self.pending.append((r0, slots, band))
        k = len(self.pending)
        if k > len(self.pending_max):
            self.pending_max = _grow(self.pending_max, k)
        self.pending_max[k - 1] = int(band.max())

    def flush(self) -> None:
        """Index the rows held but not indexed yet (in one pass, in arrival order)."""
        if not self.pending:
            return
        slots = self.pending[0][1] if len(self.pending) == 1 else np.concatenate([p[1] for p in self.pending])
        self.pending = []
        self._index(slots, self.pending_from)

    def find_above(self, slots: np.ndarray, low: int) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, row number) of every indexed row whose key is a probe's, and of every row held but
        not indexed whose band value is at least ``low`` (the others cannot pass the band: the caller's
        predicate requires band value >= the probe's bound >= ``low``). When many rows not indexed are that
        high, they are indexed first (``flush``) and this is ``find``."""
        if not self.pending:
            return self.find(slots)
        at = np.flatnonzero(self.pending_max[:len(self.pending)] >= low)
        rows, keys, total = [], [], 0
        for i in at.tolist():
            r0, s, band = self.pending[i]
            c = np.flatnonzero(band >= low)
            if len(c):
                rows.append(c + r0)
                keys.append(s[c])
                total += len(c)
                if total > FLUSH_ROWS + len(slots):
                    return self.find(slots)
        p, r = self._find_indexed(slots)
        if not total:
            return p, r
        ck = keys[0] if len(keys) == 1 else np.concatenate(keys)
        cr = rows[0] if len(rows) == 1 else np.concatenate(rows)
        order = stable_argsort(slots)
        ss = slots[order]
        lo = np.searchsorted(ss, ck, side="left")
        cnt = np.searchsorted(ss, ck, side="right") - lo
        ci, pos = expand(lo, cnt)
        if not len(ci):
            return p, r
        return np.concatenate([p, order[pos]]), np.concatenate([r, cr[ci]])

    def _index(self, slots: np.ndarray, r0: int) -> None:
        """Index rows ``r0 ..`` (their columns are held already) under their key slots."""
        m = len(slots)
        self.cover(self.slots.n)
        if m == 1 or (slots[1:] > slots[:-1]).all():
            # distinct keys in ascending order (new ids: auctions, people): one row each, no grouping
            old = self.count[slots]
            self.count[slots] = old + 1
            if not old.any():
                self.head[slots] = np.arange(r0, r0 + m)
                self.keys_held += m
                self.most = max(self.most, 1)
                return
            uniq, size, rows, first = slots, np.ones(m, dtype=np.int64), np.arange(r0, r0 + m), None
        else:
            order = stable_argsort(slots)
            s = slots[order]
            first = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
            uniq = s[first]
            size = np.diff(first, append=m)
            rows = order + r0
            old = self.count[uniq]
            self.count[uniq] = old + size
        fresh = old == 0
        if fresh.any():                                   # a key's first row goes to ``head``
            f = np.flatnonzero(fresh)
            self.head[uniq[f]] = rows[f if first is None else first[f]]
            self.keys_held += len(f)
        self.most = max(self.most, int((old + size).max()))
        later = size - fresh                              # rows per key that go to its block
        if not later.any():
            return
        held = np.maximum(old - 1, 0)
        need = held + later
        full = need > self.cap[uniq]
        if full.any():
            self._move(uniq[full], held[full], need[full])
        if first is None:                                 # one row per key: those of keys held before
            k = np.flatnonzero(~fresh)
            self.pool[self.start[uniq[k]] + held[k]] = rows[k]
            return
        # the sorted rows of a key go to its block from ``held`` on, in order, after its head if it is new:
        # row i of the key starting at ``first`` goes to start + held + (i - first) - fresh
        pos = np.repeat(self.start[uniq] + held - first - fresh, size) + np.arange(m)
        if fresh.any():
            keep = np.ones(m, dtype=bool)
            keep[first[f]] = False                        # the heads
            pos, rows = pos[keep], rows[keep]
        self.pool[pos] = rows
        return

    def cover(self, slots: int) -> None:
        """Make the per-slot arrays long enough for ``slots`` slots (the shared table may have handed out slots
        to keys only the other input holds)."""
        if slots > len(self.count):
            self.head = _grow(self.head, slots)
            self.start = _grow(self.start, slots)
            self.count = _grow(self.count, slots)
            self.cap = _grow(self.cap, slots)

    def _move(self, slot: np.ndarray, held: np.ndarray, need: np.ndarray) -> None:
        """Give each full slot a block of ``max(need, 2 * cap)`` at the end of the pool, its rows moved there."""
        cap = np.maximum(need, 2 * self.cap[slot])
        total = int(cap.sum())
        if self.used + total > len(self.pool):
            if self.stale and 2 * self.stale >= self.used:
                self._compact()
            self.pool = _grow(self.pool, self.used + total)
        new_start = self.used + np.cumsum(cap) - cap
        if held.any():
            _, src = expand(self.start[slot], held)
            _, dst = expand(new_start, held)
            self.pool[dst] = self.pool[src]
        self.stale += int(self.cap[slot].sum())
        self.start[slot] = new_start
        self.cap[slot] = cap
        self.used += total

    def _compact(self) -> None:
        """Move every slot's block to the front of the pool, tight (entries of blocks left behind go)."""
        live = np.flatnonzero(self.count > 1)
        cnt = self.count[live] - 1
        new_start = np.cumsum(cnt) - cnt
        _, src = expand(self.start[live], cnt)
        self.pool = np.concatenate([self.pool[src], np.zeros(max(64, len(src)), dtype=np.int64)])
        self.cap[:] = 0
        self.start[live] = new_start
        self.cap[live] = cnt
        self.used, self.stale = len(src), 0

    # ---------------------------------------------------------------- probes

    def find(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, row number) of every held row whose key is a probe's."""
        self.flush()
        return self._find_indexed(slots)

    def _find_indexed(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self.n or not len(slots):
            return _EMPTY, _EMPTY
        self.cover(self.slots.n)
        cnt = self.count[slots]
        pidx = np.flatnonzero(cnt)
        rows = self.head[slots[pidx]]
        if self.most <= 1:                      # a row per key at most (auctions by id): heads alone
            return pidx, rows
        more = np.maximum(cnt - 1, 0)
        p2, pos = expand(self.start[slots], more)
        if not len(p2):
            return pidx, rows
        return np.concatenate([pidx, p2]), np.concatenate([rows, self.pool[pos]])

    def counts(self, codes: np.ndarray) -> np.ndarray:
        """Per probe key code, how many rows hold it."""
        self.flush()
        slots = self.slots.of(codes)
        self.cover(self.slots.n)
        return self.count[slots]

    def total_matches(self, codes: np.ndarray) -> int:
        return int(self.counts(codes).sum())

    @property
    def width(self) -> int:
        return self.cols.width

    def gather(self, rows: np.ndarray) -> list[np.ndarray]:
        """The columns of these rows, in that order."""
        return self.cols.take(rows)

    def columns(self, which: list[int], rows: np.ndarray) -> list[np.ndarray]:
        """The columns numbered in ``which`` of these rows."""
        return self.cols.take(rows, which)
