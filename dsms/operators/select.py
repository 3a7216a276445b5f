"""Select (σ): keep the elements whose predicate holds; vectorised over the batch.

Source: digest-004 R-PLAN-04; digest-002a section 2.10 (selection is snapshot-reducible, so it applies to
positive and negative elements alike).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dsms.batch import Batch
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import Operator, colmap
from dsms.queues import Queue


class SelectOp(Operator):
    kind = "select"

    def __init__(self, predicate: CompiledExpr, inp: Queue, out: Queue, condition: Any = None) -> None:
        """``condition`` is the predicate's expression tree (over ``$n`` column positions), kept for the load
        shedder: it reads the comparisons with constants in it to find a selection's promising regions."""
        super().__init__([inp], out, predicate.text)
        self.predicate = predicate
        self.condition = condition

    def on_batch(self, i: int, batch: Batch) -> None:
        n = len(batch)
        mask = self.predicate(colmap(batch), n)
        # one pass (``mask.all()`` was another); the method, as ``np.flatnonzero`` adds two Python wrappers
        keep = mask.nonzero()[0] if type(mask) is np.ndarray and mask.ndim == 1 else np.flatnonzero(mask)
        if len(keep) == n:
            self.emit(batch)
        elif len(keep):
            self.emit(batch.take(keep))
