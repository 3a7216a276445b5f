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
from collections.abc import Callable, Sequence
from typing import Any

from control_tables import Knob, Stat

from .base import SchedOperator, oldest_pending
from .chain import ChainPolicy


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
        """Chain's priorities, plus each operator's processing time per input tuple until everything it
        leads to has left the plan: its cost plus, per output tuple, that of every consumer (one processor
        runs all branches of a fan-out)."""
        super().recompute()
        topo, costs, tail = self.topology, self.costs(), {}
        for op in sorted(topo.ops, key=lambda o: -topo.depth[id(o)]):          # consumers first
            sel = 0.0 if topo.is_sink(op) else max(op.selectivity, 0.0)
            tail[id(op)] = costs[id(op)] + sel * sum(tail.get(id(c), 0.0) for c in topo.consumers[id(op)])
        self.tail_time = tail

    def backlog(self, ready: Sequence[SchedOperator]) -> list[tuple[SchedOperator, float, float, float, float]]:
        """Per ready operator: (op, oldest ts, newest ts, work of all its pending items, work of one item),
        work in clock units. Rows come from queue totals (O(1)) rather than a scan of the items."""
        out = []
        for op in ready:
            rows = items = 0.0
            newest = -math.inf
            for q, r in zip(op.input_queues, op.readers):
                n = r.pending()
                if not n:
                    continue
                held = len(q) if hasattr(q, "__len__") else 0
                rows += q.tuples * n / held if held else r.peek_rows()
                items += n
                last = getattr(q, "last_ts", None)
                newest = max(newest, last if last is not None else -math.inf)
            per_tuple = self.tail_time.get(id(op), 0.0) * self.cost_scale
            oldest = oldest_pending(op)
            out.append((op, oldest, max(newest, oldest), rows * per_tuple, rows / items * per_tuple if items else 0.0))
        return out

    def lookahead(self, ts: float, own: float, backlog: list) -> float:
        """Clock time a batch stamped ``ts`` still needs under FIFO flushing: the work of every pending item
        no newer than it (queues are in timestamp order; the share of a queue older than ``ts`` is
        interpolated between its oldest and newest stamps), its own work ``own``, and one run in progress."""
        work = own + self.longest_run
        for _, old, new, total, _ in backlog:
            if ts > old:
                work += total * (1.0 if new <= old else min(1.0, (ts - old) / (new - old)))
        return work

    def pick(self, ready: Any) -> SchedOperator | None:
        if not ready:
            return None
        self._sync(ready)
        if self._dirty:
            self.recompute()
        now, bound = self.now(), self.latency_bound
        backlog = self.backlog(ready)
        risky = [op for op, old, _, _, own in backlog if now - old + self.lookahead(old, own, backlog) > bound]
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
