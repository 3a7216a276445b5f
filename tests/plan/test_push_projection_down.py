"""Projection pushdown (dsms/plan/rules/push_projection_down.py): what is pushed where, where it must stop, that
the results are those of the plan without it, and how queries that need different columns of one window share
it (dsms/plan/physical.py, ``PhysicalPlanner._share_window``; docs/architecture.md)."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsms.plan.rules as rules
from dsms import Engine
from dsms.cql import ast
from dsms.errors import SchemaError
from dsms.plan import logical as L
from dsms.plan.binder import refs

STREAMS = ("REGISTER STREAM S (a INT, b INT, c INT); REGISTER STREAM T (a INT, d INT, e INT); "
           "REGISTER RELATION R (a INT, f INT)")


def _positions(op) -> str:
    """An operator's label with column positions (EXPLAIN shows names; the positions are what is checked)."""
    return getattr(op, "detail_positions", op.detail)


def engine(**config) -> Engine:
    eng = Engine(config or None)
    eng.execute(STREAMS)
    return eng


def shape(node, depth: int = 0) -> str:
    """The logical plan, one node a line: kind, then what it reads (columns by position)."""
    pad = "  " * depth
    if isinstance(node, L.StreamScan | L.RelationScan):
        line = node.name.upper()
    elif isinstance(node, L.QueryOutput):
        line = f"output of {node.query_id}"
    elif isinstance(node, L.Window):
        size = {"RANGE": f"RANGE {node.range}" + (f" SLIDE {node.slide}" if node.slide else ""),
                "ROWS": f"ROWS {node.rows}", "UNBOUNDED": "UNBOUNDED"}[node.wkind]
        line = f"window {size}" + (f" PARTITION BY {_cols(node.partition)}" if node.partition else "")
    elif isinstance(node, L.Project):
        text = ", ".join(e.name if isinstance(e, ast.ColumnRef) else "expr(" + _cols(refs(e)) + ")"
                         for e in node.exprs)
        line = f"project {text or '()'}" + (" [pushed]" if node.pushed else "")
    elif isinstance(node, L.Filter):
        line = f"filter on {_cols(refs(node.predicate))}" + (
            "" if node.keep is None else f" keeping {_cols(node.keep) or '()'}")
    elif isinstance(node, L.Join | L.SemiJoin):
        keys = ", ".join(f"L${a} = R${b}" for a, b in zip(node.left_keys, node.right_keys))
        pred = f" and on {_cols(refs(node.predicate))}" if node.predicate is not None else ""
        kind = "join" if isinstance(node, L.Join) else ("anti-join" if node.anti else "semi-join")
        line = f"{kind} {keys}{pred}".rstrip()
    elif isinstance(node, L.Aggregate):
        line = f"aggregate by {_cols(node.group)}: " + ", ".join(
            f"{f}({'*' if a is None else f'${a}'})" for f, a, _ in node.aggs)
    elif isinstance(node, L.SetOp):
        line = f"{node.op}{' ALL' if node.all else ''}"
    elif isinstance(node, L.ToStream):
        line = node.op
        return "\n".join([pad + line, shape(node.child, depth + 1)])
    else:
        line = type(node).__name__.lower()
    return "\n".join([pad + line] + [shape(c, depth + 1) for c in node.children])


def _cols(cs) -> str:
    return ", ".join(f"${c}" for c in sorted(cs))


def plan(query: str, *before: str) -> str:
    eng = engine()
    for q in before:
        eng.execute(q)
    return shape(eng.execute(query).node)


def lines(text: str) -> str:
    return textwrap.dedent(text).strip()


# ------------------------------------------------------------------------------------ what goes where

def test_below_a_range_window_above_its_filter():
    assert plan("SELECT a FROM S [RANGE 10] WHERE c > 1") == lines("""
    ISTREAM
      window RANGE 10
        filter on $2 keeping $0
          S
    """)                # the filter outputs a alone; the select list's projection does nothing: gone


@pytest.mark.parametrize("window", ["RANGE 10 SLIDE 5", "ROWS 3", "RANGE UNBOUNDED", "NOW"])
def test_below_every_window_kind(window):
    text = plan(f"SELECT RSTREAM(b) FROM S [{window}]")
    assert "project $1 [pushed]" in text.splitlines()[2], text


