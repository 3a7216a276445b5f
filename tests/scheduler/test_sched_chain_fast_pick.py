"""Chain's one-pass pick (``ChainPolicy.pick``, issue 15) decides exactly what the general path decides
(``Policy.pick`` then ``ChainPolicy.choose``): on random plans, random priorities with exact ties and ties
within the tolerance, user priority classes, operators not measured yet, operators the topology has not been
told about, and stale priorities."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from schedsim import SimBatch, SimOp, SimQueue

from scheduler import ChainPolicy, Policy

PRIOS = st.sampled_from([0.0, 0.5, 0.5 + 1e-12, 1.0, 1.0 - 1e-10, 2.0, 3.5, math.inf])


def _plan(shape: list[int]) -> list[SimOp]:
    """Pipelines of the given lengths, each from its own source queue, plus one join of the first two."""
    ops: list[SimOp] = []
    tails = []
    for k, length in enumerate(shape):
        q = SimQueue(f"s{k}")
        for j in range(length):
            op = SimOp(f"p{k}.{j}", [q], selectivity=0.5, cost=1.0 + j)
            ops.append(op)
            q = op.output
        tails.append(q)
    if len(tails) >= 2:
        ops.append(SimOp("join", tails[:2], selectivity=1.0, cost=2.0))
    return ops


@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_one_pass_pick_equals_the_general_pick(shape, data):
    ops = _plan(shape)
    fast, slow = ChainPolicy(), ChainPolicy()
    for p in (fast, slow):
        p.plan_changed(ops)
        p.recompute()                     # real chains and depths, then priorities drawn below
    stale = data.draw(st.booleans(), label="stale")
    prios = {id(op): data.draw(PRIOS, label=f"prio {op.id}") for op in ops}
    for op in ops:
        op.priority = data.draw(st.sampled_from([0] * 7 + [1]), label=f"user {op.id}")
        if data.draw(st.booleans(), label=f"measured {op.id}"):
            op.tuples_in = 10
        elif data.draw(st.booleans(), label=f"fresh {op.id}"):
            op.tuples_in = 0
        for q in op.input_queues:
            for _ in range(data.draw(st.integers(0, 2), label=f"items {op.id}")):
                q.put(SimBatch(float(data.draw(st.integers(0, 5))), 1.0, 8.0))
    for p in (fast, slow):
        p.priorities = dict(prios)
        p._dirty = stale
    ready = data.draw(st.lists(st.sampled_from(ops), min_size=1, max_size=len(ops), unique_by=id), label="ready")
    if data.draw(st.booleans(), label="unknown op"):
        ready.append(SimOp("late", [SimQueue("late.in")]))
    want = Policy.pick(slow, list(ready))
    got = fast.pick(list(ready))
    assert got is want
    assert fast.picks == slow.picks == 1


def test_the_top_priority_is_picked_without_the_tie_rule():
    ops = _plan([2, 2])
    p = ChainPolicy()
    p.plan_changed(ops)
    p.recompute()
    p.priorities = {id(op): float(k) for k, op in enumerate(ops)}
    assert p.pick([ops[0], ops[3], ops[1]]) is ops[3]
    assert p.pick([]) is None


def test_a_tie_within_the_tolerance_goes_to_the_oldest_batch():
    ops = _plan([1, 1])
    p = ChainPolicy()
    p.plan_changed(ops)
    p.recompute()
    p.priorities = {id(ops[0]): 1.0, id(ops[1]): 1.0 - 1e-10}
    ops[0].input_queues[0].put(SimBatch(5.0, 1.0, 8.0))
    ops[1].input_queues[0].put(SimBatch(2.0, 1.0, 8.0))
    assert p.pick([ops[0], ops[1]]) is ops[1]
