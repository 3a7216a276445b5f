"""``GET /entities/{id}/attributes``: one control table with what an editor needs for each attribute (stat
or knob, type, unit, range, choices, default, description, value) and its change history (SPEC section 8)."""

from __future__ import annotations

from aiohttp import web

from web.handlers.common import runtime
from web.telemetry import clean


async def get_attributes(request: web.Request) -> web.Response:
    rt = runtime(request)
    eid = request.match_info["id"]
    values = rt.entity(eid)                       # NotFound (404) for an unknown id
    attrs = rt.entity_attributes(eid)
    return web.json_response(clean({"id": eid, "kind": values.get("kind"), "attributes": attrs,
                                    "history": rt.entity_history(eid)}))
