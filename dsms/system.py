"""The system's own control table (``sys:0``, SPEC section 8): scheduler policy, global memory budget,
shedding, and global statistics."""

from __future__ import annotations

from control_tables import Knob, Stat, SystemEntity

POLICY_NAMES = ("fifo", "round_robin", "greedy", "chain", "chain_flush")


class EngineSystem(SystemEntity):
    kind = "system"
    policy = Knob(str, default="chain", choices=POLICY_NAMES,
                  doc="the scheduling policy; switching it while queries run changes no result")
    memory_budget = Knob(int | None, default=None, ge=0, unit="bytes",
                         doc="global memory budget for queues and synopses (None: unbounded)")
    shedding = Knob(bool, default=False, doc="drop input under overload instead of refusing it")
    queries = Stat(int, compute="_queries", doc="registered queries")
    operators = Stat(int, compute="_operators", doc="operators in the shared plan")
    queue_bytes = Stat(int, compute="_queue_bytes", unit="bytes", doc="bytes held by all queues")
    tuples_in = Stat(int, compute="_tuples_in", unit="tuples", doc="input elements accepted")
    application_time = Stat(int | None, compute="_now", unit="ticks",
                            doc="largest input frontier (what the change history stamps writes with)")

    def __init__(self, engine) -> None:
        self._engine = engine

    def _queries(self) -> int:
        return len(self._engine.query_list)

    def _operators(self) -> int:
        return len(self._engine.ops)

    def _queue_bytes(self) -> int:
        return sum(q.bytes for q in self._engine.queues)

    def _tuples_in(self) -> int:
        return sum(s.elements_in for s in self._engine.sources.values())

    def _now(self) -> int | None:
        return self._engine.now()

    def on_set_policy(self, old: str, new: str) -> None:
        self._engine.set_policy(new)
