"""Registry: ids per prefix, lookup, owners, validated writes and their history (SPEC section 8)."""

from __future__ import annotations

import pytest

from control_tables import (
    Change,
    ControlTableError,
    Entity,
    InvalidValueError,
    Knob,
    NoSuchEntityError,
    Registry,
    Stat,
    SystemEntity,
)


class SelectOp(Entity):
    prefix = "op"
    kind = "select"
    tuples_in = Stat(int)
    priority = Knob(int, default=0, ge=0)


class JoinOp(Entity):
    prefix = "op"
    kind = "join"
    priority = Knob(int, default=0, ge=0)


class Queue(Entity):
    prefix = "queue"
    kind = "queue"
    capacity = Knob(int | None, default=None, ge=1)


class WindowSynopsis(Entity):
    prefix = "syn"
    kind = "window"
    memory = Knob(int | None, default=None, ge=0)


def test_ids_are_allocated_per_prefix_from_zero():
    reg = Registry()
    ids = [reg.add(e).id for e in (SelectOp(), Queue(), SelectOp(), WindowSynopsis(), JoinOp(), Queue())]
    assert ids == ["op:0", "queue:0", "op:1", "syn:0", "op:2", "queue:1"]
    assert len(reg) == 6 and "op:2" in reg and "op:3" not in reg
    assert [e.id for e in reg] == ids


def test_ids_are_per_registry():
    a, b = Registry(), Registry()
    assert a.add(SelectOp()).id == "op:0"
    assert b.add(SelectOp()).id == "op:0"
    assert a.add(SelectOp()).id == "op:1"


def test_ids_are_never_reused_after_remove():
    reg = Registry()
    first = reg.add(SelectOp())
    assert reg.remove("op:0") is first
    assert first.registry is None and first.id == "op:0"
    assert reg.add(SelectOp()).id == "op:1"
    assert "op:0" not in reg


def test_explicit_id_restores_and_moves_the_counter_past_it():
    reg = Registry()
    assert reg.add(SelectOp(), id="op:7").id == "op:7"
    assert reg.add(SelectOp()).id == "op:8"
    assert reg.add(SelectOp(), id="op:3").id == "op:3"
    assert reg.add(SelectOp()).id == "op:9"


def test_bad_or_taken_ids_are_refused():
    reg = Registry()
    op = reg.add(SelectOp())
    with pytest.raises(ControlTableError, match="id 'op:0' is already taken by <SelectOp op:0>"):
        reg.add(SelectOp(), id="op:0")
    with pytest.raises(ControlTableError, match=r"its ids look like 'op:<number>'"):
        reg.add(SelectOp(), id="queue:4")
    with pytest.raises(ControlTableError, match=r"its ids look like 'op:<number>'"):
        reg.add(SelectOp(), id="op:x")
    with pytest.raises(ControlTableError, match="op:0 is already registered"):
        reg.add(op)
    with pytest.raises(TypeError, match="only an Entity"):
        reg.add(object())  # type: ignore[type-var]


def test_unknown_entity_is_refused_with_a_close_match():
    reg = Registry()
    for _ in range(10):
        reg.add(SelectOp())
    with pytest.raises(NoSuchEntityError) as info:
        reg.get("op:99")
    assert str(info.value) == "no entity 'op:99'; did you mean 'op:9'?"
    assert info.value.entity_id == "op:99"
    assert isinstance(info.value, LookupError) and isinstance(info.value, ValueError)
    with pytest.raises(NoSuchEntityError, match=r"^no entity 'zzz'$"):
        reg.set("zzz", "priority", 1)
    with pytest.raises(NoSuchEntityError):
        reg.remove("queue:0")


def test_entities_filters_by_kind_owner_and_prefix():
    reg = Registry()
    s1, j1, q1, syn = reg.add(SelectOp()), reg.add(JoinOp()), reg.add(Queue()), reg.add(WindowSynopsis())
    s1.owners.update({"q1", "q2"})  # shared by two queries
    j1.owners.add("q2")
    q1.owners.add("q1")
    assert reg.entities() == [s1, j1, q1, syn]
    assert reg.entities(owner="q1") == [s1, q1]
    assert reg.entities(owner="q2") == [s1, j1]
    assert reg.entities(owner="q3") == []
    assert reg.entities(kind="join") == [j1]
    assert reg.entities(prefix="op") == [s1, j1]
    assert reg.entities(kind="select", owner="q2") == [s1]


