"""``/system``: the system control table (scheduler policy, global statistics) and global statistics
(SPEC sections 7 and 8)."""

from __future__ import annotations

from aiohttp import web

from dsms.errors import InputError
from web.handlers.common import read_json_object, runtime
from web.handlers.entities import _clean


async def get_system(request: web.Request) -> web.Response:
    rt = runtime(request)
    out = _clean(rt.system())
    out["config"] = rt.config.public()
    return web.json_response(out)


async def patch_system(request: web.Request) -> web.Response:
    rt = runtime(request)
    doc = await read_json_object(request)
    if not doc:
        raise InputError("nothing to set: send {\"attribute\": value, ...}")
    if "runtime" in doc or "config" in doc:
        raise InputError("'runtime' and 'config' are read-only")
    return web.json_response(_clean(rt.set_system(doc)))
