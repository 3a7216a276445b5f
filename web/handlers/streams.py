"""``/streams``: list, register, describe and drop streams; ``POST /streams/{name}/elements`` ingests
(SPEC sections 6 and 7)."""

from __future__ import annotations

from aiohttp import web

from web.handlers.common import (
    decode_body,
    describe_source,
    read_json_object,
    register_text,
    runtime,
    with_warnings,
)


async def list_streams(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response({"streams": [describe_source(s, rt) for s in rt.streams()]})


async def get_stream(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response(describe_source(rt.source(request.match_info["name"], "stream"), rt))


async def create_stream(request: web.Request) -> web.Response:
    rt = runtime(request)
    text = register_text(await read_json_object(request), "stream")
    results = await rt.execute_async(text, expect=("stream",))
    return web.json_response((await with_warnings(rt, results))[0], status=201)


async def delete_stream(request: web.Request) -> web.Response:
    rt = runtime(request)
    name = request.match_info["name"]
    rt.source(name, "stream")
    await rt.drop_async(name, "STREAM")
    return web.Response(status=204)


async def post_elements(request: web.Request) -> web.Response:
    """Input in JSON, NDJSON, msgpack or XML by Content-Type; all or nothing; acknowledged once archived."""
    rt = runtime(request)
    obj = rt.source(request.match_info["name"], "stream")
    body = await request.read()
    decoded = await decode_body(body, request.headers.get("Content-Type"), obj.columns)
    n = await rt.ingest_decoded(obj.name, decoded, nbytes=len(body))
    return web.json_response({"accepted": n, "heartbeat": decoded.heartbeat,
                              "punctuations_ignored": decoded.punctuations})
