"""ISTREAM of an insert-only relation read as it is (``dsms/plan/istream_pass.py``): the query reads the queue of
the plan below, with no ``to_stream`` operator. The answers stay the reference evaluator's (tests/oracle) where
the rule fires and where it must not (a window that deletes, DSTREAM, RSTREAM, an input read as it is), also
when the plan below is shared with other queries, one of them is dropped, or the load shedder drops on the
query's results."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import CATALOG, Workload, apply, compare, inputs, pred, run_engine, run_reference
from oracle.reference import Reference

from dsms import Engine
from dsms.plan.istream_pass import NOTE

S_ENV = [("S.a", "INT"), ("S.b", "INT"), ("S.c", "STRING")]
JOIN_ENV = [("X.a", "INT"), ("X.b", "INT"), ("X.c", "STRING"), ("Y.a", "INT"), ("Y.d", "FLOAT")]


@st.composite
def shaped_queries(draw) -> tuple[str, bool]:
    """(query text, whether the rule fires): shapes whose relation below ISTREAM never deletes (a selection or
    projection of a stream, a join or DISTINCT of such, UNION ALL of selections, with or without ``[RANGE
    UNBOUNDED]``), and shapes where it must not fire (a stream read as it is; windows that delete; DSTREAM and
    RSTREAM)."""
    shape = draw(st.sampled_from(["select", "project", "join", "distinct", "union", "bare", "window", "dstream",
                                  "rstream"]))
    unbounded = draw(st.sampled_from(["", " [RANGE UNBOUNDED]"]))
    p = pred(draw, S_ENV)
    if shape == "select":
        cols = draw(st.sampled_from(["S.a, S.c", "*", "S.b", "S.c, S.a, S.b"]))
        return f"SELECT {cols} FROM S{unbounded} WHERE {p}", True
    if shape == "project":
        return f"SELECT S.a + S.b AS x, S.c FROM S{unbounded}", True
    if shape == "join":
        jp = pred(draw, JOIN_ENV, 1)
        return (f"SELECT X.a, X.c, Y.d FROM S [RANGE UNBOUNDED] X, T [RANGE UNBOUNDED] Y WHERE X.a = Y.a AND {jp}",
                True)
    if shape == "distinct":
        return f"SELECT DISTINCT S.a, S.c FROM S{unbounded} WHERE {p}", True
    if shape == "union":
        q = pred(draw, [("T.a", "INT"), ("T.d", "FLOAT")], 1)
        return f"SELECT S.a FROM S WHERE {p} UNION ALL SELECT T.a FROM T WHERE {q}", True
    if shape == "bare":                               # the input itself: the operator stays
        return draw(st.sampled_from(["SELECT * FROM S", "SELECT S.a, S.b, S.c FROM S [RANGE UNBOUNDED]",
                                     "SELECT ISTREAM(*) FROM T [RANGE UNBOUNDED]"])), False
    if shape == "window":                             # a window that deletes: ISTREAM nets each instant
        w = draw(st.sampled_from(["NOW", "RANGE 3", "ROWS 2", "RANGE 4 SLIDE 2"]))
        return f"SELECT ISTREAM(S.a, S.c) FROM S [{w}] WHERE {p}", False
    if shape == "dstream":
        return f"SELECT DSTREAM(S.a) FROM S{unbounded or ' [RANGE 5]'} WHERE {p}", False
    return f"SELECT RSTREAM(S.a, S.b) FROM S [RANGE UNBOUNDED] WHERE {p}", False


def _fired(eng: Engine, qid: str) -> bool:
    return "to_stream" not in {op.kind for op in eng.ops if qid in op.owners}


@settings(max_examples=120, deadline=None)
@given(shaped=shaped_queries(), given_input=inputs(max_events=12, max_ts=30))
def test_the_answers_are_the_reference_evaluators_where_the_rule_fires_and_where_it_must_not(shaped, given_input):
    query, fires = shaped
    actions, until = given_input
    w = Workload(CATALOG, query, actions, until)
    compare(run_reference(w), run_engine(w))
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute(query)
    assert _fired(eng, q.id) == fires, eng.explain(q.id)
    assert (NOTE in eng.explain(q.id)) == fires
    assert (NOTE in eng.execute(f"EXPLAIN {query}")["explain"]) == fires


def _actions(seed: int, n: int = 80, until: int = 100) -> list:
    rng = random.Random(seed)
    out, ts = [], 0
    for _ in range(n):
        ts += rng.randint(0, 2)
        if ts >= until - 1:
            break
        k = rng.randint(1, 3)
        out.append(("push", "S", [{"a": rng.randint(0, 4), "b": rng.randint(-2, 3), "c": rng.choice("xyz")}
                                  for _ in range(k)], [ts] * k))
        if rng.random() < 0.3:
            out.append(("run",))
        if rng.random() < 0.1:
            out.append(("heartbeat", ts))
    return out


def _reference(statements: tuple, query: str, acts: list, until: int) -> list:
    ref = Reference()
    for s in (*CATALOG, *statements):
        ref.execute(s)
    name = ref.execute(query)
    for a in acts:
        apply(ref, a)
    return ref.results(name, until)


def _elements(q) -> list:
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_shared_selection_a_view_and_a_derived_stream_over_it_keep_their_answers_when_one_is_dropped(seed):
    """One selection read by a query without ISTREAM operator, a second equal query, a view (a changelog over
    the same selection) and a derived stream read by a later query; the first query is dropped halfway."""
    sel = "SELECT a, c FROM S WHERE b > 0"
    view = "REGISTER VIEW V AS SELECT a, c FROM S WHERE b > 0"
    derived = "REGISTER QUERY big AS SELECT a, b FROM S WHERE b > 0"
    over = "SELECT a FROM big WHERE a <> 2"
    acts, until = _actions(seed), 100
    eng = Engine()
    for s in (*CATALOG, view, derived):
        eng.execute(s)
    first, second, third = eng.execute(sel), eng.execute(sel), eng.execute(over)
    assert first.reader.queue is second.reader.queue                  # one plan, no operator of their own
    assert _fired(eng, first.id) and _fired(eng, third.id)
    whole = eng.execute("SELECT * FROM big")                          # a query's result read as it is
    assert not _fired(eng, whole.id) and [op.kind for op in eng.ops if whole.id in op.owners] == ["to_stream"]
    below = [op for op in eng.ops if op.kind == "select" and "b > 0" in op.detail]
    assert len(below) == 1 and {first.id, second.id, eng.query("V").id, eng.query("big").id} <= below[0].owners
    half = len(acts) // 2
    got_first = []
    for i, a in enumerate(acts):
        apply(eng, a)
        if i == half:
            eng.run()
            got_first = _elements(first)
            eng.drop(first.id)
    eng.heartbeat(until)
    eng.run()
    compare(_reference((), sel, acts, until), [e for e in _elements(second) if e[0] < until])
    compare(_reference((derived,), "SELECT * FROM big", acts, until), [e for e in _elements(whole) if e[0] < until])
    compare(_reference((derived,), over, acts, until), [e for e in _elements(third) if e[0] < until])
    cut = max((a[3][-1] for a in acts[:half + 1] if a[0] == "push"), default=-1)
    compare(_reference((), sel, acts[:half + 1], cut + 1), got_first)    # every row pushed before the drop
    assert sorted(eng.contents("V")) == sorted((r["a"], r["c"]) for _, _, r in _reference((), sel, acts, until))


def test_a_query_registered_later_reads_from_its_registration_on():
    """A query equal to one already running shares its selection's queue; it starts after the input that
    arrived before it (contract, "Registration time"), as its own operator's reader did."""
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    sel = "SELECT a FROM S WHERE b >= 0"
    early = eng.execute(sel)
    eng.push("S", [{"a": 1, "b": 1, "c": "x"}], ts=[1])
    late = eng.execute(sel)
    eng.push("S", [{"a": 2, "b": 1, "c": "x"}, {"a": 3, "b": -1, "c": "y"}], ts=[2, 2])
    eng.run()
    assert [(e.ts, e.row["a"]) for e in early.drain()] == [(1, 1), (2, 2)]
    assert [(e.ts, e.row["a"]) for e in late.drain()] == [(2, 2)]


