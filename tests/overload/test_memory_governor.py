"""The memory governor (``mem:0``, issue 14 item 3): over the system's ``memory_budget`` it switches the largest
switchable synopses to their approximate kind until the projected memory fits, and back to exact below
``low_water`` of the budget; a switch it makes loses nothing that is still exact (the output equals the exact
run's, element for element, with a filter too large to collide); nothing happens while it is off; bad knob
values are refused. The server's side (admission accepts instead of refusing) is
tests/overload/test_memory_governor_http.py."""

from __future__ import annotations

import random

import pytest

from control_tables import ControlTableError
from dsms import Engine
from dsms.memory_governor import state_bytes


def _distinct(eng: Engine, name: str, keys: int) -> tuple[object, object]:
    """A DISTINCT query over its own stream, fed ``keys`` distinct rows; (query, its DISTINCT operator)."""
    eng.execute(f"REGISTER STREAM {name} (a INT, b INT)")
    q = eng.execute(f"SELECT DISTINCT a, b FROM {name} [RANGE 100000]")
    eng.push(name, {"a": list(range(keys)), "b": [7 * k for k in range(keys)]}, ts=list(range(keys)))
    eng.run()
    q.drain()
    (op,) = [op for op in eng.ops if q.id in op.owners and op.kind == "distinct"]
    return q, op


def test_over_the_budget_the_largest_states_go_to_bloom_until_memory_fits():
    eng = Engine()
    big, medium, small = (_distinct(eng, n, k) for n, k in (("B", 12000), ("M", 6000), ("L", 3000)))
    mem = eng.memory_bytes()
    saving = {q.id: state_bytes(op) - op.projected_bytes("bloom") for q, op in (big, medium, small)}
    assert all(s > 0 for s in saving.values())
    budget = mem - saving[big[0].id] - saving[medium[0].id] // 2      # the largest alone is not enough
    eng.set("sys:0", "memory_budget", budget)
    eng.set("mem:0", "auto_kind", True)
    eng.run()                                                         # in-process: a run to idle steps it
    gov = eng.entity("mem:0").get()
    assert gov["switched"] == sorted([big[1].id, medium[1].id]), gov  # largest first, and no more than needed
    assert gov["switches"] == 2 and gov["last_switch"] == f"{medium[1].id} exact -> bloom"
    assert gov["bytes_before"] == mem and gov["bytes_after"] == mem - saving[big[0].id] - saving[medium[0].id]
    assert [op.kind_in_effect() for _, op in (big, medium, small)] == ["exact"] * 3   # at a future instant
    for name in "BML":
        eng.push(name, [{"a": -1, "b": -1}], ts=20000)
    eng.run()
    assert [op.kind_in_effect() for _, op in (big, medium, small)] == ["bloom", "bloom", "exact"]
    assert eng.memory_bytes() <= budget
    assert big[1].synopses[0].get("kind") == "bloom"                  # the synopsis's knob says so
    assert big[0].approximation() is not None and small[0].approximation() is None
    assert big[0].drain()[-1].approx is not None


def test_nothing_switches_while_it_is_off_or_under_the_budget():
    eng = Engine()
    q, op = _distinct(eng, "S", 5000)
    eng.set("sys:0", "memory_budget", eng.memory_bytes() // 4)
    eng.run()
    eng.governor.step()
    assert eng.entity("mem:0").get("switched") == [] and op.synopses[0].get("kind") == "exact"
    assert op.pending_kind is None and eng.entity("mem:0").get("switches") == 0
    eng.set("sys:0", "memory_budget", eng.memory_bytes() * 2)
    eng.set("mem:0", "auto_kind", True)
    eng.governor.step()
    assert eng.entity("mem:0").get("switched") == [] and op.pending_kind is None


def test_back_to_exact_only_well_below_the_budget_after_the_window_turned_over():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    q = eng.execute("SELECT DISTINCT a, b FROM S [RANGE 20000]")
    eng.push("S", {"a": list(range(10000)), "b": list(range(10000))}, ts=list(range(10000)))
    eng.run()
    q.drain()
    (op,) = [o for o in eng.ops if o.kind == "distinct"]
    budget = eng.memory_bytes() // 2
    eng.set("sys:0", "memory_budget", budget)
    eng.set("mem:0", "auto_kind", True)
    eng.run()
    eng.push("S", [{"a": -1, "b": -1}], ts=10000)
    eng.run()
    assert op.kind_in_effect() == "bloom" and low(eng) < eng.memory_bytes() <= budget
    eng.push("S", [{"a": -2, "b": -2}], ts=10001)     # between low water and the budget: it stays
    eng.run()
    assert op.kind_in_effect() == "bloom"
    eng.heartbeat(40000)                               # the window turns over: the filter empties
    eng.run()
    assert eng.memory_bytes() <= low(eng)
    assert eng.entity("mem:0").get("last_switch") == f"{op.id} bloom -> exact"
    q.drain()
    eng.push("S", [{"a": 1, "b": 1}], ts=40001)
    eng.heartbeat(40002)
    eng.run()
    assert op.kind_in_effect() == "exact" and q.approximation() is None
    assert eng.entity("mem:0").get("switched") == [] and eng.entity("mem:0").get("switches") == 2
    assert [(e.row, e.sign, e.approx) for e in q.drain()] == [({"a": 1, "b": 1}, 1, None)]


def low(eng: Engine) -> float:
    return eng.entity("mem:0").get("low_water") * eng.system.get("memory_budget")


def _rows(seed: int, n: int, keys: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"a": (k := rng.randrange(keys)), "b": 3 * k + 1} for _ in range(n)]


