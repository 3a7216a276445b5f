"""Helpers shared by the handlers (SPEC section 7): reading bodies and parameters, and the JSON shape of
catalog objects."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from dsms.catalog import RelationDef, StreamDef
from dsms.engine import Query
from dsms.errors import InputError
from dsms.runtime import Runtime
from web.app import RUNTIME


def runtime(request: web.Request) -> Runtime:
    return request.app[RUNTIME]


def columns(cols: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": c, "type": t} for c, t in cols]


def describe_source(obj: StreamDef | RelationDef, rt: Runtime | None = None) -> dict[str, Any]:
    """A stream or relation as the API shows it."""
    out: dict[str, Any] = {"name": obj.name, "kind": obj.kind, "columns": columns(obj.columns)}
    src = getattr(obj, "source", None)
    if obj.kind == "stream":
        out["time"] = getattr(obj, "time", "event")
        out["source"] = None if src is None else {"mqtt": src.topic, "format": src.format,
                                                  "timestamp": src.timestamp_field}
    if rt is not None:
        out["stats"] = rt.source_stats(obj.name)
        out["used_by"] = rt.engine.catalog.dependents(obj.name)
        if src is not None and obj.kind == "stream":
            out["connection"] = rt.mqtt_connection(obj.name)
    return out


async def with_warnings(rt: Runtime, results: list[Any]) -> list[dict[str, Any]]:
    """What each statement did, with a ``warning`` on a stream read from MQTT whose broker could not be
    reached (the registration stands; the source keeps retrying)."""
    out = []
    for r in results:
        d = describe_result(r)
        if isinstance(r, StreamDef) and r.source is not None:
            warning = await rt.mqtt_warning(r.name)
            if warning is not None:
                d["warning"] = warning
        out.append(d)
    return out


def describe_query(q: Query, rt: Runtime | None = None) -> dict[str, Any]:
    """A query as ``POST /queries`` returns it: id, name, kind (stream|relation), schema; with stats."""
    out: dict[str, Any] = {"id": q.id, "name": q.name, "kind": q.kind, "schema": columns(q.schema)}
    if rt is not None:
        d = q.definition
        out.update({"text": q.text, "view": bool(getattr(d, "is_view", False)),
                    "publish_topic": getattr(d, "publish_topic", None),
                    "depends_on": sorted(getattr(d, "depends_on", ()) or ()),
                    "stats": rt.query_stats(q.id)})
    return out


def describe_result(r: Any) -> dict[str, Any]:
    """What one CQL statement created or dropped."""
    if isinstance(r, Query):
        return {"created": "view" if getattr(r.definition, "is_view", False) else "query",
                **describe_query(r)}
    if isinstance(r, StreamDef | RelationDef):
        return {"created": r.kind, **describe_source(r)}
    if isinstance(r, dict):
        return r
    return {"result": str(r)}


async def read_json(request: web.Request, what: str = "body") -> Any:
    """The body as JSON, or a 400 that says why it is not."""
    body = await request.read()
    if not body.strip():
        raise InputError(f"the {what} is empty; expected a JSON object")
    try:
        return json.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(f"the {what} is not UTF-8") from None
    except (ValueError, RecursionError) as e:
        raise InputError(f"the {what} is not valid JSON: {str(e)[:200]}") from None


async def read_json_object(request: web.Request, what: str = "body") -> dict[str, Any]:
    doc = await read_json(request, what)
    if not isinstance(doc, dict):
        raise InputError(f"the {what} must be a JSON object, not {type(doc).__name__}")
    return doc


def int_param(request: web.Request, name: str, default: int | None = None, lo: int | None = None,
              hi: int | None = None) -> int | None:
    """An integer query parameter (timestamps may also be ISO 8601)."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        if name in ("from", "to"):
            from dsms.formats import parse_ts
            return parse_ts(raw)
        raise InputError(f"query parameter '{name}' must be an integer, not {raw!r}") from None
    if lo is not None and v < lo or hi is not None and v > hi:
        raise InputError(f"query parameter '{name}' must be between {lo} and {hi}, not {v}")
    return v


def bool_param(request: web.Request, name: str, default: bool) -> bool:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    low = raw.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise InputError(f"query parameter '{name}' must be true or false, not {raw!r}")
