"""The release of a join whose two inputs never delete (streams under ``[RANGE UNBOUNDED]``, views over such
joins; the planner knows it from the plan, ``monotone``): NEXMark q3's Auction ⋈ Person, q4's and q9's
Auction ⋈ Bid.

Source: digest-002a section 2.15 (Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR; with inserts only, no negative tuples ever
arise) and digest-004 R-PLAN-06 (one synopsis per input, hashed on the join key).

A release of new left rows ΔL and new right rows ΔR adds exactly the pairs ΔL ⋈ R_old and L_new ⋈ ΔR, where
L_new = L_old + ΔL. So the new left rows probe the right input's index before ΔR is added, then join the left
index, and the new right rows probe it, then join the right index: each pair is found once, with no
lifetimes to track (every pair lives forever) and no staging. A pair enters at the later of its rows'
instants: the new row's for a pair with an old row (every held row entered at or before any released one), the
later of the two for a pair of new rows. Pairs come out in time order (sorted only when a pair of new rows
breaks the order of the probes).

The join's other predicate (a band such as ``B.dateTime BETWEEN A.dateTime AND A.expires``: the selection just
above the join, fused into it by the planner, ``L.FilteredJoin``) is evaluated on the matched pairs over the
columns it reads alone; only the pairs that pass have their columns gathered, and of those only the ones the
selection kept (``JoinOp.keep``: NEXMark q4 gathers 3 of the 7).

The pairs a release makes are counted exactly before it is applied, from each key's row count on the other
side and the keys the two released parts share (``fits``), so the join's bounded runs (``PAIR_BUDGET``) cost
one gather per released row here; only a release over the budget goes through ``JoinOp._bounded``'s cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dsms.batch import Batch
from dsms.operators import append_dense
from dsms.operators.append_pairs import Pairs, emit_pairs
from dsms.operators.append_small import small_release
from synopses.key_slots import KeySlots
from synopses.small_append_index import SmallAppendIndexSynopsis
from synopses.sort_order import search_both

if TYPE_CHECKING:
    from dsms.operators.join import JoinOp


SLOT_MARGIN = 1 << 12     # key slots kept below the first batch's smallest key (``KeySlots``)


class AppendJoin:
    """The insert-only state and release of one ``JoinOp``: both inputs' indexes share one key-slot table. While
    releases are small the indexes hold their keys in dicts and releases go through ``append_small.py``."""

    def __init__(self) -> None:
        self.slots = KeySlots(margin=SLOT_MARGIN)
        self.sides = (SmallAppendIndexSynopsis(self.slots), SmallAppendIndexSynopsis(self.slots))
        self.slots.rows = lambda: self.sides[0].n + self.sides[1].n
        self._memo: dict[int, tuple[Batch, np.ndarray]] = {}
        # (side, column of that side, column of the other side) when the join's predicate requires the first
        # column >= the second (a band's lower bound, ``band_bound``): that side's released rows are held
        # without being indexed, and a release of the other side probes only those of them at or above the
        # smallest bound it brings (``AppendIndexSynopsis.defer``, ``find_above``); None: none
        self.lazy: tuple[int, int, int] | None = None
        # per side probed: (released batch, rows the index held, its pairs), for ``fits`` then ``apply``
        self._found: dict[int, tuple[Batch, int, tuple[np.ndarray, np.ndarray]]] = {}

    def _probe(self, op: JoinOp, side: int, batch: Batch, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, row) of the released rows ``batch`` of the other input against the index of ``side``
        (once per release: ``fits`` and ``apply`` both need them): through ``find_above`` when ``side`` holds
        rows not indexed yet and the batch's bounds are integers."""
        index = self.sides[side]
        got = self._found.get(side)
        if got is not None and got[0] is batch and got[1] == index.n:
            return got[2]
        lazy = self.lazy
        if lazy is not None and lazy[0] == side and index.pending:
            bound = batch.cols[lazy[2]]
            if bound.dtype.kind in "iu":
                found = index.find_above(slots, int(bound.min()))
            else:
                found = index.find(slots)
        else:
            found = index.find(slots)
        self._found[side] = (batch, index.n, found)
        return found

    def _add(self, side: int, batch: Batch, slots: np.ndarray) -> None:
        """Add released rows to the index of ``side`` (held without being indexed when ``side`` is lazy and
        the band column is integer)."""
        lazy = self.lazy
        if lazy is not None and lazy[0] == side:
            band = batch.cols[lazy[1]]
            if band.dtype.kind in "iu":
                self.sides[side].defer(batch.cols, slots, band)
                return
        self.sides[side].append(batch.cols, slots)

    def _slots_of(self, op: JoinOp, side: int, batch: Batch) -> np.ndarray:
        """The key slot of each row of a released batch (once per release: ``fits`` and ``apply`` both need
        them)."""
        got = self._memo.get(side)
        if got is not None and got[0] is batch:
            return got[1]
        slots = self.slots.of(op._codes(side, batch))
        self._memo[side] = (batch, slots)
        return slots

    def fits(self, op: JoinOp, parts: dict, budget: int) -> bool:
        """Whether the release makes at most ``budget`` pairs, counted exactly."""
        L, R = self.sides
        lb, rb = parts.get(0), parts.get(1)
        n0 = len(lb) if lb is not None else 0
        n1 = len(rb) if rb is not None else 0
        if not L.pending and not R.pending and n0 * (R.most + n1) + n1 * (L.most + n0) <= budget:
            return True
        total = 0
        s0 = self._slots_of(op, 0, lb) if n0 else None
        s1 = self._slots_of(op, 1, rb) if n1 else None
        for side, s, b in ((0, s1, rb), (1, s0, lb)):     # each released row's matches among the held rows
            index = self.sides[side]
            if s is not None and index.n:
                if index.pending:
                    total += len(self._probe(op, side, b, s)[0])
                    continue
                index.cover(self.slots.n)
                total += int(index.count[s].sum())
        if n0 and n1 and total <= budget:
            # pairs of two released rows: at most one per row of one part when the other part's keys are
            # distinct (new auctions, people: ascending ids); else counted
            if total + n1 <= budget and (n0 == 1 or (s0[1:] > s0[:-1]).all()):
                return True
            if total + n0 <= budget and (n1 == 1 or (s1[1:] > s1[:-1]).all()):
                return True
            total += _shared(s0, s1, self.slots.n)
        return total <= budget

    def apply(self, op: JoinOp, parts: dict) -> None:
        """Add the released rows of each side (batches of inserts) and emit the pairs they make."""
        if append_dense.dense_release(self, op, parts) or small_release(self, op, parts):
            return
        L, R = self.sides
        lb, rb = parts.get(0), parts.get(1)
        found: list[Pairs] = []
        n_old = L.n
        if lb is not None and len(lb):
            sl = self._slots_of(op, 0, lb)
            if R.n:
                p, rr = self._probe(op, 1, lb, sl)
                if len(p):
                    found.append(Pairs(lb.ts[p], lb.cols, p, R, rr, True))
            self._add(0, lb, sl)
        if rb is not None and len(rb):
            sr = self._slots_of(op, 1, rb)
            if L.n:
                q, lr = self._probe(op, 0, rb, sr)
                if len(q):
                    ts = rb.ts[q]
                    if n_old < L.n and int(lb.ts[-1]) > int(ts[0]):
                        new = np.flatnonzero(lr >= n_old)     # pairs of two new rows: at the later instant
                        if len(new):
                            ts[new] = np.maximum(ts[new], lb.ts[lr[new] - n_old])
                    found.append(Pairs(ts, rb.cols, q, L, lr, False))
            self._add(1, rb, sr)
        self._memo.clear()
        self._found.clear()
        pred = op.predicate
        if pred is not None:
            found = [f.where(pred, L.width) for f in found]
            found = [f for f in found if len(f.ts)]
        emit_pairs(op, found, L.width)


def _shared(a: np.ndarray, b: np.ndarray, slots: int) -> int:
    """How many pairs of equal slots the two arrays make (the pairs of two released rows)."""
    if slots <= 4 * (len(a) + len(b)) + 4096:
        return int(np.dot(np.bincount(a, minlength=slots), np.bincount(b, minlength=slots)))
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    lo, hi = search_both(np.sort(large), small)
    return int((hi - lo).sum())
