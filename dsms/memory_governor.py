"""The memory governor (``mem:0``): over the system's ``memory_budget``, switch the largest switchable
synopses to their approximate kind instead of refusing input, and back to exact when memory falls well below
the budget (issue 14 item 3: synopsis kinds "chosen automatically when the global memory_budget would
otherwise be exceeded"; digest-004 R-APX-04; docs/approximation.md, "The memory governor").

Switchable state is found by its interface, never by class: an operator with ``switch_kind(kind)`` and
``kind_in_effect()`` (DISTINCT and the set operations: ``bloom``; join state: ``reservoir``), optionally
``projected_bytes(kind)`` (bytes in that kind if switched now; None or absent: unknown) and ``pending_kind``
(a requested kind not in effect yet). The approximate kind of an operator is the first of
``APPROXIMATE_KINDS`` it accepts. The operators guarantee that a switch applies at a future instant and loses
nothing that is still exact; the governor only decides when and which.

The thresholds (hysteresis): with ``auto_kind`` on, when memory passes the budget, operators in exact state
are switched largest first (their synopses' bytes) until the projected memory (now, minus what each switch
frees by its ``projected_bytes``; a switch that would free nothing is not made) fits the budget. A switch it
made goes back to exact when the memory projected after the switch back (the state's bytes replaced by its
exact bytes per row at the switch times the rows it holds now) is at most ``low_water`` times the budget,
so a switch back does not by itself bring memory over the budget again. Turning ``auto_kind`` off, or the
budget to None, switches back everything it switched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from control_tables import Entity, Knob, Stat

if TYPE_CHECKING:
    from dsms.engine import Engine

APPROXIMATE_KINDS = ("bloom", "reservoir")
FRESH_EVERY = 0.05      # seconds a fresh memory figure is reused (see MemoryGovernor._measure)


@dataclass
class Switched:
    """One operator the governor switched: its approximate kind, what the switch was to free, the exact
    state's bytes per row at the switch (None: unknown), and whether it was asked back to exact."""

    op: Any
    kind: str
    saving: int
    per_row: float | None
    back: bool = False


def switchable(op: Any) -> bool:
    """Whether the operator's state can change kind (``switch_kind`` and ``kind_in_effect``)."""
    return callable(getattr(op, "switch_kind", None)) and callable(getattr(op, "kind_in_effect", None))


def state_bytes(op: Any) -> int:
    """Bytes held by the operator's synopses (what a switch of kind changes)."""
    return sum(s.nbytes() for s in op.synopses)


def state_rows(op: Any) -> int:
    return sum(s.rows() for s in op.synopses)


