"""The operator statistics Chain and greedy read: selectivity and cost per row, as ratios of decayed totals.

A run that only forwards a heartbeat (no row read, none written) is left out of the totals
(``Operator._account``): counted, it aged the rows out of the totals while its time stayed in them, so after
a silence of its stream (a heartbeat every millisecond) a filter read at ten times its cost, and Chain ranked
it below the chains it should precede (docs/scheduling.md, "Operator statistics").
"""

from __future__ import annotations

import pytest
from cost_clock import charge

from dsms import Engine

# (us per input item, us per input row) of a run, by operator kind: a deterministic clock
COSTS = {"select": (4.0, 0.3), "range_window": (20.0, 1.0), "join": (40.0, 4.0), "project": (5.0, 0.1),
         "to_stream": (6.0, 0.3)}


def _op(eng: Engine, kind: str, k: int = 0):
    return [o for o in eng.ops if o.kind == kind][k]


def test_a_heartbeat_run_does_not_move_the_statistics():
    eng = Engine({"policy": "chain"})
    eng.execute("REGISTER STREAM S (a INT, c INT)")
    eng.execute("SELECT a FROM S WHERE c < 40")
    sel = _op(eng, "select")
    for _ in range(10):
        sel._account(64, 26, 64 * 400)
    cost, ratio = sel.cost_ns_per_tuple, sel.selectivity
    assert cost == pytest.approx(400) and ratio == pytest.approx(26 / 64)
    for _ in range(200):                  # 200 ms of silence: heartbeats only, 7 us each
        sel._account(0, 0, 7_000)
    assert sel.cost_ns_per_tuple == pytest.approx(cost) and sel.selectivity == pytest.approx(ratio)
    assert sel.batches_in == 210          # the runs are still counted
    sel._account(0, 30, 5_000)            # a run that releases held rows (a window's deletes) does count
    assert sel.selectivity > ratio and sel.cost_ns_per_tuple > cost


def costed(policy: str) -> Engine:
    """Two filtered streams into RANGE windows and a join (the benchmark's ``window_join``), every run charged
    by ``COSTS`` and the statistics fed that charge instead of the machine's time."""
    eng = Engine({"policy": policy, "batch_budget": 2})
    for s in ("S", "T"):
        eng.execute(f"REGISTER STREAM {s} (a INT, c INT)")
    eng.execute("SELECT ISTREAM(S.a, T.c) FROM S [RANGE 300], T [RANGE 300] "
                "WHERE S.a = T.a AND S.c < 30 AND T.c < 40")
    charge(eng, COSTS)
    return eng


def batch(k: int, n: int = 64) -> dict:
    return {"a": [(k + i) % 16 for i in range(n)], "c": [(7 * k + 3 * i) % 100 for i in range(n)]}


def test_a_filter_keeps_its_priority_through_its_streams_silence():
    """Both streams burst, then T falls silent (a heartbeat a millisecond) while S goes on. When T's next
    burst comes, its 40% filter frees memory ten times faster than the windows and the join, so Chain runs
    it before the join (the windows are fused into it), which has S's input waiting too. Before the fix T's
    filter had aged to thousands of ns a row and Chain ran the join's chain first."""
    eng = costed("chain")
    ts = 0
    for k in range(20):                   # both streams burst
        ts += 10
        eng.push("S", batch(k), ts=ts)
        eng.push("T", batch(k + 50), ts=ts)
        eng.run()
    for k in range(40):                   # T silent: S goes on, T only sends heartbeats
        ts += 1000
        eng.push("S", batch(k + 100), ts=ts)
        eng.heartbeat(ts, "T")
        eng.run()
    sel_t, join = _op(eng, "select", 1), _op(eng, "join")
    assert sel_t.input_queues[0] is eng.source_queue("T")
    assert sel_t.cost_ns_per_tuple == pytest.approx(COSTS["select"][1] * 1000 + COSTS["select"][0] * 1000 / 64,
                                                    rel=0.5)
    ts += 10
    eng.push("S", batch(200), ts=ts)
    while not join.ready():               # S's selected rows reach the join (through their projection onto a)
        assert eng.run(max_steps=1) == 1
    eng.push("T", batch(201), ts=ts)
    assert sel_t.ready() and join.ready()
    pol = eng.policy
    assert pol.pick([sel_t, join]) is sel_t
    assert pol.priorities[id(sel_t)] > 5 * pol.priorities[id(join)]
