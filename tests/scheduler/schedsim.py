"""A small deterministic simulator of a plan of toy operators under a scheduling policy.

Source: digest-004 worked example E1 (the STREAM paper's two-operator example, P1 section 4.2) and its
measurement convention: at each time step, first add the arrivals, then measure the total queue size, then let
the policy pick and run one unit of work. Used by the scheduler tests and by ``bench/scheduler_memory.py``.

The toy queues and operators implement the interface the scheduler sees (``scheduler.base.SchedOperator``)
with the engine's semantics: a shared queue keeps an item until its slowest reader has read it (P-12,
``dsms/queues.py``), and ``run(budget)`` consumes up to ``budget`` items, taking turns over its inputs
(``dsms/operators/base.py``). Time is simulated: a run takes ``batch_cost + rows * cost`` per item consumed, in
the same units as the arrival times and the operators' ``cost_ns_per_tuple``.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SimBatch:
    """A batch of ``rows`` tuples (fractions allowed) stamped with its arrival time, ``width`` bytes each."""

    ts: float
    rows: float
    width: float

    @property
    def nbytes(self) -> float:
        return self.rows * self.width


class SimQueue:
    """A FIFO with one cursor per reader, holding what its slowest reader has not read (like ``dsms.queues``)."""

    def __init__(self, name: str = "", width: float = 8.0) -> None:
        self.id = name
        self.width = width
        self._items: deque[SimBatch] = deque()
        self._base = 0
        self._readers: list[SimReader] = []
        self.tuples = 0.0
        self.bytes = 0.0
        self.capacity: float | None = None
        self.last_ts: float | None = None
        self.tuples_in = 0.0                 # rows ever written, read or not (the query's results)

    def reader(self) -> SimReader:
        r = SimReader(self, self._base + len(self._items))
        self._readers.append(r)
        return r

    def put(self, item: SimBatch) -> None:
        self.last_ts = item.ts if self.last_ts is None else max(self.last_ts, item.ts)
        self.tuples_in += item.rows
        if not self._readers or item.rows <= 0:
            return                           # a query result, or nothing: leaves the plan
        self._items.append(item)
        self.tuples += item.rows
        self.bytes += item.nbytes

    def full(self) -> bool:
        return self.capacity is not None and self.tuples >= self.capacity

    def oldest_ts(self) -> float | None:
        return self._items[0].ts if self._items else None

    def _trim(self) -> None:
        low = min(r.pos for r in self._readers)
        while self._base < low:
            item = self._items.popleft()
            self._base += 1
            self.tuples -= item.rows
            self.bytes -= item.nbytes
        if not self._items:                  # no float residue
            self.tuples = self.bytes = 0.0

    def __len__(self) -> int:
        return len(self._items)


class SimReader:
    """One reader's cursor (``dsms.queues.QueueReader``): pending items, rows not yet read, ``get``."""

    __slots__ = ("queue", "pos")

    def __init__(self, queue: SimQueue, pos: int) -> None:
        self.queue = queue
        self.pos = pos

    def pending(self) -> int:
        return self.queue._base + len(self.queue._items) - self.pos

    def peek_rows(self) -> float:
        q = self.queue
        return sum(q._items[i].rows for i in range(self.pos - q._base, len(q._items)))

    def stamps(self) -> list[tuple[float, float]]:
        """(timestamp, rows) of every pending item: lets Chain-Flush see exactly how old the backlog is."""
        q = self.queue
        return [(q._items[i].ts, q._items[i].rows) for i in range(self.pos - q._base, len(q._items))]

    def get(self) -> SimBatch | None:
        q = self.queue
        i = self.pos - q._base
        if i >= len(q._items):
            return None
        item = q._items[i]
        self.pos += 1
        if i == 0:
            q._trim()
        return item


