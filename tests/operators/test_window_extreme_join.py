"""A tumbling window joined with its own MAX or MIN as one operator (``WindowExtremeJoinOp``, planned by
``dsms/plan/window_extreme.py``; issue 15, NEXMark q7), against the reference evaluator (tests/oracle):

- generated streams with ties on the extreme (int64's ends among the values), empty periods, elements stamped
  exactly at a window end that arrive after the end was output (they raise the extreme or tie with it),
  heartbeats on every input or on the stream alone, negative timestamps, several periods in one push, MAX and
  MIN, the window on either side of the join or a scalar subquery (``WHERE v = (SELECT MAX(v) ...)``), INT and
  TIMESTAMP columns, extra conjuncts; every run also checked to have taken the path, and against the general
  plan;
- the shapes the planner must leave to the general path (another window, size, input, filter, column, type,
  aggregate), which must still agree with the reference;
- EXPLAIN naming the operator, and a broken operator being caught.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, check_query, compare, run_engine, run_reference

from dsms import Engine
from dsms.operators.window_extreme_join import WindowExtremeJoinOp
from dsms.plan import physical

CATALOG = ("REGISTER STREAM S (a INT, v INT, c STRING, t TIMESTAMP)",
           "REGISTER STREAM T (a INT, v INT)",
           "REGISTER STREAM F (a INT, x FLOAT)")


def q7(size: int, func: str = "MAX", window_first: bool | None = True, extra: str = "", col: str = "v") -> str:
    """q7's shape over S: the window first, the MAX first, or (``window_first`` None) a scalar subquery (no
    ``extra`` there: a conjunct over the window's columns alone would go below its window)."""
    if window_first is None:
        return (f"SELECT ISTREAM(a, v, c, t) FROM S [RANGE {size} SLIDE {size}] WHERE {col} = "
                f"(SELECT {func}({col}) FROM S [RANGE {size} SLIDE {size}])")
    w = f"S [RANGE {size} SLIDE {size}] B"
    m = f"(SELECT {func}({col}) AS m FROM S [RANGE {size} SLIDE {size}]) M"
    items = f"{w}, {m}" if window_first else f"{m}, {w}"
    return f"SELECT ISTREAM(B.a, B.v, B.c, B.t, M.m) FROM {items} WHERE B.{col} = M.m{extra}"


@st.composite
def stream(draw, start: int = 0):
    """Pushes of S (values from a few, so the extreme ties; int64's ends among them), with gaps of several periods (empty windows),
    heartbeats on every input or on S alone (sometimes exactly at a window end, followed by elements stamped
    there), and runs."""
    out, t = [], start
    for _ in range(draw(st.integers(1, 10))):
        ts = []
        for _ in range(draw(st.integers(1, 6))):
            t += draw(st.sampled_from([0, 0, 1, 1, 2, 3, 9]))
            ts.append(t)
        rows = [{"a": draw(st.integers(0, 3)), "v": draw(st.sampled_from([-2, 0, 1, 5, 5, 7, -(2**63), 2**63 - 1])),
                 "c": draw(st.sampled_from(["x", "", "yy"])), "t": draw(st.integers(-5, 5))} for _ in ts]
        out.append(("push", "S", rows, ts))
        if draw(st.booleans()):
            h = t + draw(st.integers(0, 3))
            out.append(("heartbeat", h) if draw(st.booleans()) else ("heartbeat", h, "S"))
            t = h
        if draw(st.booleans()):
            out.append(("run",))
    return tuple(out), t


def _ops(eng: Engine) -> list:
    return [op for op in eng.ops if isinstance(op, WindowExtremeJoinOp)]


