"""Sample: keep each stream element independently with probability p/100, before windowing.

Source: digest-004 R-CQL-08 and pitfall P-9 (Bernoulli, not a reservoir). The generator is seeded from the
engine's seed and the operator's id, so a run is reproducible.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from dsms.operators.base import Operator
from dsms.queues import Queue


class SampleOp(Operator):
    kind = "sample"

    def __init__(self, percent: float, seed: int, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"{percent}%")
        self.p = percent / 100.0
        self.rng = np.random.default_rng(seed)

    def on_batch(self, i: int, batch: Batch) -> None:
        if self.p >= 1.0:
            self.emit(batch)
        elif self.p > 0.0:
            self.emit(batch.take(self.rng.random(len(batch)) < self.p))