class SimOp:
    """A toy operator: per input item, ``rows * selectivity`` output rows, ``batch_cost + rows * cost`` time.

    ``selectivity`` and ``cost_ns_per_tuple`` start at the true values, as the engine's EWMA would converge to;
    with ``learn=True`` they are EWMAs of what each run measured (the engine's rule, alpha 0.2), and ``jitter``
    draws each batch's selectivity around the mean (seeded, so runs repeat).
    """

    def __init__(self, name: str, inputs: Sequence[SimQueue], output: SimQueue | None = None, *,
                 selectivity: float = 1.0, cost: float = 1.0, batch_cost: float = 0.0, learn: bool = False,
                 jitter: float = 0.0, seed: int = 0) -> None:
        self.id = name
        self.input_queues = list(inputs)
        self.readers = [q.reader() for q in inputs]
        self.output = output if output is not None else SimQueue(f"{name}.out")
        self.true_selectivity = selectivity
        self.true_cost = cost
        self.batch_cost = batch_cost
        self.selectivity = selectivity
        self.cost_ns_per_tuple = cost          # true per-tuple cost; learn=True folds batch_cost in
        self.priority = 0
        self.learn = learn
        self.jitter = jitter
        self.rng = random.Random(seed)
        self.last_duration = 0.0
        self._out_ts = -math.inf
        self.done: list[tuple[float, float, float]] = []     # (ts, rows in, rows out) of the last run
        self.runs = 0

    def ready(self) -> bool:
        return any(r.pending() for r in self.readers)

    def run(self, budget: int) -> int:
        consumed, dur, rows_in, rows_out = 0, 0.0, 0.0, 0.0
        self.done = []
        while consumed < budget:
            progressed = False
            for r in self.readers:
                if consumed >= budget:
                    break
                item = r.get()
                if item is None:
                    continue
                progressed = True
                consumed += 1
                sel = self.true_selectivity
                if self.jitter:
                    sel = max(0.0, sel * (1.0 + self.rng.uniform(-self.jitter, self.jitter)))
                out = item.rows * sel
                dur += self.batch_cost + item.rows * self.true_cost
                ts = item.ts
                if len(self.readers) > 1:        # a join's output is in timestamp order, as in the engine:
                    ts = self._out_ts = max(ts, self._out_ts)    # a result is stamped with the later input
                self.output.put(SimBatch(ts, out, self.output.width))
                self.done.append((item.ts, item.rows, out))
                rows_in += item.rows
                rows_out += out
            if not progressed:
                break
        if consumed:
            self.runs += 1
        if self.learn and rows_in > 0:
            a = 0.2 if self.runs > 1 else 1.0
            self.cost_ns_per_tuple = (1 - a) * self.cost_ns_per_tuple + a * dur / rows_in
            self.selectivity = (1 - a) * self.selectivity + a * rows_out / rows_in
        self.last_duration = dur
        return consumed


@dataclass
class Trace:
    """What a simulation measured: total queue size at each decision point, picks, result latencies (when a
    batch's last descendant leaves the plan, minus its timestamp), and the longest wait: the largest age
    (time minus timestamp) of any item when an operator finished with it."""

    times: list[float] = field(default_factory=list)
    tuples: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    max_wait: float = 0.0
    picks: list[str] = field(default_factory=list)
    ready_sets: list[frozenset[str]] = field(default_factory=list)
    end: float = 0.0

    @property
    def peak_bytes(self) -> float:
        return max(self.bytes, default=0.0)

    @property
    def peak_tuples(self) -> float:
        return max(self.tuples, default=0.0)

    def avg_bytes(self) -> float:
        """Time-weighted mean of the total queue bytes."""
        if len(self.times) < 2:
            return self.peak_bytes
        span = self.end - self.times[0]
        total = sum(b * (t1 - t0) for b, t0, t1 in zip(self.bytes, self.times, [*self.times[1:], self.end]))
        return total / span if span > 0 else self.peak_bytes

    def latency_quantile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


