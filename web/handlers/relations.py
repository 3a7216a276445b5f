"""``/relations``: list, register, describe and drop relations; ``POST /relations/{name}/updates`` applies
timestamped inserts and deletes (SPEC section 7)."""

from __future__ import annotations

from aiohttp import web

from web.handlers.common import (
    decode_body,
    describe_result,
    describe_source,
    read_json_object,
    register_text,
    runtime,
)


async def list_relations(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response({"relations": [describe_source(r, rt) for r in rt.relations()]})


async def get_relation(request: web.Request) -> web.Response:
    rt = runtime(request)
    obj = rt.source(request.match_info["name"], "relation")
    out = describe_source(obj, rt)
    out["size"] = out["stats"]["size"]
    return web.json_response(out)


async def create_relation(request: web.Request) -> web.Response:
    rt = runtime(request)
    text = register_text(await read_json_object(request), "relation")
    results = await rt.execute_async(text, expect=("relation",))
    return web.json_response(describe_result(results[0]), status=201)


async def delete_relation(request: web.Request) -> web.Response:
    rt = runtime(request)
    name = request.match_info["name"]
    rt.source(name, "relation")
    await rt.drop_async(name, "RELATION")
    return web.Response(status=204)


async def post_updates(request: web.Request) -> web.Response:
    """Elements with ``sign`` +1/-1, or ``{"ts", "insert": [...], "delete": [...]}`` items; all or nothing."""
    rt = runtime(request)
    obj = rt.source(request.match_info["name"], "relation")
    body = await request.read()
    decoded = await decode_body(body, request.headers.get("Content-Type"), obj.columns, allow_signs=True)
    n = await rt.update(obj.name, decoded, nbytes=len(body))
    inserted = n if decoded.sign is None else sum(1 for s in decoded.sign if s > 0)
    return web.json_response({"accepted": n, "inserted": inserted, "deleted": n - inserted,
                              "heartbeat": decoded.heartbeat})
