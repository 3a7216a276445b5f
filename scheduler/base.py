"""Scheduler base: the operator interface the scheduler sees, the plan topology, and the ``Policy`` class.

Source: digest-004 section 2.G (R-SCH-01 a granularity per run, R-SCH-06 policies switchable at run time) and
pitfalls P-12 (a shared queue holds an item until its slowest reader has read it), P-15 (ties go to the oldest
batch), P-16 (the budget counts queue items consumed from input, as ``Operator.run(budget)`` does); STYLE.md
layering: the scheduler sees operators only through ``SchedOperator``, never their classes.

A policy is an ``Entity`` (``control_tables``), so its knobs are declared, validated and shown in the system's
control table like any other. The engine drives it like this (``drive`` below does exactly this)::

    policy.plan_changed(ops)                 # ops in topological order; again whenever the plan changes
    while (op := policy.pick([o for o in ops if o.ready()])) is not None:
        policy.on_ran(op, op.run(policy.budget(op)))

Any pick order is safe: a policy only ever returns one of the ready operators it was given, and returns one
whenever the list is not empty, so every queue drains; query results never depend on the policy.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from control_tables import Entity, Knob, Stat

INF = math.inf


@runtime_checkable
class SchedOperator(Protocol):
    """What a policy may look at: ``dsms.operators.base.Operator`` has all of it, and so do the simulator's
    toy operators in ``tests/scheduler``. Queues offer ``.tuples``, ``.bytes``, ``.oldest_ts()``, ``.full()``,
    ``.capacity``; readers offer ``.pending()`` (items) and ``.peek_rows()`` (rows), optionally ``.oldest_ts()``
    and ``.stamps()``. Optional on the operator: ``held_stamps()`` ((timestamp, rows) of what it holds until
    its frontier passes it) and ``tuples_in`` (rows consumed so far), both read by Chain-Flush."""

    id: str
    readers: list
    input_queues: list
    output: Any
    selectivity: float
    cost_ns_per_tuple: float
    priority: int

    def ready(self) -> bool: ...

    def run(self, budget: int) -> int: ...


class Topology:
    """Who feeds whom, derived from queue identity (op B reads the queue op A writes: A feeds B).

    Keys are ``id(op)`` and ``id(queue)`` so that operators need not be hashable; the topology holds the
    objects, so the ids stay valid while it lives. ``depth`` is the longest distance from a leaf input, the
    "how far downstream" that FIFO drains first.
    """

    def __init__(self, ops: Sequence[SchedOperator]) -> None:
        self.ops = list(ops)
        self.order = {id(op): i for i, op in enumerate(self.ops)}
        writer = {id(op.output): op for op in self.ops}
        self.readers_of: dict[int, list[tuple[SchedOperator, Any]]] = defaultdict(list)
        for op in self.ops:
            for q, r in zip(op.input_queues, op.readers):
                self.readers_of[id(q)].append((op, r))
        self.producers = {id(op): [writer[id(q)] for q in op.input_queues if id(q) in writer] for op in self.ops}
        self.consumers = {id(op): [c for c, _ in self.readers_of.get(id(op.output), ())] for op in self.ops}
        self.queues = {id(q): q for op in self.ops for q in (*op.input_queues, op.output)}
        self.depth = self._depths()
        self._upstream: dict[int, frozenset[int]] = {}

    def _depths(self) -> dict[int, int]:
        # Kahn's algorithm, so a plan listed out of order still gets the right depths.
        missing = {k: len({id(p) for p in ps}) for k, ps in self.producers.items()}
        depth = {id(op): 0 for op in self.ops}
        todo = [op for op in self.ops if missing[id(op)] == 0]
        while todo:
            op = todo.pop()
            for c in {id(c): c for c in self.consumers[id(op)]}.values():
                depth[id(c)] = max(depth[id(c)], depth[id(op)] + 1)
                missing[id(c)] -= 1
                if missing[id(c)] == 0:
                    todo.append(c)
        return depth

    def upstream(self, op: SchedOperator) -> frozenset[int]:
        """Ids of ``op`` and of every operator feeding it, directly or not: the runs that can move an item
        towards ``op`` (and so advance its input frontier)."""
        key = id(op)
        got = self._upstream.get(key)
        if got is None:
            seen, todo = {key}, [op]
            while todo:
                for p in self.producers.get(id(todo.pop()), ()):
                    if id(p) not in seen:
                        seen.add(id(p))
                        todo.append(p)
            got = self._upstream[key] = frozenset(seen)
        return got

    def is_sink(self, op: SchedOperator) -> bool:
        """The operator's output leaves the scheduled plan (a query result): it frees everything it reads."""
        return not self.consumers[id(op)]

    def knows(self, op: SchedOperator) -> bool:
        return id(op) in self.order


