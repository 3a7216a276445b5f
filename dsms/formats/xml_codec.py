"""Streaming XML results and safe XML input (SPEC section 6; STREAM's XML plan files for the plan form).

Output is one document per result stream, written as it is produced::

    <?xml version="1.0" encoding="UTF-8"?>
    <stream query="q1">
    <element ts="7" sign="+"><a>1</a><s>5.0</s></element>
    <heartbeat ts="20"/>
    <gap missed="12" from_ts="30" to_ts="41"/>
    <snapshot ts="20" rows="1"/><element snapshot="true" ts="20" sign="+"><a>1</a><s>5.0</s></element>
    </stream>

Each column is a child named after the column (``<col name="...">`` when the name is not an XML name);
text is escaped (a carriage return as ``&#13;``, which a parser would read as a line feed), characters XML
1.0 cannot carry become U+FFFD, booleans are ``true``/``false`` and
non-finite floats ``NaN``/``INF``/``-INF`` (the xs:double spellings).

Input (``Content-Type: application/xml``) has the same shape under any root element and is parsed with
expat with DTDs refused outright: no document type, no entity declarations, so no external entity and no
entity expansion bomb can get through (SPEC section 10).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any
from xml.parsers import expat

from dsms.errors import InputError
from dsms.formats import Encoder, parse_ts

__all__ = ["decode_xml", "XML_ENCODER", "escape_text", "escape_attr", "xml_value", "NOT_XML", "visible"]

NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")   # what XML 1.0 cannot carry
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
MAX_DEPTH = 32


def escape_text(s: str) -> str:
    """Escape character data, replacing what XML 1.0 cannot hold. A carriage return becomes a character
    reference: a parser reads a raw one (or CR LF) as LF (XML 1.0 section 2.11), and the value must come back
    as written.

    >>> escape_text("a<b & \\x00\\r")
    'a&lt;b &amp; \\ufffd&#13;'
    """
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    return NOT_XML.sub("\ufffd", s)


def visible(s: str) -> str:
    """A text for people (an EXPLAIN label) with what XML 1.0 cannot carry written as ``\\uXXXX``.

    >>> visible("x\\x01y")
    'x\\\\u0001y'
    """
    return NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", s)


def escape_attr(s: str) -> str:
    """Escape an attribute value (double-quoted); newlines and tabs are kept as character references."""
    return escape_text(s).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")


def xml_value(v: Any) -> str:
    """The text of one column value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "INF" if v > 0 else "-INF"
        return repr(v)
    if isinstance(v, str):
        return escape_text(v)
    return escape_text(str(v))


_tag_cache: dict[tuple[str, ...], list[tuple[str, str]]] = {}


def _tags(names: list[str]) -> list[tuple[str, str]]:
    key = tuple(names)
    tags = _tag_cache.get(key)
    if tags is None:
        tags = [(f"<{n}>", f"</{n}>") if _NAME.match(n) and not n.lower().startswith("xml")
                else (f'<col name="{escape_attr(n)}">', "</col>") for n in names]
        if len(_tag_cache) < 4096:
            _tag_cache[key] = tags
    return tags


_XML_NONFINITE = {"nan": "NaN", "inf": "INF", "-inf": "-INF"}


