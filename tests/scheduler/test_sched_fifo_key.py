"""``Policy.fifo_key`` in one pass over an operator's inputs (issue 15) equals the key as it was composed before:
``oldest_pending``, depth, minus the items waiting on every reader, plan order; on plans of pipelines and a
join whose inputs hold random batches, shared queues read at different positions included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from schedsim import SimBatch, SimOp, SimQueue

from scheduler import FifoPolicy
from scheduler.base import oldest_pending


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_fifo_key_equals_its_composition(data):
    s0, s1 = SimQueue("s0"), SimQueue("s1")
    a = SimOp("a", [s0])
    b = SimOp("b", [s0])                    # shares s0 with a
    c = SimOp("c", [s1])
    j = SimOp("j", [a.output, c.output])
    ops = [a, b, c, j]
    for q in (s0, s1, a.output, c.output):
        for _ in range(data.draw(st.integers(0, 3))):
            q.put(SimBatch(float(data.draw(st.integers(0, 9))), float(data.draw(st.integers(0, 3))), 8.0))
    for op in ops:                          # readers moved on by random amounts
        for r in op.readers:
            for _ in range(data.draw(st.integers(0, 2))):
                r.get()
    p = FifoPolicy()
    p.plan_changed(ops)
    t = p.topology
    for op in ops:
        want = (oldest_pending(op), -t.depth.get(id(op), 0), -sum(r.pending() for r in op.readers),
                t.order.get(id(op), 0))
        assert p.fifo_key(op) == want
