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

    def announce_frontier(self) -> None:
        """Not before the snapshot, whose rows are stamped below the input's frontier: ``run`` passes the
        frontier on after emitting them."""

    def run(self, budget: int = 1 << 30) -> int:
        if self.snapshot is not None:
            self.emit(self.snapshot)
            self.snapshot = None
            done = super().run(budget)
            if not done:
                self.forward_heartbeat()
            return done or 1
        return super().run(budget)

    def on_batch(self, i: int, batch: Batch) -> None:
        self.emit(batch)
