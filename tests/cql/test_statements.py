"""SHOW, DESCRIBE, EXPLAIN and DROP through the Python API (``Engine.execute``), binding errors placed in a
multi-statement body, and a failed registration that leaves nothing (docs/cql.md, "Statements", "Errors")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsms import CQLError, Engine, SchemaError
from dsms.cql import ast
from dsms.cql.parser import parse

DOC = Path(__file__).resolve().parents[2] / "docs" / "cql.md"


@pytest.fixture
def eng() -> Engine:
    e = Engine()
    e.execute("REGISTER STREAM Bid (item INT, price FLOAT, bidder STRING); REGISTER RELATION Item (id INT, cat STRING)")
    e.execute("REGISTER QUERY busy AS SELECT item, COUNT(*) AS bids FROM Bid [RANGE 10 SECONDS] GROUP BY item")
    e.execute("REGISTER VIEW recent AS SELECT * FROM Bid [ROWS 3]")
    return e


def test_parse_shapes() -> None:
    assert parse("SHOW streams; DESC x; EXPLAIN q; EXPLAIN SELECT a FROM S") == [
        ast.Show("STREAMS"), ast.Describe("x"), ast.Explain(name="q"),
        ast.Explain(query=parse("SELECT a FROM S")[0].query)]
    with pytest.raises(CQLError, match="did you mean STREAMS") as e:
        parse("SHOW STREEMS")
    assert (e.value.line, e.value.column) == (1, 6)


def test_show(eng: Engine) -> None:
    anon = eng.execute("SELECT item FROM Bid WHERE price > 1")
    s = eng.execute("SHOW STREAMS")
    assert s["rows"] == [{"name": "Bid", "columns": "item INT, price FLOAT, bidder STRING", "time": "event", "source": "",
                          "used_by": f"busy, recent, {anon.id}"}]
    assert [r["name"] for r in eng.execute("SHOW RELATIONS")["rows"]] == ["Item"]
    assert [(r["name"], r["id"]) for r in eng.execute("SHOW VIEWS")["rows"]] == [("recent", "q2")]
    queries = eng.execute("SHOW QUERIES")
    assert [(r["id"], r["name"], r["kind"]) for r in queries["rows"]] == [("q1", "busy", "relation"),
                                                                         (anon.id, None, "stream")]
    assert queries["header"] == ["id", "name", "kind", "columns", "text"]


def test_describe(eng: Engine) -> None:
    d = eng.execute("DESCRIBE recent")
    assert (d["kind"], d["id"], d["result"], d["depends_on"]) == ("view", "q2", "relation", ["bid"])
    assert [c["name"] for c in d["columns"]] == ["item", "price", "bidder"]
    assert eng.execute("DESCRIBE q1")["describe"] == "busy"                      # by id
    assert eng.execute("desc bid")["used_by"] == "busy, recent"
    with pytest.raises(SchemaError, match="nothing named 'nope' to describe"):
        eng.execute("DESCRIBE nope")


def test_explain_registers_nothing_and_shows_names(eng: Engine) -> None:
    before = (len(eng.queries()), sorted(e.id for e in eng.registry))
    out = eng.execute("EXPLAIN SELECT B.item, I.cat FROM Bid [RANGE 5] B JOIN Item I ON B.item = I.id "
                      "WHERE I.cat = 'x'")
    assert (len(eng.queries()), sorted(e.id for e in eng.registry)) == before
    lines = out["explain"].splitlines()
    assert lines[0] == "stream result (item INT, cat STRING)"
    assert "      join: item = id" in lines and "        select: cat = 'x'" in lines
    assert eng.execute("SELECT * FROM Bid").id == "q3"           # EXPLAIN took no id
    running = eng.execute("EXPLAIN busy")
    assert running["explain"] == eng.explain("q1") and running["id"] == "q1"


def test_explain_example_in_cql_doc_is_current() -> None:
    e = Engine()
    e.execute("REGISTER STREAM Bid (item INT, price FLOAT, bidder STRING)")
    text = e.execute("EXPLAIN SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM Bid [RANGE 10 SECONDS] "
                     "GROUP BY item")["explain"]
    assert text in DOC.read_text(), "update the EXPLAIN example in docs/cql.md:\n" + text


@pytest.mark.parametrize("stmt, message", [
    ("DROP VIEW busy", "'busy' is a relation-valued query, not a view; use DROP QUERY"),
    ("DROP RELATION recent", "'recent' is a view, not a relation; use DROP VIEW"),
    ("DROP STREAM Item", "'Item' is a relation, not a stream"),
    ("DROP QUERY nothing", "nothing named 'nothing' to drop"),
])
def test_drop_checks_the_kind(eng: Engine, stmt: str, message: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(message)):
        eng.execute(stmt)
    assert len(eng.queries()) == 2


def test_drop_each_kind(eng: Engine) -> None:
    derived = eng.execute("CREATE STREAM cheap AS SELECT item FROM Bid WHERE price < 1")
    assert eng.execute("DROP STREAM cheap") == derived.id        # a stream-valued named query
    assert eng.execute("DROP QUERY busy") == "q1"
    assert eng.execute("DROP VIEW recent") == "q2"
    assert eng.execute("DROP RELATION Item") == "Item" and eng.execute("DROP STREAM Bid") == "Bid"
    assert eng.execute("SHOW STREAMS")["rows"] == [] and eng.queries() == []


def test_binding_errors_count_from_the_start_of_the_body(eng: Engine) -> None:
    body = "REGISTER STREAM T (a INT);\nREGISTER QUERY t1 AS\n  SELECT a FROM T WHERE a + 'x' > 1"
    with pytest.raises(SchemaError) as e:
        eng.execute(body)
    assert (e.value.line, e.value.column) == (3, body.splitlines()[2].index("a + 'x'") + 1)
    assert str(e.value).startswith(f"line 3, column {e.value.column}: operator + does not apply")
    assert eng.catalog.get("T") is not None and eng.catalog.get("t1") is None


def test_a_failed_registration_leaves_no_queue_or_id(eng: Engine) -> None:
    """A plan that fails while it is being built (here a filter whose condition is not BOOLEAN, loaded from a
    plan file, which the binder never checks) takes its queues and its query id back with it."""
    q = eng.execute("REGISTER QUERY ok AS SELECT item FROM Bid [RANGE 10] WHERE item > 1")
    bad = eng.plan_xml(q.id).replace('<ast.BinaryOp op="s:&gt;">', '<ast.BinaryOp op="s:+">')
    before = (sorted(e.id for e in eng.registry), len(eng.queues), len(eng.ops), len(eng.queries()))
    with pytest.raises(SchemaError, match="must be BOOLEAN"):
        eng.load_plan(bad, "again")
    assert (sorted(e.id for e in eng.registry), len(eng.queues), len(eng.ops), len(eng.queries())) == before
    assert eng.execute("SELECT * FROM Bid").id == "q4"
