"""Round-robin scheduling: the STREAM prototype's baseline scheduler.

Source: digest-004 section 2.G R-SCH-01 (P1 section 4.2): operators take turns, each consuming at most one
granularity (the ``budget`` knob, in input items) of its input per turn. Simple and fair, blind to memory.
"""

from __future__ import annotations

from .base import Policy, SchedOperator


class RoundRobinPolicy(Policy):
    """Run the next ready operator after the last one that ran, in plan order, wrapping around."""

    name = "round_robin"

    def __init__(self, **knobs: object) -> None:
        super().__init__(**knobs)
        self._next = 0          # plan position where the next turn starts

    def choose(self, ready: list[SchedOperator]) -> SchedOperator:
        order = self.topology.order
        n = max(len(order), 1)
        op = min(ready, key=lambda o: (order.get(id(o), 0) - self._next) % n)
        self._next = order.get(id(op), 0) + 1
        return op
