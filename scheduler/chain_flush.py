"""Chain-Flush: Chain scheduling under a latency bound.

Source: Babcock, Babu, Datar, Motwani, Thomas, "Operator scheduling in data stream systems", VLDB Journal 2004
(the journal version of BBDM03), section on latency: run Chain, and when a tuple is about to exceed the
latency bound, switch to FIFO until it is out; digest-004 R-SCH-05 and P-15 (Chain can starve operators and
delay results during bursts; the planned fix minimises memory subject to a latency threshold, P2 section 5).

Units. ``latency_bound`` is in the units of the policy's clock. By default the clock is application time: the
newest timestamp written to any queue of the plan, so the "wait" of a batch is how far its timestamp lags
behind the newest input. A driver with a clock of its own (the simulator in ``tests/scheduler``, or an engine
with a processing-time clock) passes ``clock=``. ``cost_scale`` converts ``cost_ns_per_tuple`` into clock
units for the look-ahead: by default 1 with a driver's clock (it counts the units the costs are measured in,
as the simulator does) and 0 with application time, which stands still while the engine runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from control_tables import Knob, Stat

from .base import SchedOperator, oldest_pending
from .chain import ChainPolicy


class ChainFlushPolicy(ChainPolicy):
    """Chain, except that batches at risk of waiting longer than ``latency_bound`` are flushed FIFO-style.

    At each pick the policy estimates, for every waiting batch, when it would be out under FIFO from now on:
    its wait so far, plus the processing time of everything no newer than it, plus its own and one run in
    progress (runs are not preempted), from the measured costs and selectivities (Chain's ``tail_time``:
    time per input tuple until all it leads to has left the plan, every branch of a fan-out included). If
    any batch would exceed the bound, the ready operator holding the oldest batch runs (the deepest one on a
    tie) until no batch is at risk; chain priorities and the user ``priority`` knob wait, the bound comes
    first. Otherwise Chain decides. The bound holds when it is feasible (at least the FIFO latency of the
    workload) and the estimates are good; it is a target, not a guarantee, when costs change faster than
    the statistics follow.
    """

    name = "chain_flush"

    latency_bound = Knob(float, default=100.0, gt=0.0, unit="clock units",
                         doc="longest a batch may wait before it is flushed FIFO-style (application time "
                             "by default)")
    cost_scale = Knob(float | None, default=None, ge=0.0, unit="clock units per cost unit",
                      doc="converts cost_ns_per_tuple into clock units for the look-ahead; None: 1 with a "
                          "clock of the driver's, 0 with application time (which stands still during a run)")
    headroom = Knob(float, default=0.05, ge=0.0, lt=1.0,
                    doc="flush once a batch is estimated to exceed (1 - headroom) * latency_bound, a margin "
                        "for the error of measured costs")
    flushes = Stat(int, default=0, unit="picks", doc="picks made in flush mode")

    def __init__(self, *, clock: Callable[[], float] | None = None, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.clock = clock
        self.longest_run = 0.0
        self._run_started: float | None = None

    def now(self) -> float:
        if self.clock is not None:
            return self.clock()
        stamps = [q.last_ts for q in self.topology.queues.values() if getattr(q, "last_ts", None) is not None]
        return max(stamps, default=-math.inf)

    def waiting(self, ready: Sequence[SchedOperator]) -> list[tuple[float, float]]:
        """Every waiting batch as (timestamp, clock time to process it and all it leads to).

        A reader with ``stamps()`` (timestamp and rows of each pending item) gives exact figures. Otherwise
        all of a reader's pending rows are counted at its oldest timestamp: an over-estimate of the wait of
        its newer items, so the bound still holds, at the price of flushing earlier than needed.
        """
        out = []
        scale = self.cost_scale if self.cost_scale is not None else (1.0 if self.clock is not None else 0.0)
        for op in ready:
            per_tuple = self.tail_time.get(id(op), 0.0) * scale
            for q, r in zip(op.input_queues, op.readers):
                n = r.pending()
                if not n:
                    continue
                stamps = getattr(r, "stamps", None)
                if stamps is not None:
                    out += [(ts, rows * per_tuple) for ts, rows in stamps()]
                    continue
                held = len(q) if hasattr(q, "__len__") else 0
                rows = q.tuples * n / held if held else r.peek_rows()
                oldest = oldest_pending(op)
                out.append((oldest, rows * per_tuple))
        return out

    def flush_target(self, now: float, waiting: list[tuple[float, float]]) -> float | None:
        """The newest timestamp whose batch would finish later than the bound under FIFO from now on, or None.

        Under FIFO a batch is out once every batch no newer than it has been processed, after the run in
        progress: ``now - ts + (work of batches stamped <= ts) + longest run``.
        """
        cum, target, bound = self.longest_run, None, self.latency_bound * (1.0 - self.headroom)
        for ts, work in sorted(waiting):
            cum += work
            if now - ts + cum > bound:
                target = ts
        return target

    def at_risk(self, now: float, ready: Sequence[SchedOperator]) -> float | None:
        """``flush_target`` of the batches waiting before ``ready``; first a cheap upper bound (every held
        tuple of every input, at the oldest stamp anywhere) that settles most picks without a queue scan."""
        scale = self.cost_scale if self.cost_scale is not None else (1.0 if self.clock is not None else 0.0)
        oldest, work = math.inf, self.longest_run
        for op in ready:
            oldest = min(oldest, oldest_pending(op))
            work += sum(q.tuples for q in op.input_queues) * self.tail_time.get(id(op), 0.0) * scale
        if now - oldest + work <= self.latency_bound * (1.0 - self.headroom):
            return None
        return self.flush_target(now, self.waiting(ready))

    def pick(self, ready: Any) -> SchedOperator | None:
        if not ready:
            return None
        self._sync(ready)
        if self._dirty:
            self.recompute()
        now = self.now()
        target = self.at_risk(now, ready)
        if target is not None:
            self.picks += 1
            self.flushes += 1
            holders = [o for o in ready if oldest_pending(o) <= target]
            op = min(holders or ready, key=self.fifo_key)
        else:
            op = super().pick(ready)
        self._run_started = now if self.clock is not None else None
        return op

    def on_ran(self, op: SchedOperator, consumed: int) -> None:
        super().on_ran(op, consumed)
        if self._run_started is not None and self.clock is not None:      # a run this policy picked
            self.longest_run = max(self.longest_run, self.clock() - self._run_started)
        self._run_started = None
