"""A RANGE window fused into the join above it (``JoinOp.fuse_window``) behaves exactly as the window operator
it replaces: the same results, the same window statistics, its ``range`` and ``memory`` knobs acting as
before. Three engines run every workload: the join alone (its windows fused), the windows first registered by
queries of their own (shared, so never fused), and those queries registered after the join (which gives the
fused windows back their output queues). The reference evaluator checks fused joins as well
(tests/test_properties.py, join family)."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from dsms import Engine
from dsms.plan import physical

# (S's window, T's window, the rest of the query after FROM); windows are RANGE with or without SLIDE
WINDOWS = ["[RANGE 3]", "[RANGE 5]", "[RANGE 2 SLIDE 2]", "[RANGE 6 SLIDE 4]", "[NOW]"]
TAILS = [
    "WHERE S.a = T.a",
    "WHERE S.a = T.a AND S.b < T.d",
    "",
    "WHERE S.b = T.a",
]

# (instant gap, input, a, b, a knob write after it or None: (which window, "range" or "memory", value))
knob = st.tuples(st.sampled_from("ST"), st.sampled_from(["range", "range", "memory"]), st.integers(1, 6))
action = st.tuples(st.integers(0, 3), st.sampled_from("SST"), st.integers(0, 2), st.integers(0, 3),
                   st.one_of(st.none(), st.none(), st.none(), knob))


def run(query: str, windows: dict[str, str], actions, mode: str):
    """``mode``: "fused" (the join alone), "shared" (each window's own query first), "unfused" (after)."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    eng.execute("REGISTER STREAM T (a INT, d FLOAT)")
    own = [f"SELECT * FROM {s} {w}" for s, w in windows.items()]
    if mode == "shared":
        for text in own:
            eng.execute(text)
    q = eng.execute(query)
    if mode == "unfused":
        for text in own:
            eng.execute(text)
    win = {op.input_queues[0].id: op for op in eng.ops if op.kind == "range_window"}
    src = {s: win.get(eng.source_queue(s).id) for s in ("S", "T")}
    fused = any(op.fused is not None for op in win.values())
    assert fused == (mode == "fused" and bool(win)), eng.explain(q.id)
    t = 0
    for gap, s, a, b, write in actions:
        t += gap
        if s == "S":
            eng.push("S", [{"a": a, "b": b}], ts=[t])
        else:
            eng.push("T", [{"a": a, "d": b / 2}], ts=[t])
        if b == 0 or write:
            eng.run()
        if write and src[write[0]] is not None:
            w, attr, value = write
            op = src[w]
            if attr == "range":
                eng.set(op.id, "range", value)
            else:
                eng.set(op.store.id, "memory", 24 * value)        # a few tuples' worth: evicts
    eng.heartbeat(t + 20)
    eng.run()
    out = Counter((e.ts, e.sign, tuple(sorted(e.row.items()))) for e in q.drain())
    stats = {s: (op.window_rows, op.store.evicted, op.store.approximate, op.tuples_in, op.tuples_out,
                 op.range_from) for s, op in src.items() if op is not None}
    return out, stats


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(WINDOWS), st.sampled_from(WINDOWS), st.sampled_from(TAILS),
       st.lists(action, min_size=1, max_size=30))
def test_fused_window_behaves_as_the_window_operator(ws, wt, tail, actions):
    query = f"SELECT * FROM S {ws}, T {wt} {tail}"
    windows = {"S": ws, "T": wt}
    fused = run(query, windows, actions, "fused")
    assert fused == run(query, windows, actions, "shared")
    assert fused == run(query, windows, actions, "unfused")


def test_a_window_that_shrank_is_matched_value_for_value():
    """After its size shrinks a window's newer tuples can leave before older ones: the join must then match
    each delete with the tuple it names, not with the oldest (S's second row leaves first here)."""
    actions = [(1, "S", 1, 1, ("S", "range", 1)), (2, "S", 2, 2, None), (2, "T", 1, 0, None),
               (0, "T", 2, 0, None)]
    windows = {"S": "[RANGE 5]", "T": "[RANGE 10]"}
    query = "SELECT * FROM S [RANGE 5], T [RANGE 10] WHERE S.a = T.a"
    fused, stats = run(query, windows, actions, "fused")
    assert [(ts, dict(row)["S.a"]) for ts, sign, row in fused] == [(5, 1)]
    assert (fused, stats) == run(query, windows, actions, "shared")


