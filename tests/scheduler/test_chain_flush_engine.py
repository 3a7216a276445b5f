"""Chain-Flush on the real engine (issue 4): the rows operators hold count towards the latency bound, and on a
small bursty workload the bound holds where Chain alone misses it, with results unchanged.

The engine is driven one operator run at a time (``Engine.run(max_steps=1)``) under a deterministic clock in
microseconds: a run costs a fixed time per input item plus a time per input row, by operator kind, and the
operator's statistics are fed that cost instead of the time measured, so every run of this file makes the
same decisions (``bench/scheduler_memory.py`` does the same with measured costs). Latency is emission time
minus the result's timestamp; a silent source sends a heartbeat 100 us after its last batch, then every 500 us.

Measured with this clock (``WORKLOAD``, seeds 1, 3 and 7): FIFO's longest latency 1.2-1.4 ms at a peak of
18-23 KB of queues; Chain 1.5-2.3 ms at 9.4-11.4 KB (on seeds 3 and 7 1.6x and 1.9x FIFO's); Chain-Flush with a
bound of 1.25x FIFO's longest latency stays under it (1.35-1.5 ms there) at Chain's memory or less, and on
seed 1 it is Chain. Of seeds 1-20 Chain misses the bound on 2, 3, 7, 10 and 12. The second query is a
DISTINCT of a selection since an ISTREAM of an insert-only selection is no operator
(dsms/plan/istream_pass.py): as ``SELECT a, b FROM S WHERE c < 10`` the plan lost its ``to_stream`` operator
and Chain kept the bound on every seed (1.0-1.1x FIFO's), so there was nothing left to compare; with the
DISTINCT the selection's output again feeds a second operator of its own. (Before that, with the plain
selection, Chain missed the bound on 3 and 7 alone of seeds 1-20 since selections output only the columns
read above them; before those, on seeds 7, 10 and 12 of 1-12, and seed 10 was tested here.) Seeds 2 and 3 were the ones where Chain missed the
bound (1.9x, 1.4x, at 17-21 KB) until projection pushdown made the window hold column a alone. (Before
heartbeat-only runs were left out of the operators' statistics, Chain took 2.9-3.5 ms and missed the bound
on seeds 1-3.)

Chain here recomputes its priorities on every drift, as Chain-Flush does (``RECOMPUTE_RUNS = 1``): the engine's
Chain waits 64 runs between recomputes for drift (issue 15), and with that rule it missed the bound on seed 7
only of seeds 1-12 (1.01-1.10x FIFO's longest latency on the others), so it would no longer be the Chain-Flush
schedule without its flushes that this file compares against.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from cost_clock import charge
from schedsim import SimBatch, SimOp, SimQueue

from dsms import Engine
from scheduler import ChainFlushPolicy

# (us per input item, us per input row) of a run, by operator kind
COSTS = {"select": (4.0, 0.05), "project": (3.0, 0.1), "range_window": (6.0, 0.4), "row_window": (6.0, 0.4),
         "aggregate": (10.0, 0.3), "to_stream": (4.0, 0.3), "join": (10.0, 1.0), "distinct": (6.0, 1.0)}
WORKLOAD = ["SELECT ISTREAM(a, COUNT(*) AS n) FROM S [RANGE 400] WHERE c < 50 GROUP BY a",
            "SELECT DISTINCT a, b FROM S WHERE c < 10"]
FACTOR = 1.25


def arrivals(seed: int, batches: int = 300) -> list[tuple[float, int]]:
    """Bursts of 30-60 batches 40 us apart (about 1.6x what the plan can process), 1.5-3 ms of silence between
    them with heartbeats; (time in us, 0 for a batch or 1 for a heartbeat)."""
    rng = random.Random(seed)
    t, times = 0.0, []
    while len(times) < batches:
        for _ in range(rng.randint(30, 60)):
            times.append(t)
            t += 40.0
        t += rng.uniform(1500.0, 3000.0)
    events, last = [], None
    for t in times[:batches]:
        if last is not None:
            h = last + 100.0
            while h < t:
                events.append((h, 1))
                h += 500.0
        events.append((t, 0))
        last = t
    events.append((last + 100.0, 1))
    return events


def run(policy: str, seed: int = 1, bound: float | None = None, queries: list[str] = WORKLOAD, rows: int = 32):
    """(longest latency in us, each query's results as sorted (ts, sign, values..), peak queue bytes, policy)."""
    eng = Engine({"policy": policy, "batch_budget": 2})
    eng.execute("REGISTER STREAM S (a INT, b FLOAT, c INT)")
    handles = [eng.execute(q) for q in queries]
    now = [0.0]
    charge(eng, COSTS, now)
    pol = eng.policy
    if policy == "chain":
        pol.RECOMPUTE_RUNS = 1      # Chain as Chain-Flush recomputes (on every drift), so that the two compare
    if policy == "chain_flush":
        pol.clock = lambda: now[0]
        eng.entity("sched:0").set_many({"latency_bound": bound, "cost_scale": 0.001})  # its control table
    data = np.random.default_rng(seed)
    events = arrivals(seed)
    results: list[list[tuple]] = [[] for _ in handles]
    longest, peak, sent, i = 0.0, 0, -1, 0
    now[0] = events[0][0]
    while True:
        while i < len(events) and events[i][0] <= now[0]:
            t, kind = events[i]
            ts = max(int(t), sent)
            if kind == 0:
                eng.push("S", {"a": data.integers(0, 20, rows), "b": data.random(rows),
                               "c": data.integers(0, 100, rows)}, ts=ts)
                sent = ts
            elif ts > sent:
                eng.heartbeat(ts, "S")
                sent = ts
            i += 1
        peak = max(peak, sum(q.bytes for q in eng.queues))
        ran = eng.run(max_steps=1)
        for k, h in enumerate(handles):
            for b in h.drain_batches():
                longest = max(longest, float((now[0] - b.ts).max()))
                results[k] += zip(b.ts.tolist(), b.sign.tolist(), *[c.tolist() for c in b.cols])
        if not ran:
            if i >= len(events):
                break
            now[0] = max(now[0], events[i][0])
    return longest, [sorted(r) for r in results], peak, pol


# ------------------------------------------------------------------------------------------- held_stamps

def _op(eng: Engine, kind: str):
    return next(o for o in eng.ops if o.kind == kind)


def test_aggregate_holds_rows_until_their_instant_is_final():
    eng = Engine({"policy": "fifo"})
    eng.execute("REGISTER STREAM S (a INT)")
    eng.execute("SELECT ISTREAM(a, COUNT(*) AS n) FROM S [RANGE 10] GROUP BY a")
    eng.push("S", [{"a": 1}, {"a": 2}, {"a": 1}], ts=5)
    eng.run()
    agg = _op(eng, "aggregate")
    assert agg.held_stamps() == [(5, 3)]
    eng.push("S", [{"a": 3}], ts=7)
    eng.run()
    assert agg.held_stamps() == [(7, 1)]              # instant 5 final and released, 7 held
    eng.heartbeat(8)
    eng.run()
    assert agg.held_stamps() == []
    assert all(o.held_stamps() == [] for o in eng.ops)    # the window and the sink hold nothing either


def test_join_holds_deltas_until_the_other_input_passes_them():
    eng = Engine({"policy": "fifo"})
    eng.execute("REGISTER STREAM S1 (n INT, k INT)")
    eng.execute("REGISTER STREAM S2 (n INT, k INT)")
    eng.execute("SELECT S1.n AS l, S2.n AS r FROM S1 [RANGE 10], S2 [RANGE 20] WHERE S1.k = S2.k")
    eng.push("S1", [{"n": 1, "k": 1}, {"n": 2, "k": 1}], ts=3)
    eng.push("S1", [{"n": 3, "k": 2}], ts=4)
    eng.run()
    join = _op(eng, "join")
    assert join.held_stamps() == [(3, 2), (4, 1)]
    eng.heartbeat(3, "S2")
    eng.run()
    assert join.held_stamps() == [(4, 1)]
    eng.heartbeat(10, "S2")
    eng.run()
    assert join.held_stamps() == []


def test_netting_sink_holds_an_instant_until_it_is_final():
    eng = Engine({"policy": "fifo"})
    eng.execute("REGISTER STREAM S (a INT)")
    eng.execute("SELECT DISTINCT a FROM S [RANGE 10]")
    eng.push("S", [{"a": 1}, {"a": 2}], ts=5)
    eng.run()
    sink = eng.ops[-1]
    assert sink.kind == "to_stream" and sink.held_stamps() == [(5, 2)]
    eng.heartbeat(6)
    eng.run()
    assert sink.held_stamps() == []


# ------------------------------------------------------------------------------------------- the policy

class HoldingOp(SimOp):
    """A toy operator holding rows internally (as an aggregate holds an instant that is not final yet)."""

    def __init__(self, *args, held: list[tuple[float, float]], **kw) -> None:
        super().__init__(*args, **kw)
        self.held = held

    def held_stamps(self) -> list[tuple[float, float]]:
        return list(self.held)


def _plan(held: list[tuple[float, float]]):
    """A -> X (X holds ``held``, its input queue empty) beside B, a cheap sink Chain prefers. A has an item
    stamped 80, B one stamped 90; the clock says 100."""
    qa, qx, qb = SimQueue("qa"), SimQueue("qx"), SimQueue("qb")
    a = SimOp("A", [qa], qx, selectivity=1.0, cost=1.0)
    x = HoldingOp("X", [qx], None, cost=1.0, held=held)
    b = SimOp("B", [qb], None, cost=0.1)
    qa.put(SimBatch(80.0, 10.0, 8.0))
    qb.put(SimBatch(90.0, 10.0, 8.0))
    policy = ChainFlushPolicy(clock=lambda: 100.0, latency_bound=45.0, headroom=0.0)
    policy.plan_changed([a, x, b])
    return policy, a, b


def test_held_rows_at_risk_flush_the_operator_upstream_of_them():
    """Rows held since 10 are at risk (waited 90 > 45); only an item reaching X releases them, so the flush
    runs A, which carries one, although nothing queued is at risk and Chain would run B."""
    policy, a, b = _plan(held=[(10.0, 5.0)])
    assert policy.pick([a, b]) is a
    assert policy.stats()["flushes"] == 1 and policy.stats()["held_flushes"] == 1
    control, a2, b2 = _plan(held=[])
    assert control.pick([a2, b2]) is b2 and control.stats()["flushes"] == 0


def test_rows_only_time_can_release_start_no_flush():
    """Nothing upstream of X has anything waiting: its rows wait for time (a later element or heartbeat),
    which no schedule can shorten, so Chain decides."""
    qx, qb, qc = SimQueue("qx"), SimQueue("qb"), SimQueue("qc")
    a = SimOp("A", [SimQueue("qa")], qx, cost=1.0)
    x = HoldingOp("X", [qx], None, cost=1.0, held=[(10.0, 5.0)])
    b = SimOp("B", [qb], None, cost=0.1)
    c = SimOp("C", [qc], None, cost=1.0)
    qb.put(SimBatch(90.0, 10.0, 8.0))
    qc.put(SimBatch(91.0, 10.0, 8.0))
    policy = ChainFlushPolicy(clock=lambda: 100.0, latency_bound=45.0, headroom=0.0)
    policy.plan_changed([a, x, b, c])
    assert policy.pick([b, c]) is b
    assert policy.stats()["flushes"] == 0


# ------------------------------------------------------------------------------------------- the engine

@pytest.mark.parametrize(("seed", "chain_misses"), [(1, False), (3, True), (7, True)])
def test_latency_bound_holds_on_the_engine_where_chain_misses_it(seed, chain_misses):
    fifo_latency, fifo_results, fifo_peak, _ = run("fifo", seed)
    chain_latency, chain_results, chain_peak, _ = run("chain", seed)
    bound = FACTOR * fifo_latency
    latency, results, peak, policy = run("chain_flush", seed, bound=bound)
    assert (chain_latency > bound) == chain_misses      # Chain alone misses it on seeds 3 and 7 (1.8x, 2.2x)
    assert latency <= bound
    assert (policy.stats()["flushes"] > 0) == chain_misses   # where Chain keeps it, Chain-Flush is Chain
    assert peak < fifo_peak and chain_peak < fifo_peak   # the memory cost: below FIFO's, near Chain's
    assert peak <= 1.2 * chain_peak
    assert results == fifo_results and chain_results == fifo_results


def test_runs_are_deterministic():
    first, second = run("chain_flush", 2, bound=2500.0), run("chain_flush", 2, bound=2500.0)
    assert first[:3] == second[:3]
