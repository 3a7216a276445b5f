"""``/entities``: the control tables of operators, queues and synopses (SPEC sections 7 and 8)."""

from __future__ import annotations

from aiohttp import web

from dsms.errors import InputError
from web.handlers.common import clean, read_json_object, runtime


async def list_entities(request: web.Request) -> web.Response:
    """Every entity, or those of one query (``?query=id``)."""
    rt = runtime(request)
    return web.json_response({"entities": clean(rt.entities(request.query.get("query") or None))})


async def get_entity(request: web.Request) -> web.Response:
    rt = runtime(request)
    eid = request.match_info["id"]
    out = clean(rt.entity(eid))
    if request.query.get("history") in ("1", "true"):
        out["history"] = clean(rt.entity_history(eid))
    return web.json_response(out)


async def patch_entity(request: web.Request) -> web.Response:
    """``{"attr": value, ...}``: written all or nothing; 400 says why a value is refused."""
    rt = runtime(request)
    doc = await read_json_object(request)
    if not doc:
        raise InputError("nothing to set: send {\"attribute\": value, ...}")
    return web.json_response(clean(await rt.set_entity_async(request.match_info["id"], doc)))
