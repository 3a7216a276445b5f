"""The reference evaluator checked against the papers' worked examples (hand-derived expectations in
``oracle/examples.py``) and against itself: change-point evaluation equals evaluating every instant."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from dsms.cql.parser import parse_query
from dsms.errors import InputError, SchemaError
from oracle.examples import cases
from oracle.generators import CATALOG, Workload, compare, diff, run_reference, workloads
from oracle.reference import Ambiguous, Reference


@pytest.mark.parametrize("ex,check", [(e, c) for _, e, c in cases()], ids=[i for i, _, _ in cases()])
def test_worked_example(ex, check):
    w = Workload(ex.statements, check.query, ex.actions, ex.until)
    compare(check.expected, run_reference(w))
    ref = Reference()
    for s in ex.statements:
        ref.execute(s)
    assert ref.kind(check.query) == check.kind


@pytest.mark.parametrize("ex,check", [(e, c) for _, e, c in cases()], ids=[i for i, _, _ in cases()])
def test_worked_example_dense(ex, check):
    w = Workload(ex.statements, check.query, ex.actions, min(ex.until, 2000))
    compare([x for x in check.expected if x[0] < w.until], run_reference(w, dense=True))


# ------------------------------------------------------------------------------------------------ unit checks


def _ref(*stmts):
    ref = Reference()
    for s in ("REGISTER STREAM S (a INT, b INT, c STRING, d FLOAT)", "REGISTER RELATION R (a INT, e STRING)",
              *stmts):
        ref.execute(s)
    return ref


def _one_row(select_list, row=None):
    """The single output row of ``SELECT <select_list> FROM S`` after one element."""
    ref = _ref()
    ref.push("S", [row or {"a": 7, "b": -7, "c": "aBc", "d": 2.5}], ts=1)
    out = ref.results(f"SELECT {select_list} FROM S", until=3)
    assert len(out) == 1
    return out[0][2]


def test_integer_arithmetic_follows_the_contract():
    row = _one_row("a / 2 AS q1, b / 2 AS q2, a % 3 AS r1, b % 3 AS r2, a % -3 AS r3, a / 0 AS z1, a % 0 AS z2, "
                   "a / 2.0 AS f1, d * 2 AS f2, a + d AS f3")
    assert row == {"q1": 3, "q2": -3, "r1": 1, "r2": -1, "r3": 1, "z1": 0, "z2": 0, "f1": 3.5, "f2": 5.0,
                   "f3": 9.5}
    assert type(row["q1"]) is int and type(row["f1"]) is float and type(row["f3"]) is float


def test_case_without_else_is_the_zero_value_of_its_type():
    row = _one_row("CASE WHEN a > 100 THEN 1 END AS i, CASE WHEN a > 100 THEN d END AS f, "
                   "CASE WHEN a > 100 THEN 'x' END AS s, CASE a WHEN 7 THEN 'seven' ELSE 'other' END AS t, "
                   "CASE WHEN a = 7 THEN 1 ELSE 2.5 END AS u")
    assert row == {"i": 0, "f": 0.0, "s": "", "t": "seven", "u": 1.0}
    assert type(row["f"]) is float and type(row["u"]) is float


def test_predicates_and_functions():
    row = _one_row("c LIKE 'a%' AS l1, c LIKE '_B_' AS l2, c LIKE 'abc' AS l3, c NOT LIKE '%c' AS l4, "
                   "a IN (1, 7) AS i1, a NOT IN (1, 7) AS i2, a BETWEEN 7 AND 8 AS b1, b NOT BETWEEN -1 AND 1 AS b2, "
                   "LOWER(c) AS lo, UPPER(c) AS up, LENGTH(c) AS n, ABS(b) AS ab, ABS(-d) AS ad")
    assert row == {"l1": True, "l2": True, "l3": False, "l4": False, "i1": True, "i2": False, "b1": True,
                   "b2": True, "lo": "abc", "up": "ABC", "n": 3, "ab": 7, "ad": 2.5}


def test_output_column_names():
    ref = _ref()
    assert [n for n, _ in ref.schema("SELECT a, a, a + 1, LOWER(c), COUNT(*), SUM(b), x.d FROM S x GROUP BY a, c, x.d")] \
        == ["a", "a_2", "col3", "lower", "count", "sum", "d"]
    assert [n for n, _ in ref.schema("SELECT * FROM S [ROWS 1] X, R")] == ["X.a", "b", "c", "d", "R.a", "e"]
    assert [n for n, _ in ref.schema("SELECT X.*, R.e FROM S [ROWS 1] X, R")] == ["X.a", "b", "c", "d", "e"]
    assert [n for n, _ in ref.schema("SELECT S.a, R.a FROM S, R")] == ["a", "a_2"]
    assert ref.schema("SELECT AVG(a), SUM(d), MIN(c), COUNT(DISTINCT c) FROM S") == [
        ("avg", "FLOAT"), ("sum", "FLOAT"), ("min", "STRING"), ("count", "INT")]


@pytest.mark.parametrize("query,kind", [
    ("SELECT * FROM S", "stream"),
    ("SELECT * FROM S [RANGE 5]", "stream"),
    ("SELECT COUNT(*) FROM S", "relation"),
    ("SELECT a FROM S GROUP BY a", "relation"),
    ("SELECT * FROM R", "relation"),
    ("SELECT S.a FROM S [NOW], R WHERE S.a = R.a", "stream"),
    ("ISTREAM(SELECT COUNT(*) FROM S)", "stream"),
    ("SELECT RSTREAM(COUNT(*)) FROM S [ROWS 2]", "stream"),
    ("SELECT a FROM S UNION SELECT a FROM R", "stream"),
    ("SELECT a FROM R UNION SELECT COUNT(*) FROM S", "relation"),
    ("SELECT X.a FROM ISTREAM(R) X [RANGE 3]", "stream"),
    ("SELECT * FROM (SELECT a FROM S) X [RANGE 3]", "stream"),
    ("SELECT * FROM (SELECT a, COUNT(*) AS n FROM S GROUP BY a) X", "relation"),
    ("SELECT * FROM v", "relation"),
    ("SELECT * FROM ds", "stream"),
    ("SELECT * FROM R WHERE a IN (SELECT a FROM S [NOW])", "relation"),
])
def test_result_kind(query, kind):
    ref = _ref("REGISTER VIEW v AS SELECT * FROM S [ROWS 2]", "REGISTER QUERY ds AS SELECT a FROM S")
    assert ref.kind(query) == kind


def test_rstream_emits_at_input_instants_of_every_input():
    ref = _ref()
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=2)
    ref.update("R", insert=[{"a": 9, "e": "x"}], ts=5)
    ref.heartbeat(8)
    out = ref.results("RSTREAM(SELECT S.a FROM S [RANGE UNBOUNDED], R)", until=10)
    assert out == [(5, 1, {"a": 1})]                 # at 2 the join is empty; 5 is R's update; none at 6..9
    out = ref.results("RSTREAM(SELECT a FROM S [RANGE 10])", until=10)
    assert out == [(2, 1, {"a": 1})]                 # R is not an input of this query: nothing at 5


def test_rstream_over_a_view_emits_at_the_instants_of_the_views_inputs():
    """A view is nothing but its definition (SPEC section 3): RSTREAM over it emits at S's instants 2 and 3, not
    at 5 where the view's row changed with no input; a view over that view is the same."""
    ref = _ref("REGISTER VIEW v AS SELECT COUNT(*) AS n FROM S [RANGE 3]", "REGISTER VIEW w AS SELECT n FROM v")
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=2)
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=3)
    expected = [(2, 1, {"n": 1}), (3, 1, {"n": 2})]
    assert ref.results("RSTREAM(SELECT * FROM v)", until=10) == expected
    assert ref.results("RSTREAM(SELECT * FROM w)", until=10) == expected
    assert ref.results("RSTREAM(SELECT COUNT(*) AS n FROM S [RANGE 3])", until=10) == expected


