"""Each policy's pick on shared queues (digest-004 P-12, E9): a queue holds an item until its slowest reader
has read it, so a reader frees memory only for the items no other reader still holds.

Plan: source S -> X -> qx, read by A and B (both sinks), beside C (a sink on its own source U).
"""

from __future__ import annotations

import pytest
from schedsim import SimBatch, SimOp, SimQueue

from scheduler import ChainFlushPolicy, ChainPolicy, FifoPolicy, GreedyPolicy, RoundRobinPolicy
from scheduler.base import release_share


def plan(c_cost: float = 3.0):
    s, u, qx = SimQueue("S"), SimQueue("U"), SimQueue("qx")
    x = SimOp("X", [s], qx, selectivity=1.0, cost=1.0)
    a = SimOp("A", [qx], None, cost=1.0)
    b = SimOp("B", [qx], None, cost=1.0)
    c = SimOp("C", [u], None, cost=c_cost)
    return s, u, qx, x, a, b, c


def test_shared_queue_counts_until_the_slowest_reader():
    """E9: 5 tuples; A reads 5 and B reads 2 -> 3 held; B reads 3 more -> 0."""
    _, _, qx, _, a, b, _ = plan()
    for t in range(5):
        qx.put(SimBatch(t, 1, 8.0))
    a.run(5)
    b.run(2)
    assert qx.tuples == 3 and qx.bytes == 24
    b.run(3)
    assert qx.tuples == 0


def lagging():
    """qx holds 3 items; A has read one of them, B none: only B's reads free memory."""
    s, u, qx, x, a, b, c = plan()
    for t in range(3):
        qx.put(SimBatch(t, 1, 8.0))
    a.run(1)
    return s, u, qx, x, a, b, c


def test_release_share_follows_reader_positions():
    _, _, qx, x, a, b, c = lagging()
    g = GreedyPolicy()
    g.plan_changed([x, a, b, c])
    topo = g.topology
    assert release_share(a, a.readers[0], topo, qx, 1) == 0.0
    assert release_share(b, b.readers[0], topo, qx, 1) == 1.0
    assert release_share(b, b.readers[0], topo, qx, 3) == pytest.approx(1 / 3)


def test_greedy_picks_the_reader_that_frees_memory():
    _, _, _, x, a, b, c = lagging()
    g = GreedyPolicy()
    g.plan_changed([x, a, b, c])
    assert g.rate(a, 1.0) == 0.0 and g.rate(b, 1.0) == 8.0
    assert g.pick([a, b]) is b          # plan order and equal costs would say A


def test_chain_takes_a_shared_queue_as_one_step():
    """Path S -> X -> {A, B}: qx's tuples are freed once both A and B have read them, so A and B are one step
    costing 2 per tuple: the chain (X, A, B) releases 1 tuple per 3 time units. C alone releases 1 per 2 and
    runs first; between A and B the one behind (holding what the other has read) runs first."""
    s, u, qx, x, a, b, c = plan(c_cost=2.0)
    s.put(SimBatch(0, 1, 8.0))
    u.put(SimBatch(0, 1, 8.0))
    for t in range(3):
        qx.put(SimBatch(t, 1, 8.0))
    p = ChainPolicy(unit="tuples")
    p.plan_changed([x, a, b, c])
    p.recompute()
    assert [(ch["ops"], ch["priority"]) for ch in p.stats()["chains"]] == \
        [(["C"], 0.5), (["X", "A", "B"], pytest.approx(1 / 3))]
    assert p.pick([x, a, b, c]) is c
    a.run(1)
    assert p.pick([x, a, b]) is b


def test_chain_ties_go_to_the_oldest_batch():
    s, u, qx, x, a, b, c = plan()
    qx.put(SimBatch(1, 1, 8.0))
    s.put(SimBatch(2, 1, 8.0))
    p = ChainPolicy(unit="tuples")
    p.plan_changed([x, a, b, c])
    p.recompute()
    p.priorities = {k: 1.0 for k in p.priorities}        # force one priority level
    assert p.choose([x, b]) is b


def test_fifo_on_a_shared_queue_drains_downstream_first():
    s, u, qx, x, a, b, c = plan()
    s.put(SimBatch(2, 1, 8.0))
    qx.put(SimBatch(1, 1, 8.0))
    f = FifoPolicy()
    f.plan_changed([x, a, b, c])
    assert f.pick([x, a, b]) is a          # the oldest batch (ts 1) is in qx; A comes first in plan order
    a.run(1)
    assert f.pick([x, b]) is b             # B still holds it: the batch is not out until B has read it
    b.run(1)
    assert f.pick([x]) is x


def test_round_robin_takes_turns():
    s, u, qx, x, a, b, c = plan()
    for q in (s, u, qx):
        q.put(SimBatch(0, 1, 8.0))
    r = RoundRobinPolicy()
    r.plan_changed([x, a, b, c])
    seen = [r.pick([x, a, b, c]).id for _ in range(6)]
    assert seen == ["X", "A", "B", "C", "X", "A"]


def test_chain_flush_flushes_the_oldest_shared_batch():
    s, u, qx, x, a, b, c = plan()
    qx.put(SimBatch(0, 1, 8.0))
    u.put(SimBatch(9, 1, 8.0))
    now = [10.0]
    p = ChainFlushPolicy(unit="tuples", latency_bound=5.0, clock=lambda: now[0])
    p.plan_changed([x, a, b, c])
    assert p.pick([a, b, c]) is a          # qx's batch waited 10 > 5: flushed, readers in plan order
    a.run(1)
    assert p.pick([b, c]) is b             # ... until B too has read it
    b.run(1)
    assert p.pick([c]) is c
