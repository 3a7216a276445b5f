"""The Policy API: the registry of policies, knobs, user priority, plan changes, drift, and the safety
property the engine relies on: any pick order drains every queue and gives the same results (digest-004
R-SCH-06: policies are switchable at run time)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schedsim import SimBatch, SimOp, SimQueue, Simulator, e1_plan

from control_tables import ControlTableError, NoSuchAttributeError
from scheduler import POLICIES, ChainPolicy, Policy, drive

NAMES = ["fifo", "round_robin", "greedy", "chain", "chain_flush"]


def test_registry():
    assert list(POLICIES) == NAMES
    assert all(issubclass(cls, Policy) and cls.name == name for name, cls in POLICIES.items())


@pytest.mark.parametrize(("name", "knobs"), [
    ("fifo", {"budget": 0}), ("chain", {"drift": -0.1}), ("chain_flush", {"latency_bound": 0}),
    ("greedy", {"unit": "rows"}), ("round_robin", {"budget": "4"}),
])
def test_bad_knobs_are_refused(name, knobs):
    with pytest.raises(ControlTableError):
        POLICIES[name](**knobs)


def test_unknown_knob():
    with pytest.raises(NoSuchAttributeError):
        POLICIES["fifo"](latency_bound=3)


def test_knobs_change_at_run_time():
    p = POLICIES["chain"](budget=4)
    ops, _ = e1_plan()
    assert p.budget(ops[0]) == 4
    p.set("budget", 2)
    assert p.budget(ops[0]) == 2
    p.plan_changed(ops)
    p.recompute()
    p.set("drift", 0.5)                    # any change of the rules recomputes the chains
    assert p._dirty


@pytest.mark.parametrize("name", NAMES)
def test_pick_nothing(name):
    assert POLICIES[name]().pick([]) is None


@pytest.mark.parametrize("name", NAMES)
def test_user_priority_runs_first(name):
    """SPEC section 8: an operator's ``priority`` knob, higher runs first, over every policy's own order."""
    ops, _ = e1_plan()
    for op in ops:
        op.input_queues[0].put(SimBatch(1, 10, 8.0))
    ops[1].priority = 0
    ops[0].priority = 0
    p = POLICIES[name]()
    p.plan_changed(ops)
    first = p.pick(ops)
    other = ops[1] if first is ops[0] else ops[0]
    other.priority = 5
    assert p.pick(ops) is other


@pytest.mark.parametrize("name", NAMES)
def test_an_operator_not_announced_joins_the_plan(name):
    ops, _ = e1_plan()
    ops[1].input_queues[0].put(SimBatch(1, 2, 8.0))
    p = POLICIES[name]()
    p.plan_changed(ops[:1])
    assert p.pick([ops[1]]) is ops[1]
    assert p.topology.knows(ops[1])


def test_chain_recomputes_on_drift_only():
    ops, arrivals = e1_plan()
    p = ChainPolicy()
    sim = Simulator(ops, arrivals[:2])
    sim.run(p)
    n = p.recomputes
    ops[0].selectivity *= 1.1              # 10% < drift 20%: keep the chains
    p.on_ran(ops[0], 1)
    ops[0].input_queues[0].put(SimBatch(9, 10, 8.0))
    p.pick([ops[0]])
    assert p.recomputes == n
    ops[0].selectivity *= 1.5              # 50%: recompute, once RECOMPUTE_RUNS runs have passed since the last
    p.recompute()
    n = p.recomputes
    for _ in range(ChainPolicy.RECOMPUTE_RUNS - 1):
        ops[0].selectivity *= 1.5
        p.on_ran(ops[0], 1)
        p.pick([ops[0]])
    assert p.recomputes == n               # drifted, but too few runs since the last recompute
    p.on_ran(ops[0], 1)
    p.pick([ops[0]])
    assert p.recomputes == n + 1
    p.on_ran(ops[0], 1)                    # no drift since: no recompute, however many runs pass
    p.pick([ops[0]])
    assert p.recomputes == n + 1


# ------------------------------------------------------------------------------ any pick order is safe

@st.composite
def random_plans(draw):
    """A random DAG: sources, unary and binary operators on earlier queues (so readers are shared), arrivals."""
    n_src = draw(st.integers(1, 2))
    n_ops = draw(st.integers(1, 7))
    spec = []
    for k in range(n_ops):
        arity = draw(st.integers(1, 2))
        inputs = [draw(st.integers(0, n_src + k - 1)) for _ in range(arity)]
        spec.append((inputs, draw(st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.0])),
                     draw(st.sampled_from([0.1, 1.0, 3.0]))))
    arrivals = draw(st.lists(st.tuples(st.integers(0, 20), st.integers(0, n_src - 1), st.integers(1, 9)),
                             min_size=1, max_size=25))
    return n_src, spec, arrivals


def build(n_src, spec, arrivals):
    queues = [SimQueue(f"s{i}") for i in range(n_src)]
    ops = []
    for k, (inputs, sel, cost) in enumerate(spec):
        out = SimQueue(f"q{k}")
        ops.append(SimOp(f"op{k}", [queues[i] for i in inputs], out, selectivity=sel, cost=cost))
        queues.append(out)
    return ops, [(float(t), queues[s], float(r)) for t, s, r in arrivals]


@settings(max_examples=60, deadline=None)
@given(random_plans())
def test_every_policy_drains_everything_with_the_same_results(plan):
    outputs = {}
    for name in NAMES:
        ops, arrivals = build(*plan)
        sim = Simulator(ops, arrivals)
        knobs = {"clock": sim.clock, "latency_bound": 5.0} if name == "chain_flush" else {}
        trace = sim.run(POLICIES[name](**knobs))
        assert not any(op.ready() for op in ops)
        assert all(pick in ready for pick, ready in zip(trace.picks, trace.ready_sets))
        assert all(q.tuples == 0 for op in ops for q in op.input_queues)
        outputs[name] = [op.output.tuples_in for op in ops]
    for name in NAMES[1:]:
        assert outputs[name] == pytest.approx(outputs["fifo"])


# ------------------------------------------------------------------------------ the real engine

ENGINE_QUERIES = [
    "SELECT ISTREAM(a, SUM(b) AS s) FROM S [RANGE 10] GROUP BY a",
    "SELECT * FROM S WHERE a > 2",
    "SELECT a FROM S [ROWS 3]",
    "SELECT ISTREAM(S.a, T.c) FROM S [RANGE 4], T [RANGE 4] WHERE S.a = T.a",
    "SELECT DISTINCT a FROM S [RANGE 5]",
]


def engine_run(policy_name: str | None, switch_to: str | None = None):
    from dsms import Engine
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b FLOAT); REGISTER STREAM T (a INT, c INT)")
    queries = [eng.execute(q) for q in ENGINE_QUERIES]
    for t in range(40):
        eng.push("S", [{"a": t % 5, "b": float(t)}, {"a": (t * 7) % 5, "b": 1.0}], ts=t)
        if t % 3 == 0:
            eng.push("T", [{"a": t % 5, "c": t}], ts=t)
        if t % 10 == 9:
            if policy_name is None:
                eng.run()
            else:
                drive(POLICIES[policy_name](), eng.ops, max_steps=7)      # part of the work ...
                drive(POLICIES[switch_to or policy_name](), eng.ops)       # ... then switch, and finish
    eng.heartbeat(100)
    eng.run() if policy_name is None else drive(POLICIES[policy_name](), eng.ops)
    return [sorted(map(repr, q.drain())) for q in queries]


@pytest.mark.parametrize(("name", "switch_to"), [(n, None) for n in NAMES] + [("chain", "fifo")])
def test_engine_results_do_not_depend_on_the_policy(name, switch_to):
    assert engine_run(name, switch_to) == engine_run(None)