def test_rstream_over_a_derived_stream_emits_at_its_elements():
    """A derived stream is a stream (SPEC section 4), not a view: its elements are the instants, so S's element
    at 3 that the filter drops is no instant of the reader."""
    ref = _ref("REGISTER QUERY ds AS SELECT a FROM S WHERE a > 1")
    ref.push("S", [{"a": 2, "b": 0, "c": "", "d": 0.0}], ts=2)
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=3)
    assert ref.results("RSTREAM(SELECT * FROM ds [RANGE 10])", until=10) == [(2, 1, {"a": 2})]


def test_aggregate_over_empty_input_has_no_row_and_scalar_subquery_without_row_is_null():
    ref = _ref()
    assert ref.results("SELECT COUNT(*) FROM S [NOW]", until=5) == []
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=2)
    assert ref.results("SELECT COUNT(*) FROM S [NOW]", until=5) == [(2, 1, {"count": 1}), (3, -1, {"count": 1})]
    # no R row: the comparison with the empty scalar subquery is unknown, in either polarity
    assert ref.results("SELECT a FROM S WHERE a = (SELECT MAX(a) FROM R)", until=5) == []
    assert ref.results("SELECT a FROM S WHERE NOT (a = (SELECT MAX(a) FROM R))", until=5) == []
    assert ref.results("SELECT a FROM S WHERE a >= ALL (SELECT a FROM R)", until=5) == [(2, 1, {"a": 1})]


