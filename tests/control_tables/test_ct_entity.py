"""Entity: control-table collection, get/set/describe, hooks and rollback (SPEC section 8, digest-004 2.I)."""

from __future__ import annotations

from typing import Literal

import pytest

from control_tables import (
    ControlTableError,
    Entity,
    HookError,
    InvalidValueError,
    Knob,
    NoSuchAttributeError,
    ReadOnlyAttributeError,
    Registry,
    Stat,
)


class SelectOp(Entity):
    """Keep the elements whose predicate holds."""

    prefix = "op"
    kind = "select"
    tuples_in = Stat(int, default=0, unit="tuples", doc="tuples consumed")
    selectivity = Stat(float, default=0.0, doc="output/input tuples, EWMA")
    priority = Knob(int, default=0, ge=0, le=1000, doc="scheduler hint; higher runs first")
    memory = Knob(int | None, default=None, ge=0, unit="bytes", doc="memory budget")
    kind_knob = Knob(Literal["exact", "reservoir", "bloom"], default="exact", name="kind", doc="synopsis kind")
    policy = Knob(str, default="chain", choices=("fifo", "round_robin", "greedy", "chain", "chain_flush"))


class HookedOp(Entity):
    prefix = "op"
    kind = "hooked"
    capacity = Knob(int, default=10, ge=1)
    window = Knob(int, default=5, ge=0, on_set="resize")
    mode_knob = Knob(str, default="a", name="mode")
    plain = Knob(int, default=0)

    def __init__(self) -> None:
        self.items = [1, 2, 3]
        self.calls: list[tuple[str, object, object]] = []

    def on_set_capacity(self, old: int, new: int) -> None:
        self.calls.append(("capacity", old, new))
        if new < len(self.items):
            raise ValueError(f"{len(self.items)} items are queued, more than {new}")

    def resize(self, old: int, new: int) -> None:
        self.calls.append(("window", old, new))
        assert self.window == new  # the new value is in place while the hook runs
        if new == 13:
            raise RuntimeError("unlucky window")

    def on_set_mode_knob(self, old: str, new: str) -> None:  # hook by Python name of a renamed knob
        self.calls.append(("mode", old, new))


def test_get_returns_id_kind_and_every_attribute():
    op = SelectOp()
    op.tuples_in += 3
    assert op.get() == {"id": None, "kind": "exact", "tuples_in": 3, "selectivity": 0.0, "priority": 0,
                        "memory": None, "policy": "chain"}
    assert SelectOp.entity_kind() == "select"  # the entity kind stays available when a knob is named "kind"
    assert op.get("kind") == "exact"
    assert op.kind_knob == "exact"
    assert HookedOp().get() == {"id": None, "kind": "hooked", "capacity": 10, "window": 5, "mode": "a",
                                "plain": 0}


def test_set_changes_the_value_seen_by_the_entity():
    op = Registry().add(SelectOp())
    op.set("priority", 7)
    op.set("kind", "bloom")
    op.set("memory", 2048)
    assert (op.priority, op.kind_knob, op.memory) == (7, "bloom", 2048)
    assert op.get()["kind"] == "bloom"


def test_describe_lists_every_attribute():
    op = SelectOp()
    op.set("priority", 3)
    d = {row["name"]: row for row in op.describe()}
    assert list(d) == ["tuples_in", "selectivity", "priority", "memory", "kind", "policy"]
    assert d["tuples_in"] == {"name": "tuples_in", "kind": "stat", "type": "int", "unit": "tuples",
                              "writable": False, "range": None, "choices": None, "default": 0,
                              "doc": "tuples consumed", "value": 0}
    assert d["priority"] == {"name": "priority", "kind": "knob", "type": "int", "unit": None, "writable": True,
                             "range": {"ge": 0, "le": 1000}, "choices": None, "default": 0,
                             "doc": "scheduler hint; higher runs first", "value": 3}
    assert d["memory"]["type"] == "int | None" and d["memory"]["unit"] == "bytes"
    assert d["kind"]["choices"] == ["exact", "reservoir", "bloom"] and d["kind"]["value"] == "exact"
    assert d["policy"]["choices"] == ["fifo", "round_robin", "greedy", "chain", "chain_flush"]


def test_writing_a_stat_is_refused():
    op = Registry().add(SelectOp())
    with pytest.raises(ReadOnlyAttributeError) as info:
        op.set("tuples_in", 5)
    assert str(info.value) == ("op:0: 'tuples_in' is a read-only statistic; writable attributes: priority, "
                               "memory, kind, policy")
    assert isinstance(info.value, ControlTableError)
    assert op.tuples_in == 0


def test_unknown_attribute_is_refused_with_a_suggestion():
    op = Registry().add(SelectOp())
    with pytest.raises(NoSuchAttributeError) as info:
        op.set("prority", 5)
    assert str(info.value) == ("op:0: no attribute 'prority'; did you mean 'priority'? (attributes: tuples_in, "
                               "selectivity, priority, memory, kind, policy)")
    with pytest.raises(NoSuchAttributeError, match="no attribute 'zzz' \\(attributes"):
        op.get("zzz")
    # The Python name of a renamed knob is not a control-table name.
    with pytest.raises(NoSuchAttributeError, match="no attribute 'kind_knob'"):
        op.set("kind_knob", "bloom")


