"""Queries registered while input is already flowing (docs/contract-engine-api.md, "Registration time"): what a
later query sees must not depend on which earlier queries share its subplans, nor on whether ``run()`` was called
before it was registered.

The contract: a query sees the stream elements that arrive after it is registered; relations and views are seen
with their current contents, as a snapshot of the live rows stamped with their insert times; and SPEC section 3's
"results for instant τ are final once every input has passed τ" counts what an input passed before the query
existed. Every expectation is derived by hand from those sentences; the reference evaluator registers its query
before any input, so these cases are the engine's alone.
"""

from __future__ import annotations

import pytest

from dsms import Engine


def rows(q) -> list[tuple]:
    return sorted((e.ts, e.sign, tuple(e.row.values())) for e in q.drain())


def make(*statements: str) -> Engine:
    eng = Engine()
    for s in statements:
        eng.execute(s)
    return eng


def test_a_relation_loaded_after_an_earlier_query_is_seen_by_a_later_one():
    """R = {1, 2} from 1 when q2 and q3 are registered; q1, registered while R was empty, must not lend them its
    scan of R (which started empty): q2 starts from {1, 2} stamped 1, q3 from {2}; both see 3 inserted at 5."""
    eng = make("REGISTER RELATION R (k INT)")
    q1 = eng.execute("SELECT k FROM R")
    eng.update("R", insert=[{"k": 1}, {"k": 2}], ts=1)
    eng.run()
    q2 = eng.execute("SELECT k FROM R")
    q3 = eng.execute("SELECT k FROM R WHERE k > 1")
    eng.update("R", insert=[{"k": 3}], ts=5)
    eng.heartbeat(10)
    eng.run()
    assert rows(q1) == [(1, 1, (1,)), (1, 1, (2,)), (5, 1, (3,))]
    assert rows(q2) == [(1, 1, (1,)), (1, 1, (2,)), (5, 1, (3,))]
    assert rows(q3) == [(1, 1, (2,)), (5, 1, (3,))]


def register_between_1_and_2(eng, text: str, run_before: bool):
    """S gets a = 1 at 1, then the query is registered (with 1 still queued, or processed first), then a = 2 at
    2, and everything up to 10 is final; returns the query."""
    eng.push("S", [{"a": 1}], ts=1)
    if run_before:
        eng.run()
    q = eng.execute(text)
    eng.push("S", [{"a": 2}], ts=2)
    eng.heartbeat(10)
    eng.run()
    return q


@pytest.mark.parametrize("run_before", [False, True], ids=["pending", "processed"])
def test_a_shared_filter_does_not_hand_earlier_input_to_a_later_query(run_before):
    """1 arrives at 1 before q2 is registered, 2 at 2 after: q2 sees 2 only, whether or not the engine had
    processed 1 (the filter q2 shares with q1 had it still queued in one case)."""
    eng = make("REGISTER STREAM S (a INT)")
    q1 = eng.execute("SELECT a FROM S WHERE a > 0")
    q2 = register_between_1_and_2(eng, "SELECT a FROM S WHERE a > 0", run_before)
    assert rows(q1) == [(1, 1, (1,)), (2, 1, (2,))]
    assert rows(q2) == [(2, 1, (2,))]


@pytest.mark.parametrize("run_before", [False, True], ids=["pending", "processed"])
def test_a_derived_stream_read_by_a_later_query(run_before):
    """d passes S on as it comes (no heartbeat needed); q reads d from its registration on: 1 arrived before it,
    2 after, so q sees 2 only, whether or not d had already processed 1."""
    eng = make("REGISTER STREAM S (a INT)", "REGISTER QUERY d AS SELECT a FROM S")
    q = register_between_1_and_2(eng, "SELECT a FROM d WHERE a > 0", run_before)
    assert rows(q) == [(2, 1, (2,))]


def test_an_input_that_passed_an_instant_before_registration_has_passed_it_for_the_query():
    """S passed 150 (a heartbeat) before q was registered; R then has 5 inserted at 101 and passes 200. Every
    input of q has passed 101, so R(101) EXCEPT S [RANGE 10](101) = {5} - {} is final: +5 at 101, although S
    sends nothing after q's registration."""
    eng = make("REGISTER STREAM S (a INT)", "REGISTER RELATION R (a INT)")
    eng.push("S", [{"a": 1}], ts=1)
    eng.heartbeat(150, "S")
    eng.run()
    q = eng.execute("SELECT a FROM R EXCEPT SELECT a FROM S [RANGE 10]")
    eng.update("R", insert=[{"a": 5}], ts=101)
    eng.heartbeat(200, "R")
    eng.run()
    assert rows(q) == [(101, 1, (5,))]


def test_a_relation_snapshot_passes_the_relations_time_on():
    """R holds 7 (inserted at 3) and has passed 50 when q is registered: q's COUNT over R (its snapshot) is final
    below 50 without any later input: +1 at 3."""
    eng = make("REGISTER RELATION R (a INT)")
    eng.update("R", insert=[{"a": 7}], ts=3)
    eng.heartbeat(50, "R")
    eng.run()
    q = eng.execute("SELECT COUNT(*) AS n FROM R")
    eng.run()
    assert rows(q) == [(3, 1, (1,))]


