"""``/streams``: list, register, describe and drop streams; ``POST /streams/{name}/elements`` ingests
(SPEC sections 6 and 7)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web

from dsms.cql import ast
from dsms.cql.parser import parse
from dsms.errors import InputError
from dsms.formats import Decoded, decode_input
from web.handlers.common import describe_source, read_json_object, runtime, with_warnings

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP")


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def register_text(doc: dict[str, Any], kind: str) -> str:
    """CQL for a JSON registration: ``{"cql": "REGISTER ..."}`` or ``{"name", "columns", ["source"]}``.
    Names and types are checked here, so the text built from them can only say what the fields say."""
    if "cql" in doc:
        text = doc["cql"]
        if not isinstance(text, str) or set(doc) != {"cql"}:
            raise InputError("give either 'cql' alone, or 'name' and 'columns'")
        stmts = parse(text)
        want = ast.RegisterStream if kind == "stream" else ast.RegisterRelation
        if len(stmts) != 1 or not isinstance(stmts[0], want):
            raise InputError(f"'cql' must be one REGISTER {kind.upper()} statement")
        return text
    extra = set(doc) - ({"name", "columns", "source"} if kind == "stream" else {"name", "columns"})
    if extra:
        raise InputError(f"unknown field '{sorted(extra)[0]}'")
    name = doc.get("name")
    if not isinstance(name, str) or not _IDENT.match(name):
        raise InputError("'name' must be an identifier (ASCII letters, digits, underscore)")
    cols = doc.get("columns")
    if isinstance(cols, dict):
        cols = [{"name": k, "type": v} for k, v in cols.items()]
    if not isinstance(cols, list) or not cols:
        raise InputError("'columns' must be a non-empty list of {\"name\", \"type\"} (or an object name -> type)")
    parts = []
    for k, c in enumerate(cols):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("type"), str):
            raise InputError("each column needs 'name' and 'type'", index=k)
        if not _IDENT.match(c["name"]):
            raise InputError(f"column name {c['name']!r} is not an identifier", index=k)
        if c["type"].upper() not in TYPES:
            raise InputError(f"column type {c['type']!r} is not one of {', '.join(TYPES)}", index=k)
        parts.append(f"{c['name']} {c['type'].upper()}")
    text = f"REGISTER {kind.upper()} {name} ({', '.join(parts)})"
    src = doc.get("source")
    if src is not None:
        if not isinstance(src, dict) or not isinstance(src.get("mqtt"), str) or not src["mqtt"]:
            raise InputError("'source' must be {\"mqtt\": topic, \"format\": JSON|MSGPACK, \"timestamp\": field}")
        text += f" FROM MQTT {_quote(src['mqtt'])}"
        fmt = src.get("format")
        if fmt is not None:
            if not isinstance(fmt, str) or fmt.upper() not in ("JSON", "MSGPACK"):
                raise InputError("'source.format' must be JSON or MSGPACK")
            text += f" FORMAT {fmt.upper()}"
        tsf = src.get("timestamp")
        if tsf is not None:
            if not isinstance(tsf, str) or not _IDENT.match(tsf):
                raise InputError("'source.timestamp' must be a field name")
            text += f" TIMESTAMP {tsf}"
    return text


THREAD_DECODE_BYTES = 256 * 1024


async def decode_body(body: bytes, content_type: str | None, schema: list[tuple[str, str]], *,
                      allow_signs: bool = False) -> Decoded:
    """Decode a request body; a large one in a worker thread, so the event loop (and the engine's time
    slices) keep running while megabytes of JSON are parsed. Decoding touches no engine state."""
    if len(body) < THREAD_DECODE_BYTES:
        return decode_input(body, content_type, schema, allow_signs=allow_signs)
    return await asyncio.to_thread(decode_input, body, content_type, schema, allow_signs=allow_signs)


async def list_streams(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response({"streams": [describe_source(s, rt) for s in rt.engine.streams()]})


async def get_stream(request: web.Request) -> web.Response:
    rt = runtime(request)
    return web.json_response(describe_source(rt.source(request.match_info["name"], "stream"), rt))


async def create_stream(request: web.Request) -> web.Response:
    rt = runtime(request)
    text = register_text(await read_json_object(request), "stream")
    results = rt.execute(text)
    return web.json_response((await with_warnings(rt, results))[0], status=201)


async def delete_stream(request: web.Request) -> web.Response:
    rt = runtime(request)
    name = request.match_info["name"]
    rt.source(name, "stream")
    rt.drop(name, "STREAM")
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