def test_partition_by_keeps_its_columns():
    assert plan("SELECT RSTREAM(a) FROM S [PARTITION BY c ROWS 2]") == lines("""
    RSTREAM
      project $0
        window ROWS 2 PARTITION BY $1
          project $0, $2 [pushed]
            S
    """)


def test_into_joins_keys_and_predicates():
    assert plan("SELECT S.a, T.e FROM S [RANGE 5], T [RANGE 5] WHERE S.a = T.a AND S.b < T.d") == lines("""
    ISTREAM
      filter on $1, $3 keeping $0, $4
        join L$0 = R$0
          window RANGE 5
            project $0, $1 [pushed]
              S
          window RANGE 5
            T
    """)                                  # S drops c; T needs all three; the filter drops b and d


def test_on_join_inputs_that_are_no_window():
    assert plan("SELECT S.b FROM S [RANGE 3], R WHERE S.a = R.a") == lines("""
    ISTREAM
      project $1
        join L$0 = R$0
          window RANGE 3
            project $0, $1 [pushed]
              S
          project $0 [pushed]
            R
    """)                                  # the join keeps R's key alone
    # a ROWS window counts before its filter, so the filter stays above it; the join does not need c
    assert plan("SELECT S.a, T.e FROM S [ROWS 3], T [RANGE 5] WHERE S.a = T.a AND S.c > 1") == lines("""
    ISTREAM
      project $0, $2
        join L$0 = R$0
          filter on $1 keeping $0
            window ROWS 3
              project $0, $2 [pushed]
                S
          window RANGE 5
            project $0, $2 [pushed]
              T
    """)


def test_star_keeps_every_column_and_qualified_star_its_table():
    assert "[pushed]" not in plan("SELECT * FROM S [RANGE 5] WHERE a > 1")
    assert plan("SELECT S.* FROM S [RANGE 5], T [RANGE 5] WHERE S.a = T.a") == lines("""
    ISTREAM
      project $0, $1, $2
        join L$0 = R$0
          window RANGE 5
            S
          window RANGE 5
            project $0 [pushed]
              T
    """)


def test_aggregates_read_group_argument_and_having_columns():
    assert plan("SELECT a, COUNT(DISTINCT b) AS n FROM S [RANGE 5] GROUP BY a HAVING MAX(c) > 1") == lines("""
    changelog
      filter on $2 keeping $0, $1
        aggregate by $0: COUNT($1), MAX($2)
          window RANGE 5
            S
    """)                                  # a, b and c are all read: nothing to drop
    assert plan("SELECT a, SUM(b) AS n FROM S [RANGE 5] GROUP BY a") == lines("""
    changelog
      aggregate by $0: SUM($1)
        window RANGE 5
          project $0, $1 [pushed]
            S
    """)                                  # the aggregate's own projection (a, b) now does nothing
    assert plan("SELECT COUNT(*) AS n FROM S [ROWS 4]") == lines("""
    changelog
      aggregate by : COUNT(*)
        window ROWS 4
          project () [pushed]
            S
    """)                                  # counts elements: no column is needed at all


def test_correlated_subqueries_read_what_their_predicates_read():
    assert plan("SELECT S.a FROM S [RANGE 5] WHERE EXISTS "
                "(SELECT * FROM T [RANGE 5] WHERE T.a = S.a AND T.d > S.b)") == lines("""
    ISTREAM
      project $0
        semi-join L$0 = R$0 and on $1, $3
          window RANGE 5
            project $0, $1 [pushed]
              S
          window RANGE 5
            project $0, $1 [pushed]
              T
    """)                                  # S.b is read by the predicate only, then dropped
    assert plan("SELECT S.a FROM S [RANGE 5] WHERE EXISTS (SELECT * FROM T [RANGE 5])") == lines("""
    ISTREAM
      semi-join
        window RANGE 5
          project $0 [pushed]
            S
        window RANGE 5
          project () [pushed]
            T
    """)                                  # only whether T's window holds a row matters


