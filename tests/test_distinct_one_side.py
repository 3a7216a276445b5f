"""DISTINCT over the columns of one side of a join, against the reference evaluator (issue 15, NEXMark q8).

The planner tells such a join that only its support is read (``dsms/plan/support.py``, ``JoinOp.keep_support``):
a join of two tumbling windows of one size then emits one pair per row of that side with a match instead of all
of them, and completes what it emitted to every pair before the general path takes over (a window resized, a
memory budget). These tests draw queries of that shape and of the shapes next to it where the rule must not fire
(columns of both sides, an expression, a condition beyond the equi-join, windows the fast path does not take),
over inputs with many equal keys and rows, uneven inputs with no heartbeat but the last, rows at a window end
arriving after it was applied, and knobs changed mid-run.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import (
    A_VALUES,
    B_VALUES,
    C_VALUES,
    CATALOG,
    D_VALUES,
    apply,
    check_query,
    inputs,
    uneven_actions,
)

X_COLS = ["X.a", "X.b", "X.c"]
Y_COLS = ["Y.a", "Y.d"]


@st.composite
def shapes(draw):
    """(query, the side the rule must pick or None)."""
    size = draw(st.integers(1, 8))
    w1 = f"RANGE {size} SLIDE {size}"
    w2 = draw(st.sampled_from([w1, w1, w1, f"RANGE {size * 2} SLIDE {size}", f"RANGE {draw(st.integers(1, 9))}"]))
    if draw(st.booleans()):
        w1, w2 = w2, w1
    cond = draw(st.sampled_from(["X.a = Y.a", "X.a = Y.a", "X.a = Y.a", "X.b = Y.a", "X.a = Y.a AND X.b > Y.d"]))
    pick = draw(st.sampled_from(["left", "left", "right", "both", "expression"]))
    if pick == "left":
        cols = draw(st.lists(st.sampled_from(X_COLS), min_size=1, max_size=3, unique=True))
    elif pick == "right":
        cols = draw(st.lists(st.sampled_from(Y_COLS), min_size=1, max_size=2, unique=True))
    elif pick == "both":
        cols = [draw(st.sampled_from(X_COLS)), draw(st.sampled_from(Y_COLS))]
    else:
        cols = ["X.b + 1", draw(st.sampled_from(X_COLS))]
    names = [f"k{i}" for i in range(len(cols))]
    inner = ", ".join(f"{c} AS {n}" for c, n in zip(cols, names))
    body = f"SELECT DISTINCT {inner} FROM S [{w1}] X, T [{w2}] Y WHERE {cond}"
    form = draw(st.sampled_from(["istream", "istream", "dstream", "relation"]))
    query = body if form == "relation" else f"SELECT {form.upper()}({', '.join(names)}) FROM ({body}) Z"
    fires = "AND" not in cond and pick in ("left", "right")
    return query, ({"left": 0, "right": 1}[pick] if fires else None)


@st.composite
def uneven(draw, size_max: int = 10):
    """Uneven pushes to S and T (``uneven_actions``) with few distinct values, so rows repeat."""
    row_s = st.fixed_dictionaries({"a": st.sampled_from(A_VALUES), "b": st.sampled_from(B_VALUES[:3]),
                                   "c": st.sampled_from(C_VALUES[:3])})
    row_t = st.fixed_dictionaries({"a": st.sampled_from(A_VALUES), "d": st.sampled_from(D_VALUES)})
    actions, last = draw(uneven_actions(row_s, row_t))
    return actions, last + 2 * size_max + 1


def _join(eng):
    return next(op for op in eng.ops if op.kind == "join")


@settings(max_examples=300)
@given(shape=shapes(), work=st.one_of(inputs(max_events=24, max_ts=50), uneven()))
def test_distinct_of_one_side_of_a_join_equals_reference(shape, work):
    """engine == reference for DISTINCT over a windowed join, the rule firing exactly for the columns of one side
    over an equi-join with no other condition"""
    query, side = shape
    actions, until = work
    eng = check_query(CATALOG, query, actions, until)
    assert _join(eng).support_side == side
    assert ("one pair per" in _join(eng).explain()) == (side is not None)


def _run(query: str, actions, until: int, knob_at: int, knob: str | None, value: int, support: bool):
    """The query's answer, with ``knob`` (of S's window) set to ``value`` after ``knob_at`` actions; with
    ``support`` False the rule is undone before any input (every pair emitted, the path without it)."""
    from dsms import Engine

    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute(query)
    join = _join(eng)
    assert join.support_side is not None
    if not support:
        join.keep_all_pairs()
    for i, a in enumerate(actions):
        if i == knob_at and knob is not None:
            w = join.windows[0]
            eng.set(w.store.id if knob == "memory" else w.id, knob, value)
        apply(eng, a)
    eng.heartbeat(until)
    eng.run()
    return Counter((e.ts, e.sign, tuple(sorted(e.row.items()))) for e in q.drain()), join.tuples_out


@settings(max_examples=200)
@given(work=uneven(), size=st.sampled_from([2, 3, 5]), knob=st.sampled_from(["range", "range", "memory", None]),
       value=st.integers(1, 12), at=st.integers(0, 20), form=st.sampled_from(["istream", "relation", "right"]))
def test_a_knob_changed_mid_run_completes_the_pairs_first(work, size, knob, value, at, form):
    """A window resized or given a memory budget while the join emits one pair per row: the join hands over to
    the general path after completing its output to every pair, and the answer equals that of the same engine
    without the rule (every pair from the start), and the reference's when no knob is set."""
    actions, until = work
    w = f"RANGE {size} SLIDE {size}"
    cols = "X.a AS a, X.c AS c" if form != "right" else "Y.d AS d"
    body = f"SELECT DISTINCT {cols} FROM S [{w}] X, T [{w}] Y WHERE X.a = Y.a"
    query = body if form == "relation" else f"SELECT ISTREAM({'d' if form == 'right' else 'a, c'}) FROM ({body}) Z"
    value = value * 60 if knob == "memory" else value
    got, pairs = _run(query, actions, until, at, knob, value, True)
    full, all_pairs = _run(query, actions, until, at, knob, value, False)
    assert got == full
    if knob is None:             # (after a knob, the pairs completed and the ones deleted count too)
        assert pairs <= all_pairs
        check_query(CATALOG, query, actions, until)


