"""Greedy scheduling: the ready operator that releases memory fastest right now.

Source: digest-004 section 2.G R-SCH-03 (P1 section 4.2: "greedily schedule the operator that consumes the
largest number of tuples per time unit and is the most selective"), formalised as (1 - selectivity) / cost;
BBDM03 section 4 uses it as the per-operator baseline. Its weakness (E2): an operator that releases nothing
itself is starved even when it feeds a very selective one; ``ChainPolicy`` fixes that.
"""

from __future__ import annotations

from .base import Policy, SchedOperator, release_share


class GreedyPolicy(Policy):
    """Run the ready operator with the highest (memory freed - memory produced) per unit of processing time.

    Per input tuple, an operator frees ``width_in * share`` and produces ``selectivity * width_out`` (nothing
    when its output leaves the plan). ``share`` is P-12: on a queue with several readers, a read frees an item
    only when no other reader still holds it, measured from the readers' positions (``release_share``).
    Ties go to the oldest pending batch, then the furthest downstream operator.
    """

    name = "greedy"

    def rate(self, op: SchedOperator, cost: float) -> float:
        """Memory released per unit time by the next run of ``op`` (negative when it grows memory).

        Inputs are weighted by their pending items (``pending()`` is O(1); rows would cost a queue scan per
        pick), and the rate is per input tuple, so the batch size cancels out.
        """
        freed = items = w_in = 0.0
        budget = self.budget(op)
        for q, r in zip(op.input_queues, op.readers):
            n = r.pending()
            if n:
                w = self.width(q)
                freed += n * w * release_share(op, r, self.topology, q, budget)
                w_in += n * w
                items += n
        if not items:
            return 0.0
        w_out = 0.0 if self.topology.is_sink(op) else self.width(op.output, fallback=w_in / items)
        return (freed - items * max(op.selectivity, 0.0) * w_out) / (items * cost)

    def choose(self, ready: list[SchedOperator]) -> SchedOperator:
        costs = self.costs()
        return min(ready, key=lambda op: (-self.rate(op, costs[id(op)]), *self.fifo_key(op)))