def test_bag_union_of_an_or_narrows_both_branches():
    # S.b IN (..) OR S.c > 1 is (S.b IN (..)) UNION ALL (S.b NOT IN (..) AND S.c > 1): each branch keeps a
    assert plan("SELECT S.a FROM S [RANGE 5] WHERE S.b IN (SELECT T.d FROM T [RANGE 5]) OR S.c > 1") == lines("""
    ISTREAM
      UNION ALL
        project $0 [pushed]
          semi-join L$1 = R$0
            window RANGE 5
              project $0, $1 [pushed]
                S
            window RANGE 5
              project $1 [pushed]
                T
        filter on $2 keeping $0
          anti-join L$1 = R$0
            window RANGE 5
              S
            window RANGE 5
              project $1 [pushed]
                T
    """)


# ------------------------------------------------------------------------------------ where it must stop

def _scan():
    return L.StreamScan("s", ("INT", "INT", "INT"), names=("a", "b", "c"))


def _first_column_of(node) -> L.Project:
    return L.Project(node, (ast.ColumnRef("$0"),), ("INT",))


@pytest.mark.parametrize("above", [
    lambda w: L.Distinct(w),                                   # two rows that differ in b or c are two rows
    lambda w: L.ToStream(w, "ISTREAM"),                        # so are they for a bag difference
    lambda w: L.ToStream(w, "DSTREAM"),
    lambda w: L.ToStream(w, "RSTREAM", (_scan(),)),
    lambda w: L.SetOp(w, w, "UNION", False),
    lambda w: L.SetOp(w, w, "EXCEPT", True),
    lambda w: L.SetOp(w, w, "INTERSECT", True),
])
def test_whole_row_operators_keep_every_column_below_them(above):
    window = L.Window(_scan(), "RANGE", range=5)
    node = rules.push_projection_down(_first_column_of(above(window)))
    assert [type(n) for n in L.walk(node)].count(L.Project) == 1     # the one on top
    assert all(n == window for n in L.walk(node) if isinstance(n, L.Window))


def test_bag_union_passes_the_columns_read_to_both_sides():
    window = L.Window(_scan(), "RANGE", range=5)
    node = rules.push_projection_down(_first_column_of(L.SetOp(window, window, "UNION", True)))
    assert isinstance(node, L.SetOp) and node.left == node.right
    assert shape(node.left) == lines("""
    window RANGE 5
      project $0 [pushed]
        S
    """)


def test_relation_to_stream_needs_whole_rows():
    text = plan("SELECT ISTREAM(x) FROM (SELECT DSTREAM(a AS x, b) FROM S [RANGE 5]) D [RANGE 2]")
    assert text == lines("""
    ISTREAM
      window RANGE 2
        project $0 [pushed]
          DSTREAM
            window RANGE 5
              project $0, $1 [pushed]
                S
    """)                                  # b is kept below the DSTREAM, dropped above it; c goes at once
    text = plan("SELECT x FROM (SELECT DISTINCT a AS x, b FROM S [RANGE 5]) D")
    assert text == lines("""
    ISTREAM
      window UNBOUNDED
        project $0 [pushed]
          ISTREAM
            distinct
              window RANGE 5
                project $0, $1 [pushed]
                  S
    """)                                  # b is kept below the DISTINCT (and its ISTREAM)


def test_views_and_derived_streams_keep_their_columns():
    eng = engine()
    view = eng.execute("REGISTER VIEW v AS SELECT a, b, c FROM S [RANGE 5]")
    ds = eng.execute("REGISTER QUERY ds AS SELECT a, b FROM S WHERE c > 0")
    assert "[pushed]" not in shape(view.node)                 # its readers decide what they read
    q = eng.execute("SELECT RSTREAM(b) FROM ds [ROWS 2]")
    assert shape(q.node) == lines(f"""
    RSTREAM
      window ROWS 2
        project $1 [pushed]
          output of {ds.id}
    """)
    assert [e.row for e in eng.execute("SELECT c FROM v").drain()] == []


# ------------------------------------------------------------------------------------ same results

