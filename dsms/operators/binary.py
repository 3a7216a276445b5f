"""The base of two-input operators: deltas are applied in timestamp order across both inputs.

A delta at instant t from one input may be applied only when the other input has reached t (its frontier is
at least t): otherwise a later-arriving delta with a smaller timestamp from the other side would meet state
from its future. Within one instant the order does not matter, because only the net change of an instant is
ever observed (SPEC section 3; digest-004 P-6). So each run releases the buffered deltas with ts <= the
smaller frontier, merged by timestamp, left before right at equal timestamps.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat
from dsms.operators.base import Operator


class BinaryOperator(Operator):
    def __init__(self, inputs, output, label: str = "") -> None:
        super().__init__(inputs, output, label)
        self.pending: list[list[Batch]] = [[] for _ in inputs]

    def on_batch(self, i: int, batch: Batch) -> None:
        self.pending[i].append(batch)

    def held_rows(self) -> int:
        return sum(len(b) for pend in self.pending for b in pend)

    def held_bytes(self) -> int:
        return sum(b.nbytes for pend in self.pending for b in pend)

    def held_stamps(self) -> list[tuple[int, int]]:
        """(timestamp, rows) per instant of the deltas held until the other input passes them, each side's in
        time order (read only)."""
        out: list[tuple[int, int]] = []
        for pend in self.pending:
            for b in pend:
                if len(b):
                    ts, rows = np.unique(b.ts, return_counts=True)
                    out += zip(ts.tolist(), rows.tolist())
        return out

    def take_pending(self, side: int, f: int) -> Batch | None:
        """Remove and return the deltas of input ``side`` with timestamps up to ``f`` (None if there are none)."""
        pend = self.pending[side]
        if not pend:
            return None
        b = concat(pend) if len(pend) > 1 else pend[0]
        if b.ts[-1] <= f:                  # all of it (most runs): no search
            self.pending[side] = []
            return b
        cut = int(b.ts.searchsorted(f, side="right"))
        self.pending[side] = [b.slice(cut, len(b))] if cut < len(b) else []
        if not cut:
            return None
        return b.slice(0, cut) if cut < len(b) else b

    def on_frontier(self, f: int) -> None:
        parts = [(side, b) for side in (0, 1) if (b := self.take_pending(side, f)) is not None]
        if parts:
            self.process(parts)

    def process(self, parts: list[tuple[int, Batch]]) -> None:
        """Apply the released deltas; ``parts`` holds (side, batch) for each side that has some."""
        if len(parts) == 1:
            side, b = parts[0]
            self.apply_run(side, b)
            return
        (s0, b0), (s1, b1) = parts
        # split into runs of one side, in time order, left first at equal timestamps
        ts = np.concatenate([b0.ts, b1.ts])
        side = np.concatenate([np.zeros(len(b0), np.int8), np.ones(len(b1), np.int8)])
        order = np.lexsort((side, ts))
        sides = side[order]
        bounds = np.nonzero(np.diff(sides))[0] + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(order)]])
        n0 = len(b0)
        for s, e in zip(starts.tolist(), ends.tolist()):
            idx = order[s:e]
            if sides[s] == 0:
                self.apply_run(s0, b0.take(idx))
            else:
                self.apply_run(s1, b1.take(idx - n0))

    def apply_run(self, side: int, batch: Batch) -> None:
        raise NotImplementedError
