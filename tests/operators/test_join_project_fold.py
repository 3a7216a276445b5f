"""A projection of plain columns directly above a join of two inputs that never delete runs inside the join as
the columns it keeps (``physical._projected_join``, an ``L.FilteredJoin`` with no predicate of its own), the
selections below such a join run inside it too (``JoinOp.fuse_select``, ``PhysicalPlanner._fuse_select``), and
the small releases of such a join add and probe keys without Python per row where they can
(``SmallAppendIndexSynopsis.add_small``, ``append_small._probe_held``). Checked here: when the projection is
folded and when not (EXPLAIN says which), and that the answers equal the reference evaluator's (tests/oracle/)
on NEXMark q3's shape (selections on both inputs below the join, a projection and ISTREAM above it) with keys
unique on one side, repeated on both, new keys of both sides in one release, uneven inputs without heartbeats,
and a deleting input (a RANGE window) where neither the fold nor the append path may fire."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import check_query, two_stream_actions

from dsms import Engine
from dsms.operators import append_small
from dsms.operators.columns_read import columns_read
from dsms.operators.join import JoinOp
from dsms.operators.project import ProjectOp
from dsms.operators.select import SelectOp

CATALOG = ("REGISTER STREAM A (id INT, seller INT, category INT, s STRING)",
           "REGISTER STREAM B (id INT, name STRING, state STRING)")
Q3 = ("SELECT ISTREAM(P.name, P.state, X.id) FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P "
      "WHERE X.seller = P.id AND (P.state = 'OR' OR P.state = 'CA') AND X.category = 1")


def _engine(*statements: str) -> Engine:
    eng = Engine()
    for s in CATALOG + statements:
        eng.execute(s)
    return eng


def _ops(eng: Engine, kind) -> list:
    return [op for op in eng.ops if isinstance(op, kind)]


def _above(eng: Engine, join: JoinOp) -> list:
    """The projections reading the join's output (projection pushdown may place others below it)."""
    return [op for op in _ops(eng, ProjectOp) if op.input_queues[0] is join.output]


def test_q3s_projection_and_selections_run_inside_the_join_and_explain_says_so():
    eng = _engine()
    q = eng.execute(Q3)
    [join] = _ops(eng, JoinOp)
    assert not _above(eng, join)
    assert join.append is not None and join.predicate is None and join.keep is not None
    sel_a, sel_b = join.selects
    assert sel_a.fused is join and sel_b.fused is join and set(_ops(eng, SelectOp)) == {sel_a, sel_b}
    assert [s.id for s in join.selects] == [op.id for op in _ops(eng, SelectOp)]
    text = eng.explain(q.id)
    assert f"join: seller = id#2 [keeps name, state, id#0]  ({sel_a.id}, {sel_b.id} -> " in text, text
    assert f"-> {join.id}, fused)" in text and "project:" not in text
    assert q.schema == [("name", "STRING"), ("state", "STRING"), ("id", "INT")]
    # the join reads the streams for its selections: only the columns they read (unread ones stay unread)
    assert columns_read(join, 0) == {0, 1, 2} and columns_read(join, 1) == columns_read(sel_b, 0)
    eng.push("A", [{"id": 5, "seller": 1, "category": 1, "s": ""}, {"id": 6, "seller": 1, "category": 0,
                                                                      "s": ""}], ts=[1, 1])
    eng.heartbeat(3)
    eng.run()
    assert (sel_a.tuples_in, sel_a.tuples_out, sel_a.frontier()) == (2, 1, 3)


def test_a_later_query_sharing_a_fused_selection_gets_it_back_and_both_answers_hold():
    """The selection over B shared by a later query: the join gives it back its cursor and reads its output
    queue again; rows pushed before and after come out right for both."""
    eng = _engine()
    q3 = eng.execute(Q3)
    eng.push("B", [{"id": 1, "name": "a", "state": "OR"}, {"id": 2, "name": "b", "state": "WA"}], ts=[1, 2])
    eng.push("A", [{"id": 7, "seller": 1, "category": 1, "s": ""}], ts=[2])
    eng.run()
    sel = eng.execute("SELECT * FROM B WHERE state = 'OR' OR state = 'CA'")
    [join] = _ops(eng, JoinOp)
    assert join.selects[1] is None and join.selects[0] is not None
    shared = [op for op in _ops(eng, SelectOp) if op.fused is None]
    assert len(shared) == 1 and shared[0].output is join.input_queues[1]
    eng.push("B", [{"id": 3, "name": "c", "state": "CA"}], ts=[3])
    eng.push("A", [{"id": 8, "seller": 3, "category": 1, "s": ""}, {"id": 9, "seller": 1, "category": 1,
                                                                      "s": ""}], ts=[4, 4])
    eng.heartbeat(6)
    eng.run()
    assert sorted((e.ts, tuple(e.row.values())) for e in q3.drain()) == [
        (2, ("a", "OR", 7)), (4, ("a", "OR", 9)), (4, ("c", "CA", 8))]
    assert [(e.ts, e.row["id"]) for e in sel.drain()] == [(3, 3)]


@pytest.mark.parametrize("query", [
    # a window deletes: the append path does not apply, the projection (and selection) stay operators
    "SELECT X.id, P.name FROM A [RANGE 5] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id AND P.state = 'OR'",
    # a computed column: not a copy of the join's columns
    "SELECT X.id + 1, P.name FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id",
])
def test_a_projection_the_join_cannot_keep_stays_above(query):
    eng = _engine()
    eng.execute(query)
    [join] = _ops(eng, JoinOp)
    assert join.keep is None and len(_above(eng, join)) == 1
    assert not any(isinstance(s, SelectOp) for s in join.selects)
    assert all(op.fused is None for op in _ops(eng, SelectOp))
    # the projections that pushdown placed below an insert-only join run inside it (as its selections would)
    if join.append is not None:
        below = [op for op in _ops(eng, ProjectOp) if op not in _above(eng, join)]
        assert below and all(op.fused is join and op in join.selects for op in below)


