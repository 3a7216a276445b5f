"""Chain scheduling: near-optimal peak queue memory (BBDM03).

Source: Babcock, Babu, Datar, Motwani, "Chain: operator scheduling for memory minimization in data stream
systems", SIGMOD 2003, section 4 (the Chain strategy); digest-004 section 2.G R-SCH-04, worked examples E1
(priorities 0.8 and 0.2 give the STREAM paper's "Strategy 2") and E2 (O1+O2 form one chain of priority 0.4),
pitfalls P-12 (shared queues), P-15 (FIFO ties). The chart machinery is in ``progress_chart``.
"""

from __future__ import annotations

from typing import Any

from control_tables import Knob, Stat

from .base import Policy, SchedOperator
from .progress_chart import Block, tree_blocks


def _moved(old: float, new: float, floor: float) -> float:
    """Relative change, with ``floor`` so that a value near zero does not make every wobble count."""
    return abs(new - old) / max(abs(old), floor)


class ChainPolicy(Policy):
    """Run a ready operator of the highest-priority chain; ties go to the operator holding the oldest batch.

    Priorities come from the progress charts of the plan (``progress_chart``): from measured selectivity and
    cost per tuple and queue widths in bytes, the chain of a plain path is a segment of its chart's lower
    envelope and its priority the segment's slope (memory freed per unit time). Shared queues (P-12) make
    the plan a tree of steps (all readers of a queue reading one tuple, the only way to free it), whose
    chains come from the same rule generalised to trees (``tree_blocks``). An operator met on several trees
    (a join, under each input) takes its highest priority. Priorities are recomputed when the plan changes,
    or when an operator's selectivity, cost or output width has moved by more than ``drift`` (relative)
    since they were last computed.

    "First ready operator in the chain" (P-15), read with BBDM03's FIFO tie-break: among ready operators of
    equal priority, the chain holding the oldest batch runs, and within it the furthest-downstream ready
    operator, so the chain moves its oldest batch along first (in a pipeline the batch deepest in a chain is
    its oldest; a join restamps its results with the later input's timestamp, so their stamps understate
    their age). Remaining ties: the reader furthest behind on a shared queue, then plan order.
    """

    name = "chain"

    drift = Knob(float, default=0.2, ge=0.0, doc="relative change of a statistic that triggers a recompute")
    recomputes = Stat(int, default=0, unit="recomputes", doc="times the chains and priorities were rebuilt")

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.priorities: dict[int, float] = {}
        self.chain_of: dict[int, Any] = {}           # operator -> its chain: (leaf queue, block)
        self.chain_list: list[dict[str, Any]] = []
        self._seen: dict[int, tuple[float, float, float]] = {}   # stats used by the last recompute
        self.tail_time: dict[int, float] = {}     # per input tuple: time until all it leads to has left the plan
        self._dirty = True

    def plan_changed(self, ops: Any) -> None:
        super().plan_changed(ops)
        self._dirty = True

    def on_set_drift(self, old: float, new: float) -> None:
        self._dirty = True

    def on_set_unit(self, old: str, new: str) -> None:
        self._dirty = True

    def on_ran(self, op: SchedOperator, consumed: int) -> None:
        super().on_ran(op, consumed)
        seen = self._seen.get(id(op))
        if seen is None:
            return
        s, c, w = seen
        if (_moved(s, op.selectivity, 0.01) > self.drift or _moved(c, op.cost_ns_per_tuple, 1e-12) > self.drift
                or _moved(w, self._out_width(op), 1e-12) > self.drift):
            self._dirty = True

    def _out_width(self, op: SchedOperator) -> float:
        return 0.0 if self.topology.is_sink(op) else self.width(op.output, fallback=0.0)

    def _produced(self, op: SchedOperator, w_in: float) -> float:
        """Memory ``op`` adds to its output per input tuple (nothing when its output leaves the plan)."""
        if self.topology.is_sink(op):
            return 0.0
        return max(op.selectivity, 0.0) * self.width(op.output, fallback=w_in)

    def blocks(self, queue: Any, n: float, width: float, costs: dict[int, float], above: frozenset) -> list[Block]:
        """The blocks of the subtree of steps below ``queue`` (``n`` tuples of ``width`` per leaf tuple).

        The step is every reader of the queue reading one tuple (P-12: only then is it freed): it takes the
        sum of their costs and produces all their outputs, each the root of a subtree of its own. An operator
        with two inputs (a join) is met once below each of them, as BBDM03 splits a join per input.
        """
        topo = self.topology
        readers = [op for op, _ in topo.readers_of.get(id(queue), ())]
        if not readers:
            return []
        freed, children = n * width, []
        for op in readers:
            out = self._produced(op, width)
            freed -= n * out
            if out > 0 and id(op) not in above:
                w = self.width(op.output, fallback=width)
                children.append(self.blocks(op.output, n * max(op.selectivity, 0.0), w, costs, above | {id(op)}))
        step = Block(tuple(id(op) for op in readers), freed, n * sum(costs[id(op)] for op in readers))
        return tree_blocks(step, children)

    def recompute(self) -> None:
        """Rebuild the blocks (chains) of every leaf queue's tree and each operator's priority."""
        topo, costs = self.topology, self.costs()
        tail: dict[int, float] = {}
        for op in sorted(topo.ops, key=lambda o: -topo.depth[id(o)]):          # consumers first
            sel = 0.0 if topo.is_sink(op) else max(op.selectivity, 0.0)
            tail[id(op)] = costs[id(op)] + sel * sum(tail.get(id(c), 0.0) for c in topo.consumers[id(op)])
        self.tail_time = tail
        written = {id(op.output) for op in topo.ops}
        best: dict[int, tuple[float, tuple[int, int]]] = {}
        chains: dict[tuple[int, int], Block] = {}
        for root, q in enumerate(q for q in topo.queues.values() if id(q) not in written):
            for k, block in enumerate(self.blocks(q, 1.0, self.width(q), costs, frozenset())):
                chains[(root, k)] = block
                for key in block.ops:
                    if key not in best or block.slope > best[key][0]:
                        best[key] = (block.slope, (root, k))
        self.priorities = {key: prio for key, (prio, _) in best.items()}
        self.chain_of = {key: where for key, (_, where) in best.items()}
        members: dict[tuple[int, int], list[str]] = {}
        for op in topo.ops:
            if id(op) in best:
                members.setdefault(best[id(op)][1], []).append(op.id)
        self.chain_list = sorted(({"ops": ids, "priority": chains[k].slope} for k, ids in members.items()),
                                 key=lambda c: -c["priority"])
        self._seen = {id(op): (op.selectivity, op.cost_ns_per_tuple, self._out_width(op)) for op in topo.ops}
        self.recomputes += 1
        self._dirty = False

    def choose(self, ready: list[SchedOperator]) -> SchedOperator:
        if self._dirty:
            self.recompute()
        prio, chain_of, depth = self.priorities, self.chain_of, self.topology.depth
        top = max(prio.get(id(op), 0.0) for op in ready)
        tol = 1e-9 * max(1.0, abs(top)) if top != float("inf") else 0.0
        level = [op for op in ready if prio.get(id(op), 0.0) >= top - tol]
        chain = chain_of.get(id(min(level, key=self.fifo_key)))
        return min((op for op in level if chain_of.get(id(op)) == chain),
                   key=lambda op: (-depth.get(id(op), 0), *self.fifo_key(op)))

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "chains": self.chain_list}
