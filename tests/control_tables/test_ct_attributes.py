"""Stat and Knob declarations: types, defaults, validation rules, cost model, ewma (SPEC section 8)."""

from __future__ import annotations

from typing import Literal, Optional

import pytest

from control_tables import ComputedStat, ControlTableError, Entity, InvalidValueError, Knob, Stat, ewma
from control_tables.attributes import Refused, TypeSpec


class Probe(Entity):
    prefix = "op"
    kind = "probe"
    tuples_in = Stat(int, unit="tuples", doc="tuples consumed")
    selectivity = Stat(float | None, default=None, doc="output/input, EWMA")
    last_ts = Stat(int, default=-1)
    log = Stat(list, default=[])
    length = Stat(int, compute=lambda self: len(self.log), doc="computed")
    priority = Knob(int, default=0, ge=0, le=1000)
    rate = Knob(float, default=1.0, gt=0.0, le=1.0)
    memory = Knob(int | None, default=None, ge=0, unit="bytes")
    flag = Knob(bool, default=False)
    mode = Knob(Literal["exact", "reservoir", "bloom"], default="exact")
    policy = Knob(str, default="chain", choices=("fifo", "chain"))
    even = Knob(int, default=0, validate=lambda v: v % 2 == 0)
    named = Knob(int, default=0, validate=lambda v: None if v < 10 else "must stay below 10")


# -- declarations --------------------------------------------------------------------------------------------

def test_defaults_by_type_when_none_given():
    assert Stat(int).default == 0
    assert Stat(float).default == 0.0
    assert Stat(bool).default is False
    assert Stat(str).default == ""
    assert Stat(int | None).default is None
    assert Knob(Literal["a", "b"]).default == "a"


def test_declaration_metadata():
    a = Probe.control_attributes()
    assert list(a) == ["tuples_in", "selectivity", "last_ts", "log", "length", "priority", "rate", "memory",
                       "flag", "mode", "policy", "even", "named"]
    assert a["tuples_in"].kind == "stat" and a["tuples_in"].writable is False
    assert a["tuples_in"].unit == "tuples" and a["tuples_in"].doc == "tuples consumed"
    assert a["priority"].kind == "knob" and a["priority"].writable is True
    assert a["priority"].range() == {"ge": 0, "le": 1000}
    assert a["rate"].range() == {"gt": 0.0, "le": 1.0}
    assert a["memory"].type_text == "int | None"
    assert a["mode"].type_text == "str"
    assert a["mode"].choices() == ["exact", "reservoir", "bloom"]
    assert a["policy"].choices() == ["fifo", "chain"]
    assert isinstance(a["length"], ComputedStat)


def test_type_text():
    assert TypeSpec(int).text == "int"
    assert TypeSpec(Optional[float]).text == "float | None"  # noqa: UP045 - typing.Optional must work too
    assert TypeSpec(None | str).text == "str | None"
    assert TypeSpec(Literal[1, 2] | None).text == "int | None"


def test_bad_declarations_fail_at_class_time():
    with pytest.raises(TypeError, match="default 5 is not allowed"):
        Knob(int, default=5, le=3)
    with pytest.raises(TypeError, match="default None is not allowed"):
        Knob(int, default=None)
    with pytest.raises(TypeError, match="bounds need an int or float"):
        Knob(str, default="x", ge=0)
    with pytest.raises(TypeError, match="choice 3 is not of the knob's type"):
        Knob(str, default="a", choices=("a", 3))
    with pytest.raises(TypeError, match="unsupported control-table type"):
        Knob(list[int], default=[])
    with pytest.raises(TypeError, match="needs a default"):
        Knob(dict)


# -- statistics are plain attributes --------------------------------------------------------------------------

def test_stat_is_a_plain_instance_attribute():
    # No descriptor stays on the class: `p.tuples_in += n` is an ordinary attribute update (the cost claim
    # of attributes.py; timings belong in the benchmarks, not here).
    assert "tuples_in" not in vars(Probe)
    assert not hasattr(Probe, "tuples_in")
    p = Probe()
    p.tuples_in += 5
    p.tuples_in += 2
    assert p.tuples_in == 7
    assert p.last_ts == -1
    assert p.get("tuples_in") == 7


def test_mutable_stat_default_is_copied_per_instance():
    a, b = Probe(), Probe()
    a.log.append(1)
    assert a.log == [1] and b.log == []
    assert a.length == 1 and b.length == 0


def test_computed_stat_cannot_be_assigned():
    p = Probe()
    with pytest.raises(AttributeError, match="computed statistic"):
        p.length = 3


# -- knob validation -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("attr, value, stored", [
    ("priority", 0, 0), ("priority", 1000, 1000),
    ("rate", 1, 1.0), ("rate", 0.25, 0.25),
    ("memory", None, None), ("memory", 0, 0), ("memory", 4096, 4096),
    ("flag", True, True),
    ("mode", "bloom", "bloom"),
    ("policy", "fifo", "fifo"),
    ("even", 4, 4), ("named", 9, 9),
])
def test_valid_values_are_stored(attr, value, stored):
    p = Probe()
    p.set(attr, value)
    assert p.get(attr) == stored
    assert type(p.get(attr)) is type(stored)