QUERIES = [
    "SELECT RSTREAM(a) FROM S [ROWS 2]",                               # counts elements, not distinct rows
    "SELECT RSTREAM(a) FROM S [PARTITION BY b ROWS 1]",
    "SELECT a FROM S [RANGE 3 SLIDE 2] WHERE c > 0",
    "SELECT RSTREAM(b) FROM S [NOW]",
    "SELECT DISTINCT a FROM S [RANGE 3]",
    "SELECT x FROM (SELECT DISTINCT a AS x, b FROM S [RANGE 3]) D",
    "SELECT ISTREAM(x) FROM (SELECT DSTREAM(a AS x, b) FROM S [RANGE 3]) D [RANGE 2]",
    "SELECT S.a, T.e FROM S [RANGE 3], T [ROWS 2] WHERE S.a = T.a AND S.b < T.d",
    "SELECT S.b, T.d FROM S [RANGE 3], T [ROWS 2] WHERE S.a = T.a",    # the join above, other columns
    "SELECT S.* FROM S [RANGE 3], T [RANGE 2] WHERE S.a = T.a",
    "SELECT a, COUNT(DISTINCT b) AS n, MAX(c) AS m FROM S [RANGE 4] GROUP BY a HAVING SUM(c) > 1",
    "SELECT y FROM (SELECT a AS y, b FROM S [RANGE 3] UNION SELECT a, d FROM T [RANGE 3]) U",
    "SELECT y FROM (SELECT a AS y, b FROM S [RANGE 3] EXCEPT ALL SELECT a, d FROM T [RANGE 3]) U",
    "SELECT S.a FROM S [RANGE 3] WHERE S.b IN (SELECT T.d FROM T [RANGE 2]) OR S.c > 1",
    "SELECT S.a FROM S [RANGE 3] WHERE EXISTS (SELECT * FROM T [RANGE 2] WHERE T.a = S.a AND T.d > S.b)",
    "SELECT S.c FROM S [RANGE 3] WHERE EXISTS (SELECT * FROM T [RANGE 2] WHERE T.a = S.a AND T.d > S.b)",
    "SELECT S.a FROM S [RANGE 3] WHERE S.b >= (SELECT MAX(T.d) FROM T [RANGE 2] WHERE T.a = S.a)",
    "SELECT S.a FROM S [RANGE 3] WHERE NOT EXISTS (SELECT * FROM T [RANGE 2])",
    "SELECT S.b, R.f FROM S [RANGE 3], R WHERE S.a = R.a",
    "SELECT COUNT(*) AS n FROM S [RANGE 3], T [RANGE 3]",
    "SELECT b FROM S [RANGE 3] WHERE a = 1",
    "SELECT a, SUM(c) AS s FROM S [RANGE 3] WHERE b > 0 GROUP BY a",
    "SELECT a FROM S WHERE b > 0",                                     # one selection, three widths: shared
    "SELECT c, a FROM S WHERE b > 0",
    "SELECT * FROM S WHERE b > 0",
    "SELECT a, COUNT(*) AS n FROM S [RANGE 3] GROUP BY a HAVING MAX(c) > 0",     # HAVING drops MAX(c)
    "SELECT a, c * 2 AS d FROM S",                  # one projection over the stream, none pushed before it
]

# (instant gap, input, a, b or d, c or e); R takes inserts only
action = st.tuples(st.integers(0, 2), st.sampled_from("SSTTR"), st.integers(0, 2), st.integers(0, 2),
                   st.integers(0, 2))


def results(queries: list[str], actions, pushdown: bool, together: bool) -> list[Counter]:
    """Each query's output per (ts, sign, row), the queries registered in one engine or each in its own."""
    saved = rules.RULES
    if not pushdown:
        rules.RULES = tuple(r for r in saved if r.__name__ != "push_projection_down")
    try:
        engines = [engine()] if together else [engine() for _ in queries]
        handles = [(engines[0] if together else e).execute(q) for e, q in zip(engines * len(queries), queries)]
    finally:
        rules.RULES = saved
    t = 0
    for gap, src, a, b, c in actions:
        t += gap
        for eng in engines:
            if src == "S":
                eng.push("S", [{"a": a, "b": b, "c": c}], ts=t)
            elif src == "T":
                eng.push("T", [{"a": a, "d": b, "e": c}], ts=t)
            else:
                eng.update("R", insert=[{"a": a, "f": b}], ts=t)
            if c == 0:
                eng.run()
    for eng in engines:
        eng.heartbeat(t + 10)
        eng.run()
    return [Counter((e.ts, e.sign, tuple(sorted(e.row.items()))) for e in h.drain()) for h in handles]


