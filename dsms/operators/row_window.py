"""Tuple-based window ``[ROWS N]``: the N latest elements, ties at one timestamp in arrival order.

Source: SPEC section 3; digest-003 section 3.5 (arrival-order tie-breaking), digest-004 R-PLAN-09. Each
arriving element is inserted at its timestamp and evicts the element N places before it, at the same
timestamp: a batch evicts the oldest elements of (window + batch), taken from the front of the window's list of
chunks (views of the input batches, never one array copied per batch).
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
        self.held = 0                                        # elements in the window

    def on_batch(self, i: int, batch: Batch) -> None:
        n = len(batch)
        chunks = self.store.batches                          # the window, oldest first: views of input batches
        held = self.held
        # element j of the batch evicts element held + j - rows of (window + batch): together the oldest m
        m = max(0, held + n - self.rows)
        chunks.append(batch)
        gone = self._pop_oldest(m)
        self.held = held + n - m
        ins = Batch(batch.ts, np.ones(n, dtype=np.int8), batch.cols)
        if m:
            ok = np.arange(held, held + n) >= self.rows
            dele = Batch(batch.ts[ok], -np.ones(m, dtype=np.int8), gone.cols)
            # interleave: element j's insert, then the delete it causes (same timestamp)
            both = concat([ins, dele])
            key = np.concatenate([np.arange(n) * 2, np.nonzero(ok)[0] * 2 + 1])
            out = both.take(np.argsort(key, kind="stable"))
        else:
            out = ins
        if self.store.memory is not None and self.store.over_budget():
            # STREAM's w = floor(M / tuple size): the oldest leave early, at this batch's last instant
            keep = int(self.store.memory // (self.store.row_bytes() or 1.0))
            cut = max(0, self.held - keep)
            if cut:
                gone = self._pop_oldest(cut)
                self.held -= cut
                self.store.evicted += cut
                self.store.approximate = True
                t = np.full(cut, int(batch.ts[-1]), dtype=np.int64)
                out = concat([out, Batch(t, -np.ones(cut, dtype=np.int8), gone.cols)])
        self.emit(out)

    def _pop_oldest(self, m: int) -> Batch | None:
        """Remove the ``m`` oldest elements from the window's chunks and return them as one batch. Only the
        chunks they come from are touched, so a batch costs O(batch), however many rows the window holds (one
        array of the whole window, concatenated with each batch, cost O(window) per batch)."""
        if not m:
            return None
        chunks = self.store.batches
        parts, k = [], 0
        while m:
            b = chunks[k]
            if len(b) <= m:
                parts.append(b)
                m -= len(b)
                k += 1
            else:
                parts.append(b.slice(0, m))
                chunks[k] = b.slice(m, len(b))
                m = 0
        del chunks[:k]
        return concat(parts) if len(parts) > 1 else parts[0]