def _run(cql: str, budget_at: dict[int, object], n: int = 6000, batch: int = 100):
    """``cql`` over S and T fed in batches with the governor on and a tiny fp_rate (no collisions); before
    batch i the memory budget becomes ``budget_at[i]`` (a callable of the engine's memory, or None)."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT); REGISTER STREAM T (a INT, b INT)")
    q = eng.execute(cql)
    (op,) = [o for o in eng.ops if hasattr(o, "switch_kind")]
    eng.set(op.synopses[0].id, "fp_rate", 1e-6)
    eng.set("mem:0", "auto_kind", True)
    rs, rt = _rows(1, n, 3000), _rows(2, n, 3000)
    seen = []
    for i in range(0, n, batch):
        if i // batch in budget_at:
            b = budget_at[i // batch]
            eng.set("sys:0", "memory_budget", b(eng.memory_bytes()) if callable(b) else b)
        eng.push("S", rs[i:i + batch], ts=list(range(i, i + batch)))
        eng.push("T", rt[i:i + batch], ts=list(range(i, i + batch)))
        eng.run()
        seen.append(op.kind_in_effect())
    eng.heartbeat(n + 10**5)
    eng.run()
    return q.drain(), seen, eng


@pytest.mark.parametrize("cql", [
    "SELECT DISTINCT a, b FROM S [RANGE 2000]",
    "SELECT a, b FROM S [RANGE 2000] EXCEPT SELECT a, b FROM T [RANGE 1000]",
    "SELECT a, b FROM S [RANGE 2000] INTERSECT ALL SELECT a, b FROM T [RANGE 1000]",
])
def test_switches_made_by_the_governor_lose_nothing_still_exact(cql):
    exact, _, _ = _run(cql, {})
    got, seen, eng = _run(cql, {20: lambda m: int(m * 0.8), 30: None})
    assert seen[19] == "exact" and "bloom" in seen[20:30]          # switched at a future instant
    assert seen[-1] == "exact"                                      # given back once the budget went
    assert eng.entity("mem:0").get("switches") == 2
    assert got == exact and len(exact) > 1000


def test_turning_it_off_gives_back_what_it_switched():
    eng = Engine()
    q, op = _distinct(eng, "S", 5000)
    eng.set("sys:0", "memory_budget", eng.memory_bytes() // 2)
    eng.set("mem:0", "auto_kind", True)
    eng.run()
    assert eng.entity("mem:0").get("switched") == [op.id]
    eng.set("mem:0", "auto_kind", False)
    eng.push("S", [{"a": -1, "b": -1}], ts=10**6)
    eng.run()
    assert op.kind_in_effect() == "exact" and q.approximation() is None   # the switch never applied
    assert eng.entity("mem:0").get("switched") == []


def test_bad_knob_values_are_refused_and_change_nothing():
    eng = Engine()
    gov = eng.entity("mem:0")
    for attr, bad in (("auto_kind", "yes"), ("auto_kind", 1), ("auto_kind", None), ("low_water", 0),
                      ("low_water", 1), ("low_water", 1.5), ("low_water", -0.1), ("low_water", "0.5"),
                      ("low_water", None), ("low_water", float("nan")), ("low_water", True),
                      ("switches", 3), ("switched", []), ("nonsense", 1)):
        with pytest.raises(ControlTableError, match=attr):
            eng.set("mem:0", attr, bad)
    assert gov.get("auto_kind") is False and gov.get("low_water") == 0.5 and gov.get("switches") == 0
    assert gov.history() == []
    eng.set("mem:0", "low_water", 0.25)
    assert gov.get("low_water") == 0.25


class _Held:
    """The byte count of a state, as a synopsis reports it."""

    def __init__(self, n: int) -> None:
        self.n = n

    def nbytes(self) -> int:
        return self.n

    def rows(self) -> int:
        return self.n // 100


class _ReservoirState:
    """An operator with the switch interface only (as join state is to have it): it takes ``reservoir`` and
    refuses ``bloom``, and cannot project its bytes. The governor must find it by that interface alone."""

    def __init__(self, oid: str, n: int) -> None:
        self.id, self.synopses, self.kind_now, self.asked = oid, [_Held(n)], "exact", []

    def held_bytes(self) -> int:
        return 0

    def kind_in_effect(self) -> str:
        return self.kind_now

    def switch_kind(self, kind: str) -> None:
        if kind not in ("exact", "reservoir"):
            raise ValueError(f"unknown synopsis kind {kind!r}")
        self.asked.append(kind)


def test_switchable_state_is_found_by_its_interface_and_gets_the_kind_it_takes():
    eng = Engine()
    q, op = _distinct(eng, "S", 3000)
    join = _ReservoirState("op:99", 10 * state_bytes(op))
    eng.ops.append(join)                          # the governor is stepped directly: nothing runs it
    try:
        eng.set("sys:0", "memory_budget", eng.memory_bytes() - 1)
        eng.set("mem:0", "auto_kind", True)
        eng.governor.step()
        assert join.asked == ["reservoir"]                             # the largest, in the kind it takes
        # its saving is unknown (no projected_bytes), so the governor went on to the next largest
        assert op.pending_kind == "bloom"
        assert eng.entity("mem:0").get("switched") == sorted([join.id, op.id])
        join.kind_now = "reservoir"
        eng.set("sys:0", "memory_budget", None)                        # everything goes back
        eng.governor.step()
        assert join.asked == ["reservoir", "exact"] and op.pending_kind is None
    finally:
        eng.ops.remove(join)


def test_over_the_budget_a_join_goes_to_a_reservoir_sample_of_its_window():
    """A real join, found by its interface like DISTINCT: the governor weighs what the sample would hold
    (``projected_bytes``), asks for ``reservoir``, and the switch takes effect at the next instant; the
    count is then marked approximate and scaled."""
    eng = Engine({"seed": 3})
    eng.execute("REGISTER STREAM S (a INT, b INT); REGISTER STREAM T (a INT, b INT)")
    q = eng.execute("SELECT COUNT(*) FROM S [RANGE 100000] X, T [RANGE 100000] Y WHERE X.a = Y.a")
    (join,) = eng.registry.entities("join")
    for syn in join.sides:
        eng.registry.set(syn.id, "reservoir_rows", 500)
    rng = random.Random(4)
    keys = {name: [rng.randrange(50) for _ in range(5000)] for name in "ST"}
    for name in "ST":
        eng.push(name, {"a": keys[name], "b": list(range(5000))}, ts=list(range(5000)))
    eng.run()
    q.drain()
    before = state_bytes(join)
    projected = join.projected_bytes("reservoir")
    assert 0 < projected * 5 < before                          # 500 of 5,000 rows a side
    with pytest.raises(ValueError, match="bloom"):
        join.projected_bytes("bloom")
    eng.set("sys:0", "memory_budget", eng.memory_bytes() - (before - projected) // 2)
    eng.set("mem:0", "auto_kind", True)
    eng.run()
    gov = eng.entity("mem:0").get()
    assert gov["switched"] == [join.id] and gov["last_switch"] == f"{join.id} exact -> reservoir"
    assert join.pending_kind == "reservoir" and join.kind_in_effect() == "exact"    # at a future instant
    for name in "ST":
        eng.push(name, [{"a": 0, "b": -1}], ts=5000)
    eng.run()
    assert join.kind_in_effect() == "reservoir" and join.pending_kind is None
    assert all(len(syn) <= 500 for syn in join.sides) and state_bytes(join) < before
    keys["S"].append(0)
    keys["T"].append(0)
    exact = sum(keys["S"].count(k) * keys["T"].count(k) for k in range(50))   # the plain join's size
    last = q.drain()[-1]
    assert last.approx is not None and last.approx.sampling_rate < 0.02     # (500 / 5,001)^2
    (count,) = last.row.values()
    assert abs(count - exact) <= last.approx.rel_error * exact              # scaled by 1 / (p_L p_R)
