"""What the handlers share (SPEC section 7): the runtime of a request, reading bodies (JSON, decoded input,
registration documents) and parameters. The JSON shapes of catalog objects are in ``web/describe.py``
(re-exported here)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from aiohttp import web

from dsms.catalog import StreamDef
from dsms.errors import InputError
from dsms.formats import Decoded, decode_input, parse_ts
from dsms.runtime import Runtime
from dsms.types import TYPES
from web.describe import clean, columns, describe_query, describe_result, describe_source
from web.keys import RUNTIME

__all__ = ["runtime", "read_json", "read_json_object", "int_param", "bool_param", "decode_body", "register_text",
           "clean", "columns", "describe_query", "describe_result", "describe_source", "with_warnings"]


def runtime(request: web.Request) -> Runtime:
    return request.app[RUNTIME]


async def with_warnings(rt: Runtime, results: list[Any]) -> list[dict[str, Any]]:
    """What each statement did, with a ``warning`` on a stream read from MQTT whose broker could not be
    reached (the registration stands; the source keeps retrying)."""
    out = []
    for r in results:
        d = describe_result(r)
        if isinstance(r, StreamDef) and r.source is not None:
            warning = await rt.mqtt_warning(r.name)
            if warning is not None:
                d["warning"] = warning
        out.append(d)
    return out


async def read_json(request: web.Request, what: str = "body") -> Any:
    """The body as JSON, or a 400 that says why it is not."""
    body = await request.read()
    if not body.strip():
        raise InputError(f"the {what} is empty; expected a JSON object")
    try:
        return json.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(f"the {what} is not UTF-8") from None
    except (ValueError, RecursionError) as e:
        raise InputError(f"the {what} is not valid JSON: {str(e)[:200]}") from None


async def read_json_object(request: web.Request, what: str = "body") -> dict[str, Any]:
    doc = await read_json(request, what)
    if not isinstance(doc, dict):
        raise InputError(f"the {what} must be a JSON object, not {type(doc).__name__}")
    return doc


def int_param(request: web.Request, name: str, default: int | None = None, lo: int | None = None,
              hi: int | None = None) -> int | None:
    """An integer query parameter (timestamps may also be ISO 8601)."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        if name in ("from", "to"):
            return parse_ts(raw)
        raise InputError(f"query parameter '{name}' must be an integer, not {raw!r}") from None
    if lo is not None and v < lo or hi is not None and v > hi:
        raise InputError(f"query parameter '{name}' must be between {lo} and {hi}, not {v}")
    return v


def bool_param(request: web.Request, name: str, default: bool) -> bool:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    low = raw.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise InputError(f"query parameter '{name}' must be true or false, not {raw!r}")


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def register_text(doc: dict[str, Any], kind: str) -> str:
    """CQL for a JSON registration (run it with ``Runtime.execute(text, expect=(kind,))``): ``{"cql": "REGISTER ..."}`` or ``{"name", "columns", ["source"]}``.
    Names and types are checked here, so the text built from them can only say what the fields say."""
    if "cql" in doc:
        text = doc["cql"]
        if not isinstance(text, str) or set(doc) != {"cql"}:
            raise InputError("give either 'cql' alone, or 'name' and 'columns'")
        return text         # Runtime.execute(text, expect=(kind,)) checks it is one REGISTER of that kind
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
