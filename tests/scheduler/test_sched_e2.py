"""digest-004 E2: per-operator greedy starves an operator that releases nothing itself but feeds a selective
one; Chain groups O1 and O2 into one chain (priority 0.4) ahead of O3 (0.2).

E2 gives times per block as it reaches each operator, so O3 (one time unit for the 0.2 block O2 leaves) costs
5 units per input tuple; greedy's (1 - s)/t is per tuple: O1 = 0, O2 = 0.8, O3 = 0.2 (the digest writes O3 =
1.0 by using t per block; either way O1 is last).
"""

from __future__ import annotations

import pytest
from schedsim import SimBatch, SimOp, SimQueue, Simulator, e2_plan

from scheduler import ChainPolicy, GreedyPolicy, Topology
from scheduler.progress_chart import Stage, chains, lower_envelope, progress_points

N = 10


def test_envelope_and_priorities():
    stages = [Stage("O1", 1, 1.0), Stage("O2", 1, 0.2), Stage("O3", 5, 0.0)]
    assert progress_points(stages) == [(0, 1), (1, 1), (2, 0.2), (3, 0)]
    assert lower_envelope(progress_points(stages)) == [(0, 2, 0.4), (2, 3, 0.2)]
    assert [(c.ops, c.slope) for c in chains(stages)] == [(("O1", "O2"), 0.4), (("O3",), 0.2)]


def test_chain_policy_groups_o1_o2():
    ops, _ = e2_plan(N)
    p = ChainPolicy(unit="tuples")
    p.plan_changed(ops)
    p.recompute()
    assert [(c["ops"], c["priority"] / N) for c in p.stats()["chains"]] == [(["O1", "O2"], 0.4), (["O3"], 0.2)]


def test_greedy_rates():
    ops, _ = e2_plan(N)
    for op in ops:                       # something to read, so the rates are defined
        op.input_queues[0].put(SimBatch(1, N, 8.0))
    g = GreedyPolicy(unit="tuples")
    g.plan_changed(ops)
    assert [g.rate(op, op.cost_ns_per_tuple) / N for op in ops] == pytest.approx([0.0, 0.8, 0.2])


def competing_plan():
    """E2 beside a one-operator query P releasing 0.15n per time unit: more than O1 (0) but less than the
    O1+O2 chain (0.4). n tuples reach E2 and 0.15n reach P at each instant 1..6."""
    ops, arrivals = e2_plan(N, instants=6)
    qp = SimQueue("qP")
    p = SimOp("P", [qp], None, selectivity=1.0, cost=1 / 1.5)
    return ops + [p], arrivals + [(float(t), qp, 1.5) for t in range(1, 7)]


def run(policy):
    ops, arrivals = competing_plan()
    return Simulator(ops, arrivals, idle_tick=1.0, until=30).run(policy)


def test_greedy_starves_o1_and_chain_does_not():
    g, c = run(GreedyPolicy(unit="tuples")), run(ChainPolicy(unit="tuples"))
    # Greedy runs O1 only when nothing else at all is ready ...
    o1_turns = [ready for pick, ready in zip(g.picks, g.ready_sets) if pick == "O1"]
    assert o1_turns and all(ready == {"O1"} for ready in o1_turns)
    assert g.picks[:6] == ["P"] * 6
    # ... while Chain runs O1 whenever it has work, as one unit with O2.
    assert c.picks[:12] == ["O1", "O2"] * 6
    assert g.peak_tuples / N == pytest.approx(6.15)
    assert c.peak_tuples / N == pytest.approx(5.3)


def test_topology_of_e2():
    ops, _ = e2_plan(N)
    t = Topology(ops)
    assert [t.depth[id(op)] for op in ops] == [0, 1, 2]
    assert [t.is_sink(op) for op in ops] == [False, False, True]