def test_fused_window_keeps_its_entity_and_control_table():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    eng.execute("REGISTER STREAM T (a INT, d FLOAT)")
    q = eng.execute("SELECT S.b, T.d FROM S [RANGE 10], T [RANGE 4] WHERE S.a = T.a")
    join = next(op for op in eng.ops if op.kind == "join")
    windows = [op for op in eng.ops if op.kind == "range_window"]
    assert [w.fused for w in windows] == [join, join]
    ids = {e["id"]: e for e in eng.entities(q.id)}
    for w in windows:                                   # listed with their synopses, pointing at the join
        assert ids[w.id]["fused_into"] == join.id and w.store.id in ids
    assert all(e["id"] in eng.registry for e in ids.values())
    text = eng.explain(q.id)
    assert f"-> {join.id}, fused)" in text and f"join: a#0 = a#2  ({windows[0].id}, {windows[1].id} ->" in text
    plan = eng.explain(q.id, "json")
    assert {"from": windows[0].id, "to": join.id} in plan["edges"]
    assert not eng.policy.topology.knows(windows[0])                       # the scheduler sees the join only
    eng.push("S", [{"a": 1, "b": 7}, {"a": 2, "b": 8}], ts=[1, 2])
    eng.push("T", [{"a": 1, "d": 0.5}], ts=[3])
    eng.run()
    eng.set(windows[1].id, "range", 2)                  # PIPES: from the instant after T's frontier (3) on
    eng.push("T", [{"a": 2, "d": 1.5}], ts=[5])
    eng.heartbeat(30)
    eng.run()
    assert sorted((e.ts, e.sign, e.row["d"]) for e in q.drain()) == [(3, 1, 0.5), (5, 1, 1.5)]
    s_win, t_win = windows
    assert (s_win.tuples_in, s_win.tuples_out, s_win.window_rows) == (2, 4, 0)     # 2 in, 2 inserts, 2 deletes
    assert (t_win.tuples_in, t_win.window_rows, t_win.range, t_win.range_from) == (2, 0, 2, 4)
    assert s_win.last_ts == 2 and s_win.frontier_ts == 30 and s_win.batches_in >= 1


def test_a_later_query_sharing_the_window_gets_it_back_as_an_operator():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    eng.execute("REGISTER STREAM T (a INT, d FLOAT)")
    q1 = eng.execute("SELECT S.b, T.d FROM S [RANGE 10], T [RANGE 4] WHERE S.a = T.a")
    q2 = eng.execute("SELECT b FROM S [RANGE 10]")
    s_win = next(op for op in eng.ops if op.kind == "range_window" and op.owners == {q1.id, q2.id})
    t_win = next(op for op in eng.ops if op.kind == "range_window" and op.owners == {q1.id})
    assert s_win.fused is None and s_win.output.id in eng.registry and t_win.fused is not None
    assert "[shared by q1, q2]" in eng.explain(q1.id)
    eng.push("S", [{"a": 1, "b": 7}], ts=[1])
    eng.push("T", [{"a": 1, "d": 0.5}], ts=[2])
    eng.heartbeat(30)
    eng.run()
    assert [(e.ts, e.row) for e in q1.drain()] == [(2, {"b": 7, "d": 0.5})]
    assert [(e.ts, e.row) for e in q2.drain()] == [(1, {"b": 7})]
    eng.drop(q1.id)
    assert t_win.id not in eng.registry and s_win in eng.ops and s_win.output.id in eng.registry


def run_q7_shape(window: str, actions, keep_apart: bool, general: bool = True):
    """NEXMark q7's shape: a join of a window with a MAX subquery over the same window of the same stream;
    ``general``: planned as a join, not as the one operator a tumbling window gets (window_extreme_join.py)."""
    saved, saved_extreme = physical.PhysicalPlanner._join_input, physical.window_extreme
    if not keep_apart:
        physical.PhysicalPlanner._join_input = lambda self, node, other: False
    if general:
        physical.window_extreme = lambda node: None
    try:
        eng = Engine()
        eng.execute("REGISTER STREAM S (a INT, b INT)")
        q = eng.execute(f"SELECT ISTREAM(X.a, X.b) FROM S {window} X, (SELECT MAX(b) AS m FROM S {window}) M "
                        "WHERE X.b = M.m")
    finally:
        physical.PhysicalPlanner._join_input = saved
        physical.window_extreme = saved_extreme
    windows = [op for op in eng.ops if op.kind == "range_window"]
    t = 0
    for gap, a, b in actions:
        t += gap
        eng.push("S", [{"a": a, "b": b}], ts=[t])
        if b == 0:
            eng.run()
    eng.heartbeat(t + 20)
    eng.run()
    return windows, Counter((e.ts, e.sign, tuple(sorted(e.row.items()))) for e in q.drain())


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["[RANGE 3]", "[RANGE 4 SLIDE 4]", "[RANGE 6 SLIDE 2]"]),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 4)), min_size=1, max_size=30))
def test_a_joins_window_is_not_shared_with_a_subquery_built_with_it(window, actions):
    """The window a join reads is kept apart from the same window built for a subquery of the same join (the
    planner's ``_join_input``), so that the join runs it inside itself; the answer is the one of the plan
    where the two share one window operator, which the join then reads through its queue."""
    apart_windows, apart = run_q7_shape(window, actions, True)
    shared_windows, shared = run_q7_shape(window, actions, False)
    assert len(apart_windows) == 2 and sum(w.fused is not None for w in apart_windows) == 1
    assert len(shared_windows) == 1 and shared_windows[0].fused is None
    assert apart == shared
    assert run_q7_shape(window, actions, True, general=False)[1] == apart    # as the planner builds it
