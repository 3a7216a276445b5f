"""SHOW, DESCRIBE, EXPLAIN and DROP over ``POST /cql``; a bare SELECT refused there with how to register it;
binding errors placed in a multi-statement body; a failing statement leaving nothing of itself (issue 17)."""

from __future__ import annotations

from httpkit import Server


def _cql(server: Server, text: str):
    return server.post("/cql", body=text, headers={"Content-Type": "text/plain"})


def test_show_describe_explain_drop(server: Server, uniq: str) -> None:
    s, r, v, q = uniq, f"{uniq}_r", f"{uniq}_v", f"{uniq}_q"
    server.cql(f"REGISTER STREAM {s} (item INT, price FLOAT); REGISTER RELATION {r} (id INT, cat STRING);"
               f"REGISTER VIEW {v} AS SELECT * FROM {s} [ROWS 2];"
               f"REGISTER QUERY {q} AS SELECT item, COUNT(*) AS n FROM {s} [RANGE 10] GROUP BY item")
    streams, relations, views, queries = server.cql("SHOW STREAMS; SHOW RELATIONS; SHOW VIEWS; SHOW QUERIES")
    mine = {row["name"]: row for row in streams["rows"]}[s]
    assert mine["columns"] == "item INT, price FLOAT" and set(mine["used_by"].split(", ")) == {v, q}
    assert streams["header"] == ["name", "columns", "time", "source", "used_by"]
    assert {row["name"] for row in relations["rows"]} >= {r} and s not in {x["name"] for x in relations["rows"]}
    assert v in {row["name"] for row in views["rows"]} and v not in {row["name"] for row in queries["rows"]}
    assert {row["name"]: row["kind"] for row in queries["rows"]}[q] == "relation"

    [d] = server.cql(f"DESCRIBE {q}")
    qid = d["id"]
    assert d["kind"] == "query" and d["result"] == "relation" and d["depends_on"] == [s.lower()]
    assert d["columns"] == [{"name": "item", "type": "INT"}, {"name": "n", "type": "INT"}]
    [d] = server.cql(f"describe {r}")
    assert d["kind"] == "relation" and [c["name"] for c in d["columns"]] == ["id", "cat"]

    before = server.get("/queries").json()["queries"]
    [e] = server.cql(f"EXPLAIN SELECT B.item, C.cat FROM {s} [RANGE 5] B JOIN {r} C ON B.item = C.id")
    assert server.get("/queries").json()["queries"] == before            # nothing registered
    assert "join: item = id" in e["explain"] and e["kind"] == "stream"
    assert [c["name"] for c in e["schema"]] == ["item", "cat"]
    [e] = server.cql(f"EXPLAIN {q}")
    assert "aggregate" in e["explain"] and e["id"] == qid and e["explain"].startswith(f"query {qid} (relation)")

    r404 = _cql(server, f"DESCRIBE {uniq}_nothing")
    assert r404.status == 400 and "nothing named" in r404.json()["detail"]
    wrong = _cql(server, f"DROP VIEW {q}")
    assert wrong.status == 400 and "use DROP QUERY" in wrong.json()["detail"]
    assert server.cql(f"DROP QUERY {q}; DROP VIEW {v}; DROP RELATION {r}; DROP STREAM {s}") == [
        {"dropped": q}, {"dropped": v}, {"dropped": r}, {"dropped": s}]
    assert server.get(f"/streams/{s}").status == 404


def test_bare_select_on_cql_is_refused_with_how_to_register(server: Server, uniq: str) -> None:
    before = server.get("/queries").json()["queries"]
    r = _cql(server, f"REGISTER STREAM {uniq} (a INT);\n  SELECT a FROM {uniq}")
    assert r.status == 400
    e = r.json()
    assert "REGISTER QUERY name AS" in e["detail"] and "/queries" in e["detail"]
    assert (e["line"], e["column"], e["statement"], e["done"]) == (2, 3, 1, [])
    assert server.get(f"/streams/{uniq}").status == 404                 # refused before anything ran
    assert server.get("/queries").json()["queries"] == before
    created = server.post("/queries", json_body={"cql": f"SELECT 1 AS one FROM {uniq}_x"})
    assert created.status == 400                                        # (unknown stream) POST /queries binds it


def test_binding_errors_count_lines_and_columns_from_the_body(server: Server, uniq: str) -> None:
    body = (f"REGISTER STREAM {uniq} (a INT, b STRING);\n"
            f"REGISTER QUERY {uniq}_ok AS SELECT a FROM {uniq};\n"
            f"REGISTER QUERY {uniq}_bad AS\n"
            f"  SELECT a FROM {uniq} WHERE b + 1 > 2")
    r = _cql(server, body)
    assert r.status == 400
    e = r.json()
    assert e["error"] == "schema error" and e["statement"] == 2
    col = body.splitlines()[3].index("b + 1") + 1
    assert (e["line"], e["column"]) == (4, col) and e["detail"].startswith(f"line 4, column {col}: ")
    assert [d["name"] for d in e["done"]] == [uniq, f"{uniq}_ok"]
    # the failing statement left nothing: no query, no entity of its own, and the name is free
    names = {q["name"] for q in server.get("/queries").json()["queries"]}
    assert f"{uniq}_ok" in names and f"{uniq}_bad" not in names
    r = _cql(server, f"REGISTER QUERY {uniq}_bad AS SELECT b FROM {uniq}")
    assert r.status == 200
    # an error in the first line of a later statement is shifted by the statement's column too
    text = f"REGISTER STREAM {uniq}_2 (a INT); REGISTER QUERY {uniq}_3 AS SELECT nope FROM {uniq}_2"
    r = _cql(server, text)
    assert r.status == 400 and (r.json()["line"], r.json()["column"]) == (1, text.index("nope") + 1)


def test_a_failed_statement_leaves_no_entities(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT, t TIMESTAMP)")
    entities = server.get("/entities").json()
    r = _cql(server, f"REGISTER QUERY {uniq}_q AS SELECT a FROM {uniq} [RANGE 5] WHERE t > 'not a date'")
    assert r.status == 400 and "ISO 8601" in r.json()["detail"]
    assert server.get("/entities").json() == entities
    assert server.get(f"/queries/{uniq}_q").status == 404
