"""A join input probed by a keyed one (``synopses/keyed_index.py``), held as a hash multimap from key code to its
rows: appends and deletes cost in proportion to the release, never to the rows held (digest-004 R-PLAN-06: one
synopsis per join input, hashed on the join key).

NEXMark q9 joins the valid bids (insert-only, 180,000 rows at 300,000 events) with ``Q9M``, the MAX price per
auction, and the bids at their auction's MAX (deletes at random as a MAX rises) with ``Q9T``. Those releases
are signed rows applied by ``keyed_release`` (``dsms/operators/keyed_join.py``): the other input's changes
probe this one, and this one's rows are added and removed. The sorted-run index keeps such an input in its
signed form, a table sorted by key code that every release merges into: four arrays as long as the rows held
rebuilt at every release, so a join over an unbounded input slowed down as it filled.

Here the rows sit in an ``AppendIndexSynopsis`` (rows in arrival order, per key slot its row numbers in blocks
that grow by doubling), with a flag per row saying whether it is live. A release appends its inserts; each of
its deletes then retracts a live row with its key code and the very values it carries (floats by their bits),
the release's own inserts included (the state is read only between releases, so netting over the release is
exact), two deletes never retracting one row. A probe expands the blocks of its slots and keeps the live
rows. Once rows that left outnumber the live ones (plus ``SLACK``), the index is rebuilt from the live rows,
so memory and block lengths follow the relation, not its history.

Anything else a join asks of its index (a release over the pair budget, a sampled side, a fused window, a
delete that finds no row to retract) turns this index into the sorted-run forms of its base class for good,
with its live rows, before it is answered there: answers never depend on the form.
"""

from __future__ import annotations

import numpy as np

from synopses.append_index import AppendIndexSynopsis
from synopses.key_slots import KeySlots
from synopses.sort_order import stable_argsort
from synopses.sorted_run_index import FastFormIndex, _equal

_EMPTY = np.empty(0, dtype=np.int64)
SLACK = 4096        # rows that left tolerated beyond the live rows before the index is rebuilt


