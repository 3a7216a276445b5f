"""Plans: sharing of identical subplans (digest-004 E7, E8, E9), DROP freeing entities, EXPLAIN, and XML plan
files that load back into the same results."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from dsms import CQLError, Engine
from dsms.batch import Batch
from dsms.queues import Queue


def feed(eng):
    eng.push("R", [{"A": 9, "B": 1}, {"A": 5, "B": 2}], ts=[1, 2])
    eng.push("S", [{"B": 1, "C": 7}], ts=3)
    eng.push("T", [{"C": 7, "D": 0}], ts=4)
    eng.heartbeat(20)
    eng.run()


def make():
    eng = Engine()
    eng.execute("REGISTER STREAM R (A INT, B INT); REGISTER STREAM S (B INT, C INT); "
                "REGISTER STREAM T (C INT, D INT)")
    return eng


def test_e7_shared_join_runs_once():
    eng = make()
    q1 = eng.execute("SELECT * FROM R [RANGE 10], S [RANGE 10] WHERE R.B = S.B AND R.A > S.C")
    q2 = eng.execute("SELECT R.A, T.D FROM R [RANGE 10], S [RANGE 10], T [RANGE 10] "
                     "WHERE R.B = S.B AND S.C = T.C")
    joins = [op for op in eng.ops if op.kind == "join"]
    shared = [op for op in joins if op.owners == {q1.id, q2.id}]
    assert len(shared) == 1, eng.explain(q2.id)
    assert shared[0].output._reader_count() == 2           # one queue, two read pointers
    feed(eng)
    assert [(e.ts, e.row) for e in q2.drain()] == [(4, {"A": 9, "D": 0})]
    assert len(q1.drain()) == 1


def test_e8_window_shared_between_max_and_join():
    eng = make()
    eng.execute("SELECT MAX(A) FROM R [ROWS 3]")
    eng.execute("SELECT * FROM R [ROWS 3], S [ROWS 3] WHERE R.B = S.B")
    windows = [op for op in eng.ops if op.kind == "row_window"]
    assert len(windows) == 2                               # one for R (shared), one for S
    r_window = [w for w in windows if len(w.owners) == 2]
    assert len(r_window) == 1
    assert len([s for s in eng.registry.entities(kind="window")]) == 2   # R's window tuples stored once


def test_e9_shared_queue_keeps_what_the_slowest_reader_has_not_read():
    q = Queue()
    a, b = q.reader(), q.reader()
    for t in range(5):
        q.put(Batch(np.array([t], np.int64), np.ones(1, np.int8), [np.array([t])]))
    for _ in range(5):
        a.get()
    for _ in range(2):
        b.get()
    assert q.tuples == 3 and q.tuples_in == 5
    for _ in range(3):
        b.get()
    assert q.tuples == 0


def test_drop_frees_only_unshared_entities():
    eng = make()
    q1 = eng.execute("SELECT A, COUNT(*) FROM R [RANGE 10] GROUP BY A")
    q2 = eng.execute("SELECT B, SUM(A) FROM R [RANGE 10] GROUP BY B")
    before = len(eng.registry)
    window = [op for op in eng.ops if op.kind == "range_window"][0]
    assert window.owners == {q1.id, q2.id}
    eng.execute(f"DROP QUERY {q1.id}") if q1.name else eng.drop(q1.id)
    assert window in eng.ops and window.owners == {q2.id}
    assert len(eng.registry) < before
    assert all(op.owners for op in eng.ops)
    eng.drop(q2.id)
    assert eng.ops == []
    assert {e.id.split(":")[0] for e in eng.registry} <= {"sys", "sched", "mem", "queue"}   # engine-wide
    assert len([q for q in eng.queues]) == 3                 # only the three source queues remain


def test_explain_formats():
    eng = make()
    q = eng.execute("SELECT A FROM R [RANGE 10] WHERE A > 1")
    text = eng.explain(q.id)
    assert "range_window: RANGE 10" in text and "select" in text
    js = eng.explain(q.id, "json")
    assert {op["kind"] for op in js["operators"]} >= {"range_window", "select", "to_stream"}
    assert all({"from", "to"} <= set(e) for e in js["edges"])
    assert eng.explain(q.id, "xml").startswith("<plan")


def test_explain_json_lists_synopses_with_their_operator_and_shared_store():
    eng = make()
    q1 = eng.execute("SELECT B, COUNT(*) AS n FROM R [RANGE 10] GROUP BY B")
    q2 = eng.execute("SELECT B, MAX(A) AS m FROM R [RANGE 20] GROUP BY B")
    p1, p2 = eng.explain(q1.id, "json"), eng.explain(q2.id, "json")
    for plan, q in ((p1, q1), (p2, q2)):
        window = next(op for op in plan["operators"] if op["kind"] == "range_window")
        syns = {s["id"]: s for s in plan["synopses"]}
        own = [s for s in syns.values() if window["id"] in s["operators"]]
        assert {s["kind"] for s in own} == {"window", "shared_store"}
        win = next(s for s in own if s["kind"] == "window")
        store = syns[win["store"]]
        assert store["kind"] == "shared_store" and store["shared"] and store["owners"] == sorted([q1.id, q2.id])
        assert win["owners"] == [q.id] and not win["shared"]
        agg = next(op for op in plan["operators"] if op["kind"] == "aggregate")
        assert any(agg["id"] in s["operators"] for s in syns.values())
        registered = {e["id"] for e in eng.entities() if e["id"].startswith("syn:")}
        assert set(syns) <= registered
    assert {s["id"] for s in p1["synopses"] if s["kind"] == "shared_store"} == \
        {s["id"] for s in p2["synopses"] if s["kind"] == "shared_store"}


def test_xml_plan_roundtrip_gives_same_results():
    eng = make()
    q = eng.execute("SELECT B, COUNT(*) AS n, MAX(A) AS m FROM R [RANGE 5] GROUP BY B HAVING COUNT(*) >= 1")
    q2 = eng.load_plan(eng.plan_xml(q.id), name="copy")
    assert q2.schema == q.schema and q2.kind == q.kind
    feed(eng)
    assert q.drain() == q2.drain() != []


@pytest.mark.parametrize("doc", [
    "<plan><Nope/></plan>",
    "not xml",
    '<?xml version="1.0"?><!DOCTYPE plan [<!ENTITY x SYSTEM "file:///etc/passwd">]><plan>&x;</plan>',
    "<plan><StreamScan name='s:r'/></plan>",
])
def test_bad_plan_xml_is_refused(doc):
    eng = make()
    with pytest.raises((CQLError, Exception)) as e:
        eng.load_plan(doc)
    assert "plan" in str(e.value).lower() or "xml" in str(e.value).lower()
    assert eng.queries() == []


def test_windows_of_different_sizes_share_one_store():
    # digest-004 R-SHR-06: windows over one stream share a store even when their specs differ
    eng = make()
    q1 = eng.execute("SELECT COUNT(*) FROM R [RANGE 10]")
    q2 = eng.execute("SELECT MAX(A) FROM R [ROWS 3]")
    (store,) = eng.registry.entities(kind="shared_store")
    assert store.get("windows") == 2 and store.owners == {q1.id, q2.id}
    eng.push("R", [{"A": i, "B": i} for i in range(6)], ts=list(range(6)))
    eng.run()
    windows = eng.registry.entities(kind="window")
    assert store.get("size") == max(w.get("size") for w in windows) == 6
    assert store.get("bytes") < sum(w.get("bytes") for w in windows) + 200
    eng.drop(q1.id)
    assert store.get("windows") == 1 and store.id in eng.registry
    eng.drop(q2.id)
    assert store.id not in eng.registry


def test_the_plan_that_explain_and_http_give_loads_back():
    """SPEC 6: a query plan has an XML form (STREAM's plan files); the one EXPLAIN (and GET /queries/{id}/plan)
    gives, entities and edges with the logical plan inside, loads as it is, into another engine too, and gives
    the same results: a view, a join with a relation, a filter on an aggregate and a UNION. v counts S [RANGE 5]
    per a: (1, 1) at 1, (1, 2) from 2, (1, 1) again from 6 (the first 1 expires); R = {1} from 0. The left branch
    holds (1, 2) from 2 to 6, the right one (1, 1) from 0."""
    def setup():
        eng = Engine()
        eng.execute("REGISTER STREAM S (a INT); REGISTER RELATION R (a INT); "
                    "REGISTER VIEW v AS SELECT a, COUNT(*) AS n FROM S [RANGE 5] GROUP BY a")
        return eng

    eng = setup()
    q = eng.execute("SELECT v.a, n FROM v, R WHERE v.a = R.a AND n > 1 UNION SELECT a, 1 FROM R")
    other = setup()
    loaded = [eng.load_plan(eng.explain(q.id, "xml")), other.load_plan(eng.explain(q.id, "xml"))]
    for e in (eng, other):
        e.update("R", insert=[{"a": 1}], ts=0)
        e.push("S", [{"a": 1}, {"a": 1}], ts=[1, 2])
        e.heartbeat(20)
        e.run()
    expected = [(0, 1, {"a": 1, "n": 1}), (2, 1, {"a": 1, "n": 2}), (6, -1, {"a": 1, "n": 2})]
    assert [tuple(x) for x in q.drain()] == expected
    for q2 in loaded:
        assert q2.schema == q.schema and q2.kind == q.kind
        assert [tuple(x) for x in q2.drain()] == expected


def test_a_plan_with_characters_xml_cannot_carry_loads_back():
    """A STRING constant may hold any character; the plan file must carry it (XML 1.0 has no control characters
    other than tab, LF and CR): only the row whose s equals the constant passes, in the loaded plan too."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (s STRING)")
    odd = "x\x01y\r\nz"
    q = eng.execute("SELECT s FROM S WHERE s = '" + odd + "' OR s = 'é'")
    q2 = eng.load_plan(eng.plan_xml(q.id))
    assert q2.node == q.node
    # EXPLAIN's XML is well-formed too: a label shows such a character as \uXXXX, and loads back
    explained = ET.fromstring(eng.explain(q.id, "xml"))
    assert any("x\\u0001y" in op.get("label") for op in explained.iter("operator"))
    assert eng.load_plan(eng.explain(q.id, "xml")).node == q.node
    eng.push("S", [{"s": odd}, {"s": "x"}, {"s": "é"}], ts=[1, 2, 3])
    eng.heartbeat(5)
    eng.run()
    assert [e.row["s"] for e in q.drain()] == [e.row["s"] for e in q2.drain()] == [odd, "é"]
