"""Select (σ): keep the elements whose predicate holds; vectorised over the batch.

Source: digest-004 R-PLAN-04; digest-002a section 2.10 (selection is snapshot-reducible, so it applies to
positive and negative elements alike).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsms.batch import Batch
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import Operator, column_reader
from dsms.queues import Queue


def keeps_label(keep) -> str:
    """What ends a selection's label when it outputs only some of its input's columns (``Filter.keep``), as
    ``SelectOp`` writes it.

    >>> keeps_label((0, 2)), keeps_label(None)
    (' [keeps $0, $2]', '')
    """
    if keep is None:
        return ""
    return f" [keeps {', '.join(f'${c}' for c in keep) or 'no column'}]"


class SelectOp(Operator):
    kind = "select"

    def __init__(self, predicate: CompiledExpr, inp: Queue, out: Queue, condition: Any = None,
                 columns: list[int] | None = None) -> None:
        """``condition`` is the predicate's expression tree (over ``$n`` column positions), kept for the load
        shedder: it reads the comparisons with constants in it to find a selection's promising regions.
        ``columns``: the input columns it outputs, in order (None: all); placed by projection pushdown
        (``Filter.keep``), so the rows kept are copied only in the columns read above, and the EXPLAIN label
        ends with them (``[keeps $0, $2]``), the operator's output schema."""
        super().__init__([inp], out, predicate.text + keeps_label(columns))
        self.predicate = predicate
        self.condition = condition
        self.columns = columns
        self._read = column_reader(predicate.columns)      # the map of only the columns the predicate reads

    def on_batch(self, i: int, batch: Batch) -> None:
        out = self.picked(batch)
        if out is not None:
            self.output.put(out)           # not ``emit``: ``out`` has rows

    def picked(self, batch: Batch) -> Batch | None:
        """The rows of ``batch`` the predicate keeps, in the columns kept (None: no row). Also what a join
        that runs this selection inside itself calls (``JoinOp.fuse_select``)."""
        n = len(batch.ts)
        mask = self.predicate(self._read(batch.cols), n)
        # one pass (``mask.all()`` was another); the method, as ``np.flatnonzero`` adds two Python wrappers
        keep = mask.nonzero()[0] if type(mask) is np.ndarray and mask.ndim == 1 else np.flatnonzero(mask)
        columns = self.columns
        if not len(keep):
            return None
        if columns is None:
            return batch if len(keep) == n else batch.take(keep)
        cols = batch.cols
        if len(keep) == n:                   # every row: the kept columns as they are, with their byte counts
            out = Batch(batch.ts, batch.sign, [cols[c] for c in columns])
            known = batch.col_bytes
            if known is not None:
                out.col_bytes = [known[c] for c in columns]
            return out
        return Batch(batch.ts[keep], batch.sign[keep], [cols[c][keep] for c in columns])
