"""The JSON shapes of what the API shows: streams, relations, queries, statement results, and control tables
made JSON-ready (SPEC section 7). Used by the handlers and by the error middleware (a failed multi-statement
request lists what the statements before it created)."""

from __future__ import annotations

from typing import Any

from dsms.catalog import RelationDef, StreamDef
from dsms.engine import Query
from dsms.formats import jsonable
from dsms.runtime import Runtime


def columns(cols: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": c, "type": t} for c, t in cols]


def describe_source(obj: StreamDef | RelationDef, rt: Runtime | None = None) -> dict[str, Any]:
    """A stream or relation as the API shows it; with the runtime, its statistics and readers too."""
    out: dict[str, Any] = {"name": obj.name, "kind": obj.kind, "columns": columns(obj.columns)}
    src = getattr(obj, "source", None)
    if obj.kind == "stream":
        out["time"] = getattr(obj, "time", "event")
        out["source"] = None if src is None else {"mqtt": src.topic, "format": src.format,
                                                  "timestamp": src.timestamp_field}
    if rt is not None:
        out["stats"] = rt.source_stats(obj.name)
        out["used_by"] = rt.used_by(obj.name)
        if src is not None and obj.kind == "stream":
            out["connection"] = rt.mqtt_connection(obj.name)
    return out


def describe_query(q: Query, rt: Runtime | None = None) -> dict[str, Any]:
    """A query as ``POST /queries`` returns it: id, name, kind (stream|relation), schema; with stats."""
    out: dict[str, Any] = {"id": q.id, "name": q.name, "kind": q.kind, "schema": columns(q.schema)}
    if rt is not None:
        d = q.definition
        out.update({"text": q.text, "view": bool(d.is_view), "publish_topic": d.publish_topic,
                    "depends_on": sorted(d.depends_on or ()), "stats": rt.query_stats(q.id)})
    return out


def describe_result(r: Any) -> dict[str, Any]:
    """What one CQL statement created or dropped."""
    if isinstance(r, Query):
        return {"created": "view" if r.definition.is_view else "query", **describe_query(r)}
    if isinstance(r, StreamDef | RelationDef):
        return {"created": r.kind, **describe_source(r)}
    if isinstance(r, dict):
        return r
    return {"result": str(r)}


def clean(v: Any) -> Any:
    """JSON-ready copy of a control table (numpy scalars, non-finite floats, odd values as text)."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [clean(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return jsonable(v)
    try:
        return jsonable(v.item())  # numpy scalars
    except AttributeError:
        return str(v)
