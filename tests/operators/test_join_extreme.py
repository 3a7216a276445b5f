"""A grouped MAX/MIN straight over a join whose inputs never delete is one operator, ``JoinExtremeOp``
(``dsms/plan/join_extreme.py`` checks the facts, ``dsms/operators/join_extreme.py`` and ``extreme_fold.py`` do it):
which aggregates the planner folds into their join and which it must not, what EXPLAIN says, and answers
against the reference evaluator (tests/oracle/) on uneven inputs (pushes to one stream only for a while, no
heartbeat between, runs now and then), several rows per instant, ties on the extreme, values at the ends of
int64, rows of the value side before their group row, groups from the right input, MIN and MAX together, and
a view over the fold read by an AVG (NEXMark q4's shape); q4 itself against the plain loop."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import check_query, two_stream_actions

from dsms import Engine
from dsms.operators.join_extreme import JoinExtremeOp
from dsms.operators.project import ProjectOp
from dsms.operators.vector_aggregate import VectorAggregateOp

CATALOG = ("REGISTER STREAM A (id INT, t INT, e INT, c INT, f FLOAT, s STRING)",
           "REGISTER STREAM B (k INT, t INT, p INT, f FLOAT, s STRING)")
U = "A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y"
BAND = "X.id = Y.k AND Y.t BETWEEN X.t AND X.e"
Q4WIN = f"REGISTER VIEW W AS SELECT X.id AS id, X.c AS c, MAX(Y.p) AS final FROM {U} WHERE {BAND} GROUP BY X.id, X.c"
SHAPES = {
    "q4_view": ((), f"SELECT X.id, X.c, MAX(Y.p) AS m FROM {U} WHERE {BAND} GROUP BY X.id, X.c"),
    "q4_avg_over_view": ((Q4WIN,), "SELECT c, AVG(final) AS a FROM W GROUP BY c"),
    "min_and_max_no_band": ((), f"SELECT X.c, MIN(Y.p) AS lo, MAX(Y.t) AS hi FROM {U} WHERE X.id = Y.k "
                                "GROUP BY X.c"),
    "group_from_the_right": ((), f"SELECT Y.p, MAX(X.e) AS m FROM {U} WHERE X.id = Y.k AND X.t <= Y.t "
                                 "GROUP BY Y.p"),
    "value_from_the_group_side": ((), f"SELECT X.id, MAX(X.e) AS m, MIN(Y.p) AS n FROM {U} "
                                      "WHERE X.id = Y.k AND Y.f > X.f GROUP BY X.id"),
    "having_and_projection_above": ((), f"SELECT m + 1 AS m1, X.id FROM (SELECT X.id AS id, MAX(Y.p) AS m "
                                        f"FROM {U} WHERE {BAND} GROUP BY X.id HAVING MAX(Y.p) > 0) X"),
    "istream_of_it": ((), f"SELECT ISTREAM(X.id, MAX(Y.p) AS m) FROM {U} WHERE {BAND} GROUP BY X.id"),
    # selections of one input each, pushed below the join and run inside it (the group side's before its ids)
    "selections_on_both_inputs": ((), f"SELECT X.id, X.c, MAX(Y.p) AS m FROM {U} WHERE {BAND} AND X.c = 1 "
                                      "AND Y.p > 0 GROUP BY X.id, X.c"),
}


def _engine(*statements: str) -> Engine:
    eng = Engine()
    for s in CATALOG + statements:
        eng.execute(s)
    return eng


def _folds(eng: Engine) -> list[JoinExtremeOp]:
    return [op for op in eng.ops if isinstance(op, JoinExtremeOp)]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_planner_folds_where_the_plan_proves_it_and_explain_says_so(shape):
    views, query = SHAPES[shape]
    eng = _engine(*views)
    q = eng.execute(query)
    [op] = _folds(eng)
    text = "\n".join(eng.explain(x.id) for x in eng.queries())
    assert text.count("join_extreme:") == 1 and "[folded: only pairs that can change it]" in text, text
    assert not any(isinstance(o, VectorAggregateOp) and "MAX" in o.detail for o in eng.ops)
    logical = eng.execute("EXPLAIN " + query)["explain"]          # the logical tree says how it will be built
    # (the AVG over the view reads the view's output: the fold is in the view's own plan)
    assert logical.count("[folded into the join below: one join_extreme]") == int(not views), logical
    assert q.id


def test_q4s_view_reads_like_its_query():
    eng = _engine(Q4WIN)
    [op] = _folds(eng)
    # A keeps id, t, e, c (pushdown), so B's t is joined column 5
    assert op.detail == ("id = k AND t#5 BETWEEN t#1 AND e -> GROUP BY id, c: MAX(p) "
                         "[folded: only pairs that can change it] [lazy R index: t#5 >= t#1]"), op.detail


NOT_PROVEN = {
    "groups_from_both_inputs": f"SELECT X.id, Y.p, MAX(Y.t) FROM {U} WHERE X.id = Y.k GROUP BY X.id, Y.p",
    "a_sum": f"SELECT X.id, SUM(Y.p) FROM {U} WHERE X.id = Y.k GROUP BY X.id",
    "a_count_beside_the_max": f"SELECT X.id, MAX(Y.p), COUNT(*) FROM {U} WHERE X.id = Y.k GROUP BY X.id",
    "a_float_max": f"SELECT X.id, MAX(Y.f) FROM {U} WHERE X.id = Y.k GROUP BY X.id",
    "a_string_group": f"SELECT X.s, MAX(Y.p) FROM {U} WHERE X.id = Y.k GROUP BY X.s",
    "no_group_by": f"SELECT MAX(Y.p) FROM {U} WHERE X.id = Y.k",
    "a_window_that_deletes": ("SELECT X.id, MAX(Y.p) FROM A [RANGE 5] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k "
                              "GROUP BY X.id"),
    "rows_window": ("SELECT X.id, MAX(Y.p) FROM A [RANGE UNBOUNDED] X, B [ROWS 3] Y WHERE X.id = Y.k "
                    "GROUP BY X.id"),
    "no_equi_key": f"SELECT X.id, MAX(Y.p) FROM {U} WHERE Y.t > X.t GROUP BY X.id",
    "a_projection_between": (f"SELECT Z.id, MAX(Z.q) FROM (SELECT X.id AS id, Y.p + 1 AS q FROM {U} "
                             "WHERE X.id = Y.k) Z GROUP BY Z.id"),
}


@pytest.mark.parametrize("case", sorted(NOT_PROVEN))
def test_aggregates_the_plan_does_not_prove_stay_a_join_and_an_aggregate(case):
    eng = _engine()
    q = eng.execute(NOT_PROVEN[case])
    assert not _folds(eng)
    assert "join_extreme" not in eng.explain(q.id)
    assert "join_extreme" not in eng.execute("EXPLAIN " + NOT_PROVEN[case])["explain"]


def test_a_join_another_query_already_reads_is_shared_and_not_folded():
    eng = _engine()
    eng.execute(f"SELECT X.id, Y.p FROM {U} WHERE X.id = Y.k")
    eng.execute(f"SELECT X.id, MAX(Y.p) FROM {U} WHERE X.id = Y.k GROUP BY X.id")
    assert not _folds(eng)


small = st.integers(0, 3)
EDGE = st.sampled_from([0, 1, 2, 3, -(2**63), 2**63 - 1])
row_a = st.fixed_dictionaries({"id": small, "t": st.integers(0, 6), "e": st.one_of(st.integers(-1, 8), EDGE),
                               "c": st.integers(0, 1), "f": st.sampled_from([0.5, 1.0]), "s": st.just("")})
row_b = st.fixed_dictionaries({"k": small, "t": st.integers(0, 8), "p": st.one_of(st.integers(0, 3), EDGE),
                               "f": st.sampled_from([0.5, 1.0]), "s": st.just("")})


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(sorted(SHAPES)), two_stream_actions(row_a, row_b, max_steps=16, max_rows=6))
def test_folded_aggregates_answer_as_the_reference_says(shape, acts):
    views, query = SHAPES[shape]
    eng = check_query(CATALOG + views, query, *acts)
    assert len(_folds(eng)) == 1


def _push(kind: str, rows: list[tuple], ts: list[int]) -> tuple:
    names = ("id", "t", "e", "c", "f", "s") if kind == "A" else ("k", "t", "p", "f", "s")
    return ("push", kind, [dict(zip(names, r)) for r in rows], ts)


def test_uneven_inputs_without_heartbeats_hold_instants_until_both_pass_them():
    """Bids run ahead of auctions for several pushes with no heartbeat (nothing is final until the auctions
    catch up), bids before their auction, an extreme that rises twice within one instant and again later,
    ties, a group's first row and its improvement at one instant, and a late auction whose band reaches bids
    held since the start."""
    acts = (
        _push("B", [(1, 1, 5, 0.5, ""), (1, 1, 7, 0.5, ""), (2, 2, 3, 0.5, "")], [1, 1, 2]),
        ("run",),
        _push("B", [(1, 3, 7, 0.5, ""), (1, 3, 9, 0.5, ""), (1, 3, 8, 0.5, "")], [3, 3, 3]),
        ("run",),
        _push("A", [(1, 0, 9, 0, 0.5, "")], [2]),
        ("run",),
        _push("B", [(1, 4, 9, 0.5, ""), (1, 5, 12, 0.5, ""), (2, 5, 1, 0.5, "")], [4, 5, 5]),
        _push("A", [(2, 1, 4, 1, 0.5, ""), (3, 0, 6, 1, 0.5, "")], [4, 4]),
        ("run",),
        _push("B", [(3, 6, -(2**63), 0.5, ""), (3, 6, 2**63 - 1, 0.5, "")], [6, 6]),
        _push("A", [(2, 0, 9, 0, 0.5, "")], [7]),
        ("run",),
    )
    for shape in sorted(SHAPES):
        views, query = SHAPES[shape]
        check_query(CATALOG + views, query, acts, 12)


def test_a_query_registered_after_input_starts_from_the_views_contents():
    """The view over the fold registered before the input, the AVG over it halfway through: the late query
    starts from the view's contents (a snapshot), and ends with the early one's answer."""
    eng = _engine(Q4WIN)
    early = eng.execute("SELECT c, AVG(final) AS a FROM W GROUP BY c")
    eng.push("A", [{"id": i, "t": 0, "e": 50, "c": i % 2, "f": 0.0, "s": ""} for i in range(4)], ts=[1] * 4)
    eng.push("B", [{"k": i % 4, "t": i, "p": (7 * i) % 11, "f": 0.0, "s": ""} for i in range(20)], ts=list(range(1, 21)))
    eng.heartbeat(25)
    eng.run()
    late = eng.execute("SELECT c, AVG(final) AS a FROM W GROUP BY c")
    eng.push("B", [{"k": i % 4, "t": 30 + i, "p": (5 * i) % 13, "f": 0.0, "s": ""} for i in range(20)],
             ts=list(range(30, 50)))
    eng.heartbeat(60)
    eng.run()
    got = sorted(eng.contents(early.id))
    assert len(got) == 2 and sorted(eng.contents(late.id)) == got


def test_q4_answers_as_the_plain_loop():
    """NEXMark q4 in full (its view folded into the join) against bench/nexmark_queries.py's plain loop, at
    two push sizes."""
    from bench import nexmark as nm
    from bench.nexmark_gen import generate
    from bench.nexmark_queries import BY_NAME, Windows

    q, w = BY_NAME["q4"], Windows()
    ev = generate(30_000)
    want = nm.canonical_loop(q, q.loop(nm.merged_events(ev), w))
    for per in (700, 5_000):
        _, out = nm.run_dsms(q, ev, 30_000, per, w)
        assert nm.canonical_dsms(q, out) == want


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["q4_view", "q4_avg_over_view", "min_and_max_no_band"]),
       two_stream_actions(row_a, row_b, max_steps=16, max_rows=6))
def test_releases_cut_by_a_tiny_pair_budget_answer_as_the_reference_says(shape, acts):
    """With a pair budget of 3 the join applies a release in prefixes over several runs, forwarding its
    frontier only up to the first instant not fully applied: the fold must hold that instant's pairs."""
    import dsms.operators.join as join_mod

    saved, join_mod.PAIR_BUDGET = join_mod.PAIR_BUDGET, 3
    try:
        views, query = SHAPES[shape]
        check_query(CATALOG + views, query, *acts)
    finally:
        join_mod.PAIR_BUDGET = saved