def column_text(values: list) -> list[str]:
    """The XML text of every value of one column, column-wise like the JSON encoder.

    >>> column_text(["a<b", "c"]), column_text([float("inf"), 2.0]), column_text([True])
    (['a&lt;b', 'c'], ['INF', '2.0'], ['true'])
    """
    kinds = set(map(type, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds == {float}:
        out = list(map(float.__repr__, values))
        if any(map(_XML_NONFINITE.__contains__, out)):
            out = [_XML_NONFINITE.get(x, x) for x in out]
        return out
    if kinds == {str}:
        joined = "".join(values)
        if not NOT_XML.search(joined):
            if "&" not in joined and "<" not in joined and ">" not in joined and "\r" not in joined:
                return values
            return [v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
                    for v in values]
    return [xml_value(v) for v in values]


_el_templates: dict[tuple[str, ...], str] = {}


def _plain(values: Any) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _elements(names: list[str], ts: Any, sign: Any, cols: list[Any]) -> bytes:
    """Result elements (columns as lists or numpy arrays) as ``<element>`` lines."""
    ts, sign, cols = _plain(ts), _plain(sign), [_plain(c) for c in cols]
    key = tuple(names)
    template = _el_templates.get(key)
    if template is None:
        inner = "".join(f"{o}%s{e}" for o, e in _tags(names)).replace("%s", "\0").replace("%", "%%") \
            .replace("\0", "%s")
        template = '<element ts="%s" sign="%s">' + inner + "</element>\n"
        if len(_el_templates) < 4096:
            _el_templates[key] = template
    signs = ["+" if x > 0 else "-" for x in sign]
    return "".join(map(template.__mod__, zip(ts, signs, *map(column_text, cols)))).encode("utf-8")


def _head(query: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<stream query="{escape_attr(query)}">\n'.encode()


def _gap(missed: int, a: int | None, b: int | None) -> bytes:
    attrs = f'missed="{missed}"' + (f' from_ts="{a}"' if a is not None else "") + \
        (f' to_ts="{b}"' if b is not None else "")
    return f"<gap {attrs}/>\n".encode()


XML_ENCODER = Encoder(
    name="xml",
    content_type="application/xml",
    head=_head,
    elements=_elements,
    heartbeat=lambda ts: f'<heartbeat ts="{ts}"/>\n'.encode(),
    gap=_gap,
    tail=lambda: b"</stream>\n",
    snapshot=lambda ts, rows: f'<snapshot ts="{ts}" rows="{rows}"/>\n'.encode(),
    frame=lambda data, first_id, snapshot: data.replace(b"<element ", b'<element snapshot="true" ') if snapshot
    else data,
)


# ---------------------------------------------------------------- input


class _Refused(Exception):
    pass


def _convert(text: str, type_: str | None, col: str, index: int) -> Any:
    t = (type_ or "STRING").upper()
    s = text.strip()
    try:
        if t == "INT":
            return int(s)
        if t == "TIMESTAMP":
            return parse_ts(int(s) if re.fullmatch(r"[+-]?\d+", s) else s, index)
        if t == "FLOAT":
            return float({"INF": "inf", "-INF": "-inf"}.get(s, s))
        if t == "BOOLEAN":
            low = s.lower()
            if low in ("true", "1"):
                return True
            if low in ("false", "0"):
                return False
            raise ValueError(s)
    except (ValueError, InputError):
        raise InputError(f"column '{col}': {text!r} is not a {t}", index=index) from None
    return text


def decode_xml(body: bytes, b: Any, schema: Sequence[tuple[str, str]]) -> None:
    """Parse ``<anything><element ts=".." sign="+|-"><col>v</col>..</element><heartbeat ts=".."/>..``."""
    if not body.strip():
        raise InputError("the body is empty")
    types = {c.lower(): t for c, t in schema}
    p = expat.ParserCreate()
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[str] = []
    state: dict[str, Any] = {"item": None, "col": None, "text": []}

    def refuse(*_: Any) -> None:
        raise _Refused("a DTD or entity declaration is not allowed in XML input")

    def start(name: str, attrs: dict[str, str]) -> None:
        stack.append(name)
        if len(stack) > MAX_DEPTH:
            raise InputError(f"XML nested deeper than {MAX_DEPTH} levels", index=b.items)
        depth = len(stack)
        if depth == 2:
            if name == "element":
                item: dict[str, Any] = {"row": {}}
                if "ts" in attrs:
                    item["ts"] = attrs["ts"]
                if "sign" in attrs:
                    item["sign"] = attrs["sign"]
                state["item"] = item
            elif name == "heartbeat":
                state["item"] = {"heartbeat": attrs.get("ts")}
            elif name == "punctuation":
                state["item"] = {"punctuation": dict(attrs)}
            else:
                raise InputError(f"unexpected <{name}> (expected element, heartbeat or punctuation)",
                                 index=b.items)
        elif depth == 3:
            if state["item"] is None or "row" not in state["item"]:
                raise InputError(f"unexpected <{name}> inside <{stack[1]}>", index=b.items)
            state["col"] = attrs.get("name", name) if name == "col" else name
            state["text"] = []
        elif depth > 3:
            raise InputError(f"unexpected <{name}> inside a column value", index=b.items)

    def end(name: str) -> None:
        depth = len(stack)
        stack.pop()
        if depth == 3:
            col = state["col"]
            row = state["item"]["row"]
            if any(c.lower() == col.lower() for c in row):   # names are case-insensitive; never last-one-wins
                raise InputError(f"column '{col}' given twice", index=b.items)
            row[col] = _convert("".join(state["text"]), types.get(col.lower()), col, b.items)
            state["col"] = None
        elif depth == 2:
            item = state["item"]
            state["item"] = None
            if "heartbeat" in item and item["heartbeat"] is not None:
                s = item["heartbeat"]
                item["heartbeat"] = int(s) if re.fullmatch(r"\s*[+-]?\d+\s*", s) else s
            elif "ts" in item and re.fullmatch(r"\s*[+-]?\d+\s*", item["ts"]):
                item["ts"] = int(item["ts"])
            b.add(item)

    def chars(data: str) -> None:
        if state["col"] is not None:
            state["text"].append(data)

    p.StartDoctypeDeclHandler = refuse
    p.EntityDeclHandler = refuse
    p.UnparsedEntityDeclHandler = refuse
    p.ExternalEntityRefHandler = refuse
    p.StartElementHandler = start
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    try:
        p.Parse(body, True)
    except _Refused as e:
        raise InputError(str(e)) from None
    except expat.ExpatError as e:
        raise InputError(f"not well-formed XML: {expat.ErrorString(e.code)} at line {e.lineno}, "
                         f"column {e.offset}", index=b.items) from None
    except RecursionError:
        raise InputError("XML nested too deeply") from None
