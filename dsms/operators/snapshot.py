"""Snapshot: a relation's current contents, then its changes, for a query registered after the relation
already holds rows.

Without it, a query registered after a relation was loaded would see the relation as empty and, worse, see
deletes of rows it never saw. The snapshot rows carry the timestamps of the inserts that are still live, in
timestamp order, followed by whatever the relation's queue delivers next.
"""

from __future__ import annotations

from dsms.batch import Batch
from dsms.operators.base import Operator
from dsms.queues import Queue


class SnapshotOp(Operator):
    kind = "snapshot"

    def __init__(self, snapshot: Batch, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"{len(snapshot)} rows")
        self.snapshot: Batch | None = snapshot

    def ready(self) -> bool:
        return self.snapshot is not None or super().ready()

    def run(self, budget: int = 1 << 30) -> int:
        if self.snapshot is not None:
            self.emit(self.snapshot)
            self.snapshot = None
        return super().run(budget) or 1

    def on_batch(self, i: int, batch: Batch) -> None:
        self.emit(batch)