def test_one_pair_per_row_and_the_reference_answer():
    """A row of S with three matches in its window: the join emits one pair for it (three without the rule), and
    the answer is the reference's, rows at the window end arriving after it was applied included."""
    query = ("SELECT ISTREAM(a, c) FROM (SELECT DISTINCT X.a AS a, X.c AS c FROM S [RANGE 10 SLIDE 10] X, "
             "T [RANGE 10 SLIDE 10] Y WHERE X.a = Y.a) Z")
    actions = [("push", "S", [{"a": 1, "b": 0, "c": "x"}, {"a": 1, "b": 0, "c": "x"}, {"a": 2, "b": 0, "c": "y"}],
                [1, 2, 3]),
               ("push", "T", [{"a": 1, "d": 0.5}, {"a": 1, "d": 1.5}, {"a": 1, "d": 2.5}], [4, 5, 6]),
               ("heartbeat", 10), ("run",),
               ("push", "T", [{"a": 2, "d": 0.5}], [10]), ("push", "S", [{"a": 1, "b": 0, "c": "z"}], [10]),
               ("run",), ("push", "S", [{"a": 3, "b": 0, "c": "w"}], [14]), ("run",)]
    eng = check_query(CATALOG, query, actions, 40)
    assert _join(eng).support_side == 0
    assert "distinct: [the join below keeps one pair per left row]" in eng.execute("EXPLAIN " + query)["explain"]
    got, pairs = _run(query, actions, 40, 0, None, 0, True)
    full, all_pairs = _run(query, actions, 40, 0, None, 0, False)
    assert got == full
    # at end 10 the two rows of a=1 get one pair each instead of three (inserted, then deleted at 20)
    assert all_pairs - pairs >= 2 * 2 * 2


def test_a_later_query_sharing_the_join_gets_every_pair():
    """A second query that shares the join (or the projection above it) reads every pair: the rule is undone
    when it registers, before any input, and both answers are the reference's."""
    from oracle.generators import compare
    from oracle.reference import Reference

    from dsms import Engine

    w = "RANGE 5 SLIDE 5"
    first = f"SELECT DISTINCT X.a AS a, X.c AS c FROM S [{w}] X, T [{w}] Y WHERE X.a = Y.a"
    for second in (f"SELECT X.a AS a, X.c AS c FROM S [{w}] X, T [{w}] Y WHERE X.a = Y.a",
                   f"SELECT X.a, X.c, Y.d FROM S [{w}] X, T [{w}] Y WHERE X.a = Y.a"):
        eng, ref = Engine(), Reference()
        for s in CATALOG:
            eng.execute(s)
            ref.execute(s)
        q1, n1 = eng.execute(first), ref.execute(first)
        assert _join(eng).support_side == 0
        q2, n2 = eng.execute(second), ref.execute(second)
        assert all(op.support_side is None for op in eng.ops if op.kind == "join")
        actions = [("push", "S", [{"a": 1, "b": 0, "c": "x"}, {"a": 2, "b": 0, "c": "y"}], [1, 2]),
                   ("push", "T", [{"a": 1, "d": 0.5}, {"a": 1, "d": 1.5}, {"a": 2, "d": 0.0}], [2, 3, 4]),
                   ("run",), ("push", "S", [{"a": 1, "b": 1, "c": "x"}], [6]),
                   ("push", "T", [{"a": 1, "d": 2.5}, {"a": 1, "d": 3.5}], [7, 8])]
        for a in actions:
            apply(eng, a)
            apply(ref, a)
        eng.heartbeat(30)
        eng.run()
        for q, n in ((q1, n1), (q2, n2)):
            compare(ref.results(n, 30), [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()])
