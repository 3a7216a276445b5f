"""The join of two inputs that never delete (``dsms/operators/append_join.py``, an ``AppendIndexSynopsis`` per
input) against the reference evaluator (tests/oracle/): equi-joins with band predicates (NEXMark q4's and q9's
``B.dateTime BETWEEN A.dateTime AND A.expires``), several key columns, string keys, a self-join, a cross
product, an aggregate and a view above, pairs of rows released together, rows released at one instant across
several runs, and releases cut by the pair budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, diff, run_engine, run_reference, two_stream_actions

import dsms.operators.join as join_mod
from dsms import Engine
from dsms.operators.join import JoinOp
from synopses.append_index import AppendIndexSynopsis
from synopses.sorted_run_index import SortedRunIndexSynopsis

CATALOG = ("REGISTER STREAM A (id INT, t INT, e INT, s STRING)",
           "REGISTER STREAM B (k INT, t INT, p FLOAT, s STRING)")
BAND = "X.id = Y.k AND Y.t >= X.t AND Y.t <= X.e"
QUERIES = [
    f"SELECT X.id, Y.p, Y.t FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE {BAND}",
    "SELECT * FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k",
    "SELECT * FROM B [RANGE UNBOUNDED] Y, A [RANGE UNBOUNDED] X WHERE Y.k = X.id AND Y.t BETWEEN X.t AND X.e",
    "SELECT X.id, X.s, Y.p FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND X.t = Y.t",
    "SELECT X.s, Y.k FROM A X, B Y WHERE X.s = Y.s AND X.id <> Y.k",
    "SELECT X.id, Y.t FROM A [RANGE UNBOUNDED] X, A [RANGE UNBOUNDED] Y WHERE X.id = Y.id AND X.t < Y.t",
    "SELECT X.id, Y.k FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.t + 1 >= Y.t",
    f"SELECT X.id, X.s, MAX(Y.p) AS m, COUNT(*) AS n FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y "
    f"WHERE {BAND} GROUP BY X.id, X.s",
    "SELECT ISTREAM(X.id, Y.p) FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND X.e > 0",
]
VIEW = (f"REGISTER VIEW V AS SELECT X.id AS id, Y.p AS p, Y.t AS bt FROM A [RANGE UNBOUNDED] X, "
        f"B [RANGE UNBOUNDED] Y WHERE {BAND}")
# D never deletes and holds one row per id: an input both insert-only and keyed (the append path wins)
DISTINCT_VIEW = "REGISTER VIEW D AS SELECT DISTINCT id FROM A [RANGE UNBOUNDED]"
VIEW_QUERIES = [
    "SELECT V.id, V.p, Z.s FROM V, A [RANGE UNBOUNDED] Z WHERE V.id = Z.id AND V.bt >= Z.t",
    "SELECT id, MAX(p) AS m FROM V GROUP BY id",
    "SELECT Y.k, Y.p, D.id FROM B [RANGE UNBOUNDED] Y, D WHERE Y.k = D.id",
]

small = st.integers(0, 3)
row_a = st.fixed_dictionaries({"id": small, "t": st.integers(0, 6), "e": st.integers(-1, 8),
                               "s": st.sampled_from(["", "x", "yy"])})
row_b = st.fixed_dictionaries({"k": small, "t": st.integers(0, 6), "p": st.sampled_from([0.5, -1.0, 2.25]),
                               "s": st.sampled_from(["", "x", "yy"])})


def actions():
    """Pushes to A and B (several rows at one instant, gaps of 0-2), runs and heartbeats in between."""
    return two_stream_actions(row_a, row_b, max_steps=14, max_rows=5)


def check(statements: tuple, query: str, acts: tuple, until: int) -> None:
    w = Workload(statements, query, acts, until)
    info, einfo = {}, {}
    expected = run_reference(w, info=info)
    actual = run_engine(w, info=einfo)
    assert einfo["kind"] == info["kind"] and einfo["schema"] == info["schema"]
    problem = diff(expected, actual)
    assert problem is None, f"{w!r}\n{problem}"


@settings(max_examples=250, deadline=None)
@given(st.sampled_from(QUERIES), actions())
def test_insert_only_join_equals_reference(query, acts):
    check(CATALOG, query, *acts)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(VIEW_QUERIES), actions())
def test_join_over_an_insert_only_view_equals_reference(query, acts):
    check(CATALOG + (VIEW, DISTINCT_VIEW), query, *acts)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUERIES[:3] + QUERIES[5:6]), actions(), st.integers(1, 6))
def test_releases_cut_by_the_pair_budget_equal_reference(query, acts, budget):
    """With a pair budget of a few pairs every release over it is cut into prefixes (``JoinOp._bounded``)."""
    saved, join_mod.PAIR_BUDGET = join_mod.PAIR_BUDGET, budget
    try:
        check(CATALOG, query, *acts)
    finally:
        join_mod.PAIR_BUDGET = saved


def _join(eng: Engine) -> JoinOp:
    return next(op for op in eng.ops if isinstance(op, JoinOp))


@pytest.mark.parametrize(("query", "append"), [
    (QUERIES[0], True),
    ("SELECT * FROM A X, B Y WHERE X.id = Y.k", True),                       # no window: unbounded
    ("SELECT * FROM A [RANGE 10] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k", False),
    ("SELECT * FROM A [ROWS 3] X, B Y WHERE X.id = Y.k", False),
])
def test_the_append_path_is_taken_exactly_when_neither_input_deletes(query, append):
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    eng.execute(query)
    join = _join(eng)
    assert (join.append is not None) == append
    assert all(isinstance(s, AppendIndexSynopsis if append else SortedRunIndexSynopsis) for s in join.sides)


def test_bids_before_their_auction_and_in_its_release_are_joined_at_the_later_instant():
    """NEXMark's bids may name an auction that arrives later: each pair enters when its later row does, also
    when both rows come in one release, and the band predicate is applied to the matched pairs."""
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute(QUERIES[0])
    eng.push("B", [{"k": 1, "t": 5, "p": 1.0, "s": ""}, {"k": 2, "t": 6, "p": 2.0, "s": ""}], ts=[5, 6])
    eng.push("A", [{"id": 1, "t": 3, "e": 9, "s": ""}, {"id": 2, "t": 7, "e": 9, "s": ""},
                   {"id": 3, "t": 7, "e": 9, "s": ""}], ts=[7, 7, 8])
    eng.push("B", [{"k": 3, "t": 8, "p": 3.0, "s": ""}, {"k": 1, "t": 10, "p": 4.0, "s": ""}], ts=[8, 10])
    eng.heartbeat(20)
    eng.run()
    got = sorted((e.ts, e.row["id"], e.row["p"]) for e in q.drain())
    # bid (2, t=6) is before its auction's start (7): out; bid (1, t=10) after its expiry (9): out
    assert got == [(7, 1, 1.0), (8, 3, 3.0)]
    join = _join(eng)
    assert [len(s) for s in join.sides] == [3, 4] and join.sides[0].get("keys") == 3


def test_state_bytes_and_rows_are_reported():
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    eng.execute(QUERIES[1])
    for i in range(50):
        eng.push("A", [{"id": i % 7, "t": i, "e": i, "s": f"s{i}"}], ts=[i])
        eng.push("B", [{"k": i % 5, "t": i, "p": 1.0, "s": "b"}], ts=[i])
    eng.run()
    join = _join(eng)
    for syn in join.sides:
        table = syn.get()
        assert table["kind"] == "append_index" and table["size"] == 50 and table["bytes"] > 50 * 8
    assert join.sides[0].get("keys") == 7 and join.sides[1].get("keys") == 5


def test_an_insert_only_join_cannot_be_sampled_and_says_so_before_any_projection():
    """No window to sample: a switch to reservoir, or the projection the memory governor asks for first, is
    refused with ValueError (which the governor takes as "not this one"), and exact state is projected as is."""
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    eng.execute(QUERIES[1])
    eng.push("A", [{"id": 1, "t": 1, "e": 1, "s": "a"}], ts=[1])
    eng.heartbeat(2)
    eng.run()
    join = _join(eng)
    with pytest.raises(ValueError, match="first in, first out"):
        join.projected_bytes("reservoir")
    with pytest.raises(ValueError, match="first in, first out"):
        join.switch_kind("reservoir")
    assert join.projected_bytes("exact") == join.table_bytes() > 0 and join.kind_in_effect() == "exact"
