"""Control tables on the engine's entities (issue 4): each knob does what it claims, an invalid write changes
nothing and says why, and the memory accounting matches the bytes really held."""

import gc
import tracemalloc

import pytest

from control_tables import ControlTableError
from dsms import Engine


def engine_with(query: str, policy: str = "chain"):
    eng = Engine({"policy": policy})
    eng.execute("REGISTER STREAM S (k INT, v INT)")
    return eng, eng.execute(query)


def op_of(eng, kind):
    return [op for op in eng.ops if op.kind == kind][0]


def counts_by_instant(q):
    cur = {}
    for e in q.drain():
        if e.sign > 0:
            cur[e.ts] = e.row["c"]
    return cur


def test_window_range_change_takes_effect_at_a_future_instant():
    # digest-002b W7: w = 5 -> 3 decided at t = 10 (the input has passed 9): count 5 until 12, 4 at 13, 3 after
    eng, q = engine_with("SELECT COUNT(*) AS c FROM S [RANGE 5]")
    win = op_of(eng, "range_window")
    for t in range(10):
        eng.push("S", [{"k": 0, "v": t}], ts=t)
    eng.run()
    eng.set(win.id, "range", 3)
    assert win.get()["range_from"] == 10 and win.get()["range"] == 3
    for t in range(10, 20):
        eng.push("S", [{"k": 0, "v": t}], ts=t)
    eng.heartbeat(20)
    eng.run()
    c = counts_by_instant(q)
    assert c[4] == 5 and 12 not in c and c[13] == 4 and c[14] == 3 and max(c) == 14


def test_window_range_increase():
    eng, q = engine_with("SELECT COUNT(*) AS c FROM S [RANGE 3]")
    win = op_of(eng, "range_window")
    for t in range(10):
        eng.push("S", [{"k": 0, "v": t}], ts=t)
    eng.run()
    eng.set(win.id, "range", 5)
    for t in range(10, 20):
        eng.push("S", [{"k": 0, "v": t}], ts=t)
    eng.heartbeat(20)
    eng.run()
    c = counts_by_instant(q)
    assert c[2] == 3 and c[13] == 4 and c[14] == 5


def test_priority_decides_among_ready_operators():
    eng = Engine({"policy": "round_robin"})
    eng.execute("REGISTER STREAM S (k INT, v INT)")
    eng.execute("SELECT k FROM S WHERE v > 0")
    eng.execute("SELECT v FROM S WHERE k > 0")
    selects = [op for op in eng.ops if op.kind == "select"]
    eng.set(selects[1].id, "priority", 7)
    eng.push("S", [{"k": 1, "v": 1}], ts=1)
    eng.run(max_steps=1)
    assert selects[1].tuples_in == 1 and selects[0].tuples_in == 0


def test_queue_capacity_holds_the_producer_back():
    eng, q = engine_with("SELECT k FROM S WHERE v > 0")
    out = q.reader.queue                     # the result queue, written by the ISTREAM operator
    producer = [op for op in eng.ops if op.output is out][0]
    eng.set(out.id, "capacity", 2)
    for t in range(5):
        eng.push("S", [{"k": t, "v": 1}, {"k": t, "v": 1}], ts=t)
        eng.run()
    assert out.tuples == 2 and producer.tuples_in == 2          # stopped once its output was full
    drained = []
    for _ in range(10):
        drained += q.drain()
        eng.run()
    assert len(drained) == 10 and [e.row["k"] for e in drained] == [t for t in range(5) for _ in (0, 1)]