class Simulator:
    """Runs ``ops`` under a policy: add due arrivals, measure, pick, run (time advances by the run's cost).

    With ``idle_tick`` the clock advances by that much when nothing is ready (E1 measures every instant);
    otherwise it jumps to the next arrival. ``until`` stops measuring after that time.
    """

    def __init__(self, ops: Sequence[SimOp], arrivals: Sequence[tuple[float, SimQueue, float]], *,
                 idle_tick: float | None = None, until: float | None = None) -> None:
        self.ops = list(ops)
        self.arrivals = sorted(arrivals, key=lambda a: a[0])
        self.idle_tick = idle_tick
        self.until = until
        self.now = self.arrivals[0][0] if self.arrivals else 0.0
        self.queues = list({id(q): q for op in self.ops for q in op.input_queues}.values())
        read = {id(q) for q in self.queues}
        self.sinks = {id(op) for op in self.ops if id(op.output) not in read}

    def clock(self) -> float:
        return self.now

    def run(self, policy: Any, max_steps: int = 10_000_000,
            on_step: Callable[[Simulator, Any], None] | None = None) -> Trace:
        tr = Trace()
        policy.plan_changed(self.ops)
        i, n_arr, eps = 0, len(self.arrivals), 1e-9
        for _ in range(max_steps):
            while i < n_arr and self.arrivals[i][0] <= self.now + eps:
                t, q, rows = self.arrivals[i]
                q.put(SimBatch(t, rows, q.width))
                i += 1
            if self.until is not None and self.now > self.until + eps:
                break
            tr.times.append(self.now)
            tr.tuples.append(sum(q.tuples for q in self.queues))
            tr.bytes.append(sum(q.bytes for q in self.queues))
            ready = [op for op in self.ops if op.ready()]
            op = policy.pick(ready)
            if op is None:
                if i >= n_arr and (self.until is None or self.idle_tick is None):
                    break
                self.now = self.now + self.idle_tick if self.idle_tick else self.arrivals[i][0]
                continue
            tr.picks.append(op.id)
            tr.ready_sets.append(frozenset(o.id for o in ready))
            consumed = op.run(policy.budget(op))
            self.now += op.last_duration
            policy.on_ran(op, consumed)
            sink = id(op) in self.sinks
            for ts, _rows, out in op.done:
                tr.max_wait = max(tr.max_wait, self.now - ts)
                if sink or out <= 0:
                    tr.latencies.append(self.now - ts)
            if on_step is not None:
                on_step(self, op)
        tr.end = self.now
        return tr


# ---------------------------------------------------------------------------------------------------------- plans

def e1_plan(n: int = 10) -> tuple[list[SimOp], list[tuple[float, SimQueue, float]]]:
    """digest-004 E1: O1 (1 unit per n tuples, selectivity 0.2) -> O2 (1 unit per n/5 tuples, output leaves);
    n tuples arrive at every instant 1..7."""
    q1, q2 = SimQueue("q1"), SimQueue("q2")
    o1 = SimOp("O1", [q1], q2, selectivity=0.2, cost=1 / n)
    o2 = SimOp("O2", [q2], None, selectivity=1.0, cost=5 / n)
    return [o1, o2], [(float(t), q1, float(n)) for t in range(1, 8)]


def e2_plan(n: int = 10, instants: int = 6) -> tuple[list[SimOp], list[tuple[float, SimQueue, float]]]:
    """digest-004 E2: O1 (t=1, s=1) -> O2 (t=1, s=0.2) -> O3 (t=1 per block it receives, output leaves).
    Times are per block of n input tuples as it reaches each operator, so O3's cost per tuple is 5/n."""
    q1, q2, q3 = SimQueue("q1"), SimQueue("q2"), SimQueue("q3")
    o1 = SimOp("O1", [q1], q2, selectivity=1.0, cost=1 / n)
    o2 = SimOp("O2", [q2], q3, selectivity=0.2, cost=1 / n)
    o3 = SimOp("O3", [q3], None, selectivity=1.0, cost=5 / n)
    return [o1, o2, o3], [(float(t), q1, float(n)) for t in range(1, instants + 1)]