def test_the_load_shedder_drops_on_the_results_of_a_selection_whose_operator_is_shared():
    """A selection query sharing its select with a view it does not shed: the drop it needs alone goes on its
    own reading of its results (where its ISTREAM operator's edge was), so it is thinned and the view is not;
    an aggregate whose operators are all shared gets no such drop (thinning a changelog is no sample)."""
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    view = eng.execute("REGISTER VIEW V AS SELECT a, c FROM S WHERE b > -5")
    q = eng.execute("SELECT a, c FROM S WHERE b > -5")
    agg = eng.execute("SELECT a, COUNT(*) AS n FROM S [RANGE 50] GROUP BY a")
    twin = eng.execute("SELECT a, COUNT(*) AS n FROM S [RANGE 50] GROUP BY a")
    eng.shedder.shed({q.id: 0.25, agg.id: 0.5})
    edges = {s.get("edge"): s.get()["queries"] for s in eng.registry.entities(kind="shedder")}
    assert edges[f"{q.reader.queue.id} -> results of {q.id}"] == [q.id]
    assert not any("results of" in e and q.id not in e for e in edges)
    assert eng.shedder.effective(q.id) == pytest.approx(0.25) and eng.shedder.effective(view.id) == 1.0
    assert eng.shedder.effective(twin.id) == eng.shedder.effective(agg.id)
    rows = [{"a": k % 5, "b": 0, "c": "x"} for k in range(2000)]
    eng.push("S", rows, ts=list(range(2000)))
    eng.heartbeat(3000)
    eng.run()
    kept = q.drain()
    assert 300 < len(kept) < 700 and all(e.approx is not None for e in kept)
    assert len(eng.contents("V")) == 2000
    eng.shedder.shed({})
    assert not list(eng.registry.entities(kind="shedder")) and q.reader.shed is None
