"""``/entities``: the control tables of operators, queues and synopses (SPEC sections 7 and 8)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from dsms.errors import InputError
from dsms.formats import jsonable
from web.handlers.common import read_json_object, runtime


def _clean(v: Any) -> Any:
    """JSON-ready copy of a control table (numpy scalars, non-finite floats, odd values as text)."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [_clean(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return jsonable(v)
    try:
        return jsonable(v.item())  # numpy scalars
    except AttributeError:
        return str(v)


async def list_entities(request: web.Request) -> web.Response:
    """Every entity, or those of one query (``?query=id``)."""
    rt = runtime(request)
    return web.json_response({"entities": _clean(rt.entities(request.query.get("query") or None))})


async def get_entity(request: web.Request) -> web.Response:
    rt = runtime(request)
    eid = request.match_info["id"]
    out = _clean(rt.entity(eid))
    if request.query.get("history") in ("1", "true"):
        out["history"] = _clean(rt.entity_history(eid))
    return web.json_response(out)


async def patch_entity(request: web.Request) -> web.Response:
    """``{"attr": value, ...}``: written all or nothing; 400 says why a value is refused."""
    rt = runtime(request)
    doc = await read_json_object(request)
    if not doc:
        raise InputError("nothing to set: send {\"attribute\": value, ...}")
    return web.json_response(_clean(rt.set_entity(request.match_info["id"], doc)))
