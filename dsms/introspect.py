"""SHOW, DESCRIBE and EXPLAIN: the statements that read the engine's catalog and change nothing.

What a user of psql or ksqlDB reaches for first (SHOW STREAMS, DESCRIBE Bid, EXPLAIN SELECT ...). Each returns
a plain dict, the same through the Python API (``Engine.execute``), ``POST /cql`` and the shell, so that a client
can render it without knowing the engine: a SHOW is ``{"show": what, "header": [...], "rows": [{...}]}``.
"""

from __future__ import annotations

from typing import Any

from dsms.catalog import QueryDef, RelationDef, StreamDef
from dsms.cql import ast
from dsms.errors import SchemaError
from dsms.plan import logical as L
from dsms.plan.binder import Binder
from dsms.plan.istream_pass import NOTE as ISTREAM_NOTE
from dsms.plan.istream_pass import passes_through
from dsms.plan.join_extreme import join_extreme
from dsms.plan.labels import explain_logical
from dsms.plan.lex_extreme import lex_aggregate, lex_extreme
from dsms.plan.rules import optimize
from dsms.plan.rules.share_join_prefix import share_join_prefix
from dsms.plan.support import support_side
from dsms.plan.window_extreme import window_extreme

SHOW_HEADERS: dict[str, list[str]] = {
    "STREAMS": ["name", "columns", "time", "source", "used_by"],
    "RELATIONS": ["name", "columns", "used_by"],
    "VIEWS": ["name", "id", "columns", "used_by", "text"],
    "QUERIES": ["id", "name", "kind", "columns", "text"],
}


def column_list(cols: list[tuple[str, str]]) -> str:
    """``item INT, price FLOAT``: columns as they are declared."""
    return ", ".join(f"{n} {t}" for n, t in cols)


def _source_text(src: ast.MqttSource | None) -> str:
    if src is None:
        return ""
    ts = f" TIMESTAMP {src.timestamp_field}" if src.timestamp_field else ""
    return f"MQTT '{src.topic}' FORMAT {src.format}{ts}"


def _users(engine, name: str) -> str:
    key = name.lower()
    return ", ".join(q.name or q.id for q in engine.query_list.values() if key in q.definition.depends_on)


def show(engine, what: str) -> dict[str, Any]:
    """``SHOW STREAMS | RELATIONS | VIEWS | QUERIES``: one row per object, in registration order."""
    rows: list[dict[str, Any]] = []
    if what == "STREAMS":
        rows = [{"name": s.name, "columns": column_list(s.columns), "time": s.time, "source": _source_text(s.source),
                 "used_by": _users(engine, s.name)} for s in engine.streams()]
    elif what == "RELATIONS":
        rows = [{"name": r.name, "columns": column_list(r.columns), "used_by": _users(engine, r.name)}
                for r in engine.relations()]
    elif what == "VIEWS":
        rows = [{"name": q.name, "id": q.id, "columns": column_list(q.schema), "used_by": _users(engine, q.name),
                 "text": q.text} for q in engine.queries() if q.definition.is_view]
    elif what == "QUERIES":
        rows = [{"id": q.id, "name": q.name, "kind": q.kind, "columns": column_list(q.schema), "text": q.text}
                for q in engine.queries() if not q.definition.is_view]
    else:
        raise SchemaError(f"SHOW {what}: expected STREAMS, RELATIONS, VIEWS or QUERIES")
    return {"show": what.lower(), "header": SHOW_HEADERS[what], "rows": rows}


def describe(engine, name: str) -> dict[str, Any]:
    """``DESCRIBE name``: what ``name`` is (stream, relation, view or query, by name or id) and its columns."""
    obj = engine.catalog.get(name)
    query = None
    if obj is None:
        try:
            query = engine.query(name)
        except SchemaError:
            raise SchemaError(f"nothing named '{name}' to describe; SHOW STREAMS, RELATIONS, VIEWS or QUERIES "
                              "lists what there is") from None
    elif isinstance(obj, QueryDef):
        query = engine.query(obj.id)
    if query is not None:
        d = query.definition
        return {"describe": query.name or query.id, "kind": "view" if d.is_view else "query", "id": query.id,
                "result": query.kind, "columns": [{"name": n, "type": t} for n, t in query.schema],
                "text": query.text, "depends_on": sorted(d.depends_on), "used_by": _users(engine, d.name)
                if d.name else ""}
    assert isinstance(obj, StreamDef | RelationDef)
    out: dict[str, Any] = {"describe": obj.name, "kind": obj.kind,
                           "columns": [{"name": n, "type": t} for n, t in obj.columns],
                           "used_by": _users(engine, obj.name)}
    if isinstance(obj, StreamDef):
        out["time"] = obj.time
        out["source"] = _source_text(obj.source) or None
    return out


def explain(engine, stmt: ast.Explain) -> dict[str, Any]:
    """``EXPLAIN name``: the plan of a registered query or view (its operators, queues and what it shares);
    ``EXPLAIN query``: the plan the query would get, bound and rewritten but not registered."""
    if stmt.name is not None:
        q = engine.query(stmt.name)
        return {"explain": engine.explain(q.id, "text"), "id": q.id, "kind": q.kind,
                "schema": [{"name": n, "type": t} for n, t in q.schema]}
    bound = Binder(engine.catalog, {}).bind_statement_query(stmt.query)
    node = optimize(share_join_prefix(bound.node, engine.planner.shareable_joins()))
    root = node if bound.kind == L.STREAM else L.Changelog(node, names=bound.names)
    columns = list(zip(bound.names, bound.types))
    note = lambda n: _planned_as(n, engine.planner._view_root)      # noqa: E731
    return {"explain": explain_logical(root, bound.kind, columns, note), "kind": bound.kind,
            "schema": [{"name": n, "type": t} for n, t in columns]}


def _planned_as(node, view_root) -> str:
    """What EXPLAIN adds to a node the physical planner builds as another operator than its own: a tumbling
    window joined with its own MAX or MIN is one ``window_extreme_join`` (dsms/plan/window_extreme.py); a grouped
    MAX or MIN over a join whose inputs never delete is folded into it (dsms/plan/join_extreme.py); an arg max
    joined with a MIN or MAX of it, or that aggregate, is a lexicographic extreme read from the relation below
    (dsms/plan/lex_extreme.py); an ISTREAM of an insert-only relation is no operator at all
    (dsms/plan/istream_pass.py)."""
    if isinstance(node, L.Join) and window_extreme(node) is not None:
        return " [built as one window_extreme_join: rows at the window's extreme only]"
    if isinstance(node, L.Join) and (lex := lex_extreme(node, view_root)) is not None:
        return f" [built as one lexicographic extreme of {len(lex.values)} values, from the relation below]"
    if isinstance(node, L.Aggregate) and lex_aggregate(node, view_root) is not None:
        return " [built as one lexicographic extreme, from the relation below]"
    if isinstance(node, L.Aggregate) and join_extreme(node) is not None:
        # (dsms/plan/join_extreme.py; unless a build of that join is shared, which EXPLAIN cannot see here)
        return " [folded into the join below: one join_extreme]"
    if passes_through(node):
        return f" [{ISTREAM_NOTE}]"
    if isinstance(node, L.Distinct) and (side := support_side(node)) is not None:
        return f" [the join below keeps one pair per {('left', 'right')[side]} row]"
    return ""
