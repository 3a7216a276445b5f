"""digest-004 E1 (the STREAM paper's scheduling example, P1 section 4.2) reproduced exactly in the simulator.

FIFO is the paper's Strategy 1 and Chain its Strategy 2; the rows continue the paper's table with the digest's
COMPUTED values for tau = 8..16. The policies are fed the operators' true selectivity and cost.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from schedsim import SimBatch, Simulator, e1_plan

from scheduler import POLICIES, ChainPolicy

N = 10
FIFO_ROW = "1 1.2 2 2.2 3 3.2 4 3.2 3.0 2.2 2.0 1.2 1.0 0.2 0 0"
CHAIN_ROW = "1 1.2 1.4 1.6 1.8 2.0 2.2 1.4 1.2 1.0 0.8 0.6 0.4 0.2 0 0"


def sizes(policy_name: str, **knobs) -> tuple[list[Fraction], list[str]]:
    ops, arrivals = e1_plan(N)
    sim = Simulator(ops, arrivals, idle_tick=1.0, until=16)
    trace = sim.run(POLICIES[policy_name](**knobs))
    assert trace.times == [float(t) for t in range(1, 17)]
    return [Fraction(x).limit_denominator(1000) / N for x in trace.tuples], trace.picks


def row(text: str) -> list[Fraction]:
    return [Fraction(x) for x in text.split()]


def test_fifo_is_strategy_1():
    got, picks = sizes("fifo")
    assert got == row(FIFO_ROW)
    assert max(got) == 4
    assert picks == ["O1", "O2"] * 7


def test_chain_is_strategy_2():
    got, picks = sizes("chain")
    assert got == row(CHAIN_ROW)
    assert max(got) == Fraction("2.2")
    assert picks == ["O1"] * 7 + ["O2"] * 7


@pytest.mark.parametrize("unit", ["tuples", "bytes"])
def test_chain_priorities_per_n_tuples(unit):
    """Chains {O1} with priority 0.8 and {O2} with 0.2, per n tuples per time unit (bytes: 8 per tuple)."""
    ops, _ = e1_plan(N)
    ops[0].input_queues[0].put(SimBatch(1, N, 8.0))   # a width to learn from
    p = ChainPolicy(unit=unit)
    p.plan_changed(ops)
    p.recompute()
    scale = N * (8 if unit == "bytes" else 1)
    assert [(c["ops"], c["priority"] / scale) for c in p.stats()["chains"]] == [(["O1"], 0.8), (["O2"], 0.2)]


def test_greedy_matches_chain_on_e1():
    """With one chain per operator, greedy's (1 - s)/t order is Chain's order."""
    assert sizes("greedy")[0] == row(CHAIN_ROW)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_finishes_at_15(name):
    """The paper: both strategies reach 0 at tau = 15 (the processor is never idle while work waits)."""
    knobs = {"latency_bound": 100.0} if name == "chain_flush" else {}
    got, _ = sizes(name, **knobs)
    assert got[13] > 0 and got[14] == 0 and got[15] == 0
