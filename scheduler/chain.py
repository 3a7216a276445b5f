"""Chain scheduling: near-optimal peak queue memory (BBDM03).

Source: Babcock, Babu, Datar, Motwani, "Chain: operator scheduling for memory minimization in data stream
systems", SIGMOD 2003, section 4 (the Chain strategy); digest-004 section 2.G R-SCH-04, worked examples E1
(priorities 0.8 and 0.2 give the STREAM paper's "Strategy 2") and E2 (O1+O2 form one chain of priority 0.4),
pitfalls P-12 (shared queues), P-15 (FIFO ties). The chart machinery is in ``progress_chart``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from control_tables import Knob, Stat

from .base import Policy, SchedOperator
from .progress_chart import Stage, chains, paths


def _moved(old: float, new: float, floor: float) -> float:
    """Relative change, with ``floor`` so that a value near zero does not make every wobble count."""
    return abs(new - old) / max(abs(old), floor)


class ChainPolicy(Policy):
    """Run a ready operator of the highest-priority chain; ties go to the operator holding the oldest batch.

    Priorities come from the lower envelope of each path's progress chart (measured selectivity and cost per
    tuple, queue widths in bytes). An operator on several paths (a shared subplan) takes the highest priority
    it gets on any of them. The readers of a shared queue are one step of the chart and share its priority
    (P-12): the step costs all their costs, and only after all have read is a tuple freed. Priorities are
    recomputed when the plan changes or when an operator's selectivity, cost or output width has moved by
    more than ``drift`` (relative) since they were last computed.

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
        self.chain_of: dict[int, Any] = {}           # operator -> the chain (path, segment) it belongs to
        self.chain_list: list[dict[str, Any]] = []
        self._seen: dict[int, tuple[float, float, float]] = {}   # stats used by the last recompute
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

    def stages(self, path: list[tuple[SchedOperator, int]], costs: dict[int, float]) -> list[Stage]:
        """The chart stages of one path, from measured statistics; a sink has selectivity 0, and a queue with
        several readers is one step of all of them (P-12: its items are freed once every reader has read)."""
        topo, out = self.topology, []
        w = self.width(path[0][0].input_queues[path[0][1]])
        for op, i in path:
            w_in = w
            w = self.width(op.output, fallback=w_in)
            others = [o for o, r in topo.readers_of.get(id(op.input_queues[i]), ()) if r is not op.readers[i]]
            side = sum(self._produced(o, w_in) for o in others)
            out.append(Stage(id(op), costs[id(op)] + sum(costs[id(o)] for o in others),
                             0.0 if topo.is_sink(op) else max(op.selectivity, 0.0), w, side,
                             tuple(id(o) for o in others)))
        return out

    def _produced(self, op: SchedOperator, w_in: float) -> float:
        """Memory ``op`` adds to its output per input tuple (nothing when its output leaves the plan)."""
        if self.topology.is_sink(op):
            return 0.0
        return max(op.selectivity, 0.0) * self.width(op.output, fallback=w_in)

    def recompute(self) -> None:
        """Rebuild every path's chart, its envelope, and each operator's priority and chain."""
        topo, costs = self.topology, self.costs()
        best: dict[int, tuple[float, tuple[int, tuple[int, int]]]] = {}
        segments: dict[tuple[int, tuple[int, int]], Any] = {}
        for p, path in enumerate(paths(topo)):
            leaf = self.width(path[0][0].input_queues[path[0][1]])
            stages = self.stages(path, costs)
            own = [replace(s, side=0.0) for s in stages]
            # A shared step is judged with everything it produces (its readers' outputs on other paths too);
            # every other operator with its own path's tuples only: the other paths' tuples are theirs.
            for seg, chart in [(s, "all") for s in chains(stages, leaf)] + [(s, "own") for s in chains(own, leaf)]:
                segments[(p, seg.span)] = seg
                for st in stages[seg.span[0]:seg.span[1]]:
                    if bool(st.group) != (chart == "all"):
                        continue
                    for key in (st.op, *st.group):
                        if key not in best or seg.slope > best[key][0]:
                            best[key] = (seg.slope, (p, seg.span))
        self.priorities = {key: prio for key, (prio, _) in best.items()}
        self.chain_of = {key: where for key, (_, where) in best.items()}
        members: dict[tuple[int, tuple[int, int]], list[str]] = {}
        for op in topo.ops:
            if id(op) in best:
                members.setdefault(best[id(op)][1], []).append(op.id)
        self.chain_list = sorted(({"ops": ids, "priority": segments[k].slope} for k, ids in members.items()),
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
