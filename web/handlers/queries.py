"""``/queries``: register, list, describe, tune and drop continuous queries; their results (streamed) and
their plans (SPEC section 7)."""

from __future__ import annotations

from aiohttp import web

from dsms.errors import InputError
from web.handlers.common import bool_param, describe_query, int_param, read_json_object, runtime
from web.streaming import stream_results

MAX_BUFFER = 1_000_000
"""The largest ``?buffer=`` (elements); the reader's buffer is bounded in bytes too
(``results.reader_buffer_bytes``), and all readers by ``results.reader_memory``."""


async def list_queries(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response({"queries": [describe_query(q, rt) for q in rt.queries()]})


async def create_query(request: web.Request) -> web.Response:
    """``{"cql": "SELECT ..."}`` or ``REGISTER QUERY|VIEW ...``: 201 with id, name, kind and schema."""
    rt = runtime(request)
    doc = await read_json_object(request)
    text = doc.get("cql")
    if not isinstance(text, str):
        raise InputError("the body needs 'cql': one query (SELECT ..., REGISTER QUERY or REGISTER VIEW)")
    extra = set(doc) - {"cql", "retention"}
    if extra:
        raise InputError(f"unknown field '{sorted(extra)[0]}' (fields: cql, retention)")
    q = (await rt.execute_async(text, expect=("query", "view")))[0]      # other statements: POST /cql
    if "retention" in doc:
        rt.set_query_retention(q.id, doc["retention"])
    return web.json_response(describe_query(q), status=201,
                             headers={"Location": f"/queries/{q.id}"})


async def get_query(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response(describe_query(rt.query(request.match_info["id"]), rt))


async def patch_query(request: web.Request) -> web.Response:
    """Runtime knobs of a query: ``{"retention": N}`` (result elements kept for ``?from=``), ``{"weight": w}``
    (the load shedder's weight of its error, docs/approximation.md)."""
    rt = runtime(request)
    q = rt.query(request.match_info["id"])
    doc = await read_json_object(request)
    extra = set(doc) - {"retention", "weight"}
    if extra or not doc:
        raise InputError("writable query attributes: retention, weight")
    if "weight" in doc:
        rt.set_query_weight(q.id, doc["weight"])
    if "retention" in doc:
        rt.set_query_retention(q.id, doc["retention"])
    return web.json_response(describe_query(q, rt))


async def delete_query(request: web.Request) -> web.Response:
    rt = runtime(request)
    q = rt.query(request.match_info["id"])
    await rt.drop_async(q.id)
    return web.Response(status=204)


async def get_results(request: web.Request) -> web.StreamResponse:
    """Streamed results: ``?format=ndjson|sse|xml`` or Accept; ``?from=ts`` replays retained results first;
    ``?after=id`` (or Last-Event-ID) resumes after an element; a relation's reader starts with its contents
    (``?snapshot=false``: not); ``?follow=false`` ends after what is already there; ``?buffer=N`` sizes this
    reader's buffer."""
    rt = runtime(request)
    q = rt.query(request.match_info["id"])
    from_ts = int_param(request, "from")
    follow = bool_param(request, "follow", True)
    buffer = int_param(request, "buffer", None, 1, MAX_BUFFER)
    after = _after(request)
    snapshot = bool_param(request, "snapshot", follow and from_ts is None and after is None)
    ts_form = request.query.get("ts", "ms")
    if ts_form not in ("ms", "iso"):
        raise InputError(f"query parameter 'ts' must be ms or iso, not {ts_form[:20]!r}")
    if not follow and from_ts is None and after is None and not snapshot:
        from_ts = -(2**63)
    return await stream_results(request, rt, q.id, q.name or q.id, from_ts=from_ts, follow=follow, buffer=buffer,
                                after=after, snapshot=snapshot, iso=ts_form == "iso")


def _after(request: web.Request) -> int | None:
    """The id of the last element the reader has: ``?after=`` or SSE's ``Last-Event-ID`` header (sent by a
    browser's EventSource when it reconnects)."""
    raw = request.query.get("after") or request.headers.get("Last-Event-ID")
    if raw is None or not raw.strip():
        return None
    try:
        n = int(raw)
    except ValueError:
        raise InputError(f"'after' (or Last-Event-ID) must be a result element id, not {raw[:40]!r}") from None
    if n < 0:
        raise InputError(f"'after' (or Last-Event-ID) must be 0 or more, not {n}")
    return n


async def get_plan(request: web.Request) -> web.Response:
    """The plan as JSON (default), XML (STREAM's plan files) or text, by ``?format=`` or Accept."""
    rt = runtime(request)
    q = rt.query(request.match_info["id"])
    fmt = request.query.get("format")
    if not fmt:
        accept = request.headers.get("Accept", "")
        fmt = "xml" if "xml" in accept else ("text" if "text/plain" in accept else "json")
    fmt = fmt.lower()
    if fmt not in ("json", "xml", "text"):
        raise InputError(f"plan format {fmt!r} is not one of json, xml, text")
    plan = rt.explain(q.id, fmt)
    if fmt == "json":
        return web.json_response(plan)
    return web.Response(text=plan, content_type="application/xml" if fmt == "xml" else "text/plain")