def test_a_selection_another_query_already_reads_is_shared_and_not_folded():
    """The band join's pairs registered first (the selection fused into its join): an aggregate over the very
    same selection, reordered by a projection, shares that build instead of folding a join of its own; one
    over the selection narrowed otherwise (another node) folds its own."""
    eng = _engine()
    eng.execute(f"SELECT X.id, X.c, Y.p FROM {U} WHERE {BAND}")
    eng.execute(f"SELECT X.c, X.id, MAX(Y.p) AS m FROM {U} WHERE {BAND} GROUP BY X.c, X.id")
    assert not _folds(eng) and [op.kind for op in eng.ops].count("join") == 1
    eng.execute(f"SELECT Y.p, MAX(X.c) AS m FROM {U} WHERE {BAND} GROUP BY Y.p")
    assert len(_folds(eng)) == 1


@pytest.mark.parametrize("policy", ["round_robin", "greedy"])
@settings(max_examples=25, deadline=None)
@given(shape=st.sampled_from(["q4_avg_over_view", "min_and_max_no_band", "istream_of_it"]),
       acts=two_stream_actions(row_a, row_b, max_steps=16, max_rows=6))
def test_other_scheduling_policies_answer_as_the_reference_says(policy, shape, acts):
    """The order in which the scheduler runs the join, the view's sink and the AVG above must not matter: the
    fold holds a pair until the join forwards its frontier past the pair's instant, under any policy."""
    from oracle.generators import _below, apply, compare
    from oracle.reference import Reference

    views, query = SHAPES[shape]
    actions, until = acts
    ref = Reference()
    eng = Engine({"policy": policy})
    for s in CATALOG + views:
        ref.execute(s)
        eng.execute(s)
    name, q = ref.execute(query), eng.execute(query)
    assert len(_folds(eng)) == 1
    for a in actions:
        apply(ref, a)
        apply(eng, a)
    eng.heartbeat(until)
    eng.run()
    compare(ref.results(name, until), _below(q.drain(), until))