def test_window_memory_budget_shrinks_the_window_and_marks_it_approximate():
    eng, q = engine_with("SELECT COUNT(*) AS c FROM S [ROWS 100]")
    syn = [e for e in eng.registry.entities(kind="window")][0]
    for t in range(100):
        eng.push("S", [{"k": t, "v": t}], ts=t)
    eng.run()
    full = syn.get("bytes")
    eng.set(syn.id, "memory", full // 4)
    eng.push("S", [{"k": 0, "v": 0}], ts=100)
    eng.heartbeat(101)
    eng.run()
    assert syn.get("size") <= 26 and syn.get("approximate") is True and syn.get("evicted") >= 74
    assert counts_by_instant(q)[100] == syn.get("size")


def test_switching_policy_mid_run_changes_no_result():
    query = "SELECT k, SUM(v) AS s FROM S [RANGE 4] GROUP BY k"
    outs = []
    for switch in (None, "fifo", "greedy", "round_robin", "chain_flush"):
        eng, q = engine_with(query, "chain")
        for t in range(30):
            eng.push("S", [{"k": t % 3, "v": t}, {"k": (t * 7) % 3, "v": -t}], ts=t)
            if t == 15 and switch:
                eng.set("sys:0", "policy", switch)
            eng.run(max_steps=3)
        eng.heartbeat(40)
        eng.run()
        outs.append(sorted((e.ts, e.sign, tuple(e.row.values())) for e in q.drain()))
    assert all(o == outs[0] for o in outs) and outs[0]


@pytest.mark.parametrize("entity, attr, value, why", [
    ("sys:0", "policy", "lifo", "allowed"),
    ("sys:0", "policy", 3, "wrong type"),
    ("op:0", "priority", -1, "minimum"),
    ("op:0", "priority", "high", "string"),
    ("op:0", "priority", True, "bool"),
    ("op:0", "tuples_in", 5, "read-only"),
    ("op:0", "nope", 1, "no attribute"),
    ("op:99", "priority", 1, "no entity"),
    ("queue:0", "capacity", 0, "minimum"),
])
def test_invalid_writes_change_nothing(entity, attr, value, why):
    eng, _ = engine_with("SELECT COUNT(*) AS c FROM S [RANGE 5]")
    before = [e for e in eng.entities()]
    with pytest.raises(ControlTableError) as e:
        eng.set(entity, attr, value)
    assert why in str(e.value)
    assert eng.entities() == before
    assert eng.registry.history() == []


def test_history_records_writes_with_application_time():
    eng, _ = engine_with("SELECT COUNT(*) AS c FROM S [RANGE 5]")
    eng.push("S", [{"k": 1, "v": 1}], ts=42)
    eng.set("op:0", "priority", 3)
    (change,) = eng.entity("op:0").history()
    assert (change.attr, change.old, change.new, change.at) == ("priority", 0, 3, 42)


def test_synopsis_bytes_match_tracemalloc_within_ten_percent():
    eng = Engine()
    eng.execute("REGISTER STREAM S (k INT, name STRING, v FLOAT)")
    eng.execute("SELECT * FROM S [ROWS 20000]")
    syn = [e for e in eng.registry.entities(kind="window")][0]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    rows = [{"k": i, "name": f"sensor-{i:06d}", "v": i / 3} for i in range(20000)]
    eng.push("S", rows, ts=list(range(20000)))
    eng.run()
    for q in eng.queries():
        q.drain_batches()
    del rows
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    reported = syn.get("bytes")
    assert abs(reported - held) <= 0.10 * held, (reported, held)


# ---------------------------------------------------------------- the system table and the policy's own table


def test_the_system_overload_knobs_refuse_bad_values_and_change_nothing():
    # memory_budget and shedding act since issue 14 (tests/overload); a bad value is refused, value kept
    eng = Engine()
    for knob, value in (("memory_budget", -1), ("memory_budget", "lots"), ("shedding", "yes"),
                        ("load_threshold", 0), ("load_threshold", -0.5)):
        before = eng.system.get(knob)
        with pytest.raises(ControlTableError):
            eng.set("sys:0", knob, value)
        assert eng.system.get(knob) == before
    assert eng.system.get("scheduler") == "sched:0"


def test_the_policy_budget_is_a_knob_of_sched_0_that_takes_effect():
    eng, q = engine_with("SELECT * FROM S", policy="fifo")
    for t in range(6):
        eng.push("S", [{"k": t, "v": t}], ts=t)
    pol = eng.entity("sched:0")
    assert pol is eng.policy and pol.get("policy") == "fifo"
    eng.set("sched:0", "budget", 4)
    assert eng.run(max_steps=1) == 1
    assert sum(op.get("tuples_in") for op in eng.ops) == 4          # one run read 4 input items, not 64
    eng.set("sched:0", "budget", 1)
    eng.run(max_steps=1)
    assert sum(op.get("tuples_in") for op in eng.ops) == 5
    with pytest.raises(ControlTableError):
        eng.set("sched:0", "budget", 0)
    assert [c.attr for c in eng.entity("sched:0").history()] == ["budget", "budget"]


def test_chain_flush_knobs_are_reachable_and_a_new_policy_keeps_the_shared_ones():
    eng, _ = engine_with("SELECT * FROM S", policy="chain_flush")
    eng.set("sched:0", "latency_bound", 5.0)
    eng.set("sched:0", "headroom", 0.2)
    eng.set("sched:0", "budget", 3)
    assert (eng.policy.latency_bound, eng.policy.headroom) == (5.0, 0.2)
    with pytest.raises(ControlTableError):
        eng.set("sched:0", "headroom", 1.5)
    eng.set("sys:0", "policy", "chain")
    pol = eng.entity("sched:0")
    assert pol is eng.policy and pol.get("policy") == "chain" and pol.get("budget") == 3
    with pytest.raises(ControlTableError):
        eng.set("sched:0", "latency_bound", 5.0)                       # Chain has no latency bound
    assert {e["id"] for e in eng.entities()} >= {"sys:0", "sched:0"}
