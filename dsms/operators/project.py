"""Project (π): compute the output columns from expressions, duplicate-preserving; vectorised.

Source: digest-004 R-PLAN-04 (duplicate-preserving projection has no synopsis).
"""

from __future__ import annotations

from dsms.batch import Batch
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import Operator, column_reader
from dsms.queues import Queue


class ProjectOp(Operator):
    kind = "project"

    def __init__(self, exprs: list[CompiledExpr | int], inp: Queue, out: Queue, note: str = "") -> None:
        """``exprs`` holds a compiled expression, or the input column number for a plain column copy; ``note``
        ends the EXPLAIN label (``[pushed]``: placed by projection pushdown)."""
        label = ", ".join(f"${e}" if isinstance(e, int) else e.text for e in exprs)
        super().__init__([inp], out, f"{label} {note}" if note else label)
        self.exprs = exprs
        self.copied = [e if isinstance(e, int) else None for e in exprs]    # input column of a plain copy
        # decided once, not per batch: the map of only the columns the expressions read (None: all copies)
        computed = [e for e in exprs if not isinstance(e, int)]
        self._read = column_reader(frozenset().union(*(e.columns for e in computed))) if computed else None

    def on_batch(self, i: int, batch: Batch) -> None:
        self.output.put(self.picked(batch))  # not ``emit``: a batch read from a queue has rows

    def picked(self, batch: Batch) -> Batch:
        """``batch`` in this projection's columns. Also what a join whose inputs never delete calls when it runs
        this projection inside itself, as it runs a selection (``JoinOp.fuse_select``: NEXMark q4's and q9's
        pushed projections of Auction and Bid, two operator runs a push fewer)."""
        src = batch.cols
        read = self._read
        if read is None:
            cols = [src[j] for j in self.copied]
        else:
            cm, n = read(src), len(batch.ts)
            cols = [e(cm, n) if j is None else src[j] for e, j in zip(self.exprs, self.copied)]
        out = Batch(batch.ts, batch.sign, cols)
        known = batch.col_bytes
        if known is not None:                # the copied columns' byte counts come along (Batch.nbytes)
            out.col_bytes = [None if j is None else known[j] for j in self.copied]
        return out