def _run(query: str, acts, until: int, general: bool = False) -> tuple[list, Engine]:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    with pytest.MonkeyPatch.context() as m:
        if general:
            m.setattr(physical, "window_extreme", lambda node: None)
        q = eng.execute(query)
    for a in acts:
        if a[0] == "push":
            eng.push(a[1], a[2], ts=a[3])
        elif a[0] == "heartbeat":
            eng.heartbeat(*a[1:])
        else:
            eng.run()
    eng.heartbeat(until)
    eng.run()
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()], eng


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_rows_at_the_extreme_agree_with_the_reference(data):
    size = data.draw(st.sampled_from([1, 2, 3, 4, 10]))
    query = q7(size, data.draw(st.sampled_from(["MAX", "MIN"])), data.draw(st.sampled_from([True, False, None])),
               data.draw(st.sampled_from(["", " AND B.a + M.m > 4", " AND B.t >= M.m"])),
               data.draw(st.sampled_from(["v", "v", "t"])))           # INT, TIMESTAMP
    acts, t = data.draw(stream(data.draw(st.sampled_from([0, -7]))))
    until = t + data.draw(st.sampled_from([1, size, 2 * size + 1]))
    w = Workload(CATALOG, query, acts, until)
    expected = run_reference(w)
    got, eng = _run(query, acts, until)
    assert len(_ops(eng)) == 1                       # the path was taken
    compare(expected, got)
    compare(expected, _run(query, acts, until, general=True)[0])


def test_a_late_element_at_a_window_end_replaces_or_joins_the_rows_output():
    """Elements stamped 4 after the heartbeat at 4 made the end 4 output: a tie is added, a higher one
    replaces the rows output at 4 (deleted at 4, so ISTREAM shows the new row alone)."""
    acts = (("push", "S", [{"a": 1, "v": 5, "c": "p", "t": 0}, {"a": 2, "v": 3, "c": "q", "t": 0}], [1, 4]),
            ("heartbeat", 4), ("run",),
            ("push", "S", [{"a": 3, "v": 5, "c": "r", "t": 0}], [4]), ("run",),
            ("push", "S", [{"a": 4, "v": 9, "c": "s", "t": 0}], [4]), ("run",),
            ("push", "S", [{"a": 5, "v": 9, "c": "u", "t": 0}, {"a": 6, "v": 1, "c": "v", "t": 0}], [4, 6]))
    query = q7(4)
    expected = run_reference(Workload(CATALOG, query, acts, 20))
    assert [(ts, r["a"]) for ts, _, r in expected] == [(4, 4), (4, 5), (8, 6)]
    got, eng = _run(query, acts, 20)
    assert _ops(eng)
    compare(expected, got)


def test_explain_names_the_operator_and_the_general_parts_are_gone():
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute(q7(10))
    plan = eng.explain(q.id)
    assert "window_extreme_join: RANGE 10 SLIDE 10: v = MAX(v) [rows at the window's extreme only]" in plan
    assert not any(op.kind in ("join", "aggregate", "range_window") for op in eng.ops)
    text = eng.execute("EXPLAIN " + q7(10))["explain"]        # the logical tree says how it will be built
    assert "join: v = MAX(v) [built as one window_extreme_join: rows at the window's extreme only]" in text
    assert "window_extreme_join" not in eng.execute("EXPLAIN " + GENERAL["hopping"])["explain"]


GENERAL = {      # one fact missing each: planned the general way, and still right
    "sliding": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4] B, (SELECT MAX(v) AS m FROM S [RANGE 4]) M "
               "WHERE B.v = M.m",
    "hopping": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 2] B, "
               "(SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 2]) M WHERE B.v = M.m",
    "two sizes": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
                 "(SELECT MAX(v) AS m FROM S [RANGE 2 SLIDE 2]) M WHERE B.v = M.m",
    "two streams": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
                   "(SELECT MAX(v) AS m FROM T [RANGE 4 SLIDE 4]) M WHERE B.v = M.m",
    "filter on one side": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
                          "(SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 4] WHERE a > 0) M WHERE B.v = M.m",
    "filter on the window's side": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
                                   "(SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 4]) M WHERE B.v = M.m AND B.a > 0",
    "another column": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
                      "(SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 4]) M WHERE B.a = M.m",
    "group by": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
                "(SELECT a, MAX(v) AS m FROM S [RANGE 4 SLIDE 4] GROUP BY a) M WHERE B.v = M.m",
    "having": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
              "(SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 4] HAVING COUNT(*) > 1) M WHERE B.v = M.m",
    "count": "SELECT ISTREAM(B.a, B.v) FROM S [RANGE 4 SLIDE 4] B, "
             "(SELECT COUNT(*) AS m FROM S [RANGE 4 SLIDE 4]) M WHERE B.v = M.m",
    "float": "SELECT ISTREAM(B.a, B.x) FROM F [RANGE 4 SLIDE 4] B, "
             "(SELECT MAX(x) AS m FROM F [RANGE 4 SLIDE 4]) M WHERE B.x = M.m",
}


