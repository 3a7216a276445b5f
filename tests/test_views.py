"""A view means its definition (SPEC section 3: a view is a name for its definition and never changes an answer).

The property: on generated views (every body shape, views over views) and readers (every relation-to-stream
operator, relation-valued results, joins, aggregates, ``op(v)`` FROM items), the engine equals the reference
evaluator, in which a view is nothing but its definition (V(τ) computed from the base inputs at every instant,
RSTREAM's instants taken from the base inputs); and where the reader can be written with the views inlined
(tests/oracle/views.py), the engine gives the inlined text the same answer. Then one hand-derived test for each
place where naming a view used to change an answer, and for what a view is not (a derived stream).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from oracle.generators import CATALOG, Workload, apply, diff, inputs, minimize, run_engine, run_reference
from oracle.reference import Ambiguous
from oracle.views import view_cases

from dsms import Engine


@st.composite
def _cases(draw):
    setup, query, inlined = draw(view_cases())
    actions, until = draw(inputs())
    return Workload(CATALOG + setup, query, actions, until), inlined


def _problem(w: Workload, inlined: str | None) -> str | None:
    """What is wrong: the engine against the reference, and the view form against the inlined form."""
    info: dict = {}
    expected = run_reference(w, info=info)
    einfo: dict = {}
    actual = run_engine(w, info=einfo)
    if (einfo["kind"], einfo["schema"]) != (info["kind"], info["schema"]):
        return f"engine {einfo['kind']} {einfo['schema']}, reference {info['kind']} {info['schema']}"
    d = diff(expected, actual)
    if d:
        return "engine != reference:\n" + d
    together = _together(w, inlined)
    d = diff(actual, together[0])
    if d:
        return "the reader beside the other forms (sharing their plans) != the reader alone:\n" + d
    if inlined is None:
        return None
    flat = Workload(CATALOG, inlined, w.actions, w.until)
    finfo: dict = {}
    flat_actual = run_engine(flat, info=finfo)
    if finfo["kind"] != einfo["kind"]:
        return None                # merging changed what the text means (an implicit ISTREAM): not an inlining
    d = diff(flat_actual, actual) or diff(flat_actual, together[1])
    return None if d is None else f"view form != inlined form ({inlined}):\n{d}"


def _together(w: Workload, inlined: str | None) -> list:
    """The reader's results and the inlined form's, from one engine in which each view's body was first
    registered as a query of its own, then the views, the reader and the inlined form: equal subplans are
    shared between them (digest-004 E7), and naming must not change what any of them gets."""
    eng = Engine()
    for s in w.statements:
        if s.upper().startswith("REGISTER VIEW"):
            eng.execute(s.split(" AS ", 1)[1])
        eng.execute(s)
    qs = [eng.execute(w.query)] + ([eng.execute(inlined)] if inlined else [])
    for a in w.actions:
        apply(eng, a)
    eng.heartbeat(w.until)
    eng.run()
    return [[(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()] for q in qs] + [[]]


def _fails(case) -> bool:
    try:
        return _problem(*case) is not None
    except Exception:
        return False


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(_cases())
def test_a_view_answers_as_its_definition(case):
    """engine == reference on views and views over views, and engine(view form) == engine(inlined form)."""
    w, inlined = case
    try:
        problem = _problem(w, inlined)
    except Ambiguous:
        reject()
    if problem:
        small = minimize(w, lambda v: _fails((v, inlined)))
        raise AssertionError(f"{small!r}\n{_problem(small, inlined)}")


def test_the_generated_readers_are_inlined_in_every_shape():
    """The inlined comparison is not vacuous: merged bodies, FROM subqueries and op(body) items all occur."""
    seen = set()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(view_cases())
    def inner(case):
        setup, query, inlined = case
        if inlined is not None:
            seen.add("merged" if "FROM (" not in inlined else "subquery")
            if "STREAM(SELECT" in inlined and " Z" in inlined:
                seen.add("op item")
            if "RSTREAM" in inlined and "v2" in "".join(setup):
                seen.add("rstream over a view over a view")
    inner()
    assert seen == {"merged", "subquery", "op item", "rstream over a view over a view"}


# ---------------------------------------------------------------------------------------------------- cases

def _run(statements, query, pushes, until):
    eng = Engine()
    for s in statements:
        eng.execute(s)
    q = eng.execute(query)
    for name, row, ts in pushes:
        eng.push(name, [row], ts=ts)
    eng.heartbeat(until)
    eng.run()
    return [(e.ts, e.sign, tuple(e.row.values())) for e in q.drain()]


# issue 16's input: S (a, b) at 1, 1, 11, 15, 16, 20
ISSUE_INPUT = [("S", {"a": a, "b": b}, t) for a, b, t in
               [(1, 3, 1), (2, 1, 1), (1, 2, 11), (1, 8, 15), (2, 13, 16), (1, 10, 20)]]
ISSUE_RSTREAM = [(1, 1, (1,)), (1, 1, (2,)), (11, 1, (1,)), (15, 1, (1,)), (16, 1, (1,)), (16, 1, (2,)),
                 (20, 1, (1,))]


@pytest.mark.parametrize("statements, query", [
    ((), "SELECT RSTREAM(DISTINCT a) FROM S [RANGE 4]"),
    (("REGISTER VIEW Q AS SELECT DISTINCT a FROM S [RANGE 4]",), "SELECT RSTREAM(*) FROM Q"),
    (("REGISTER VIEW Q AS SELECT DISTINCT a FROM S [RANGE 4]", "REGISTER VIEW Q2 AS SELECT a FROM Q"),
     "SELECT RSTREAM(*) FROM Q2"),
    (("REGISTER QUERY Q AS SELECT a, COUNT(*) AS n FROM S [RANGE 4] GROUP BY a",),
     "SELECT RSTREAM(a) FROM Q"),
], ids=["inline", "view", "view over view", "relation-valued named query"])
def test_rstream_over_a_view_emits_at_the_instants_of_its_base_inputs(statements, query):
    """Issue 16: RSTREAM emits R(τ) at every instant S has an element, 15 included (the view's contents did not
    change there) and 19 excluded (an element expired, nothing arrived), however the relation is named.
    DISTINCT a over S [RANGE 4]: {1,2} at 1, {1} at 11 and 15, {1,2} at 16, {1} at 20 (2 left at 20)."""
    assert sorted(_run(("REGISTER STREAM S (a INT, b INT)", *statements), query, ISSUE_INPUT, 25)) \
        == ISSUE_RSTREAM


def test_rstream_over_a_view_joined_with_a_stream_takes_the_instants_of_both():
    """v = MAX(b) per a over S [RANGE 4]: (1,5) on [1,5) (S's 3 at 3 leaves it unchanged), (1,3) on [5,7), then
    empty. Joined with T [RANGE 100] (a=1 from 2, a=2 from 6), RSTREAM emits at the instants of S (1, 3) and T
    (2, 6): nothing at 1 (T empty), (1,5) at 2 and 3, (1,3) at 6; not at 5 or 7, where only v changed."""
    stmts = ("REGISTER STREAM S (a INT, b INT)", "REGISTER STREAM T (a INT)",
             "REGISTER VIEW v AS SELECT a, MAX(b) AS n FROM S [RANGE 4] GROUP BY a")
    pushes = [("S", {"a": 1, "b": 5}, 1), ("T", {"a": 1}, 2), ("S", {"a": 1, "b": 3}, 3), ("T", {"a": 2}, 6)]
    out = _run(stmts, "SELECT RSTREAM(v.a, v.n) FROM v, T [RANGE 100] Y WHERE v.a = Y.a", pushes, 20)
    assert sorted(out) == [(2, 1, (1, 5)), (3, 1, (1, 5)), (6, 1, (1, 3))]


# DISTINCT a over S [RANGE 4] on ISSUE_INPUT: {1,2} on [1,5), {} on [5,11), {1} on [11,16), {1,2} on [16,19),
# {2} on [19,20), {1} on [20,24), {} from 24
@pytest.mark.parametrize("op, expected", [
    ("ISTREAM", [(1, 1, (1,)), (1, 1, (2,)), (11, 1, (1,)), (16, 1, (2,)), (20, 1, (1,))]),
    ("DSTREAM", [(5, 1, (1,)), (5, 1, (2,)), (19, 1, (1,)), (20, 1, (2,)), (24, 1, (1,))]),
])
def test_istream_and_dstream_over_a_view_equal_the_inlined_form(op, expected):
    """ISTREAM and DSTREAM compare R(τ) with R(τ-1): they emit where the relation changes (19 and 24 too, with no
    input there), through a view as written inline."""
    stream = ("REGISTER STREAM S (a INT, b INT)",)
    view = stream + ("REGISTER VIEW Q AS SELECT DISTINCT a FROM S [RANGE 4]",)
    assert sorted(_run(stream, f"SELECT {op}(DISTINCT a) FROM S [RANGE 4]", ISSUE_INPUT, 25)) == expected
    assert sorted(_run(view, f"SELECT {op}(*) FROM Q", ISSUE_INPUT, 25)) == expected


@pytest.mark.parametrize("first", [False, True], ids=["view alone", "after the same body as a query"])
def test_a_view_sharing_a_querys_plan_keeps_its_contents_for_later_readers(first):
    """An unnamed query with the view's body, registered just before the view, shares its whole plan, result
    sink included; that sink did not keep the relation (nobody reads an unnamed query by name), so a reader
    registered later missed the view's contents. c = COUNT per a over S [RANGE 100]: (1,1) from 1, (2,1) from
    2; a reader registered at 10 starts from them, then gets (3,1) at 20."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT)")
    body = "SELECT a, COUNT(*) AS n FROM S [RANGE 100] GROUP BY a"
    if first:
        eng.execute(body)
    eng.execute(f"REGISTER VIEW c AS {body}")
    eng.push("S", [{"a": 1}, {"a": 2}], ts=[1, 2])
    eng.heartbeat(10)
    eng.run()
    q = eng.execute("SELECT * FROM c")
    eng.push("S", [{"a": 3}], ts=20)
    eng.heartbeat(30)
    eng.run()
    assert sorted((e.ts, e.sign, tuple(e.row.values())) for e in q.drain()) == \
        [(1, 1, (1, 1)), (2, 1, (2, 1)), (20, 1, (3, 1))]