@pytest.mark.parametrize("run_before", [False, True], ids=["pending", "processed"])
def test_a_view_is_seen_with_its_rows_insert_times(run_before):
    """v = S [ROWS 2] holds 1 (from 1) and 2 (from 2) when q is registered; then 3 at 6 pushes 1 out. q starts
    from v's contents stamped with the instants they entered v, whether the view had already released them
    (snapshot) or still had them queued (changes that reach q through v's output)."""
    eng = make("REGISTER STREAM S (a INT)", "REGISTER VIEW v AS SELECT a FROM S [ROWS 2]")
    eng.push("S", [{"a": 1}, {"a": 2}], ts=[1, 2])
    eng.heartbeat(5)
    if run_before:
        eng.run()
    q = eng.execute("SELECT a FROM v")
    eng.push("S", [{"a": 3}], ts=6)
    eng.heartbeat(10)
    eng.run()
    assert rows(q) == [(1, 1, (1,)), (2, 1, (2,)), (6, -1, (1,)), (6, 1, (3,))]


def read_later(eng, name: str):
    """S gets 1, 1, 2 at 1, 2, 3 (final by 10), then ``SELECT * FROM name`` is registered, then 3 arrives at 20
    (final by 30); returns the late query."""
    eng.push("S", [{"a": 1}, {"a": 1}, {"a": 2}], ts=[1, 2, 3])
    eng.heartbeat(10)
    eng.run()
    q = eng.execute(f"SELECT * FROM {name}")
    eng.push("S", [{"a": 3}], ts=20)
    eng.heartbeat(30)
    eng.run()
    return q


@pytest.mark.parametrize("kind", ["VIEW", "QUERY"])
@pytest.mark.parametrize(("body", "expected"), [
    # c's changelog: +(1,1) at 1; -(1,1) +(1,2) at 2; +(2,1) at 3 (nothing leaves RANGE 100 before 30)
    ("SELECT a, COUNT(*) AS n FROM S [RANGE 100] GROUP BY a",
     [(2, 1, (1, 2)), (3, 1, (2, 1)), (20, 1, (3, 1))]),
    # S [ROWS 2] = {1}, {1, 1}, {1, 2}, then {2, 3} at 20: c = (1,1) at 1, (1,2) at 2, (1,1) (2,1) from 3, then
    # (2,1) (3,1) at 20
    ("SELECT a, COUNT(*) AS n FROM S [ROWS 2] GROUP BY a",
     [(3, 1, (1, 1)), (3, 1, (2, 1)), (20, -1, (1, 1)), (20, 1, (3, 1))]),
])
def test_a_named_relation_is_seen_with_its_contents(kind, body, expected):
    """SPEC 4 names a view "a named relation other queries can use"; a relation-valued REGISTER QUERY is one too
    (later queries read it by name), and a query registered on it later starts from its contents as it would
    from a view's (contract), then follows its changes."""
    eng = make("REGISTER STREAM S (a INT)", f"REGISTER {kind} c AS {body}")
    q = read_later(eng, "c")
    assert rows(q) == sorted(expected)


def test_a_view_of_a_window_is_seen_with_the_instants_its_rows_entered():
    """v = S [ROWS 2] (a view, so a relation) = {1} at 1, {1, 1} at 2, {1, 2} at 3: of the two equal rows the
    copy that entered last left first, so the 1 left is stamped 1; at 20 v = {2, 3}."""
    eng = make("REGISTER STREAM S (a INT)", "REGISTER VIEW v AS SELECT a FROM S [ROWS 2]")
    q = read_later(eng, "v")
    assert rows(q) == [(1, 1, (1,)), (3, 1, (2,)), (20, -1, (1,)), (20, 1, (3,))]


def test_a_final_result_is_not_withheld_from_an_identical_later_query():
    """R = {1, 1} from 2; q1 = COUNT(*) over R has emitted +2 at 2 (final after the heartbeat) when q2, the same
    text, is registered with no input in between: q2 starts from R's contents too, so it gets +2 at 2 as well
    (not a share of q1's plan that has already emitted it)."""
    eng = make("REGISTER RELATION R (a INT)")
    eng.update("R", insert=[{"a": 1}, {"a": 1}], ts=2)
    q1 = eng.execute("SELECT COUNT(*) AS n FROM R")
    eng.heartbeat(10)
    eng.run()
    q2 = eng.execute("SELECT COUNT(*) AS n FROM R")
    eng.run()
    assert rows(q1) == [(2, 1, (2,))]
    assert rows(q2) == [(2, 1, (2,))]


