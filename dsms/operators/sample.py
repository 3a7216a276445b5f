"""Sample: keep each stream element independently with probability p/100, before windowing.

Source: digest-004 R-CQL-08 and pitfall P-9 (Bernoulli, not a reservoir). The generator is seeded from the
engine's seed and the operator's id, so a run is reproducible. The drop itself is the load shedder's
(``dsms.operators.shed.RandomDrop``): one Bernoulli sampler for both.
"""

from __future__ import annotations

from dsms.batch import Batch
from dsms.operators.base import Operator
from dsms.operators.shed import RandomDrop
from dsms.queues import Queue


class SampleOp(Operator):
    kind = "sample"

    def __init__(self, percent: float, seed: int, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"{percent}%")
        self.p = percent / 100.0
        self.drop = RandomDrop(self.p, seed)

    def on_batch(self, i: int, batch: Batch) -> None:
        if self.p > 0.0:
            self.emit(self.drop.keep(batch))
