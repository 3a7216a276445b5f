"""Chain's inlined ``on_ran`` (issue 15) learns the same queue widths and marks the chart stale exactly when the
method it replaced did: ``Policy.on_ran``'s width learning, then the drift test of selectivity, cost per tuple
and output width (``_moved`` against the statistics of the last recompute, the output width by
``_out_width``), on random plans, statistics, queue contents, units and drift knobs."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from schedsim import SimBatch, SimOp, SimQueue

from scheduler import ChainPolicy, Policy
from scheduler.chain import _moved


def _reference_on_ran(p: ChainPolicy, op: SimOp, consumed: int) -> None:
    """``ChainPolicy.on_ran`` as it was before it was inlined (2026-11-26, ``ab380d4``)."""
    Policy.on_ran(p, op, consumed)
    p._since += 1
    if not p._stale:
        seen = p._seen.get(id(op))
        if seen is not None:
            s, c, w = seen
            if (_moved(s, op.selectivity, 0.01) > p.drift or _moved(c, op.cost_ns_per_tuple, 1e-12) > p.drift
                    or _moved(w, p._out_width(op), 1e-12) > p.drift):
                p._stale = True
    if p._stale and p._since >= p.RECOMPUTE_RUNS:
        p._dirty = True


def _plan() -> list[SimOp]:
    """A pipeline of two operators and a sink beside it on the same source (a shared queue)."""
    src = SimQueue("src")
    a = SimOp("a", [src], selectivity=0.5, cost=1.0)
    b = SimOp("b", [a.output], selectivity=0.5, cost=2.0)
    c = SimOp("c", [src], selectivity=1.0, cost=1.0)
    return [a, b, c]


STAT = st.sampled_from([0.0, 1e-13, 5e-13, 0.003, 0.005, 0.3, 0.36, 0.5, 0.6, 0.61, 1.0, 2.0, 40.0])


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_inlined_on_ran_equals_the_method_it_replaced(data):
    ops = _plan()
    fast, slow = ChainPolicy(), ChainPolicy()
    unit = data.draw(st.sampled_from(["bytes", "tuples"]), label="unit")
    drift = data.draw(st.sampled_from([0.0, 0.2, 0.5]), label="drift")
    for p in (fast, slow):
        p.unit, p.drift = unit, drift
        p.RECOMPUTE_RUNS = data.draw(st.sampled_from([1, 3]), label="recompute runs") if p is fast else fast.RECOMPUTE_RUNS
        p.plan_changed(ops)
        p.recompute()
    for step in range(data.draw(st.integers(1, 12), label="runs")):
        op = data.draw(st.sampled_from(ops), label=f"op {step}")
        if data.draw(st.booleans(), label=f"new selectivity {step}"):
            op.selectivity = data.draw(STAT, label=f"selectivity {step}")
        if data.draw(st.booleans(), label=f"new cost {step}"):
            op.cost_ns_per_tuple = data.draw(STAT, label=f"cost {step}")
        for q in (*op.input_queues, op.output):
            if data.draw(st.booleans(), label=f"put {step}"):
                q.put(SimBatch(float(step), data.draw(st.sampled_from([1.0, 3.0])), data.draw(STAT)))
        fast.on_ran(op, 1)
        _reference_on_ran(slow, op, 1)
        assert fast.widths == slow.widths
        assert (fast._stale, fast._dirty, fast._since, fast.runs) == (slow._stale, slow._dirty, slow._since, slow.runs)
        if fast._dirty:
            for p in (fast, slow):
                p.recompute()


GRID = [0.0, 1e-13, 5e-13, 2e-12, 0.003, 0.005, 0.01, 0.02, 0.5, 0.6, 0.61, 2.0, -0.5, math.inf, math.nan]


def test_each_drift_test_at_its_floor_and_threshold_as_before():
    """Every (recorded, current) pair of the grid, for each statistic alone and each drift knob: the floors
    (0.01 for selectivity, 1e-12 for cost and width) and the threshold decide as ``_moved`` did."""
    for what in ("selectivity", "cost", "width"):
        for drift in (0.0, 0.2, 0.5):
            for old in GRID:
                for new in GRID:
                    ops = _plan()
                    a = ops[0]
                    verdicts = []
                    for ref in (False, True):
                        p = ChainPolicy()
                        p.drift = drift
                        p.plan_changed(ops)
                        a.selectivity, a.cost_ns_per_tuple = (old, 1.0) if what == "selectivity" else (0.5, old)
                        p.widths[id(a.output)] = old
                        p.recompute()
                        if what == "selectivity":
                            a.selectivity = new
                        elif what == "cost":
                            a.cost_ns_per_tuple = new
                        else:
                            p.widths[id(a.output)] = new
                        (_reference_on_ran if ref else ChainPolicy.on_ran)(p, a, 1)
                        verdicts.append(p._stale)
                    assert verdicts[0] == verdicts[1], (what, drift, old, new)
