"""Tuple-based window ``[ROWS N]``: the N latest elements, ties at one timestamp in arrival order.

Source: SPEC section 3; digest-003 section 3.5 (arrival-order tie-breaking), digest-004 R-PLAN-09. Each
arriving element is inserted at its timestamp and evicts the element N places before it, at the same
timestamp; the eviction of a batch is computed with one index operation over (window + batch).
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat
from dsms.operators.base import Operator
from dsms.queues import Queue
from synopses.window import WindowSynopsis


class RowWindowOp(Operator):
    kind = "row_window"

    def __init__(self, rows: int, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"ROWS {rows}")
        self.rows = rows
        self.store = WindowSynopsis()
        self.synopses = [self.store]

    def on_batch(self, i: int, batch: Batch) -> None:
        n = len(batch)
        buf = self.store.batches[0] if self.store.batches else None
        held = len(buf) if buf is not None else 0
        combined = concat([buf, batch]) if held else batch
        evict = np.arange(held, held + n) - self.rows        # index into combined, per new element
        ok = evict >= 0
        ins = Batch(batch.ts, np.ones(n, dtype=np.int8), batch.cols)
        if ok.any():
            gone = combined.take(evict[ok])
            dele = Batch(batch.ts[ok], -np.ones(int(ok.sum()), dtype=np.int8), gone.cols)
            # interleave: element j's insert, then the delete it causes (same timestamp)
            both = concat([ins, dele])
            key = np.concatenate([np.arange(n) * 2, np.nonzero(ok)[0] * 2 + 1])
            out = both.take(np.argsort(key, kind="stable"))
        else:
            out = ins
        start = max(0, len(combined) - self.rows)
        kept = combined.slice(start, len(combined))
        self.store.batches[:] = [kept]
        if self.store.memory is not None and self.store.over_budget():
            # STREAM's w = floor(M / tuple size): the oldest leave early, at this batch's last instant
            keep = int(self.store.memory // (self.store.row_bytes() or 1.0))
            cut = max(0, len(kept) - keep)
            if cut:
                gone = kept.slice(0, cut)
                self.store.batches[:] = [kept.slice(cut, len(kept))]
                self.store.evicted += cut
                self.store.approximate = True
                t = np.full(cut, int(batch.ts[-1]), dtype=np.int64)
                out = concat([out, Batch(t, -np.ones(cut, dtype=np.int8), gone.cols)])
        self.emit(out)