@settings(max_examples=40, deadline=None)
@given(st.lists(action, min_size=1, max_size=25))
def test_results_equal_the_plan_without_it(actions):
    """Each query alone, with and without the rule; then all of them in one engine, where windows that need
    different columns are shared through the union of their columns."""
    without = results(QUERIES, actions, pushdown=False, together=False)
    assert results(QUERIES, actions, pushdown=True, together=False) == without
    assert results(QUERIES, actions, pushdown=True, together=True) == without


# ------------------------------------------------------------------------------------ sharing

def _ops(eng, kind: str) -> list:
    return [op for op in eng.ops if op.kind == kind]


def _feed(eng) -> None:
    eng.push("S", [{"a": i % 3, "b": i, "c": 10 - i} for i in range(6)], ts=[1, 1, 2, 3, 5, 6])
    eng.push("T", [{"a": i % 3, "d": i, "e": 2 * i} for i in range(4)], ts=[1, 2, 4, 6])
    eng.heartbeat(20)
    eng.run()


def _alone(query: str) -> list:
    eng = engine()
    q = eng.execute(query)
    _feed(eng)
    return q.drain()


A_BY_A = "SELECT ISTREAM(a, COUNT(*) AS n) FROM S [RANGE 5] GROUP BY a"
SUM_B = "SELECT ISTREAM(SUM(b) AS s) FROM S [RANGE 5]"


def test_queries_reading_other_columns_share_one_window_over_the_union():
    eng = engine()
    q1 = eng.execute(A_BY_A)
    first = _ops(eng, "range_window")[0]
    q2 = eng.execute(SUM_B)
    (window,) = _ops(eng, "range_window")
    assert window is not first and window.owners == {q1.id, q2.id}   # q1's window (a alone) was replaced
    assert first.id not in eng.registry
    (pushed,) = [op for op in eng.ops if op.output is window.input_queues[0]]
    assert _positions(pushed) == "$0, $1 [pushed]"                        # a and b: c is dropped for both
    views = [op for op in eng.ops if op.input_queues[0] is window.output]
    assert sorted(_positions(v) for v in views) == ["$0 [view of shared window]", "$1 [view of shared window]"]
    assert "[view of shared window]" in eng.explain(q1.id) and "[view of shared window]" in eng.explain(q2.id)
    q3 = eng.execute(A_BY_A)                          # q1's plan again: all of it shared, nothing rebuilt
    assert {op.id for op in eng.ops if q3.id in op.owners} == {op.id for op in eng.ops if q1.id in op.owners}
    assert all(op.output._reader_count() for op in eng.ops)       # the projection onto a went with its window
    _feed(eng)
    assert q1.drain() == _alone(A_BY_A) == q3.drain() and q2.drain() == _alone(SUM_B)


def test_a_query_reading_fewer_columns_reads_the_window_there_is():
    eng = engine()
    q1 = eng.execute(SUM_B.replace("SUM(b)", "SUM(a + b)"))
    (window,) = _ops(eng, "range_window")
    q2 = eng.execute(A_BY_A)
    assert _ops(eng, "range_window") == [window] and window.owners == {q1.id, q2.id}
    assert [_positions(op) for op in eng.ops if op.input_queues[0] is window.output
            and "view" in op.detail] == ["$0 [view of shared window]"]


def test_a_window_fused_into_a_join_is_given_back_its_queue_and_widened():
    join_q = "SELECT S.a, T.e FROM S [RANGE 5], T [RANGE 5] WHERE S.a = T.a"
    eng = engine()
    q1 = eng.execute(join_q)
    assert all(w.fused is not None for w in _ops(eng, "range_window"))
    q2 = eng.execute("SELECT RSTREAM(c) FROM S [RANGE 5]")
    s_window = next(w for w in _ops(eng, "range_window") if w.owners == {q1.id, q2.id})
    assert s_window.fused is None and _ops(eng, "join")[0].windows[0] is None
    _feed(eng)
    assert q1.drain() == _alone(join_q)
    assert q2.drain() == _alone("SELECT RSTREAM(c) FROM S [RANGE 5]")


