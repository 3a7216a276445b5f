"""Random drops: the Bernoulli sampler that ``SAMPLE(p)`` and the load shedder's shedders share, and the
``Shedder`` entity the load shedder places on an edge of the shared plan.

Source: digest-004 R-APX-05/06 and pitfalls P-9 (Bernoulli, independent per element, not a reservoir) and
P-11 (a shedder on a shared edge affects every query below it); Babcock, Datar, Motwani, "Load Shedding for
Aggregation Queries over Data Streams", ICDE 2004 (random drops placed as early as possible, at rates that
minimise the largest weighted relative error). docs/approximation.md says what is dropped when.

A shedder sits on one edge: the read cursor of one operator on one queue (``QueueReader.shed``), so placing
or removing it needs no change to the plan, no extra scheduling step and no queue, works on an edge into a
window fused into a join as on any other, and leaves the other readers of a shared queue untouched (which is
how a query that needs no shedding keeps its exact input while its neighbour on the same queue is shed).
"""

from __future__ import annotations

import numpy as np

from control_tables import Entity, Knob, Stat
from dsms.batch import Batch, Heartbeat


class RandomDrop:
    """Keeps each row independently with probability ``rate`` (a seeded generator: a run is reproducible).

    >>> d = RandomDrop(0.5, seed=1)
    >>> b = d.keep(Batch(np.arange(1000), np.ones(1000, np.int8), []))
    >>> 400 < len(b) < 600 and d.dropped == 1000 - len(b)
    True
    """

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = np.random.default_rng(seed)
        self.kept = 0
        self.dropped = 0

    def keep(self, batch: Batch) -> Batch:
        """The rows kept (the batch itself at rate 1)."""
        n = len(batch)
        if self.rate >= 1.0:
            self.kept += n
            return batch
        if self.rate <= 0.0:
            self.dropped += n
            return batch.take(np.zeros(n, dtype=bool))
        out = batch.take(self.rng.random(n) < self.rate)
        self.kept += len(out)
        self.dropped += n - len(out)
        return out


class Shedder(Entity):
    """A random drop on one edge of the plan, placed and tuned by the load shedder (``dsms/load_shedder.py``)."""

    prefix = "shed"
    kind = "shedder"
    edge = Stat(str, default="", doc="the queue and the operator whose reading of it this shedder thins")
    queries = Stat(list, default=[], doc="the queries whose results it makes approximate")
    method = Stat(str, default="random", doc="random (each tuple kept with probability sampling_rate) or "
                  "promising (a selection's predicate evaluated on the regions most likely to match, up to "
                  "sampling_rate of the input: dsms/operators/promising.py)")
    sampling_rate = Knob(float, default=1.0, gt=0.0, le=1.0, doc="fraction of tuples kept; writing it pins "
                         "the rate (auto turns false)")
    auto = Knob(bool, default=True, doc="whether the load shedder sets sampling_rate (false: the rate "
                "written stays until auto is set again)")
    dropped = Stat(int, default=0, unit="tuples", doc="tuples dropped")
    kept = Stat(int, default=0, unit="tuples", doc="tuples let through")
    rel_error = Stat(float, default=0.0, doc="largest relative error bound it currently gives a query it "
                     "affects (at confidence)")
    confidence = Stat(float, default=0.95, doc="probability with which the error bound holds")

    def __init__(self, reader, label: str, seed: int, rate: float = 1.0, drop=None) -> None:
        """``drop`` is what thins the edge (a ``RandomDrop`` at ``rate`` unless given: the load shedder gives
        a selection a ``PromisingDrop``)."""
        self.reader = reader
        self.edge = label
        self.drop = drop if drop is not None else RandomDrop(rate, seed)
        self.method = getattr(self.drop, "method", "random")
        self._setting = True
        self.sampling_rate = rate
        self._setting = False

    def on_set_sampling_rate(self, old: float, new: float) -> None:
        self.drop.rate = new
        if not self._setting:
            self.auto = False

    def set_rate(self, rate: float) -> None:
        """The load shedder's own write (keeps ``auto``)."""
        self._setting = True
        try:
            self.sampling_rate = rate
        finally:
            self._setting = False
        self.drop.rate = rate

    def thin(self, item):
        """What the reader gets instead of ``item``: a batch's kept rows, or a heartbeat at its last
        timestamp when none is kept (the frontier still moves)."""
        if type(item) is not Batch:
            return item
        out = self.drop.keep(item)
        self.kept, self.dropped = self.drop.kept, self.drop.dropped
        if not len(out):
            return Heartbeat(int(item.ts[-1]))
        return out
