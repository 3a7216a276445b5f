"""Plans as XML (STREAM's plan files, digest-004 R-PLAN-02 and section 2.J): a logical plan written out and read
back, so a plan can be stored, edited and loaded without CQL.

The encoding is generic over the frozen dataclasses of ``dsms.plan.logical`` and ``dsms.cql.ast``: one element
per node, named after its class; scalar fields are attributes with a type prefix (``i:3``, ``s:abc``, ``f:0.5``,
``b:1``, ``n:`` for None, ``j:"..."`` for a string holding a character XML 1.0 cannot carry, as a JSON literal;
syntax-tree nodes are prefixed ``ast.``); a field holding nodes or tuples is a ``<field name=..>`` child. Parsing uses
``xml.etree`` with no DTD and no entity expansion: a document that declares either is refused.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import fields, is_dataclass

from dsms.cql import ast
from dsms.errors import CQLError
from dsms.plan import logical as L

_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _tag(cls) -> str:
    return ("ast." if cls.__module__ == ast.__name__ else "") + cls.__name__


_CLASSES = {_tag(c): c for mod in (L, ast) for c in vars(mod).values()
            if isinstance(c, type) and is_dataclass(c) and c.__module__ == mod.__name__}


def _scalar(v) -> str:
    if v is None:
        return "n:"
    if isinstance(v, bool):
        return f"b:{int(v)}"
    if isinstance(v, int):
        return f"i:{v}"
    if isinstance(v, float):
        return f"f:{v!r}"
    if isinstance(v, str):
        if _NOT_XML.search(v):          # a character XML 1.0 cannot carry: the string as a JSON literal
            return f"j:{json.dumps(v)}"
        return f"s:{v}"
    raise TypeError(f"cannot encode {type(v).__name__} in a plan")


def _unscalar(text: str):
    kind, _, body = text.partition(":")
    if kind == "n":
        return None
    if kind == "b":
        return body == "1"
    if kind == "i":
        return int(body)
    if kind == "f":
        return float(body)
    if kind == "s":
        return body
    if kind == "j":
        try:
            v = json.loads(body)
        except ValueError:
            v = None
        if isinstance(v, str):
            return v
    raise CQLError(f"plan XML: bad attribute value {text!r}")


def to_element(obj) -> ET.Element:
    """Encode a plan node (or an expression, or a plain value) as an XML element."""
    if is_dataclass(obj):
        el = ET.Element(_tag(type(obj)))
        for f in fields(obj):
            if f.name == "pos":
                continue
            v = getattr(obj, f.name)
            if is_dataclass(v) or isinstance(v, tuple):
                child = ET.SubElement(el, "field", name=f.name)
                child.append(to_element(v))
            else:
                el.set(f.name, _scalar(v))
        return el
    if isinstance(obj, tuple):
        el = ET.Element("tuple")
        for x in obj:
            el.append(to_element(x))
        return el
    el = ET.Element("value")
    el.set("v", _scalar(obj))
    return el


def from_element(el: ET.Element):
    if el.tag == "tuple":
        return tuple(from_element(c) for c in el)
    if el.tag == "value":
        return _unscalar(el.get("v", "n:"))
    cls = _CLASSES.get(el.tag)
    if cls is None:
        raise CQLError(f"plan XML: unknown node <{el.tag}>")
    kwargs = {}
    names = {f.name for f in fields(cls)}
    for k, v in el.attrib.items():
        if k not in names:
            raise CQLError(f"plan XML: <{el.tag}> has no attribute '{k}'")
        kwargs[k] = _unscalar(v)
    for child in el:
        if child.tag != "field" or child.get("name") not in names or len(child) != 1:
            raise CQLError(f"plan XML: unexpected <{child.tag}> inside <{el.tag}>")
        kwargs[child.get("name")] = from_element(child[0])
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise CQLError(f"plan XML: <{el.tag}>: {e}") from None


def plan_to_xml(root, query_id: str = "", kind: str = "") -> str:
    doc = ET.Element("plan", query=query_id, kind=kind)
    doc.append(to_element(root))
    return ET.tostring(doc, encoding="unicode")


def plan_from_xml(text: str):
    """The logical plan in a ``<plan>`` document: ``plan_to_xml``'s, or EXPLAIN's (entities and edges, with the
    logical plan in its ``<logical>`` child). Refuses DTDs and entities (no external entities, no entity
    expansion)."""
    if "<!DOCTYPE" in text.upper() or "<!ENTITY" in text.upper():
        raise CQLError("plan XML: DTDs and entities are not allowed")
    try:
        doc = ET.fromstring(text)
    except ET.ParseError as e:
        raise CQLError(f"plan XML: {e}") from None
    if doc.tag == "plan" and doc.find("logical") is not None:
        doc = doc.find("logical")        # EXPLAIN's form: entities and edges, the logical plan inside
    if doc.tag not in ("plan", "logical") or len(doc) != 1:
        raise CQLError("plan XML: expected <plan> with one root node")
    return from_element(doc[0])
