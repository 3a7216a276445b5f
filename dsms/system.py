"""The system's own control table (``sys:0``, SPEC section 8): which scheduling policy runs, the global
memory budget and load shedding (docs/approximation.md), and global statistics. The policy's own knobs live
in its control table, ``sched:0`` (``Engine.set_policy``).

``memory_budget`` counts every queue, every synopsis and the rows operators hold (``Engine.memory_bytes``);
when it (or the runtime's backlog limit) is passed, input is refused with 503 + Retry-After while
``shedding`` is off, and accepted and shed by the load shedder while it is on."""

from __future__ import annotations

from control_tables import Knob, Stat, SystemEntity

POLICY_NAMES = ("fifo", "round_robin", "greedy", "chain", "chain_flush")


class EngineSystem(SystemEntity):
    kind = "system"
    policy = Knob(str, default="chain", choices=POLICY_NAMES,
                  doc="the scheduling policy; switching it while queries run changes no result")
    memory_budget = Knob(int | None, default=None, ge=0, unit="bytes",
                         doc="global budget for queues, synopses and held rows; over it input is refused "
                         "(503) or, with shedding on, shed (None: unbounded)")
    shedding = Knob(bool, default=False, doc="under overload, drop input at random where it costs the least "
                    "error (load shedder) instead of refusing it")
    load_threshold = Knob(float, default=0.9, gt=0.0, le=10.0, doc="shedding starts when the measured load "
                          "(CPU seconds of work per second of arrivals) passes this share of capacity")
    lag_target = Knob(float, default=1.0, ge=0.0, le=3600.0, unit="s",
                      doc="the load shedder steers the input backlog (the engine time it would take at the "
                      "rates in force) to at most this; above it the capacity it plans for is cut so that "
                      "the excess is worked off within two steps")
    load = Stat(float, compute="_load", unit="CPU s/s", doc="demand the load shedder measured at its last "
                "step: CPU seconds per second the queries' operators would use unshed")
    load_factor = Stat(float, compute="_load_factor", doc="the load shedder's calibration: engine time per "
                       "second of the work its per-tuple cost model predicts (smoothed; 1 before any)")
    input_lag = Stat(float, compute="_input_lag", unit="s", doc="engine time the input backlog would take at "
                     "the rates in force, at the load shedder's last step")
    shed_queries = Stat(int, compute="_shed_queries", doc="queries the load shedder is shedding now")
    memory_bytes = Stat(int, compute="_memory_bytes", unit="bytes",
                        doc="bytes held by all queues, synopses and rows held inside operators")
    backlog = Stat(int, compute="_backlog", unit="tuples",
                   doc="tuples in all queues and held inside operators (not yet fully processed)")
    scheduler = Stat(str | None, compute="_scheduler", doc="id of the policy's control table (its knobs)")
    queries = Stat(int, compute="_queries", doc="registered queries")
    operators = Stat(int, compute="_operators", doc="operators in the shared plan")
    queue_bytes = Stat(int, compute="_queue_bytes", unit="bytes", doc="bytes held by all queues")
    queue_tuples = Stat(int, compute="_queue_tuples", unit="tuples", doc="tuples held by all queues")
    queue_peak_bytes = Stat(int, compute="_queue_peak_bytes", unit="bytes",
                            doc="largest bytes any single queue has held")
    tuples_in = Stat(int, compute="_tuples_in", unit="tuples", doc="input elements accepted")
    application_time = Stat(int | None, compute="_now", unit="ticks",
                            doc="largest input frontier (what the change history stamps writes with)")

    def __init__(self, engine) -> None:
        self._engine = engine

    def _load(self) -> float:
        return round(self._engine.shedder.load, 6)

    def _load_factor(self) -> float:
        return round(self._engine.shedder.factor, 6)

    def _input_lag(self) -> float:
        return round(self._engine.shedder.lag, 6)

    def _shed_queries(self) -> int:
        return len(self._engine.shedder.rates)

    def _memory_bytes(self) -> int:
        return self._engine.memory_bytes()

    def _backlog(self) -> int:
        return self._engine.backlog()

    def _queries(self) -> int:
        return len(self._engine.query_list)

    def _operators(self) -> int:
        return len(self._engine.ops)

    def _queue_bytes(self) -> int:
        return sum(q.bytes for q in self._engine.queues)

    def _queue_tuples(self) -> int:
        return sum(q.tuples for q in self._engine.queues)

    def _queue_peak_bytes(self) -> int:
        return max((q.peak_bytes for q in self._engine.queues), default=0)

    def _tuples_in(self) -> int:
        return sum(s.elements_in for s in self._engine.sources.values())

    def _scheduler(self) -> str | None:
        return None if self._engine.policy is None else self._engine.policy.id

    def _now(self) -> int | None:
        return self._engine.now()

    def on_set_shedding(self, old: bool, new: bool) -> None:
        if not new:
            self._engine.shedder.shed({})        # every drop goes; results say so until their windows pass

    def on_set_policy(self, old: str, new: str) -> None:
        self._engine.set_policy(new)