def test_sample_zero_keeps_nothing_and_sample_hundred_everything():
    ref = _ref()
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=2)
    q = parse_query("SELECT a FROM S SAMPLE(100)")
    assert ref.results(q, until=5) == [(2, 1, {"a": 1})]
    zero = dataclasses.replace(q, from_=(dataclasses.replace(q.from_[0], sample=0.0),))   # the parser refuses 0
    assert ref.results(zero, until=5) == []


def test_rows_over_a_derived_stream_that_cuts_an_instant_is_ambiguous():
    ref = _ref()
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}, {"a": 2, "b": 0, "c": "", "d": 0.0}], ts=2)
    with pytest.raises(Ambiguous):
        ref.results("SELECT * FROM (SELECT a FROM S) X [ROWS 1]", until=5)
    assert ref.results("SELECT * FROM (SELECT a FROM S) X [ROWS 2]", until=5) == [(2, 1, {"a": 1}), (2, 1, {"a": 2})]
    assert ref.results("SELECT * FROM S [ROWS 1]", until=5) == [(2, 1, {"a": 2, "b": 0, "c": "", "d": 0.0})]


def test_input_errors():
    ref = _ref()
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=5)
    with pytest.raises(InputError):
        ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=4)
    with pytest.raises(InputError):
        ref.update("R", delete=[{"a": 1, "e": "x"}], ts=6)
    with pytest.raises(InputError):
        ref.push("S", [{"a": 1}], ts=6)
    with pytest.raises(SchemaError):
        ref.results("SELECT a FROM S, R", until=3)          # ambiguous column
    with pytest.raises(SchemaError):
        ref.results("SELECT c + 1 FROM S", until=3)         # STRING arithmetic


@settings(max_examples=60, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(w=workloads())
def test_change_point_evaluation_equals_evaluating_every_instant(w):
    """The only shortcut the oracle takes (evaluating only where something can change) is checked against
    evaluating every integer instant, on generated workloads of every family."""
    try:
        sparse = run_reference(w)
    except Ambiguous:
        return
    assert diff(sparse, run_reference(w, dense=True)) is None
    assert w.statements[:len(CATALOG)] == CATALOG


def test_negative_timestamps_are_legal_input():
    """Contract: |ts| <= 2**62, so an input may start below 0; SLIDE rounds down to the multiple of S at or below
    τ for negative instants too ([RANGE 10 SLIDE 5] at τ=4 is evaluated at 0, at τ=5 at 5)."""
    ref = _ref()
    ref.push("S", [{"a": 1, "b": 0, "c": "", "d": 0.0}], ts=-7)
    ref.push("S", [{"a": 2, "b": 0, "c": "", "d": 0.0}], ts=-5)
    ref.push("S", [{"a": 3, "b": 0, "c": "", "d": 0.0}], ts=4)
    assert ref.results("SELECT COUNT(*) AS n FROM S [RANGE 10 SLIDE 5]", until=30) == [
        (-5, 1, {"n": 2}), (5, 1, {"n": 1}), (5, -1, {"n": 2}), (15, -1, {"n": 1})]
    assert ref.results("SELECT a FROM S [RANGE 3]", until=30) == [(-7, 1, {"a": 1}), (-5, 1, {"a": 2}),
                                                                  (4, 1, {"a": 3})]
