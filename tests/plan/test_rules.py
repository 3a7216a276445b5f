"""The rewrite rules (dsms/plan/rules/): where they apply, where they must not, and that the rewritten plan gives
the results of the definition (digest-003 section 3.13's counter-example for count windows)."""

from dsms import Engine
from dsms.plan import logical as L


def kinds(eng, q):
    return [op["kind"] for op in eng.explain(q.id, "json")["operators"]]


def test_filter_goes_below_a_range_window():
    eng = Engine()
    eng.execute("REGISTER STREAM S (id INT, t INT)")
    q = eng.execute("SELECT id FROM S [RANGE 2] WHERE t >= 30")
    assert kinds(eng, q).index("select") < kinds(eng, q).index("range_window")
    # the window reads the filter (through the projection onto id that projection pushdown puts above it)
    below = [n.child.child if isinstance(n.child, L.Project) and n.child.pushed else n.child
             for n in L.walk(q.node) if isinstance(n, L.Window)]
    assert [type(n) for n in below] == [L.Filter]


def test_filter_stays_above_a_rows_window_and_gives_the_definition():
    # digest-003 section 3.13: n=2, stream (1,35), (2,20), (3,31), (4,10), F: T >= 30
    eng = Engine()
    eng.execute("REGISTER STREAM S (id INT, t INT)")
    q = eng.execute("SELECT RSTREAM(id) FROM S [ROWS 2] WHERE t >= 30")
    assert kinds(eng, q).index("row_window") < kinds(eng, q).index("select")
    for i, t in [(1, 35), (2, 20), (3, 31), (4, 10)]:
        eng.push("S", [{"id": i, "t": t}], ts=i)
    eng.heartbeat(5)
    eng.run()
    at4 = [e.row["id"] for e in q.drain() if e.ts == 4]
    assert at4 == [3]                    # sigma(W2(S)) = {(3,31)}, not W2(sigma(S)) = {1, 3}


def test_time_window_commutes_with_selection():
    # digest-003 section 3.13: omega=2, at tau=4 both orders give {(3,31)}
    eng = Engine()
    eng.execute("REGISTER STREAM S (id INT, t INT)")
    q = eng.execute("SELECT RSTREAM(id) FROM S [RANGE 2] WHERE t >= 30")
    for i, t in [(1, 35), (2, 20), (3, 31), (4, 10)]:
        eng.push("S", [{"id": i, "t": t}], ts=i)
    eng.heartbeat(5)
    eng.run()
    assert [e.row["id"] for e in q.drain() if e.ts == 4] == [3]
