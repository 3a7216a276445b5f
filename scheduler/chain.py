"""Chain scheduling: near-optimal peak queue memory (BBDM03).

Source: Babcock, Babu, Datar, Motwani, "Chain: operator scheduling for memory minimization in data stream
systems", SIGMOD 2003, section 4 (the Chain strategy); digest-004 section 2.G R-SCH-04, worked examples E1
(priorities 0.8 and 0.2 give the STREAM paper's "Strategy 2") and E2 (O1+O2 form one chain of priority 0.4),
pitfalls P-12 (shared queues), P-15 (FIFO ties). The chart machinery is in ``progress_chart``.
"""

from __future__ import annotations

import math
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
    chains come from the same rule generalised to trees (``tree_blocks``). A join is met once below each
    input, as BBDM03 splits it per input; but the engine's join applies a delta only once the other input
    has passed it, so the two chains that reach it are merged into one (``synchronised``). An operator met
    on several trees otherwise takes its highest priority. Priorities are recomputed when the plan changes,
    or when an operator's selectivity, cost or output width has moved by more than ``drift`` (relative)
    since they were last computed, at most once per ``RECOMPUTE_RUNS`` operator runs: a recompute costs
    about as much as four to eight small runs, and with small batches the measured statistics move by
    20% every dozen runs (issue 15: NEXMark q3 at 1,000 events a push recomputed on 9% of its runs, a
    quarter of its run time, without changing a pick). A drift seen in between is kept and acted on once
    that many runs have passed.

    "First ready operator in the chain" (P-15), read with BBDM03's FIFO tie-break: among ready operators of
    equal priority, the one holding the oldest batch decides: its chain runs, and within the chain the
    furthest-downstream ready operator on that batch's way (it or an operator it feeds), so the chain moves
    its oldest batch along first. In a pipeline that is the deepest ready operator of the chain (the batch
    deepest in a chain is its oldest; a join restamps its results with the later input's timestamp, so their
    stamps understate their age); in a merged chain it is the side that is behind, which the join needs
    to release anything. Remaining ties: the reader furthest behind on a shared queue, then plan order.

    An operator that has consumed no rows yet (``tuples_in == 0``, as the engine's operators report it) has
    default statistics (selectivity 1, the mean cost), not measurements: it runs first, once, so that its
    chart is measured before it is trusted. Otherwise a path charted from defaults can rank below a measured
    one and never run (a selective filter charted at selectivity 1 waits through another stream's burst; the
    benchmark case is in docs/scheduling.md).
    """

    name = "chain"
    RECOMPUTE_RUNS = 64     # operator runs at least between two recomputes for drift (plan, knob: at once)

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
        self._stale = False       # a statistic drifted; recompute once RECOMPUTE_RUNS runs have passed
        self._since = 0           # operator runs since the last recompute
        self._shape_cache: _Shape | None = None

    def plan_changed(self, ops: Any) -> None:
        super().plan_changed(ops)
        self._dirty = True

    def on_set_drift(self, old: float, new: float) -> None:
        self._dirty = True

    def on_set_unit(self, old: str, new: str) -> None:
        self._dirty = True

    def pick(self, ready: Any) -> SchedOperator | None:
        """``Policy.pick`` then ``choose``, in one pass over ``ready`` when the answer is plain: every
        operator known to the topology, measured (``tuples_in`` above 0), of one user priority class, the
        priorities current, and one operator strictly above the others (beyond ``choose``'s tolerance).
        That is every pick of NEXMark's q3, q5 and q8 (issue 15: the general path cost about 6 us a pick,
        four picks a push of q3). Anything else goes the general way, which decides the same in these
        cases (``tests/scheduler/test_sched_chain_fast_pick.py`` checks the two agree)."""
        if not ready or self._dirty:
            return super().pick(ready)
        order, prio = self.topology.order, self.priorities
        best = None
        top = second = -math.inf
        user = None
        for op in ready:
            key = id(op)
            if key not in order or getattr(op, "tuples_in", None) == 0:
                return super().pick(ready)
            u = op.priority
            if user is None:
                user = u
            elif u != user:
                return super().pick(ready)
            p = prio.get(key, 0.0)
            if p != p:
                return super().pick(ready)
            if p > top:
                second, top, best = top, p, op
            elif p > second:
                second = p
        if top == math.inf:
            return super().pick(ready)
        self.picks += 1
        tol = 1e-9 * max(1.0, abs(top))
        if second >= top - tol:              # a tie within the tolerance: the oldest batch decides
            return self._oldest_of([op for op in ready if prio.get(id(op), 0.0) >= top - tol])
        return best

    def on_ran(self, op: SchedOperator, consumed: int) -> None:
        """``Policy.on_ran`` (queue widths), then the drift test against the statistics the last recompute
        used. Inlined, with the knobs read from their slots and ``_out_width`` worked out here: after every
        run, and most runs of a push cycle only forward a heartbeat (NEXMark q5: 9 of 11), so a microsecond
        here is a tenth of such a run (issue 15)."""
        self.runs += 1
        widths = self.widths
        for q in op.input_queues:
            t = q.tuples
            if t > 0:
                w = q.bytes / t
                old = widths.get(id(q))
                widths[id(q)] = w if old is None else 0.8 * old + 0.2 * w
        out = op.output
        t = out.tuples
        if t > 0:
            w = out.bytes / t
            old = widths.get(id(out))
            widths[id(out)] = w if old is None else 0.8 * old + 0.2 * w
        self._since += 1
        if not self._stale:
            seen = self._seen.get(id(op))
            if seen is not None:
                s, c, w = seen
                drift = self._knob_drift
                # _moved, inlined: |new - old| / max(|old|, floor), the max written out (the builtin with
                # two arguments costs 0.2 us, more than the rest of the test; same result, NaN included)
                d = abs(s)
                if abs(op.selectivity - s) / (0.01 if d < 0.01 else d) > drift:
                    self._stale = True
                else:
                    d = abs(c)
                    if abs(op.cost_ns_per_tuple - c) / (1e-12 if d < 1e-12 else d) > drift:
                        self._stale = True
                    else:
                        # _out_width: 0 at a sink, else the output's width; the loop above has just learned
                        # it when the output holds anything, and a width never learned falls back to 0
                        if not self.topology.consumers[id(op)]:          # Topology.is_sink
                            now = 0.0
                        elif self._knob_unit == "tuples":
                            now = 1.0
                        else:
                            now = widths.get(id(out), 0.0)
                        d = abs(w)
                        if abs(now - w) / (1e-12 if d < 1e-12 else d) > drift:
                            self._stale = True
        if self._stale and self._since >= self.RECOMPUTE_RUNS:
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
        readers = self._shape().readers.get(id(queue))
        if not readers:
            return []
        sinks = self._shape().sinks
        freed, children = n * width, []
        for op in readers:
            if id(op) in sinks:
                continue                              # produces nothing that stays in the plan
            sel = max(op.selectivity, 0.0)
            w = self.width(op.output, fallback=width)
            out = sel * w
            freed -= n * out
            if out > 0 and id(op) not in above:
                children.append(self.blocks(op.output, n * sel, w, costs, above | {id(op)}))
        step = Block(tuple(id(op) for op in readers), freed, n * sum(costs[id(op)] for op in readers))
        return tree_blocks(step, children)

    def _shape(self) -> _Shape:
        """What the recompute needs from the plan's topology, worked out once per plan."""
        shape = self._shape_cache
        if shape is None or shape.topology is not self.topology:
            shape = self._shape_cache = _Shape(self.topology)
        return shape

    def synchronised(self, chains: dict[Any, Block], rate: dict[Any, float]) -> dict[Any, Block]:
        """Merge the chains that meet at an operator with several inputs into one chain (one per such group).

        BBDM03 splits a join per input and gives each input's path its own chart, which assumes the join
        processes a tuple as soon as it reads it. Operators with several inputs here (joins, set operations:
        ``dsms.operators.binary``) apply a delta only once every other input has passed its timestamp
        (SPEC section 3); until then they hold it. So the chain below one input of a join frees nothing at the
        join by itself: its rows only move from the queue into the join, and leave when the other input's
        chain has brought its own rows up to the same time. Chains with separate priorities then starve one
        side while the other fills the join (``window_join``: greedy and Chain held up to 780 and 410 KB
        there, which the queues did not show). Merged, the chain's priority is what the two sides free
        together per unit of time: the blocks' memory and time summed, weighted by each input's arrival
        (``rate``: tuples each leaf queue has received, at least 1). Within the merged chain the tie rule
        (oldest batch first) then feeds the join in timestamp order, the order in which it can release.
        Blocks before the join's block on each side (a filter steeper than everything after it) keep their
        own priority: they free memory without the other side.
        """
        multi = self._shape().multi
        if not multi:
            return chains
        parent = {where: where for where in chains}

        def find(x: Any) -> Any:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for key in multi:
            holding = [where for where, block in chains.items() if key in block.ops]
            for where in holding[1:]:
                parent[find(where)] = find(holding[0])
        groups: dict[Any, list[Any]] = {}
        for where in chains:
            groups.setdefault(find(where), []).append(where)
        out: dict[Any, Block] = {}
        for members in groups.values():
            if len(members) == 1:
                out[members[0]] = chains[members[0]]
                continue
            ops = tuple(dict.fromkeys(k for where in members for k in chains[where].ops))
            freed = sum(rate[w] * chains[w].freed for w in members)
            time = sum(rate[w] * chains[w].time for w in members)
            out[("sync", *sorted(members))] = Block(ops, freed, time)
        return out

    def recompute(self) -> None:
        """Rebuild the blocks (chains) of every leaf queue's tree and each operator's priority."""
        topo, costs, shape = self.topology, self.costs(), self._shape()
        tail: dict[int, float] = {}
        for op, consumers in shape.consumers_first:
            sel = 0.0 if not consumers else max(op.selectivity, 0.0)
            tail[id(op)] = costs[id(op)] + sel * sum(tail.get(c, 0.0) for c in consumers)
        self.tail_time = tail
        chains: dict[Any, Block] = {}
        rate: dict[Any, float] = {}
        for root, q in enumerate(shape.leaves):
            for k, block in enumerate(self.blocks(q, 1.0, self.width(q), costs, frozenset())):
                chains[(root, k)] = block
                rate[(root, k)] = max(float(getattr(q, "tuples_in", 0) or 0), 1.0)
        chains = self.synchronised(chains, rate)
        best: dict[int, tuple[float, Any]] = {}
        for where, block in chains.items():
            for key in block.ops:
                if key not in best or block.slope > best[key][0]:
                    best[key] = (block.slope, where)
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
        self._dirty = self._stale = False
        self._since = 0

    def choose(self, ready: list[SchedOperator]) -> SchedOperator:
        fresh = [op for op in ready if getattr(op, "tuples_in", None) == 0]   # statistics not measured yet
        if fresh:
            return min(fresh, key=self.fifo_key)
        if self._dirty:
            self.recompute()
        if len(ready) == 1:
            return ready[0]
        prio = self.priorities
        ps = [prio.get(id(op), 0.0) for op in ready]
        top = max(ps)
        tol = 1e-9 * max(1.0, abs(top)) if top != float("inf") else 0.0
        level = [op for op, p in zip(ready, ps) if p >= top - tol]
        if len(level) == 1:
            return level[0]
        return self._oldest_of(level)

    def _oldest_of(self, level: list[SchedOperator]) -> SchedOperator:
        """The tie rule among operators of the top priority (``level``, two or more): the chain of the one
        holding the oldest batch, and in it the furthest-downstream ready operator on that batch's way."""
        chain_of, depth, up = self.chain_of, self.topology.depth, self.topology.upstream
        keys = {id(op): self.fifo_key(op) for op in level}      # each asked once per pick
        first = min(level, key=lambda op: keys[id(op)])         # the oldest batch of the level
        chain = chain_of.get(id(first))
        return min((op for op in level if chain_of.get(id(op)) == chain and id(first) in up(op)),
                   key=lambda op: (-depth.get(id(op), 0), *keys[id(op)]))

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "chains": self.chain_list}


class _Shape:
    """The parts of a plan's topology that a recompute reads and that change only with the plan: each queue's
    readers, the sinks, the operators consumers first (with their consumers), the leaf queues (written by no
    operator, in the topology's order) and the operators with several inputs."""

    def __init__(self, topo: Any) -> None:
        self.topology = topo
        self.readers = {q: [op for op, _ in rs] for q, rs in topo.readers_of.items()}
        self.sinks = {id(op) for op in topo.ops if topo.is_sink(op)}
        self.consumers_first = [(op, [id(c) for c in topo.consumers[id(op)]])
                                for op in sorted(topo.ops, key=lambda o: -topo.depth[id(o)])]
        written = {id(op.output) for op in topo.ops}
        self.leaves = [q for q in topo.queues.values() if id(q) not in written]
        self.multi = [id(op) for op in topo.ops if len(op.input_queues) > 1]


assert (ChainPolicy.drift.slot, ChainPolicy.unit.slot) == ("_knob_drift", "_knob_unit")   # read so in on_ran