def test_release_returns_the_entities_no_query_owns_any_more():
    reg = Registry()
    shared, own = reg.add(SelectOp()), reg.add(Queue())
    shared.owners.update({"q1", "q2"})
    own.owners.add("q1")
    assert reg.release("q1") == [own]
    assert shared.owners == {"q2"} and own.owners == set()
    assert reg.release("q2") == [shared]


def test_set_validates_applies_and_records():
    reg = Registry()
    op = reg.add(SelectOp())
    change = reg.set("op:0", "priority", 5, at=1200)
    assert isinstance(change, Change)
    assert (change.seq, change.entity_id, change.attr, change.old, change.new, change.at) == \
        (1, "op:0", "priority", 0, 5, 1200)
    assert change.wall_time > 0
    assert op.priority == 5
    with pytest.raises(InvalidValueError, match="op:0: cannot set 'priority' to -5"):
        reg.set("op:0", "priority", -5)
    assert op.priority == 5
    assert reg.history() == [change]


def test_history_per_entity_and_since():
    reg = Registry()
    op, q = reg.add(SelectOp()), reg.add(Queue())
    op.set("priority", 1, at=10)
    q.set("capacity", 100, at=11)
    op.set("priority", 2, at=12)
    assert [(c.seq, c.entity_id, c.attr, c.old, c.new, c.at) for c in reg.history()] == [
        (1, "op:0", "priority", 0, 1, 10), (2, "queue:0", "capacity", None, 100, 11),
        (3, "op:0", "priority", 1, 2, 12)]
    assert [c.seq for c in op.history()] == [1, 3]
    assert [c.seq for c in reg.history("queue:0")] == [2]
    assert [c.seq for c in reg.history(since=1)] == [2, 3]
    reg.remove("op:0")
    assert [c.seq for c in reg.history("op:0")] == [1, 3]  # history outlives the entity


def test_clock_supplies_at_when_the_caller_does_not():
    now = {"t": 500}
    reg = Registry(clock=lambda: now["t"])
    op = reg.add(SelectOp())
    assert op.set("priority", 1).at == 500
    now["t"] = 700
    assert reg.set("op:0", "priority", 2).at == 700
    assert reg.set("op:0", "priority", 3, at=42).at == 42


def test_history_is_bounded():
    reg = Registry(history_limit=3)
    op = reg.add(SelectOp())
    for v in range(1, 6):
        op.set("priority", v)
    assert [(c.seq, c.new) for c in reg.history()] == [(3, 3), (4, 4), (5, 5)]
    assert reg.history_dropped == 2
    reg.history_limit = 1
    assert [c.seq for c in reg.history()] == [5] and reg.history_dropped == 4
    assert Registry().history_limit == 1000


def test_system_entity_owns_the_history_limit_knob():
    reg = Registry(history_limit=50)
    system = reg.add(SystemEntity())
    assert system.id == "sys:0" and system.get() == {"id": "sys:0", "kind": "system", "history_limit": 1000}
    assert reg.history_limit == 1000  # the knob is the source of truth once registered
    reg.set("sys:0", "history_limit", 2)
    assert reg.history_limit == 2
    op = reg.add(SelectOp())
    for v in (1, 2, 3):
        op.set("priority", v)
    assert [(c.entity_id, c.new) for c in reg.history()] == [("op:0", 2), ("op:0", 3)]
    with pytest.raises(InvalidValueError, match="sys:0: cannot set 'history_limit' to -1"):
        reg.set("sys:0", "history_limit", -1)
    assert reg.history_limit == 2


def test_error_details_for_http():
    reg = Registry()
    reg.add(Queue())
    with pytest.raises(InvalidValueError) as info:
        reg.set("queue:0", "capacity", 0)
    assert info.value.to_dict() == {
        "error": "queue:0: cannot set 'capacity' to 0: 0 is below the minimum 1; allowed: int with value >= 1, "
                 "or None",
        "entity": "queue:0", "attribute": "capacity", "value": 0, "allowed": "int with value >= 1, or None"}
