"""Views computed when read (``dsms/plan/view_demand.py``, ``Engine.materialise``; docs/architecture.md, "Views
computed when read"): a view that only reads relation-valued queries that never delete runs no operator until a
query's plan, a drain, ``contents`` or a server reader reads it, and then answers what it would have answered had
it run since it was registered (against the reference evaluator, tests/oracle, under several scheduling
policies); the views that must run from their registration (they read a stream, a base relation, a relation that
deletes) do; the server builds a view when a reader subscribes and recovery builds it at the same point."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import _below, apply, compare, two_stream_actions
from oracle.reference import Reference

from dsms import Engine
from dsms.runtime import ResultChunk, Runtime

CATALOG = ("REGISTER STREAM A (id INT, lo TIMESTAMP, hi TIMESTAMP, s INT)",
           "REGISTER STREAM B (auction INT, p INT, t TIMESTAMP)",
           "REGISTER RELATION R (id INT, s INT)")
AB = ("REGISTER VIEW AB AS SELECT A.id AS a, A.s AS s, B.p AS p, B.t AS t "
      "FROM A [RANGE UNBOUNDED] A, B [RANGE UNBOUNDED] B WHERE A.id = B.auction AND B.t >= A.lo AND B.t <= A.hi")
M = "REGISTER VIEW M AS SELECT a, MAX(p) AS mp FROM AB GROUP BY a"
T = ("REGISTER VIEW T AS SELECT X.a AS a, MIN(X.t) AS mt FROM AB X, M WHERE X.a = M.a AND X.p = M.mp "
     "GROUP BY X.a")
Q9 = "SELECT X.a, X.s, X.p, X.t FROM AB X, T, M WHERE X.a = T.a AND X.t = T.mt AND X.a = M.a AND X.p = M.mp"


def _engine(*statements: str) -> Engine:
    eng = Engine()
    for s in (*CATALOG, *statements):
        eng.execute(s)
    return eng


def _owned(eng: Engine, name: str) -> list:
    return [op for op in eng.ops if eng.query(name).id in op.owners]


def test_q9_views_nobody_reads_run_no_operator_and_explain_says_so():
    """q9's answer reads the valid bids alone (the lexicographic-extreme rule), so its views M and T wait;
    AB, which the answer reads, runs. A drain of M builds it then."""
    eng = _engine(AB, M, T)
    q = eng.execute(Q9)
    assert [eng.query(n).deferred for n in ("AB", "M", "T")] == [False, True, True]
    assert not q.deferred
    assert _owned(eng, "M") == [] and _owned(eng, "T") == []
    assert {o for op in eng.ops for o in op.owners} == {eng.query("AB").id, q.id}
    assert "[view computed when read" in eng.explain(eng.query("M").id)
    assert eng.explain(eng.query("M").id, "json")["deferred"] is True
    assert 'deferred="true"' in eng.explain(eng.query("M").id, "xml")
    assert "[view computed when read" not in eng.explain(q.id)
    eng.push("A", [{"id": 1, "lo": 0, "hi": 9, "s": 4}], ts=[1])
    eng.push("B", [{"auction": 1, "p": 5, "t": 2}, {"auction": 1, "p": 7, "t": 3}], ts=[2, 3])
    eng.heartbeat(10)
    eng.run()
    m = eng.query("M")
    got = [(e.ts, e.sign, e.row) for e in m.drain()]
    assert got == [(2, 1, {"a": 1, "mp": 5}), (3, -1, {"a": 1, "mp": 5}), (3, 1, {"a": 1, "mp": 7})]
    assert not m.deferred and _owned(eng, "M") and _owned(eng, "T") == []
    assert "[view computed when read" not in eng.explain(m.id)


def test_dropping_a_view_never_built_leaves_no_entity():
    eng = _engine(AB)
    before = {e["id"] for e in eng.entities()}
    eng.execute(M)
    assert eng.query("M").deferred and len({e["id"] for e in eng.entities()}) == len(before) + 1   # its queue
    eng.execute("DROP VIEW M")
    assert {e["id"] for e in eng.entities()} == before
    assert [v["name"] for v in eng.execute("SHOW VIEWS")["rows"]] == ["AB"]


# name: (views, which of them must run from their registration)
MUST_RUN = {
    "over_a_stream": (["REGISTER VIEW V AS SELECT id, COUNT(*) AS n FROM A GROUP BY id"], {"V"}),
    "over_a_base_relation": (["REGISTER VIEW V AS SELECT s, COUNT(*) AS n FROM R GROUP BY s"], {"V"}),
    "over_a_view_that_deletes": ([AB.replace("B [RANGE UNBOUNDED] B", "B [RANGE 4] B"), M], {"AB", "M"}),
    "over_a_view_that_reads_a_deleting_view": ([AB, M, "REGISTER VIEW V AS SELECT a, COUNT(*) AS n FROM M "
                                                "GROUP BY a"], {"AB", "M", "V"}),
    "over_a_derived_stream": (["REGISTER QUERY D AS SELECT * FROM A",
                               "REGISTER VIEW V AS SELECT id, MAX(s) AS m FROM D GROUP BY id"], {"D", "V"}),
    "a_named_query_is_read_by_its_name": ([AB, "REGISTER QUERY N AS SELECT a, MAX(p) AS mp FROM AB GROUP BY a"],
                                          {"AB", "N"}),
    "the_general_plan_reads_the_max": ([AB, M, T.replace("MIN(X.t)", "MIN(X.s)"),
                                        "REGISTER VIEW W AS SELECT X.a AS a, MIN(X.t) AS mt FROM AB X, M "
                                        "WHERE X.a = M.a AND X.p < M.mp GROUP BY X.a"], {"AB", "M", "W"}),
}


@pytest.mark.parametrize("case", sorted(MUST_RUN))
def test_views_that_must_run_from_their_registration_do(case):
    """The rule fires only where the inputs' kept contents replay every change the view would have seen: not
    over streams (kept nowhere), base relations and relations that delete (their contents lose the deletes),
    nor for named queries (read by their name, like any query)."""
    views, running = MUST_RUN[case]
    eng = _engine(*views)
    for q in eng.queries():
        assert q.deferred == (q.name not in running), q.name
        assert bool(_owned(eng, q.name)) == (q.name in running), q.name


POLICIES = [None, "round_robin", "greedy", "chain"]
ROW_A = st.fixed_dictionaries({"id": st.integers(0, 2), "lo": st.integers(0, 3), "hi": st.integers(2, 9),
                               "s": st.integers(0, 2)})
ROW_B = st.fixed_dictionaries({"auction": st.integers(0, 2), "p": st.sampled_from([0, 1, 1, 2, 5, -3]),
                               "t": st.integers(0, 9)})
READS = ["drain_M", "drain_T", "contents_T", "query_over_T", "query_over_M_and_T", "nothing"]


def _fold(results) -> Counter:
    live: Counter = Counter()
    for _ts, sign, row in results:
        live[tuple(sorted(row.items()))] += sign
    return +live


@settings(max_examples=60, deadline=None)
@given(two_stream_actions(ROW_A, ROW_B, max_steps=16, max_rows=5), st.integers(0, 16), st.sampled_from(READS),
       st.booleans(), st.sampled_from(POLICIES))
def test_a_view_read_late_answers_as_if_it_had_run_since_registration(work, at, read, with_q9, policy):
    """M and T wait until something reads them at step ``at`` (a drain, ``contents``, a query registered
    then), or until the final drain; then every result either produces, from its registration on, is the
    reference's for the view, and a query registered late over T ends with T's contents."""
    acts, until = work
    ref = Reference()
    for s in (*CATALOG, AB, M, T):
        ref.execute(s)
    eng = _engine(AB, M, T)
    if policy is not None:
        eng.set_policy(policy)
    if with_q9:
        eng.execute(Q9)
    got = {"M": [], "T": []}
    late = None
    for k, a in enumerate((*acts, ("run",))):
        if k == at:
            if read.startswith("drain_"):
                got[read[-1]] += eng.query(read[-1]).drain()
            elif read == "contents_T":
                eng.contents("T")
            elif read == "query_over_T":
                late = eng.execute("SELECT a, mt FROM T")
            elif read == "query_over_M_and_T":
                late = eng.execute("SELECT T.a, mt FROM T, M WHERE T.a = M.a AND M.mp > 0")
            if read != "nothing":
                assert not eng.query("T" if read != "drain_M" else "M").deferred
        apply(ref, a)
        apply(eng, a)
    eng.heartbeat(until)
    eng.run()
    for v in ("M", "T"):
        got[v] += eng.query(v).drain()
        compare(ref.results(v, until), _below(got[v], until))
    if late is not None:
        mine = _fold(_below(late.drain(), until))
        want = ref.results(late.text, until)
        assert mine == _fold(want)


def _flat(items) -> list:
    return sorted((e.ts, e.sign, tuple(sorted(e.row.items()))) for it in items if isinstance(it, ResultChunk)
                  for e in it.elements())


def test_the_server_builds_a_view_when_a_reader_subscribes_and_recovery_at_the_same_point(tmp_path: Path):
    """A reader of a waiting view gets every result since the view's registration (the view is built and run
    when it subscribes); the building is logged, so a restarted server has the same entities and results."""
    rows_a = [{"id": i % 3, "lo": 0, "hi": 50, "s": i} for i in range(6)]
    rows_b = [{"auction": i % 3, "p": (i * 7) % 11, "t": i} for i in range(40)]

    async def session(path: Path) -> tuple[list, list, list]:
        rt = Runtime({"data_dir": str(path), "archive.fsync": "never"})
        await rt.start()
        for s in (*CATALOG, AB, M, T):
            rt.execute(s)
        rt.execute(Q9)
        assert rt.engine.query("M").deferred
        await rt.ingest("A", rows_a, list(range(6)))
        await rt.ingest("B", rows_b[:20], list(range(20)))
        rt.pump.quiesce()
        sub = rt.subscribe("M", from_ts=-1)         # every result since its registration
        assert not rt.engine.query("M").deferred and rt.engine.query("T").deferred
        await rt.ingest("B", rows_b[20:], list(range(20, 40)))
        await rt.heartbeat(60)
        rt.pump.quiesce()
        ids = sorted(e["id"] for e in rt.entities())
        await rt.stop()
        rt = Runtime({"data_dir": str(path), "archive.fsync": "never"})
        await rt.start()
        again = sorted(e["id"] for e in rt.entities())
        m = rt.engine.query("M")
        ring = _flat(rt.states[m.id].ring)
        t_deferred = rt.engine.query("T").deferred
        await rt.stop()
        assert t_deferred and not m.deferred
        return _flat(sub.take()), ring, [ids, again]

    served, ring, (ids, again) = asyncio.run(session(tmp_path / "data"))
    eng = _engine(AB, M, T)
    eng.push("A", rows_a, list(range(6)))
    eng.push("B", rows_b, list(range(40)))
    eng.heartbeat(60)
    eng.run()
    want = sorted((e.ts, e.sign, tuple(sorted(e.row.items()))) for e in eng.query("M").drain())
    assert len(want) > 3
    assert served == want and ring == want
    assert again == ids
