"""Chain-Flush: Chain scheduling under a latency bound.

Source: Babcock, Babu, Datar, Motwani, Thomas, "Operator scheduling in data stream systems", VLDB Journal 2004
(the journal version of BBDM03), section on latency: run Chain, and when a tuple is about to exceed the
latency bound, switch to FIFO until it is out; digest-004 R-SCH-05 and P-15 (Chain can starve operators and
delay results during bursts; the planned fix minimises memory subject to a latency threshold, P2 section 5).

Units. ``latency_bound`` is in the units of the policy's clock. By default the clock is application time: the
newest timestamp written to any queue of the plan, so the "wait" of a batch is how far its timestamp lags
behind the newest input. A driver with a clock of its own (the simulator in ``tests/scheduler``, or an engine
with a processing-time clock) passes ``clock=``; ``cost_scale`` converts ``cost_ns_per_tuple`` into clock
units for the look-ahead (1.0 when the clock counts the same units as the costs, 0 to switch it off).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from control_tables import Knob, Stat

from .base import SchedOperator, oldest_pending
from .chain import ChainPolicy
from .progress_chart import paths, time_to_end


class ChainFlushPolicy(ChainPolicy):
    """Chain, except that a batch at risk of waiting longer than ``latency_bound`` is flushed FIFO-style.

    A batch waiting before operator ``op`` is at risk when ``now - ts + lookahead(op) > latency_bound``, where
    the look-ahead is the time it still needs to leave the plan (rows per waiting item times the chart time
    from ``op`` to the end, in clock units) plus the longest single run seen (runs are not preempted). While
    some batch is at risk, the ready operator holding the oldest at-risk batch runs (the deepest one on a
    tie), ignoring chain priorities and the user ``priority`` knob: the bound comes first. A batch at risk
    stays at risk until it is out (the clock only moves forward), which is the "flush until it is out" rule.
    The bound holds when it is feasible: at least the FIFO latency of the workload.
    """

    name = "chain_flush"

    latency_bound = Knob(float, default=100.0, gt=0.0, unit="clock units",
                         doc="longest a batch may wait before it is flushed FIFO-style (application time "
                             "by default)")
    cost_scale = Knob(float, default=1.0, ge=0.0, unit="clock units per cost unit",
                      doc="converts cost_ns_per_tuple into clock units for the flush look-ahead (0: none)")
    flushes = Stat(int, default=0, unit="picks", doc="picks made in flush mode")

    def __init__(self, *, clock: Callable[[], float] | None = None, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.clock = clock
        self.tail_time: dict[int, float] = {}     # per input tuple, time to leave the plan from each operator
        self.longest_run = 0.0
        self._run_started: float | None = None

    def now(self) -> float:
        if self.clock is not None:
            return self.clock()
        stamps = [q.last_ts for q in self.topology.queues.values() if getattr(q, "last_ts", None) is not None]
        return max(stamps, default=-math.inf)

    def recompute(self) -> None:
        super().recompute()
        costs, tail = self.costs(), {}
        for path in paths(self.topology):
            stages = self.stages(path, costs)
            for k, (op, _) in enumerate(path):
                tail[id(op)] = max(tail.get(id(op), 0.0), time_to_end(stages[k:]))
        self.tail_time = tail

    def lookahead(self, op: SchedOperator) -> float:
        """Clock time the oldest batch before ``op`` still needs: its rows (the queue's mean rows per item,
        O(1), rather than a scan of the reader's items) times the chart time to the end, plus one run."""
        rows = 0.0
        for q, r in zip(op.input_queues, op.readers):
            if r.pending():
                n = len(q) if hasattr(q, "__len__") else 0
                rows = max(rows, q.tuples / n if n else r.peek_rows() / r.pending())
        return rows * self.tail_time.get(id(op), 0.0) * self.cost_scale + self.longest_run

    def pick(self, ready: Any) -> SchedOperator | None:
        if not ready:
            return None
        self._sync(ready)
        if self._dirty:
            self.recompute()
        now = self.now()
        bound = self.latency_bound
        risky = [op for op in ready if now - oldest_pending(op) + self.lookahead(op) > bound]
        if risky:
            self.picks += 1
            self.flushes += 1
            op = min(risky, key=self.fifo_key)
        else:
            op = super().pick(ready)
        self._run_started = now if self.clock is not None else None
        return op

    def on_ran(self, op: SchedOperator, consumed: int) -> None:
        super().on_ran(op, consumed)
        if self._run_started is not None:
            self.longest_run = max(self.longest_run, self.clock() - self._run_started)