def test_every_column_in_place_is_no_operator_and_no_keep():
    eng = _engine()
    eng.execute("SELECT * FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id")
    [join] = _ops(eng, JoinOp)
    assert join.keep is None and not _above(eng, join)


def test_a_join_another_query_already_reads_is_shared_and_the_projection_stays_above():
    eng = _engine()
    both = eng.execute("SELECT * FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id")
    some = eng.execute("SELECT P.name, X.id FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id")
    [join] = _ops(eng, JoinOp)
    assert join.keep is None and len(_above(eng, join)) == 1
    eng.push("B", [{"id": 7, "name": "n", "state": "OR"}], ts=[1])
    eng.push("A", [{"id": 3, "seller": 7, "category": 1, "s": ""}], ts=[2])
    eng.heartbeat(5)
    eng.run()
    assert [(e.ts, tuple(e.row.values())) for e in some.drain()] == [(2, ("n", 3))]
    assert [(e.ts, len(e.row)) for e in both.drain()] == [(2, 7)]


key = st.integers(0, 4)
row_a = st.fixed_dictionaries({"id": st.integers(0, 50), "seller": key, "category": st.integers(0, 1),
                               "s": st.sampled_from(["", "x"])})
row_b = st.fixed_dictionaries({"id": key, "name": st.sampled_from(["a", "b", ""]),
                               "state": st.sampled_from(["OR", "CA", "WA"])})


@st.composite
def unique_people(draw):
    """Pushes to A and B where B's ids are new and ascending (NEXMark's people: the join's dict of held keys
    takes a release in one update) or repeat one held (the row-at-a-time form), with A's sellers among them."""
    acts, until = draw(two_stream_actions(row_a, row_b, max_steps=14, max_rows=6))
    out, nxt = [], 0
    for a in acts:
        if a[0] == "push" and a[1] == "B" and draw(st.booleans()):
            rows = [dict(r, id=nxt + i) for i, r in enumerate(a[2])]
            nxt += len(rows)
            a = ("push", "B", rows, a[3])
        out.append(a)
    return tuple(out), until


QUERIES = [
    Q3,
    "SELECT ISTREAM(X.id, P.name) FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id",
    "SELECT P.state, X.s, X.id FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id "
    "AND X.id > P.id",
    # a column twice, right before left, and the join key
    "SELECT P.name AS a, X.category, P.name AS b, P.id FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] P "
    "WHERE X.seller = P.id",
    # a deleting input: neither the fold nor the append path fires
    "SELECT ISTREAM(P.name, X.id) FROM A [RANGE 3] X, B [RANGE UNBOUNDED] P WHERE X.seller = P.id "
    "AND X.category = 1",
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(QUERIES), st.one_of(two_stream_actions(row_a, row_b, max_rows=6), unique_people()))
def test_folded_projections_and_small_releases_equal_reference(query, acts):
    check_query(CATALOG, query, *acts)


def test_people_and_their_auctions_in_one_release_equal_reference():
    """New sellers and their auctions in the same release (the pairs of two new rows, at the later instant),
    a seller's second person row (a key held twice), auctions before and after their seller."""
    acts = (
        ("push", "A", [{"id": 1, "seller": 0, "category": 1, "s": ""},
                       {"id": 2, "seller": 1, "category": 1, "s": "x"}], [1, 3]),
        ("push", "B", [{"id": 0, "name": "a", "state": "OR"}, {"id": 1, "name": "b", "state": "CA"},
                       {"id": 2, "name": "c", "state": "OR"}], [2, 2, 4]),
        ("run",),
        ("push", "B", [{"id": 1, "name": "d", "state": "CA"}], [5]),
        ("push", "A", [{"id": 3, "seller": 1, "category": 1, "s": ""},
                       {"id": 4, "seller": 2, "category": 0, "s": ""}], [5, 6]),
    )
    for query in QUERIES:
        check_query(CATALOG, query, acts, 9)


def test_a_release_refused_after_its_new_people_went_in_first_takes_them_out_again(monkeypatch):
    """People with new ids (added to their dict first, ``append_small._fresh``) and their auctions in one
    release that makes more pairs than ``SMALL_PAIRS``: the people's keys are taken out again, both inputs
    move to the arrays, and the array path gives the reference's answer (each person once, no stray key)."""
    monkeypatch.setattr(append_small, "SMALL_PAIRS", 2)
    people = [{"id": i, "name": f"p{i}", "state": "OR"} for i in range(3)]
    auctions = [{"id": 10 + i, "seller": i % 2, "category": 1, "s": ""} for i in range(4)]
    acts = (
        ("push", "B", [{"id": 9, "name": "old", "state": "CA"}], [1]),
        ("push", "A", [{"id": 1, "seller": 9, "category": 1, "s": ""}], [1]),
        ("run",),
        ("push", "B", people, [2, 2, 3]),
        ("push", "A", auctions, [2, 3, 3, 4]),
        ("heartbeat", 4),
        ("run",),
        ("push", "A", [{"id": 20, "seller": 2, "category": 1, "s": ""}], [5]),
    )
    eng = check_query(CATALOG, Q3, acts, 8)
    [join] = _ops(eng, JoinOp)
    assert join.sides[0].keys is None and join.sides[1].keys is None      # the arrays took over
    assert join.sides[1].n == 4 and join.sides[0].n == 6
