"""Join (⋈) of two relations given as delta streams: a symmetric hash join, vectorised per run of deltas.

Source: digest-004 R-PLAN-06 (one synopsis per input, hashed on the join key) and P-14 (deletes retract
results); digest-002a section 2.15 (the positive/negative approach): Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR.

The binary base releases the deltas of both sides up to the common frontier. Applied one by one in time
order, each delta would join the other side's state as it was then; in bulk that is: each side's deltas
against the other side's stored state, plus every pair of new deltas from the two sides, stamped with the
later timestamp. Each side's state is a table of signed rows kept sorted by key code; probe keys are located
with a binary search and the matching pairs gathered with index arithmetic. A stored delete simply joins with the opposite sign,
so the table may hold a row and its delete until it is compacted (netted) once such pairs make up half
Equi-join columns are the key; any other predicate filters the joined rows.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import colmap
from dsms.operators.binary import BinaryOperator
from dsms.queues import Queue
from synopses.hash_index import HashIndexSynopsis
from synopses.rowcodes import row_codes


class JoinOp(BinaryOperator):
    kind = "join"

    def __init__(self, left: Queue, right: Queue, out: Queue, left_keys: tuple[int, ...],
                 right_keys: tuple[int, ...], predicate: CompiledExpr | None, dtypes: list) -> None:
        label = " AND ".join(f"L${a} = R${b}" for a, b in zip(left_keys, right_keys))
        if predicate is not None:
            label = (label + " AND " if label else "") + predicate.text
        super().__init__([left, right], out, label or "cross product")
        self.keys = (tuple(left_keys), tuple(right_keys))
        self.predicate = predicate
        self.dtypes = dtypes
        self.sides = (HashIndexSynopsis(), HashIndexSynopsis())
        self.synopses = list(self.sides)
        self.key_ids: dict[tuple, int] = {}
        self.int_keys = False


    def _codes(self, side: int, batch: Batch) -> np.ndarray:
        """An int64 per row, equal for equal join keys across both sides."""
        keys = self.keys[side]
        n = len(batch)
        if not keys:
            return np.zeros(n, dtype=np.int64)
        cols = [batch.cols[k] for k in keys]
        if len(cols) == 1 and cols[0].dtype.kind in "iu":
            return cols[0].astype(np.int64, copy=False)
        codes = row_codes(cols)
        if codes is None:
            tuples = list(zip(*[c.tolist() for c in cols]))
            return np.fromiter((self.key_ids.setdefault(t, len(self.key_ids)) for t in tuples),
                               dtype=np.int64, count=n)
        uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
        ukeys = zip(*[c[first].tolist() for c in cols])
        ids = np.fromiter((self.key_ids.setdefault(t, len(self.key_ids)) for t in ukeys), dtype=np.int64,
                          count=len(uniq))
        return ids[inv.reshape(-1)]

    def process(self, parts: list[tuple[int, Batch]]) -> None:
        """Join everything released at once: each side's deltas against the other side's state, plus the
        pairs of deltas from both sides, stamped with the later of the two timestamps (the one that would
        have found the other, had they been applied one by one in time order)."""
        got = dict(parts)
        codes = {side: self._codes(side, b) for side, b in got.items()}
        outs = []
        for side, b in got.items():
            other = self.sides[1 - side]
            if len(other):
                table = Batch(other.ts, other.sign, other.cols)
                outs.append(self._pairs(side, b, codes[side], table, other.codes, None))
        if len(got) == 2:
            rb = got[1]
            o = np.argsort(codes[1], kind="stable")
            outs.append(self._pairs(0, got[0], codes[0], rb.take(o), codes[1][o], later=True))
        outs = [o for o in outs if o is not None and len(o)]
        if outs:
            out = outs[0] if len(outs) == 1 else concat(outs)
            if len(outs) > 1 or len(got) == 2:         # pairs of new deltas carry the later timestamp
                out = out.take(np.argsort(out.ts, kind="stable"))
            if self.predicate is not None:
                out = out.take(self.predicate(colmap(out), len(out)))
            self.emit(out)
        for side, b in got.items():
            self._store(side, b, codes[side])

    def _pairs(self, side: int, probe: Batch, pcodes: np.ndarray, table: Batch, tcodes: np.ndarray,
               later: bool | None) -> Batch | None:
        """Rows of ``probe`` joined with the rows of ``table`` (sorted by ``tcodes``) with equal key codes."""
        lo = np.searchsorted(tcodes, pcodes, side="left")
        hi = np.searchsorted(tcodes, pcodes, side="right")
        cnt = hi - lo
        total = int(cnt.sum())
        if not total:
            return None
        pidx = np.repeat(np.arange(len(probe)), cnt)
        tidx = np.arange(total) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        mine = probe.take(pidx)
        theirs = table.take(tidx)
        cols = mine.cols + theirs.cols if side == 0 else theirs.cols + mine.cols
        ts = np.maximum(mine.ts, theirs.ts) if later else mine.ts
        return Batch(ts, (mine.sign * theirs.sign).astype(np.int8), cols)

    def _store(self, side: int, batch: Batch, codes: np.ndarray) -> None:
        self.sides[side].insert(batch.ts, batch.sign, batch.cols, codes)