def oldest_pending(op: SchedOperator) -> float:
    """Timestamp of the oldest item ``op`` has waiting (inf when none): the FIFO order of P-15.

    A reader with an ``oldest_ts()`` of its own is asked directly. Otherwise the queue's oldest item is exact
    when this reader is the slowest one (it holds every item); behind a slower reader it is a lower bound.
    """
    best = INF
    for q, r in zip(op.input_queues, op.readers):
        if not r.pending():
            continue
        ts = r.oldest_ts() if hasattr(r, "oldest_ts") else q.oldest_ts()
        if ts is not None and ts < best:
            best = ts
    return best


def held_stamps(op: SchedOperator) -> list[tuple[float, float]]:
    """(timestamp, rows) of what ``op`` holds internally until its input frontier passes it (an aggregate's
    rows of an instant not final yet, a join's deltas waiting for the other input, a sink's instant); empty
    for an operator without ``held_stamps()`` (it is optional in ``SchedOperator``)."""
    f = getattr(op, "held_stamps", None)
    return f() if f is not None else []


def release_share(op: SchedOperator, reader: Any, topo: Topology, queue: Any, budget: int) -> float:
    """Share of the next ``budget`` items ``op`` reads from ``queue`` that the read actually frees (P-12).

    Readers' pending items are nested suffixes of the queue, so the items only ``op`` still holds are its
    ``pending - max(other readers' pending)`` oldest ones, and those are exactly the ones it reads next.
    """
    mine = reader.pending()
    if not mine:
        return 0.0
    others = [r.pending() for o, r in topo.readers_of.get(id(queue), ()) if r is not reader]
    free = max(0, mine - max(others, default=0))
    n = min(budget, mine)
    return min(n, free) / n


