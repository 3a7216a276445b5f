"""EXPLAIN names the columns an operator reads (issue 17: ``GROUP BY item: COUNT(*), MAX(price)``), and the
plan's positions stay available in the XML and JSON plans."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dsms import Engine


def _engine() -> Engine:
    eng = Engine()
    eng.execute("REGISTER STREAM Bid (item INT, price FLOAT, bidder STRING); REGISTER STREAM T (item INT, d FLOAT)")
    return eng


def test_aggregate_having_and_projection_by_name() -> None:
    eng = _engine()
    q = eng.execute("SELECT item, COUNT(*) AS n FROM Bid [RANGE 10] GROUP BY item HAVING MAX(price) > 3")
    text = eng.explain(q.id)
    assert "aggregate: GROUP BY item: COUNT(*), MAX(price)" in text
    assert "select: MAX(price) > 3 [keeps item, COUNT(*)]" in text and "project: item, COUNT(*)" not in text
    assert "project: item, price [pushed]" in text and "$" not in text
    plan = ET.fromstring(eng.explain(q.id, "xml"))
    agg = next(op for op in plan.iter("operator") if op.get("kind") == "aggregate")
    assert agg.get("label").startswith("GROUP BY item: COUNT(*), MAX(price)")
    assert agg.get("positions").startswith("GROUP BY $0: COUNT(*), MAX($1)")
    ops = {op["kind"]: op for op in eng.explain(q.id, "json")["operators"]}
    assert ops["select"]["positions"] == "$2 > 3 [keeps $0, $1]"
    assert ops["select"]["label"] == "MAX(price) > 3 [keeps item, COUNT(*)]"
    assert ops["range_window"]["positions"] is None                   # nothing to name: no positions kept


def test_a_name_on_both_sides_of_a_join_is_numbered() -> None:
    eng = _engine()
    q = eng.execute("SELECT B.price, T.d FROM Bid [RANGE 5] B, T [RANGE 5] WHERE B.item = T.item AND B.price > T.d")
    text = eng.explain(q.id)
    assert "join: item#0 = item#2" in text and "select: price > d" in text
    assert "L$0 = R$0" in eng.explain(q.id, "xml")
