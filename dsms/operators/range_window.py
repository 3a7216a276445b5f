"""Time-based window ``[RANGE T [SLIDE S]]`` (and ``[NOW]`` = ``[RANGE 1]``) over a stream.

Source: SPEC section 3; digest-003 section 3.2 (scope function), digest-004 R-PLAN-05 (a window emits the
inserts and deletes of its relation). An element with timestamp ts is in the window at instants τ whose
evaluation point s = S*floor(τ/S) satisfies s - T < ts <= s, so it is inserted at ceil(ts/S)*S and deleted at
ceil((ts+T)/S)*S (never inserted when those are equal, as in a hopping window). With S = 1 that is the plain
sliding window: insert at ts, delete at ts + T. Events are released in time order once the input frontier
reaches them, so the output stays sorted and expiry happens on heartbeats alone (digest-004 P-7).
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat
from dsms.operators.base import Operator, merge_by_ts
from dsms.queues import Queue


def _ceil_to(x: np.ndarray, s: int) -> np.ndarray:
    return -((-x) // s) * s


class RangeWindowOp(Operator):
    kind = "range_window"

    def __init__(self, range_: int, slide: int | None, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"RANGE {range_}" + (f" SLIDE {slide}" if slide else ""))
        self.range = range_
        self.slide = slide or 1
        self.pending_ins: list[Batch] = []     # future inserts, times ascending
        self.pending_del: list[Batch] = []     # future deletes, times ascending
        self.size = 0                          # tuples in the window now

    def on_batch(self, i: int, batch: Batch) -> None:
        ts = batch.ts
        if self.slide == 1:
            ins_t, del_t = ts, ts + self.range
            keep = slice(None)
            ins = Batch(ins_t, batch.sign, batch.cols)
            dele = Batch(del_t, -batch.sign, batch.cols)
        else:
            ins_t = _ceil_to(ts, self.slide)
            del_t = _ceil_to(ts + self.range, self.slide)
            keep = ins_t < del_t
            ins = Batch(ins_t[keep], batch.sign[keep], [c[keep] for c in batch.cols])
            dele = Batch(del_t[keep], -batch.sign[keep], [c[keep] for c in batch.cols])
        if len(ins):
            self.pending_ins.append(ins)
            self.pending_del.append(dele)
        self.on_frontier(self.frontier())

    def on_frontier(self, f: int) -> None:
        out = []
        for pend in (self.pending_del, self.pending_ins):
            while pend:
                b = pend[0]
                if b.ts[-1] <= f:
                    out.append(pend.pop(0))
                    continue
                cut = int(np.searchsorted(b.ts, f, side="right"))
                if cut:
                    out.append(b.slice(0, cut))
                    pend[0] = b.slice(cut, len(b))
                break
        if out:
            merged = merge_by_ts(out) if len(out) > 1 else out[0]
            self.size += int(merged.sign.sum())
            self.emit(merged)

    @property
    def held_bytes(self) -> int:
        return sum(b.nbytes for b in self.pending_del) + sum(b.nbytes for b in self.pending_ins)


__all__ = ["RangeWindowOp", "concat"]
