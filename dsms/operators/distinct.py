"""Duplicate elimination (δ) over a relation: a row is in the output while its multiplicity is positive.

Source: digest-004 R-PLAN-04; digest-003 section 3.1 (per-chunk distinct is wrong: the state must span the
whole relation).
"""

from __future__ import annotations

from dsms.batch import Batch, from_rows
from dsms.operators.base import Operator
from dsms.queues import Queue
from synopses.base import deep_bytes
from synopses.state import StateSynopsis


class DistinctOp(Operator):
    kind = "distinct"

    def __init__(self, inp: Queue, out: Queue, dtypes: list) -> None:
        super().__init__([inp], out)
        self.counts: dict[tuple, int] = {}
        self.dtypes = dtypes
        self.synopses = [StateSynopsis("distinct rows", lambda: len(self.counts),
                                       lambda: deep_bytes(self.counts))]

    @property
    def size(self) -> int:
        return len(self.counts)

    def on_batch(self, i: int, batch: Batch) -> None:
        counts = self.counts
        out_ts, out_sign, out_rows = [], [], []
        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
            old = counts.get(row, 0)
            new = old + s
            if new:
                counts[row] = new
            else:
                del counts[row]
            if old == 0 and new > 0:
                out_ts.append(t)
                out_sign.append(1)
                out_rows.append(row)
            elif old > 0 and new == 0:
                out_ts.append(t)
                out_sign.append(-1)
                out_rows.append(row)
        if out_rows:
            self.emit(from_rows(out_ts, out_sign, out_rows, self.dtypes))
