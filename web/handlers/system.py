"""``/system``: the system control table (scheduler policy, global statistics) and the runtime's statistics
(SPEC sections 7 and 8)."""

from __future__ import annotations

from aiohttp import web

from dsms.errors import InputError
from web.handlers.common import clean, read_json_object, runtime


async def get_system(request: web.Request) -> web.Response:
    rt = runtime(request)
    out = clean(rt.system())
    out["config"] = rt.config.public()     # the broker password masked (dsms.config.redact_url, issue 18)
    return web.json_response(out)


async def patch_system(request: web.Request) -> web.Response:
    rt = runtime(request)
    doc = await read_json_object(request)
    if not doc:
        raise InputError("nothing to set: send {\"attribute\": value, ...}")
    if "runtime" in doc or "config" in doc:
        raise InputError("'runtime' and 'config' are read-only")
    return web.json_response(clean(rt.set_system(doc)))