def test_int_for_float_is_stored_as_float():
    p = Probe()
    p.set("rate", 1)
    assert p.rate == 1.0 and isinstance(p.rate, float)


@pytest.mark.parametrize("attr, value, reason", [
    ("priority", True, "a bool is not a number"),
    ("priority", False, "a bool is not a number"),
    ("priority", "10", "got a string; text is not converted, send a JSON number"),
    ("priority", 2.0, "wrong type float"),
    ("priority", None, "wrong type NoneType"),
    ("priority", -1, "-1 is below the minimum 0"),
    ("priority", 1001, "1001 is above the maximum 1000"),
    ("rate", 0.0, "0.0 is not above 0.0"),
    ("rate", 0, "0.0 is not above 0.0"),
    ("rate", 1.5, "1.5 is above the maximum 1.0"),
    ("rate", True, "a bool is not a number"),
    ("rate", float("nan"), "NaN is not allowed"),
    ("rate", "0.5", "got a string; text is not converted, send a JSON number"),
    ("memory", -1, "-1 is below the minimum 0"),
    ("memory", 1.5, "wrong type float"),
    ("flag", 1, "wrong type int"),
    ("flag", "true", "got a string; text is not converted, send true or false"),
    ("mode", "lossy", "not one of the allowed values"),
    ("mode", 1, "wrong type int"),
    ("policy", "lifo", "not one of the choices"),
    ("policy", 3, "wrong type int"),
    ("even", 3, "refused by <lambda>"),
    ("named", 12, "must stay below 10"),
])
def test_invalid_values_are_refused_and_change_nothing(attr, value, reason):
    p = Probe()
    p.id = "op:7"
    before = p.get()
    with pytest.raises(InvalidValueError) as info:
        p.set(attr, value)
    err = info.value
    assert isinstance(err, ControlTableError) and isinstance(err, ValueError)
    assert err.entity_id == "op:7"
    assert err.attr == attr
    assert err.value is value
    msg = str(err)
    assert msg.startswith(f"op:7: cannot set {attr!r} to {value!r}: {reason}; allowed: ")
    assert p.get() == before


def test_allowed_text():
    a = Probe.control_attributes()
    assert a["priority"].allowed() == "int with 0 <= value <= 1000"
    assert a["rate"].allowed() == "float with 0.0 < value <= 1.0"
    assert a["memory"].allowed() == "int with value >= 0, or None"
    assert a["flag"].allowed() == "bool"
    assert a["mode"].allowed() == "one of 'exact', 'reservoir', 'bloom'"
    assert a["policy"].allowed() == "one of 'fifo', 'chain'"
    assert a["even"].allowed() == "int, accepted by <lambda>"
    assert Knob(float, lt=5).allowed() == "float with value < 5"


def test_error_message_names_entity_attribute_value_and_allowed():
    p = Probe()
    p.id = "op:3"
    with pytest.raises(InvalidValueError) as info:
        p.set("priority", 5000)
    assert str(info.value) == ("op:3: cannot set 'priority' to 5000: 5000 is above the maximum 1000; "
                               "allowed: int with 0 <= value <= 1000")
    assert info.value.to_dict() == {"error": str(info.value), "entity": "op:3", "attribute": "priority",
                                    "value": 5000, "allowed": "int with 0 <= value <= 1000"}


def test_validate_raising_value_error_refuses():
    def positive_power_of_two(v: int) -> None:
        if v & (v - 1):
            raise ValueError(f"{v} is not a power of two")

    k = Knob(int, default=1, ge=1, validate=positive_power_of_two)
    assert k.coerce(8) == 8
    with pytest.raises(Refused, match="6 is not a power of two"):
        k.coerce(6)


def test_direct_assignment_of_a_knob_is_validated_too():
    p = Probe()
    p.priority = 12
    assert p.priority == 12
    with pytest.raises(InvalidValueError, match=r"Probe \(unregistered\): cannot set 'priority' to -3"):
        p.priority = -3
    assert p.priority == 12
    assert p.history() == []  # direct assignments are the entity's own business: not recorded


def test_numpy_style_integers_are_ints():
    import numpy as np

    p = Probe()
    p.set("priority", np.int64(7))
    assert p.priority == 7 and type(p.priority) is int
    p.set("rate", np.float32(0.5))
    assert p.rate == 0.5 and type(p.rate) is float


# -- ewma ----------------------------------------------------------------------------------------------------

def test_ewma():
    assert ewma(None, 4.0) == 4.0
    assert ewma(10.0, 20.0, alpha=0.5) == 15.0
    assert ewma(1.0, 0.0) == pytest.approx(0.8)
    v = None
    for sample in (1.0, 1.0, 1.0):
        v = ewma(v, sample)
    assert v == 1.0


def test_literal_with_none():
    k = Knob(Literal["a", None], default=None)
    assert k.type_text == "str | None"
    assert k.allowed() == "one of 'a', None"
    assert k.coerce(None) is None and k.coerce("a") == "a"
    with pytest.raises(Refused, match="not one of the allowed values"):
        k.coerce("b")
