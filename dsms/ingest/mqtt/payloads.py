"""MQTT payloads: decoding a message into elements (FORMAT JSON or MSGPACK, through the HTTP API's own
decoders in ``dsms.formats``), the TIMESTAMP field (``dsms.types.to_ticks``, as everywhere), and encoding a
result element for PUBLISH TO MQTT (SPEC section 6 JSON)."""

from __future__ import annotations

import base64
import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

import msgpack

from dsms.errors import InputError
from dsms.formats.json_codec import parse_json
from dsms.formats.msgpack_codec import unpack_one
from dsms.types import to_ticks


class Malformed(ValueError):
    """A payload (or one element of it) that cannot become a row: the reason goes to the dead-letter file."""


def decode_payload(payload: bytes, fmt: str) -> list[Any]:
    """Decode one message into its elements: FORMAT JSON is one JSON object or an array of objects, FORMAT
    MSGPACK a map or an array of maps. Raises Malformed saying why (the element's position when one is not an
    object)."""
    fmt = fmt.upper()
    if fmt == "JSON":
        try:
            obj = parse_json(payload, "payload")
        except InputError as e:
            raise Malformed(f"not JSON: {e}") from None
    elif fmt == "MSGPACK":
        try:
            obj = unpack_one(payload, "payload")
        except InputError as e:
            raise Malformed(f"not msgpack: {e}") from None
    else:
        raise ValueError(f"unknown MQTT payload format {fmt!r}; expected JSON or MSGPACK")
    what = "an object" if fmt == "JSON" else "a map"
    if isinstance(obj, Mapping):
        return [obj]
    if isinstance(obj, list):
        for k, item in enumerate(obj):
            if not isinstance(item, Mapping):
                raise Malformed(f"element {k}: expected {what}, got {_type_name(item)}")
        return obj
    raise Malformed(f"expected {what} or an array of them, got {_type_name(obj)}")


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null", bytes: "binary data"}.get(type(v), type(v).__name__)


def parse_timestamp(value: Any) -> int:
    """A TIMESTAMP field's value as milliseconds since the epoch, by the rules of ``dsms.types.to_ticks``
    (integers, whole floats, ISO 8601 strings, msgpack Timestamps); Malformed saying why otherwise."""
    try:
        return to_ticks(value)
    except (TypeError, ValueError) as e:
        raise Malformed(str(e)) from None


def json_default(v: Any) -> Any:
    """Make numpy scalars, bytes and msgpack timestamps JSON-able (results come out of numpy columns)."""
    if hasattr(v, "item") and callable(v.item):      # numpy scalars
        return v.item()
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, msgpack.Timestamp):
        return v.to_unix_nano() // 1_000_000
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    return repr(v)


def encode_element(element: Any) -> bytes:
    """One result element as SPEC section 6 JSON: ``{"ts": 7, "sign": 1, "row": {...}}`` (plus ``approx`` when
    the element has it). Takes a mapping in that shape or a ``dsms.Element``."""
    if isinstance(element, Mapping):
        if "row" not in element or "ts" not in element:
            raise TypeError(f"an element needs 'ts' and 'row': {element!r}")
        obj = {"ts": element["ts"], "sign": element.get("sign", 1), "row": element["row"]}
        if "approx" in element:
            obj["approx"] = element["approx"]
    elif all(hasattr(element, a) for a in ("ts", "sign", "row")):
        obj = {"ts": element.ts, "sign": element.sign, "row": element.row}
        if getattr(element, "approx", None) is not None:
            obj["approx"] = element.approx
    else:
        raise TypeError(f"cannot publish {element!r}: expected a mapping with ts/sign/row or an Element")
    return json.dumps(obj, default=json_default, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