class Policy(Entity, ABC):
    """A scheduling policy: given the ready operators, which one runs next and for how many input items.

    Subclasses set ``name`` and implement ``choose``. ``pick`` first keeps the ready operators of the highest
    user ``priority`` knob (a strict class: "higher runs first", SPEC section 8), then lets ``choose`` decide.
    """

    prefix = "sched"
    kind = "policy"
    name: ClassVar[str] = "policy"

    budget_items = Knob(int, default=1, ge=1, name="budget", unit="queue items",
                        doc="granularity: input items (batches or heartbeats) an operator consumes per run")
    unit = Knob(Literal["bytes", "tuples"], default="bytes",
                doc="what memory estimates count (greedy, chain): queue bytes or queued tuples")
    policy = Stat(str, compute=lambda self: self.name, doc="which policy this is (the system's policy knob)")
    picks = Stat(int, default=0, unit="picks", doc="scheduling decisions made")
    runs = Stat(int, default=0, unit="runs", doc="operator runs reported through on_ran")

    #: whether the class keeps ``Policy.budget`` (the ``budget`` knob for every operator): the engine then reads
    #: the knob once per ``run`` instead of calling ``budget`` before every operator run (set per class)
    same_budget: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.same_budget = cls.budget is Policy.budget

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.topology = Topology([])
        self.widths: dict[int, float] = {}

    # -- the interface the engine calls ------------------------------------------------------------------
    def plan_changed(self, ops: Sequence[SchedOperator]) -> None:
        """The plan's operators, producers first; called again whenever a query is added or dropped."""
        self.topology = Topology(ops)

    def pick(self, ready: Sequence[SchedOperator]) -> SchedOperator | None:
        """One of ``ready`` (never None unless ``ready`` is empty)."""
        if not ready:
            return None
        self._sync(ready)
        self.picks += 1
        prios = [op.priority for op in ready]
        top = max(prios)
        if prios.count(top) == len(prios):         # the usual case: nobody set a priority
            return self.choose(ready if type(ready) is list else list(ready))
        return self.choose([op for op, p in zip(ready, prios) if p == top])

    @abstractmethod
    def choose(self, ready: list[SchedOperator]) -> SchedOperator:
        """The policy proper: one of ``ready``, which is never empty."""

    def budget(self, op: SchedOperator) -> int:
        """Input items ``op`` may consume in this run (P-16: counted in input items, not output tuples)."""
        return self.budget_items

    def on_ran(self, op: SchedOperator, consumed: int) -> None:
        """``op`` ran and consumed ``consumed`` items: learn queue widths (bytes per tuple) while they are full."""
        self.runs += 1
        for q in (*op.input_queues, op.output):
            if q.tuples > 0:
                w = q.bytes / q.tuples
                old = self.widths.get(id(q))
                self.widths[id(q)] = w if old is None else 0.8 * old + 0.2 * w

    def stats(self) -> dict[str, Any]:
        """Counters and knobs for the system control table and the GUI."""
        return {"policy": self.name, **{k: v for k, v in self.get().items() if k not in ("id", "kind")}}

    # -- helpers for subclasses ---------------------------------------------------------------------------
    def _sync(self, ready: Iterable[SchedOperator]) -> None:
        """An operator the policy has not been told about joins the topology (a plan change not reported)."""
        order = self.topology.order
        for op in ready:
            if id(op) not in order:
                self.plan_changed(self.topology.ops + [o for o in ready if id(o) not in order])
                return

    def width(self, queue: Any, fallback: float | None = None) -> float:
        """Size of one queued tuple in the memory unit: 1 when counting tuples, else the learned bytes per
        tuple; a queue never seen holding anything gets ``fallback`` (its producer's input width: assume
        the operator keeps the tuple size), or the mean of the known widths."""
        if self.unit == "tuples":
            return 1.0
        w = self.widths.get(id(queue))
        if w is None and queue.tuples > 0:
            w = self.widths[id(queue)] = queue.bytes / queue.tuples
        if w is not None:
            return w
        if fallback is not None:
            return fallback
        known = list(self.widths.values())
        return sum(known) / len(known) if known else 1.0

    def costs(self) -> dict[int, float]:
        """Cost per input tuple of every operator; one not measured yet gets the mean of the measured ones."""
        ops = self.topology.ops
        seen = [op.cost_ns_per_tuple for op in ops if op.cost_ns_per_tuple > 0 and math.isfinite(op.cost_ns_per_tuple)]
        default = sum(seen) / len(seen) if seen else 1.0
        return {id(op): op.cost_ns_per_tuple if op.cost_ns_per_tuple > 0 and math.isfinite(op.cost_ns_per_tuple)
                else default for op in ops}

    def fifo_key(self, op: SchedOperator) -> tuple[float, int, int, int]:
        """Oldest waiting batch first (P-15), then furthest downstream, then the reader furthest behind (on a
        shared queue it holds the older items, and only its reads free them), then plan order."""
        t = self.topology
        queues, readers = op.input_queues, op.readers
        if len(queues) != len(readers):
            return (oldest_pending(op), -t.depth.get(id(op), 0), -sum(r.pending() for r in readers),
                    t.order.get(id(op), 0))
        oldest, waiting = INF, 0            # oldest_pending and the items waiting, in one pass over the inputs
        for q, r in zip(queues, readers):
            n = r.pending()
            if n:
                waiting += n
                ts = r.oldest_ts() if hasattr(r, "oldest_ts") else q.oldest_ts()
                if ts is not None and ts < oldest:
                    oldest = ts
        return (oldest, -t.depth.get(id(op), 0), -waiting, t.order.get(id(op), 0))


def drive(policy: Policy, ops: Sequence[SchedOperator], max_steps: int | None = None) -> int:
    """Run ``ops`` under ``policy`` until nothing is ready (or ``max_steps`` runs); returns the runs made.

    An operator whose output queue is ``full()`` is held back while another one can run (queue capacity,
    SPEC section 8); if every ready operator is held back they run anyway, so a run never deadlocks.
    """
    policy.plan_changed(ops)
    steps = 0
    while max_steps is None or steps < max_steps:
        ready = [op for op in ops if op.ready()]
        room = [op for op in ready if not op.output.full()]
        op = policy.pick(room or ready)
        if op is None:
            break
        policy.on_ran(op, op.run(policy.budget(op)))
        steps += 1
    return steps