def test_joins_reading_other_columns_share_one_join_with_its_windows_fused():
    first, second = ("SELECT S.b, T.d FROM S [RANGE 5], T [RANGE 5] WHERE S.a = T.a",
                     "SELECT S.c, T.d FROM S [RANGE 5], T [RANGE 5] WHERE S.a = T.a")
    eng = engine()
    q1 = eng.execute(first)
    q2 = eng.execute(second)
    (join,) = _ops(eng, "join")
    assert join.owners == {q1.id, q2.id} and all(w is not None for w in join.windows)
    assert sorted(_positions(op) for op in eng.ops if "view" in op.detail) == [
        "$0, $1, $3, $4 [view of shared join]", "$0, $2, $3, $4 [view of shared join]"]
    pushed = [_positions(op) for op in eng.ops if "pushed" in op.detail]
    assert pushed == ["$0, $1 [pushed]"] and pushed == [                  # S keeps a, b and c; T a and d
        _positions(op) for op in eng.ops if op.owners == {q1.id, q2.id} and op.kind == "project"]
    assert all(op.output._reader_count() or op.fused for op in eng.ops)
    _feed(eng)
    assert q1.drain() == _alone(first) and q2.drain() == _alone(second)


def test_after_input_each_query_has_its_window_and_they_share_a_store():
    eng = engine()
    q1 = eng.execute(A_BY_A)
    eng.push("S", [{"a": 1, "b": 2, "c": 3}], ts=0)
    eng.run()
    q2 = eng.execute("SELECT ISTREAM(a, SUM(b) AS s) FROM S [RANGE 5] GROUP BY a")   # q1's window holds
    assert len(_ops(eng, "range_window")) == 2                                  # input q2 must not see
    (store,) = eng.registry.entities(kind="shared_store")
    assert store.owners == {q1.id, q2.id}        # through the projections onto a and onto a, b: one store
    eng.push("S", [{"a": 0, "b": i, "c": i} for i in range(50)], ts=1)
    eng.heartbeat(2)
    eng.run()
    windows = eng.registry.entities(kind="window")
    assert store.get("bytes") < sum(w.get("bytes") for w in windows)    # the column a of both, held once
    assert [e.row for e in q2.drain()] == [{"a": 0, "s": sum(range(50))}]


def test_a_window_whose_knobs_were_written_is_not_replaced():
    eng = engine()
    eng.execute(A_BY_A)
    (window,) = _ops(eng, "range_window")
    eng.set(window.id, "priority", 3)
    eng.execute(SUM_B)
    assert window in eng.ops and window.get("priority") == 3 and len(_ops(eng, "range_window")) == 2


def test_dropping_the_queries_frees_the_shared_window_and_the_views():
    eng = engine()
    q1 = eng.execute(A_BY_A)
    q2 = eng.execute(SUM_B)
    eng.drop(q1.id)
    (window,) = _ops(eng, "range_window")
    assert window.owners == {q2.id} and all(op.owners == {q2.id} for op in eng.ops)
    eng.drop(q2.id)
    assert eng.ops == [] and len(eng.queues) == 3      # the source queues
    assert {e.id.split(":")[0] for e in eng.registry} <= {"sys", "sched", "mem", "queue"}   # engine-wide


def test_a_query_that_fails_to_build_after_widening_leaves_the_other_working(monkeypatch):
    from dsms.plan.physical import PhysicalPlanner
    eng = engine()
    q1 = eng.execute(A_BY_A)

    def fails(self, node, qid):
        self.build(node.child, qid)
        raise RuntimeError("no")
    monkeypatch.setattr(PhysicalPlanner, "_Aggregate", fails)
    with pytest.raises(RuntimeError):
        eng.execute(SUM_B)                   # its window is built (q1's widened), then its aggregate fails
    monkeypatch.undo()
    assert all(op.owners == {q1.id} for op in eng.ops) and all(op.id in eng.registry for op in eng.ops)
    assert "[view of shared window]" in eng.explain(q1.id)
    _feed(eng)
    assert q1.drain() == _alone(A_BY_A)


# ------------------------------------------------------------------------------------ selections that narrow

