"""Select (σ): keep the elements whose predicate holds; vectorised over the batch.

Source: digest-004 R-PLAN-04; digest-002a section 2.10 (selection is snapshot-reducible, so it applies to
positive and negative elements alike).
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import Operator, colmap
from dsms.queues import Queue


class SelectOp(Operator):
    kind = "select"

    def __init__(self, predicate: CompiledExpr, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, predicate.text)
        self.predicate = predicate

    def on_batch(self, i: int, batch: Batch) -> None:
        n = len(batch)
        keep = np.flatnonzero(self.predicate(colmap(batch), n))    # one pass; ``mask.all()`` was another
        if len(keep) == n:
            self.emit(batch)
        elif len(keep):
            self.emit(batch.take(keep))