class MemoryGovernor(Entity):
    """Switches synopses to their approximate kind over the system's ``memory_budget`` and back to exact
    below ``low_water`` of it (docs/approximation.md, "The memory governor"); one per engine, ``mem:0``."""

    prefix = "mem"
    kind = "memory_governor"
    auto_kind = Knob(bool, default=False, doc="over the system's memory_budget, switch the largest synopses to "
                     "their approximate kind (bloom, reservoir) instead of refusing or shedding input")
    low_water = Knob(float, default=0.5, gt=0.0, lt=1.0, doc="a switched synopsis goes back to exact when "
                     "memory after the switch back is projected at most this share of the budget")
    switched = Stat(list, default=(), compute="_switched", doc="operators whose state the governor holds in "
                    "an approximate kind now (asked for, in effect, or on the way back)")
    switches = Stat(int, doc="switches made, both ways")
    last_switch = Stat(str | None, default=None, doc="the last switch: operator, from kind -> to kind")
    last_switch_at = Stat(int | None, default=None, unit="ticks",
                          doc="application time when the last switch was asked for (it applies after it)")
    bytes_before = Stat(int | None, default=None, unit="bytes",
                        doc="memory held when the last switch was decided")
    bytes_after = Stat(int | None, default=None, unit="bytes", doc="memory projected once it is in effect")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.held: dict[str, Switched] = {}
        self._fresh: tuple[float, int, tuple] | None = None

    def _switched(self) -> list[str]:
        return sorted(oid for oid, r in self.held.items() if self._state(r) not in ("exact", "gone"))

    def on_set_auto_kind(self, old: bool, new: bool) -> None:
        if not new:
            self._restore_all()

    # ------------------------------------------------------------------ the decision

    def armed(self) -> bool:
        """Whether a step has anything to do (measuring memory is not free): on with a budget, or holding
        switched state to give back."""
        return bool(self.held) or (self.auto_kind and self.engine.system.memory_budget is not None)

    def step(self, memory: int | None = None) -> int | None:
        """Compare the memory held (``memory``, or measured now) with the budget and switch: called by the
        server with its admission step and every 0.2 s, and by ``Engine.run`` in-process. Returns the memory
        projected once the switches asked for are in effect (None when off or without a budget)."""
        self._tidy()
        budget = self.engine.system.memory_budget
        if not self.auto_kind or budget is None:
            self._restore_all()
            return None
        mem = self.engine.memory_bytes() if memory is None else memory
        if mem > budget:
            return self._shrink(mem, budget, fresh=memory is None)
        if mem <= self.low_water * budget:
            self._restore(mem, budget)
        return mem

    def relieve(self, memory: int) -> bool:
        """Admission found ``memory`` (a figure that may be a little old) over the budget: switch now; True
        when the memory projected once the switches asked for are in effect fits the budget, so the input
        may be accepted (the switches apply to it)."""
        if not self.auto_kind:
            return False
        projected = self.step(memory)
        return projected is not None and projected <= self.engine.system.memory_budget

    def _state(self, r: Switched) -> str:
        """asked (not in effect yet), approximate, returning (asked back), exact (back), or gone (someone
        else changed the kind)."""
        now = r.op.kind_in_effect()
        if r.back:
            return "exact" if now == "exact" else "returning"
        if now == r.kind:
            return "approximate"
        if now == "exact" and getattr(r.op, "pending_kind", r.kind) == r.kind:
            return "asked"
        return "gone"

    def _tidy(self) -> None:
        live = {id(op) for op in self.engine.ops}
        for oid, r in list(self.held.items()):
            if id(r.op) not in live or self._state(r) in ("exact", "gone"):
                del self.held[oid]

    def _shrink(self, mem: int, budget: int, fresh: bool) -> int:
        """Switch largest first until the projected memory fits; returns the projected memory."""
        projected = mem - sum(r.saving for r in self.held.values() if self._state(r) == "asked")
        if projected <= budget:
            return projected                        # switches under way will do
        if not fresh:                               # a cached figure may predate a switch now in effect
            mem = self._measure()
            projected = mem - sum(r.saving for r in self.held.values() if self._state(r) == "asked")
            if projected <= budget:
                return projected
        cands = [op for op in self.engine.ops if switchable(op) and op.id not in self.held
                 and op.kind_in_effect() == "exact" and getattr(op, "pending_kind", None) is None]
        for op in sorted(cands, key=state_bytes, reverse=True):
            if projected <= budget:
                break
            r = self._switch(op)
            if r is not None:
                projected -= r.saving
                self._note(op, "exact", r.kind, mem, projected)
        return projected

    def _measure(self) -> int:
        """``Engine.memory_bytes`` taken afresh; reused for ``FRESH_EVERY`` seconds while no switch was made or
        came into effect since: admission asks on every request while over the budget, and a refused
        request need not pay for a walk over every synopsis."""
        now = time.monotonic()
        key = (self.switches, frozenset(oid for oid, r in self.held.items() if self._state(r) == "asked"))
        if self._fresh is None or now - self._fresh[0] >= FRESH_EVERY or self._fresh[2] != key:
            self._fresh = (now, self.engine.memory_bytes(), key)
        return self._fresh[1]

    def _switch(self, op: Any) -> Switched | None:
        """Switch ``op`` to the first approximate kind it takes, unless that would free nothing."""
        before, rows = state_bytes(op), state_rows(op)
        project = getattr(op, "projected_bytes", None)
        for kind in APPROXIMATE_KINDS:
            try:
                after = project(kind) if project is not None else None
                if after is not None and after >= before:
                    return None                     # the filter would be as large as the exact state
                op.switch_kind(kind)
            except ValueError:
                continue                            # not a kind it takes, or not now (still draining)
            r = Switched(op, kind, before - after if after is not None else 0,
                         before / rows if rows > 0 else None)
            self.held[op.id] = r
            return r
        return None

    def _restore(self, mem: int, budget: int) -> None:
        for r in sorted(self.held.values(), key=lambda r: state_bytes(r.op)):
            if self._state(r) != "approximate" or r.per_row is None:
                continue
            after = mem - state_bytes(r.op) + int(r.per_row * state_rows(r.op))
            if after > self.low_water * budget:
                continue
            if self._back(r):
                self._note(r.op, r.kind, "exact", mem, after)
                mem = after

    def _restore_all(self) -> None:
        for r in list(self.held.values()):
            if self._state(r) in ("asked", "approximate") and self._back(r):
                self._note(r.op, r.kind, "exact", None, None)

    def _back(self, r: Switched) -> bool:
        try:
            r.op.switch_kind("exact")
        except ValueError:
            return False                            # a plain Bloom filter never empties; draining: later
        r.back = True
        return True

    def _note(self, op: Any, old: str, new: str, before: int | None, after: int | None) -> None:
        self.switches += 1
        self.last_switch = f"{op.id} {old} -> {new}"
        self.last_switch_at = self.engine.now()
        self.bytes_before, self.bytes_after = before, after