def test_identical_queries_registered_together_still_share():
    """Sharing is kept where it is safe: two identical queries registered with no input between them run one
    plan (digest-004 R-SHR-01), and both get every result: 1 in S [RANGE 5] from 1 to 6."""
    eng = make("REGISTER STREAM S (a INT)")
    q1 = eng.execute("SELECT a, COUNT(*) AS n FROM S [RANGE 5] GROUP BY a")
    n_ops = len(eng.ops)
    q2 = eng.execute("SELECT a, COUNT(*) AS n FROM S [RANGE 5] GROUP BY a")
    assert len(eng.ops) == n_ops
    eng.push("S", [{"a": 1}], ts=1)
    eng.heartbeat(10)
    eng.run()
    assert rows(q1) == rows(q2) == [(1, 1, (1, 1)), (6, -1, (1, 1))]


def test_dropping_the_first_owner_of_a_shared_plan_and_registering_its_text_again():
    """q1 and q2 share S [RANGE 10]'s count; q1 is dropped after 1 arrived at 1: q2 keeps every result
    (1 at 1, 2 from 3, 1 from 11, none from 13, 1 from 31 to 41). q1's text registered again after 3 arrived
    sees only 5 at 31 (registration time)."""
    eng = make("REGISTER STREAM S (a INT)")
    q1 = eng.execute("SELECT COUNT(*) AS n FROM S [RANGE 10]")
    q2 = eng.execute("SELECT COUNT(*) AS n FROM S [RANGE 10]")
    eng.push("S", [{"a": 1}], ts=1)
    eng.run()
    eng.drop(q1.id)
    eng.push("S", [{"a": 2}], ts=3)
    again = eng.execute("SELECT COUNT(*) AS n FROM S [RANGE 10]")
    eng.push("S", [{"a": 5}], ts=31)
    eng.heartbeat(50)
    eng.run()
    assert rows(q2) == sorted([(1, 1, (1,)), (3, -1, (1,)), (3, 1, (2,)), (11, -1, (2,)), (11, 1, (1,)),
                               (13, -1, (1,)), (31, 1, (1,)), (41, -1, (1,))])
    assert rows(again) == [(31, 1, (1,)), (41, -1, (1,))]


# ---------------------------------------------------------------------------------------------------- property
# The sentences above as one property: a query registered after the first k input actions, next to an earlier
# query of the same family (or the same query) registered at the start and sharing whatever it can, gives what
# a fresh engine gives when fed only what the late query may see: each relation's live rows at k as inserts at
# their insert times (of equal rows, the latest copy leaves first), each input's frontier at k as a heartbeat on
# it, then the actions after k.

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from oracle.generators import CATALOG, RELATIONS, STREAMS, apply, diff, queries, workloads  # noqa: E402


def _seen_from(actions) -> list:
    """The actions a fresh engine needs to stand where a query registered after ``actions`` starts."""
    frontier: dict[str, int] = {}
    live: dict[str, list] = {r: [] for r in RELATIONS}
    for a in actions:
        if a[0] == "push":
            frontier[a[1]] = max(frontier.get(a[1], a[3][-1]), a[3][-1])
        elif a[0] == "update":
            frontier[a[1]] = max(frontier.get(a[1], a[4]), a[4])
            bag = live[a[1]]
            bag += [(a[4], r) for r in a[2]]
            for r in a[3]:
                k = max(i for i, (_, x) in enumerate(bag) if x == r)
                bag.pop(k)
        elif a[0] == "heartbeat":
            for name in (a[2:] or (*STREAMS, *RELATIONS)):
                frontier[name] = max(frontier.get(name, a[1]), a[1])
    out: list = []
    for name, bag in live.items():
        for t in sorted({t for t, _ in bag}):
            out.append(("update", name, [r for u, r in bag if u == t], [], t))
    out += [("heartbeat", h, name) for name, h in frontier.items()]
    return out


@st.composite
def _late_registrations(draw, family: str):
    w = draw(workloads(family).filter(lambda w: w.statements == CATALOG))
    setup, other = draw(queries(family).filter(lambda q: not q[0]))
    first = draw(st.sampled_from([other, w.query]))
    k = draw(st.integers(0, len(w.actions)))
    return w, first, k


def _late_vs_fresh(w, first: str, k: int) -> str | None:
    late = Engine()
    for s in w.statements:
        late.execute(s)
    late.execute(first)
    for a in w.actions[:k]:
        apply(late, a)
    q = late.execute(w.query)
    for a in w.actions[k:]:
        apply(late, a)
    late.heartbeat(w.until)
    late.run()
    fresh = Engine()
    for s in w.statements:
        fresh.execute(s)
    f = fresh.execute(w.query)
    for a in [*_seen_from(w.actions[:k]), *w.actions[k:]]:
        apply(fresh, a)
    fresh.heartbeat(w.until)
    fresh.run()
    return diff([tuple(e) for e in f.drain()], [tuple(e) for e in q.drain()])


@pytest.mark.parametrize("family", ["window", "join", "aggregate", "setop", "subquery"])
def test_a_late_query_sees_what_a_fresh_engine_fed_its_view_of_the_input_sees(family):
    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_late_registrations(family))
    def inner(case):
        w, first, k = case
        problem = _late_vs_fresh(w, first, k)
        assert problem is None, f"registered after {k} actions, beside {first!r}:\n{w!r}\n{problem}"
    inner()