def test_hook_runs_with_old_and_new():
    e = Registry().add(HookedOp())
    e.set("capacity", 20)
    e.set("window", 9)
    e.set("mode", "b")
    assert e.calls == [("capacity", 10, 20), ("window", 5, 9), ("mode", "a", "b")]
    assert (e.capacity, e.window, e.mode_knob) == (20, 9, "b")


def test_hook_failure_rolls_back_and_reports():
    reg = Registry()
    e = reg.add(HookedOp())
    with pytest.raises(HookError) as info:
        e.set("capacity", 2)
    assert str(info.value) == ("op:0: setting 'capacity' to 2 was refused, value kept at 10: "
                               "3 items are queued, more than 2")
    assert isinstance(info.value.__cause__, ValueError)
    assert e.capacity == 10
    with pytest.raises(HookError, match="unlucky window"):
        e.set("window", 13)
    assert e.window == 5
    assert reg.history() == []  # nothing half-applied, nothing recorded


def test_validation_happens_before_the_hook():
    e = HookedOp()
    with pytest.raises(InvalidValueError):
        e.set("capacity", 0)
    assert e.calls == []


def test_unchanged_value_runs_no_hook_and_records_nothing():
    reg = Registry()
    e = reg.add(HookedOp())
    assert e.set("capacity", 10) is None
    assert e.calls == [] and reg.history() == []


def test_set_many_is_all_or_nothing():
    reg = Registry()
    e = reg.add(HookedOp())
    # A validation failure anywhere: nothing applied, no hook run.
    with pytest.raises(InvalidValueError):
        e.set_many({"capacity": 20, "window": -1})
    assert (e.capacity, e.window, e.calls) == (10, 5, [])
    # A hook failure after an applied write: the applied one is undone, its hook told so.
    with pytest.raises(HookError):
        e.set_many({"capacity": 20, "window": 13})
    assert (e.capacity, e.window) == (10, 5)
    assert e.calls == [("capacity", 10, 20), ("window", 5, 13), ("capacity", 20, 10)]
    assert reg.history() == []
    changes = e.set_many({"capacity": 30, "window": 6, "plain": 0}, at=50)
    assert [(c.attr, c.old, c.new, c.at) for c in changes] == [("capacity", 10, 30, 50), ("window", 5, 6, 50)]


def test_constructor_keywords_set_knobs():
    op = SelectOp(priority=4, kind="reservoir")
    assert (op.priority, op.kind_knob) == (4, "reservoir")
    with pytest.raises(InvalidValueError):
        SelectOp(priority=-1)
    with pytest.raises(ReadOnlyAttributeError):
        SelectOp(tuples_in=1)


def test_subclass_inherits_overrides_and_hides():
    class Base(Entity):
        prefix = "op"
        kind = "base"
        a = Stat(int)
        b = Knob(int, default=1)
        c = Knob(int, default=2)

    class Child(Base):
        kind = "child"
        b = Knob(int, default=5, ge=5)  # redeclared: keeps its place
        c = 3  # hidden by a plain class attribute
        d = Stat(float)

    assert list(Child.control_attributes()) == ["a", "b", "d"]
    child = Child()
    assert child.get() == {"id": None, "kind": "child", "a": 0, "b": 5, "d": 0.0}
    assert Base().get() == {"id": None, "kind": "base", "a": 0, "b": 1, "c": 2}
    with pytest.raises(InvalidValueError):
        child.set("b", 4)


def test_kind_defaults_to_the_nearest_string_and_then_the_class_name():
    class WindowSynopsis(Entity):
        prefix = "syn"
        kind = Knob(Literal["exact", "reservoir", "bloom"], default="exact")

    class Unnamed(Entity):
        pass

    assert WindowSynopsis.entity_kind() == "entity"
    assert WindowSynopsis().get() == {"id": None, "kind": "exact"}
    assert Unnamed.entity_kind() == "entity"


def test_declaration_errors():
    with pytest.raises(TypeError, match="reserved"):
        class A(Entity):
            ident = Stat(int, name="id")
    with pytest.raises(TypeError, match="two attributes are named 'x'"):
        class B(Entity):
            x = Stat(int)
            y = Knob(int, name="x")
    with pytest.raises(TypeError, match="there is no knob 'prority' for this hook"):
        class C(Entity):
            priority = Knob(int)

            def on_set_prority(self, old: int, new: int) -> None: ...
    with pytest.raises(TypeError, match="names hook 'missing', which is not a method"):
        class D(Entity):
            priority = Knob(int, on_set="missing")


def test_entity_without_registry():
    op = SelectOp()
    assert op.id is None and op.registry is None and op.owners == set()
    assert op.set("priority", 2) is None
    assert op.priority == 2 and op.history() == []
    assert repr(op) == "<SelectOp SelectOp (unregistered)>"


def test_on_set_may_be_a_function_and_compute_a_method_name():
    seen: list[tuple[str, int, int]] = []

    class Q(Entity):
        prefix = "queue"
        kind = "queue"
        length = Stat(int, compute="_length", unit="tuples")
        capacity = Knob(int, default=4, ge=1, on_set=lambda self, old, new: seen.append((self.label, old, new)))

        def __init__(self) -> None:
            self.buf = [1, 2]

        def _length(self) -> int:
            return len(self.buf)

    reg = Registry()
    q = reg.add(Q())
    q.set("capacity", 8)
    assert seen == [("queue:0", 4, 8)]
    q.buf.append(3)
    assert q.get() == {"id": "queue:0", "kind": "queue", "length": 3, "capacity": 8}
    assert q.describe()[0]["value"] == 3