class HashRows:
    """Rows by key code with a live flag each: appends, retractions by value, probes.

    >>> h = HashRows()
    >>> h.add([np.array([1, 2, 1]), np.array([5, 6, 7])], np.array([10, 20, 11]), np.array([1, 2, 1]))
    >>> h.retract([np.array([1]), np.array([7])], np.array([11]), np.array([1]))
    True
    >>> p, cols = h.probe(np.array([20, 10, 11, 30]), np.array([2, 1, 1, 3]))
    >>> p.tolist(), [c.tolist() for c in cols], h.n_live
    ([0, 1], [[2, 1], [6, 5]], 2)
    >>> h.retract([np.array([1]), np.array([7])], np.array([11]), np.array([1]))   # that row has left
    False
    """

    def __init__(self) -> None:
        self.slots = KeySlots()
        self.index = AppendIndexSynopsis(self.slots)
        self.slots.rows = lambda: self.index.n
        self.live = np.zeros(64, dtype=bool)
        self.codes = np.zeros(64, dtype=np.int64)      # per row: its join key code
        self.buckets = np.zeros(64, dtype=np.int64)    # ... and its bucket value
        self.n_live = 0
        self.n_dead = 0

    def nbytes(self) -> int:
        return self.index.nbytes() + self.live.nbytes + self.codes.nbytes + self.buckets.nbytes

    def add(self, cols: list[np.ndarray], codes: np.ndarray, buckets: np.ndarray) -> None:
        """Append rows (all live) with their key codes and bucket values."""
        m = len(codes)
        if not m:
            return
        r0 = self.index.n
        if r0 + m > len(self.live):
            cap = max(r0 + m, 2 * len(self.live))
            live = np.zeros(cap, dtype=bool)
            live[:r0] = self.live[:r0]
            cc, bb = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
            cc[:r0], bb[:r0] = self.codes[:r0], self.buckets[:r0]
            self.live, self.codes, self.buckets = live, cc, bb
        self.index.append(cols, self.slots.of(buckets))
        self.live[r0:r0 + m] = True
        self.codes[r0:r0 + m] = codes
        self.buckets[r0:r0 + m] = buckets
        self.n_live += m

    def _candidates(self, codes: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, row number) of every live row with a probe's key code (found in the probe's bucket), by
        probe, rows in arrival order."""
        if not self.n_live or not len(codes):
            return _EMPTY, _EMPTY
        p, rows = self.index.find(self.slots.of(buckets))
        if len(rows):
            keep = self.codes[rows] == codes[p]
            if self.n_dead:
                keep &= self.live[rows]
            if not keep.all():
                p, rows = p[keep], rows[keep]
        if len(p) > 1 and not (p[1:] >= p[:-1]).all():
            o = stable_argsort(p)
            p, rows = p[o], rows[o]
        return p, rows

    def probe(self, codes: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """(probe index, the matching live rows' columns), in probe order."""
        p, rows = self._candidates(codes, buckets)
        if not len(p):
            return _EMPTY, []
        return p, self.index.gather(rows)

    def retract(self, cols: list[np.ndarray], codes: np.ndarray, buckets: np.ndarray) -> bool:
        """Remove, for each delete (its values, key code and bucket value), one live row with that code and those
        values, no row for two deletes; False, with nothing changed, when some delete finds none."""
        nd = len(codes)
        if not nd:
            return True
        p, rows = self._candidates(codes, buckets)
        if len(p):
            ok = np.ones(len(p), dtype=bool)
            held = self.index.gather(rows)
            if len(held) != len(cols):
                return False
            for h, c in zip(held, cols):
                ok &= _equal(h, c[p])
            p, rows = p[ok], rows[ok]
        if len(p) < nd:
            return False
        if len(p) == nd and p[-1] == nd - 1 and (nd == 1 or (p[1:] != p[:-1]).all()):
            # one candidate each (the usual case): distinct rows, or a row wanted twice (found once)
            r = np.sort(rows)
            if nd == 1 or (r[1:] != r[:-1]).all():
                return self._kill(rows)
            return False
        got = np.full(nd, -1, dtype=np.int64)
        while len(p):
            # each delete's first candidate (the oldest copy); a row wanted by several goes to the first
            first = np.ones(len(p), dtype=bool)
            first[1:] = p[1:] != p[:-1]
            fp, fr = p[first], rows[first]
            _, once = np.unique(fr, return_index=True)
            got[fp[once]] = fr[once]
            left = (got[p] < 0) & ~np.isin(rows, fr[once])
            p, rows = p[left], rows[left]
        if (got < 0).any():
            return False
        return self._kill(got)

    def _kill(self, rows: np.ndarray) -> bool:
        """The rows numbered ``rows`` (distinct, live) leave."""
        self.live[rows] = False
        self.n_live -= len(rows)
        self.n_dead += len(rows)
        if self.n_dead > self.n_live + SLACK:
            self._rebuild()
        return True

    def pop(self, codes: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Remove every live row with a probe's key code: (probe index, their columns), as ``probe`` finds them."""
        p, rows = self._candidates(codes, buckets)
        if not len(p):
            return _EMPTY, []
        cols = self.index.gather(rows)
        self._kill(rows)
        return p, cols

    def live_rows(self) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """The live rows' key codes, columns and bucket values, in arrival order."""
        rows = np.flatnonzero(self.live[:self.index.n])
        if not len(rows):
            return _EMPTY, [], _EMPTY
        return self.codes[rows], self.index.gather(rows), self.buckets[rows]

    def _rebuild(self) -> None:
        """Hold the live rows alone again (new slots, blocks and row numbers)."""
        codes, cols, buckets = self.live_rows()
        self.__init__()
        if len(codes):
            self.add(cols, codes, buckets)


class HashMultiIndexSynopsis(FastFormIndex):
    """A join input probed by a keyed input: held as ``HashRows`` while the join applies its releases as signed
    rows (``keyed_release``), in the sorted-run forms of the base class for good after anything else (see the
    module). ``bucket`` says what buckets the rows: ``(own, probe)`` for a join key column of INT values (``own``
    in this input, ``probe`` the keyed input's column equated with it: the keyed input's unique key, so a probe's
    bucket holds the rows of its group, auctions by id in q9), None for the join key code itself. Same entity
    kind and control table as the sorted-run index."""

    def __init__(self, bucket: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.bucket = bucket
        self.by_code: HashRows | None = HashRows()

    def hashed(self) -> bool:
        """Whether the rows are held by key code in the hash form (else in the base class's forms, for good)."""
        return self.by_code is not None

    def __len__(self) -> int:
        if self.by_code is not None:
            return self.by_code.n_live
        return super().__len__()

    def nbytes(self) -> int:
        if self.by_code is not None:
            return self.by_code.nbytes()
        return super().nbytes()

    def _own_buckets(self, cols: list[np.ndarray], codes: np.ndarray) -> np.ndarray:
        return codes if self.bucket is None else cols[self.bucket[0]].astype(np.int64, copy=False)

    def lookup_from(self, codes: np.ndarray, batch) -> tuple[np.ndarray, list[np.ndarray], np.ndarray | None]:
        """``lookup`` for probes with these codes from rows of the keyed input (``batch``): (probe index, the
        rows' columns, None: every row held is an insert)."""
        if self.by_code is None:
            return super().lookup(codes)
        b = codes if self.bucket is None else batch.column(self.bucket[1]).astype(np.int64, copy=False)
        p, cols = self.by_code.probe(codes, b)
        return p, cols, None

    def lookup(self, codes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray | None]:
        if self.by_code is not None and self.bucket is None:
            p, cols = self.by_code.probe(codes, codes)
            return p, cols, None
        self.unhash()
        return super().lookup(codes)

    def insert(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> None:
        """Apply signed rows: the inserts appended, then the deletes retract live rows (see the module); a delete
        that finds no row turns the index into the base class's forms, where it is stored signed."""
        if self.by_code is None:
            super().insert(ts, sign, cols, codes)
            return
        neg = sign < 0
        if not neg.any():
            self.by_code.add(cols, codes, self._own_buckets(cols, codes))
            return
        pos = np.flatnonzero(~neg)
        if len(pos):
            c = [x[pos] for x in cols]
            self.by_code.add(c, codes[pos], self._own_buckets(c, codes[pos]))
        d = np.flatnonzero(neg)
        c = [x[d] for x in cols]
        if self.by_code.retract(c, codes[d], self._own_buckets(c, codes[d])):
            return
        self.unhash()
        super().insert(ts[d], sign[d], c, codes[d])

    def unhash(self) -> None:
        """Hold the rows in the base class's forms from now on."""
        if self.by_code is None:
            return
        codes, cols, _ = self.by_code.live_rows()
        self.by_code = None
        self.hold_in_runs(codes, cols)

    leave_form = unhash

    def key_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The distinct key codes held and how many rows hold each, or None when not in the hash form."""
        if self.by_code is None:
            return None
        codes, _, _ = self.by_code.live_rows()
        keys, cnt = np.unique(codes, return_counts=True)
        return keys, cnt.astype(np.float64)