def test_pushed_projections_run_inside_the_fold_and_a_later_query_sharing_one_gets_it_back():
    """Projection pushdown's plain projections of A and B run inside the ``join_extreme`` (as an insert-only
    join's selections do: no operator run of their own a push); a query registered after input arrived that
    shares A's projection gets it back, and both answers hold for the rows pushed before and after."""
    eng = _engine(Q4WIN)
    [op] = _folds(eng)
    pushed = [o for o in eng.ops if isinstance(o, ProjectOp) and o.fused is op]
    assert len(pushed) == 2 and pushed == op.selects
    text = eng.explain(eng.queries()[0].id)
    assert f"({pushed[0].id}, {pushed[1].id} -> " in text and "fused" in text, text
    auctions = [(1, 0, 10, 5), (2, 0, 10, 6), (3, 4, 20, 5)]
    bids = [(1, 1, 7), (2, 2, 9), (1, 3, 8), (3, 5, 4), (1, 12, 99)]   # (k, t, p); the last is past auction 1
    eng.push("A", [dict(id=a, t=t, e=e, c=c, f=0.0, s="") for a, t, e, c in auctions[:2]], ts=[0, 0])
    eng.push("B", [dict(k=k, t=t, p=p, f=0.0, s="") for k, t, p in bids[:2]], ts=[1, 2])
    eng.heartbeat(2)
    eng.run()
    late = eng.execute("SELECT id, t, e, c FROM A")
    assert pushed[0].fused is None and op.selects[0] is None and op.selects[1] is pushed[1]
    eng.push("A", [dict(id=3, t=4, e=20, c=5, f=0.0, s="")], ts=[4])
    eng.push("B", [dict(k=k, t=t, p=p, f=0.0, s="") for k, t, p in bids[2:]], ts=[5, 6, 12])
    eng.heartbeat(20)
    eng.run()
    want = {}
    for a, t, e, c in auctions:
        prices = [p for k, bt, p in bids if k == a and t <= bt <= e]
        if prices:
            want[a, c] = max(prices)
    assert sorted(eng.contents(eng.queries()[0].id)) == sorted((a, c, m) for (a, c), m in want.items())
    assert [tuple(e.row.values()) for e in late.drain()] == [(3, 4, 20, 5)]
