"""The pairs one release of an insert-only join finds (``append_join.py``, ``append_dense.py``): per probe, the
released rows' positions and the other input's rows they met, with their instants, and their emission in time
order in the columns the join keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dsms.batch import Batch
from synopses.sort_order import stable_argsort

if TYPE_CHECKING:
    from dsms.expr.compile import CompiledExpr
    from dsms.operators.join import JoinOp
    from synopses.append_index import AppendIndexSynopsis


def emit_pairs(op: JoinOp, found: list[Pairs], width: int) -> None:
    """Emit the pairs of one release (at most two sets, each found by one probe) in time order, in the columns
    the join keeps; ``width``: the left input's columns."""
    if not found:
        return
    found = [f.in_time_order() for f in found]
    keep = op.keep
    if len(found) == 1:
        ts, cols = found[0].ts, found[0].columns(width, keep)
    else:                                     # two sets in time order each: merged by one search
        a, b = found
        n = len(a.ts) + len(b.ts)
        at_a = np.searchsorted(b.ts, a.ts, side="right") + np.arange(len(a.ts))
        mask = np.ones(n, dtype=bool)
        mask[at_a] = False
        at_b = np.flatnonzero(mask)
        ts = np.empty(n, dtype=np.int64)
        ts[at_a], ts[at_b] = a.ts, b.ts
        cols = []
        for ca, cb in zip(a.columns(width, keep), b.columns(width, keep)):
            c = np.empty(n, dtype=np.result_type(ca.dtype, cb.dtype))
            c[at_a], c[at_b] = ca, cb
            cols.append(c)
    op.emit(Batch(ts, np.ones(len(ts), dtype=np.int8), cols))


class Pairs:
    """Pairs of released rows (``mine``: the batch's columns, ``at``: positions in it) with held or just added
    rows of the other input (``index``, ``rows``), entering at ``ts``; ``left``: the released rows are the left
    input's. Columns are gathered per pair set: the released rows' from their batch, the others' from the
    index."""

    __slots__ = ("ts", "mine", "at", "index", "rows", "left")

    def __init__(self, ts: np.ndarray, mine: list[np.ndarray], at: np.ndarray, index: AppendIndexSynopsis,
                 rows: np.ndarray, left: bool) -> None:
        self.ts, self.mine, self.at, self.index, self.rows, self.left = ts, mine, at, index, rows, left

    def columns(self, width_l: int, which: list[int] | None = None) -> list[np.ndarray]:
        """The joined rows' columns (left, then right; those numbered in ``which`` when given, in that order)."""
        k = len(self.mine)
        if which is None:
            mine = [c[self.at] for c in self.mine]
            theirs = self.index.gather(self.rows)
            return mine + theirs if self.left else theirs + mine
        off = 0 if self.left else width_l                  # where the released rows' columns start
        out: list = [None] * len(which)
        held = [(i, j - (width_l if self.left else 0)) for i, j in enumerate(which) if not off <= j < off + k]
        for i, j in enumerate(which):
            if off <= j < off + k:
                out[i] = self.mine[j - off][self.at]
        if held:
            for (i, _), c in zip(held, self.index.columns([j for _, j in held], self.rows)):
                out[i] = c
        return out

    def in_time_order(self) -> Pairs:
        """These pairs ordered by instant (stable), or themselves when they are."""
        ts = self.ts
        if (ts[1:] >= ts[:-1]).all():
            return self
        o = stable_argsort(ts)
        return Pairs(ts[o], self.mine, self.at[o], self.index, self.rows[o], self.left)

    def where(self, pred: CompiledExpr, width_l: int) -> Pairs:
        """The pairs for which ``pred`` holds, evaluated over the columns it reads alone."""
        n = len(self.ts)
        keys = sorted(pred.columns)
        cols = self.columns(width_l, [int(key[1:]) for key in keys])
        keep = np.flatnonzero(pred(dict(zip(keys, cols)), n))
        if len(keep) == n:
            return self
        return Pairs(self.ts[keep], self.mine, self.at[keep], self.index, self.rows[keep], self.left)