def test_a_derived_stream_is_a_stream_not_a_view():
    """SPEC section 4: a derived stream is a stream later queries read by name; its elements are its instants.
    ds keeps S's elements with a > 1: 2 at 2 and 4 at 6 (S's 1 at 4 is dropped). RSTREAM over ds [RANGE 10]
    emits at 2 and 6 only; the same through a view over ds, whose input is ds."""
    stmts = ("REGISTER STREAM S (a INT)", "REGISTER QUERY ds AS SELECT a FROM S WHERE a > 1",
             "REGISTER VIEW v AS SELECT a FROM ds [RANGE 10]")
    pushes = [("S", {"a": 2}, 2), ("S", {"a": 1}, 4), ("S", {"a": 4}, 6)]
    expected = [(2, 1, (2,)), (6, 1, (2,)), (6, 1, (4,))]
    assert sorted(_run(stmts, "SELECT RSTREAM(a) FROM ds [RANGE 10]", pushes, 30)) == expected
    assert sorted(_run(stmts, "SELECT RSTREAM(*) FROM v", pushes, 30)) == expected


def test_rstream_takes_instants_from_a_view_read_in_a_where_subquery():
    """The view in the IN subquery stands for R: R's update at 5 is an instant of the reader (S [RANGE 100]
    holds 1 from 1; v = the a < 2 of R; 1 is in v from 5), and S's element at 1 is one too (the result is
    empty there); R's insert of 2 at 8 changes neither v nor the result, but it is an instant."""
    stmts = ("REGISTER STREAM S (a INT)", "REGISTER RELATION R (a INT)",
             "REGISTER VIEW v AS SELECT a FROM R WHERE a < 2")
    eng = Engine()
    for s in stmts:
        eng.execute(s)
    q = eng.execute("SELECT RSTREAM(a) FROM S [RANGE 100] WHERE a IN (SELECT a FROM v)")
    eng.push("S", [{"a": 1}], ts=1)
    eng.update("R", insert=[{"a": 1}], ts=5)
    eng.update("R", insert=[{"a": 2}], ts=8)
    eng.heartbeat(20)
    eng.run()
    assert sorted((e.ts, tuple(e.row.values())) for e in q.drain()) == [(5, (1,)), (8, (1,))]


def test_a_reader_of_a_view_loaded_from_its_plan_file_keeps_its_instants():
    """The reader's plan file (``plan_xml``) names the view's inputs as RSTREAM's instants, so the loaded plan
    answers as the registered one: issue 16's input through Q."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    eng.execute("REGISTER VIEW Q AS SELECT DISTINCT a FROM S [RANGE 4]")
    q = eng.execute("SELECT RSTREAM(*) FROM Q")
    loaded = eng.load_plan(eng.plan_xml(q.id))
    for name, row, ts in ISSUE_INPUT:
        eng.push(name, [row], ts=ts)
    eng.heartbeat(25)
    eng.run()
    for query in (q, loaded):
        assert sorted((e.ts, e.sign, tuple(e.row.values())) for e in query.drain()) == ISSUE_RSTREAM