def test_a_selection_outputs_only_the_columns_read_above_it():
    eng = engine()
    q = eng.execute("SELECT c FROM S WHERE b > 1")
    # (the ISTREAM above an insert-only selection is no operator: dsms/plan/istream_pass.py)
    assert [(op.kind, _positions(op)) for op in eng.ops] == [("select", "$1 > 1 [keeps $2]")]
    assert "select: b > 1 [keeps c]" in eng.explain(q.id)          # the operator's output, by name
    _feed(eng)
    # b = i > 1 for the rows i = 2..5 of _feed, stamped 2, 3, 5, 6, with c = 10 - i
    assert [(e.ts, e.row) for e in q.drain()] == [(2, {"c": 8}), (3, {"c": 7}), (5, {"c": 6}), (6, {"c": 5})]


def test_selections_reading_other_columns_share_one_selection_over_the_union():
    eng = engine()
    q1 = eng.execute("SELECT a FROM S WHERE b > 1")
    (first,) = _ops(eng, "select")
    q2 = eng.execute("SELECT c FROM S WHERE b > 1")
    (select,) = _ops(eng, "select")
    assert select is not first and first.id not in eng.registry and select.owners == {q1.id, q2.id}
    assert _positions(select) == "$1 > 1 [keeps $0, $2]"
    views = [op for op in eng.ops if op.input_queues[0] is select.output]
    assert sorted(_positions(v) for v in views) == ["$0 [view of shared select]", "$1 [view of shared select]"]
    q3 = eng.execute("SELECT a FROM S WHERE b > 1")          # q1's plan again: all of it shared
    assert {op.id for op in eng.ops if q3.id in op.owners} == {op.id for op in eng.ops if q1.id in op.owners}
    _feed(eng)
    assert q1.drain() == _alone("SELECT a FROM S WHERE b > 1") == q3.drain()
    assert q2.drain() == _alone("SELECT c FROM S WHERE b > 1")


def test_a_selection_is_widened_after_input_too_and_no_element_is_lost_or_repeated():
    """A selection over a stream holds no state: a later query may widen it whenever its input is read up
    (the engine runs before every registration), and the earlier query reads on through a projection."""
    eng = engine()
    q1 = eng.execute("SELECT a FROM S WHERE b > 1")
    eng.push("S", [{"a": 1, "b": 5, "c": 0}], ts=1)           # not run: the registration below runs it
    q2 = eng.execute("SELECT a, c FROM S WHERE b > 1")
    (select,) = _ops(eng, "select")
    assert select.owners == {q1.id, q2.id} and _positions(select) == "$1 > 1 [keeps $0, $2]"
    eng.push("S", [{"a": 2, "b": 5, "c": 7}, {"a": 3, "b": 0, "c": 8}], ts=2)
    eng.heartbeat(9)
    eng.run()
    assert [(e.ts, e.row) for e in q1.drain()] == [(1, {"a": 1}), (2, {"a": 2})]
    assert [(e.ts, e.row) for e in q2.drain()] == [(2, {"a": 2, "c": 7})]


def test_a_selection_whose_knobs_were_written_is_not_replaced():
    eng = engine()
    eng.execute("SELECT a FROM S WHERE b > 1")
    (select,) = _ops(eng, "select")
    eng.set(select.id, "priority", 3)
    q2 = eng.execute("SELECT c FROM S WHERE b > 1")
    assert select in eng.ops and len(_ops(eng, "select")) == 2
    _feed(eng)
    assert q2.drain() == _alone("SELECT c FROM S WHERE b > 1")


def test_a_plan_file_keeps_what_a_selection_keeps_and_a_bad_keep_is_refused():
    eng = engine()
    q1 = eng.execute("SELECT c FROM S WHERE b > 1")
    xml = eng.plan_xml(q1.id)
    q2 = eng.load_plan(xml)
    assert "select: b > 1 [keeps c]" in eng.explain(q2.id)
    _feed(eng)
    assert q2.drain() == q1.drain() == _alone("SELECT c FROM S WHERE b > 1")
    bad = xml.replace('<value v="i:2" />', '<value v="i:7" />')
    assert bad != xml
    with pytest.raises(SchemaError, match="keeps columns \\[7\\] of an input of 3"):
        eng.load_plan(bad)
