"""The system's ``load_threshold`` knob acts (issue 14 item 1): the load shedder sheds when the measured demand
passes ``load_threshold`` of capacity and not below it. The demand is measured from wall time, so these tests
hand the shedder a known demand (``step(demand=...)``) or a clock of their own (``LoadShedder(clock=)``): with
the same demand, a threshold above it sheds nothing and one below it sheds, at the rate the threshold leaves
room for; a knob write changes the very next step's decision."""

from __future__ import annotations

import pytest

from control_tables import ControlTableError
from dsms import Engine
from dsms.load_shedder import LoadShedder

Q = "SELECT g, COUNT(*) AS c FROM S [RANGE 1000000] GROUP BY g"


def _engine() -> tuple[Engine, object]:
    """One COUNT query over 2,000 rows in 10 groups: it has an error profile, so it can be shed."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT)")
    q = eng.execute(Q)
    eng.push("S", {"g": [k % 10 for k in range(2000)]}, ts=list(range(2000)))
    eng.run()
    return eng, q


def _rates(eng: Engine) -> list[float]:
    return [s.get("sampling_rate") for s in eng.registry.entities(kind="shedder")]


def test_the_same_demand_is_shed_below_the_threshold_and_not_above_it():
    eng, q = _engine()
    demand = {q.id: 0.5}                                   # CPU seconds per second at full rate
    eng.set("sys:0", "load_threshold", 0.9)
    eng.shedder.step(demand=demand)
    assert _rates(eng) == [] and eng.shedder.rates == {}   # 0.5 fits under 0.9 of one CPU
    assert eng.system.get("load") == 0.5
    eng.set("sys:0", "load_threshold", 0.3)                # the knob, read by the next step
    eng.shedder.step(demand=demand)
    (rate,) = _rates(eng)
    assert rate == pytest.approx(0.3 / 0.5, rel=1e-3)      # the demand scaled down to the threshold
    assert eng.shedder.rates == {q.id: pytest.approx(0.6, rel=1e-3)}
    assert q.approximation() is not None and q.approximation().sampling_rate == pytest.approx(0.6, rel=1e-3)
    eng.set("sys:0", "load_threshold", 0.45)               # a smaller cut, same demand
    eng.shedder.step(demand=demand)
    assert _rates(eng) == [pytest.approx(0.9, rel=1e-3)]
    eng.set("sys:0", "load_threshold", 2.0)                # above the demand again: every drop goes
    eng.shedder.step(demand=demand)
    assert _rates(eng) == [] and eng.shedder.rates == {}


def test_a_given_threshold_overrides_the_knob_and_capacity_scales_it():
    eng, q = _engine()
    eng.shedder.step(demand={q.id: 0.5}, threshold=0.25)
    assert _rates(eng) == [pytest.approx(0.5, rel=1e-3)]
    eng.shedder.step(demand={q.id: 0.5}, capacity=2.0)     # 0.9 of two CPUs: fits
    assert _rates(eng) == []


def test_the_measured_demand_comes_from_the_clock_and_the_operators_counters():
    """With a clock of the test's own, the measured demand is the operators' tuples read times their cost
    per tuple over the clock's time, and it is judged against the knob like a given one."""
    t = [100.0]
    eng = Engine()
    eng.shedder = LoadShedder(eng, clock=lambda: t[0])
    eng.execute("REGISTER STREAM S (g INT)")
    q = eng.execute(Q)
    assert eng.shedder.measure() is None                   # the first call starts the clock
    before = {op.id: op.tuples_in for op in eng.ops}
    eng.push("S", {"g": [k % 10 for k in range(2000)]}, ts=list(range(2000)))
    eng.run()
    t[0] += 0.5
    want = sum((op.tuples_in - before[op.id]) * op.cost_ns_per_tuple / 1e9 / 0.5 / len(op.owners)
               for op in eng.ops if op.owners)
    demand = eng.shedder.measure()
    assert want > 0 and demand == {q.id: pytest.approx(want)}
    eng.set("sys:0", "load_threshold", 10.0)
    eng.shedder.step(demand=demand)
    assert _rates(eng) == []
    eng.set("sys:0", "load_threshold", want / 4)           # a quarter of the measured load
    eng.shedder.step(demand=demand)
    assert _rates(eng) == [pytest.approx(0.25, rel=1e-3)]


def test_bad_threshold_values_are_refused_and_change_nothing():
    eng, q = _engine()
    for bad in (0, -0.5, 10.5, "0.5", None, True, float("nan")):
        with pytest.raises(ControlTableError):
            eng.set("sys:0", "load_threshold", bad)
    assert eng.system.get("load_threshold") == 0.9
    eng.shedder.step(demand={q.id: 0.5})
    assert _rates(eng) == []
