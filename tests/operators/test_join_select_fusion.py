"""A selection directly above a join of two inputs that never delete runs inside the join
(``L.FilteredJoin``, ``PhysicalPlanner._filtered_join``): the predicate is evaluated on the pairs found and
only the kept columns are gathered. Checked here: when it is fused and when not (EXPLAIN says which), and that
the answers equal the reference evaluator's (tests/oracle/) on NEXMark q4's shape (band join, grouped MAX, AVG
over a view) with band edges at equal timestamps, auctions arriving after their bids, and equal prices; also
when a later query shares the fused join, or reads the same join without the selection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, check_query, diff, run_engine, run_reference, two_stream_actions

from dsms import Engine
from dsms.operators.join import JoinOp
from dsms.operators.select import SelectOp

CATALOG = ("REGISTER STREAM A (id INT, t INT, e INT, c INT, s STRING)",
           "REGISTER STREAM B (k INT, t INT, p INT, s STRING)")
BAND = "X.id = Y.k AND Y.t >= X.t AND Y.t <= X.e"
Q4WIN = (f"REGISTER VIEW W AS SELECT X.id AS id, X.c AS c, MAX(Y.p) AS final FROM A [RANGE UNBOUNDED] X, "
         f"B [RANGE UNBOUNDED] Y WHERE {BAND} GROUP BY X.id, X.c")
Q4 = "SELECT c, AVG(final) AS avg_final FROM W GROUP BY c"
PAIRS = f"SELECT X.id, X.s, Y.p, Y.t FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE {BAND}"
PLAIN = "SELECT X.id, Y.p FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k"


def _engine(*statements: str) -> Engine:
    eng = Engine()
    for s in CATALOG + statements:
        eng.execute(s)
    return eng


def _ops(eng: Engine, kind) -> list:
    return [op for op in eng.ops if isinstance(op, kind)]


def test_the_band_selection_runs_inside_the_join_and_explain_says_so():
    """The band join's pairs themselves (q4's view, a MAX over the join, is folded into the join instead:
    tests/operators/test_join_extreme.py)."""
    eng = _engine()
    q = eng.execute(PAIRS)
    assert not _ops(eng, SelectOp)
    [join] = _ops(eng, JoinOp)
    assert len(join.keep) == 4 and join.predicate is not None and join.append is not None
    text = eng.explain(q.id)
    assert "join: id = k AND (t#5 >= t#1) AND (t#5 <= e) [keeps id, s, t#5, p]" in text, text
    assert "select:" not in text


@pytest.mark.parametrize("query", [
    # a window deletes: the selection stays above the join
    "SELECT X.id, Y.p FROM A [RANGE 5] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k AND Y.t >= X.t",
    # no equality between the two inputs in the condition's other conjuncts: still a join with the rest above
    "SELECT X.id, Y.p FROM A [RANGE UNBOUNDED] X, B [ROWS 2] Y WHERE X.id = Y.k AND Y.t <= X.e",
])
def test_a_join_whose_input_deletes_keeps_its_selection_above(query):
    eng = _engine()
    eng.execute(query)
    [join] = _ops(eng, JoinOp)
    assert join.predicate is None and join.keep is None and len(_ops(eng, SelectOp)) == 1


def test_a_join_another_query_already_reads_is_shared_and_the_selection_stays_above():
    eng = _engine()
    eng.execute("SELECT * FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE X.id = Y.k")
    eng.execute(f"SELECT * FROM A [RANGE UNBOUNDED] X, B [RANGE UNBOUNDED] Y WHERE {BAND}")
    [join] = _ops(eng, JoinOp)
    assert join.predicate is None and len(_ops(eng, SelectOp)) == 1


small = st.integers(0, 3)
row_a = st.fixed_dictionaries({"id": small, "t": st.integers(0, 6), "e": st.integers(-1, 8),
                               "c": st.integers(0, 1), "s": st.sampled_from(["", "x"])})
row_b = st.fixed_dictionaries({"k": small, "t": st.integers(0, 6), "p": st.integers(0, 3),
                               "s": st.sampled_from(["", "x"])})


def actions():
    """Pushes to A and B (bids before their auction, several rows per instant: band edges at equal
    timestamps, equal prices), runs and heartbeats in between."""
    return two_stream_actions(row_a, row_b, max_steps=14, max_rows=5)


def _check(statements: tuple, query: str, acts: tuple, until: int) -> None:
    w = Workload(statements, query, acts, until)
    expected = run_reference(w)
    actual = run_engine(w)
    problem = diff(expected, actual)
    assert problem is None, f"{w!r}\n{problem}"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([(Q4WIN,), ()]), st.sampled_from([Q4, PAIRS, "SELECT * FROM W"]), actions())
def test_fused_band_joins_equal_reference(views, query, acts):
    if query != PAIRS and not views:
        views = (Q4WIN,)
    _check(CATALOG + views, query, *acts)


def test_band_edges_late_auctions_and_equal_prices_equal_reference():
    """Bids exactly at an auction's start and at its expiry pass, one tick outside does not; bids that came
    before their auction join when it arrives; two bids of one price make one MAX."""
    acts = (
        ("push", "B", [{"k": 1, "t": 3, "p": 5, "s": ""}, {"k": 1, "t": 2, "p": 9, "s": ""}], [3, 3]),
        ("push", "A", [{"id": 1, "t": 3, "e": 6, "c": 0, "s": ""}, {"id": 2, "t": 3, "e": 3, "c": 0, "s": ""}],
         [3, 3]),
        ("run",),
        ("push", "B", [{"k": 2, "t": 3, "p": 4, "s": ""}, {"k": 1, "t": 6, "p": 5, "s": ""},
                       {"k": 1, "t": 7, "p": 99, "s": ""}, {"k": 2, "t": 4, "p": 50, "s": ""}], [4, 6, 7, 7]),
        ("push", "A", [{"id": 3, "t": 8, "e": 9, "c": 1, "s": ""}], [8]),
        ("push", "B", [{"k": 3, "t": 9, "p": 7, "s": ""}, {"k": 3, "t": 9, "p": 7, "s": ""}], [9, 9]),
    )
    for query in (Q4, PAIRS, "SELECT * FROM W"):
        eng = check_query(CATALOG + (Q4WIN,), query, acts, 12)
        assert not _ops(eng, SelectOp)


def test_a_later_query_sharing_the_fused_join_or_reading_the_bare_join_gets_its_own_answer():
    """A second registration of the same selection shares the fused join; a query over the join without the
    selection builds a join of its own (the fused one outputs only the pairs that pass, in three columns)."""
    eng = _engine()
    first = eng.execute(PAIRS)
    second = eng.execute(PAIRS)
    plain = eng.execute(PLAIN)
    joins = _ops(eng, JoinOp)
    assert len(joins) == 2 and sorted(j.predicate is None for j in joins) == [False, True]
    eng.push("A", [{"id": 1, "t": 2, "e": 4, "c": 0, "s": "a"}], ts=[2])
    eng.push("B", [{"k": 1, "t": 1, "p": 3, "s": ""}, {"k": 1, "t": 4, "p": 8, "s": ""}], ts=[3, 4])
    eng.heartbeat(10)
    eng.run()
    for q in (first, second):
        got = [(e.ts, e.sign, dict(e.row)) for e in q.drain()]
        assert [(ts, s) for ts, s, _ in got] == [(4, 1)] and list(got[0][2].values()) == [1, "a", 8, 4]
    assert sorted((e.ts, e.row["p"]) for e in plain.drain()) == [(3, 3), (4, 8)]