@pytest.mark.parametrize("name", sorted(GENERAL))
def test_other_shapes_keep_the_general_plan(name):
    acts = []
    for t in range(0, 30, 2):
        v = (7 * t) % 5
        acts.append(("push", "S", [{"a": t % 3, "v": v, "c": "", "t": 0}, {"a": 1, "v": 4 - v, "c": "", "t": 0}],
                     [t, t + 1]))
        acts.append(("push", "T", [{"a": t % 2, "v": v + 1}], [t]))
        acts.append(("push", "F", [{"a": t % 3, "x": v / 2}, {"a": 0, "x": 2.0}], [t, t]))
    eng = check_query(CATALOG, GENERAL[name], acts, 40)
    assert not _ops(eng) and any(op.kind == "join" for op in eng.ops)


def test_a_broken_operator_is_caught(monkeypatch):
    """The comparison can fail: an operator that kept one row per extreme (ties dropped) disagrees."""
    acts = (("push", "S", [{"a": 1, "v": 5, "c": "", "t": 0}, {"a": 2, "v": 5, "c": "", "t": 0}], [1, 2]),)
    query = q7(4)
    expected = run_reference(Workload(CATALOG, query, acts, 10))
    keep = WindowExtremeJoinOp._add

    def first_only(self, end, batch, vals, base):
        keep(self, end, batch, vals, base)
        p = self.open[-1]
        p.rows = p.rows[:1]
        p.rows[0] = (p.rows[0][0], p.rows[0][1][:1])
    monkeypatch.setattr(WindowExtremeJoinOp, "_add", first_only)
    with pytest.raises(AssertionError):
        compare(expected, run_engine(Workload(CATALOG, query, acts, 10)))


def test_an_aggregate_above_it_is_not_shed():
    """Planned as a join, the MAX side made it a query over two input edges, which the load shedder never
    sheds (a drop moves the MAX: no error bound); read from one edge, it must stay unshed."""
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute("SELECT COUNT(*) AS n FROM S [RANGE 4 SLIDE 4] B, (SELECT MAX(v) AS m FROM S [RANGE 4 SLIDE 4]) M "
                    "WHERE B.v = M.m")
    plain = eng.execute("SELECT COUNT(*) AS n FROM S [RANGE 4 SLIDE 4]")
    assert _ops(eng) and eng.shedder.profile(q.id) is None
    assert eng.shedder.profile(plain.id) is not None         # the check itself can say yes


def test_only_the_rows_at_the_running_extreme_are_held():
    """Of a period's 600 rows only those at its MAX so far are held (the statistic ``rows_held``), and the
    output is theirs, as the reference gives it."""
    rows = [{"a": i, "v": (i * 37) % 101, "c": "x" * (i % 5), "t": 0} for i in range(600)]
    acts = tuple(("push", "S", rows[k:k + 50], [1 + k // 100] * 50) for k in range(0, 600, 50))
    query = q7(10)
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    q = eng.execute(query)
    for a in acts:
        eng.push(a[1], a[2], ts=a[3])
        eng.run()
    op = _ops(eng)[0]
    top = sum(r["v"] == 100 for r in rows)
    assert top > 1 and eng.entity(op.id).get()["rows_held"] == top
    eng.heartbeat(30)
    eng.run()
    got = [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()]
    compare(run_reference(Workload(CATALOG, query, acts, 30)), got)
    assert len(got) == top
