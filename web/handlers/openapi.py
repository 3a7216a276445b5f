"""``GET /openapi.json``: the API described as OpenAPI 3.1 (built in ``web/openapi.py``)."""

from __future__ import annotations

from aiohttp import web

from web.openapi import document


async def get_openapi(request: web.Request) -> web.Response:
    return web.json_response(document())
