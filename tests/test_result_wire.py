"""Result wire formats read back by an independent parser (SPEC section 6): what an external checker that parses
our NDJSON or XML with a standard library gets must be exactly the values the engine produced, typed as the
query's schema says.

XML: ``<stream query="..">`` whose ``<element ts=".." sign="+|-">`` children hold one child per column, in the
schema's column order; ``<heartbeat ts=".."/>``. NDJSON: ``{"ts", "sign", "row"}`` a line, ``{"heartbeat": h}``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np

from dsms.formats import ENCODERS

NAMES = ["i", "f", "s", "b"]
TS = np.array([1, 2, 2], dtype=np.int64)
SIGN = np.array([1, -1, 1], dtype=np.int8)
STRINGS = ["a\rb", "x\r\ny\tz\n", "<&>]]>\"'é☃"]
COLS = [np.array([4, -3, 2**62], dtype=np.int64), np.array([2.0, -0.0, 1e300]),
        np.array(STRINGS, dtype=object), np.array([True, False, True])]


def xml_document() -> str:
    enc = ENCODERS["xml"]
    return (enc.head("q1") + enc.elements(NAMES, TS, SIGN, COLS) + enc.heartbeat(5) + enc.tail()).decode()


def test_xml_results_read_back_by_a_parser():
    """Every string comes back as written, a carriage return too: an XML parser turns a raw CR (or CR LF) in
    character data into LF (XML 1.0 section 2.11), so the writer must send it as a character reference."""
    root = ET.fromstring(xml_document())
    assert root.tag == "stream" and root.get("query") == "q1"
    elements = [e for e in root if e.tag == "element"]
    assert [(e.get("ts"), e.get("sign")) for e in elements] == [("1", "+"), ("2", "-"), ("2", "+")]
    assert [[c.tag for c in e] for e in elements] == [NAMES] * 3          # the schema's column order
    assert [e.find("s").text for e in elements] == STRINGS
    assert [e.find("i").text for e in elements] == ["4", "-3", str(2**62)]
    assert [float(e.find("f").text) for e in elements] == [2.0, -0.0, 1e300]
    assert [e.find("b").text for e in elements] == ["true", "false", "true"]
    assert [(h.tag, h.get("ts")) for h in root if h.tag != "element"] == [("heartbeat", "5")]


def test_ndjson_results_read_back_by_a_parser():
    enc = ENCODERS["ndjson"]
    lines = (enc.elements(NAMES, TS, SIGN, COLS) + enc.heartbeat(5)).decode().splitlines()
    items = [json.loads(line) for line in lines]
    assert [list(i["row"]) for i in items[:3]] == [NAMES] * 3
    assert [i["row"]["s"] for i in items[:3]] == STRINGS
    assert [(i["ts"], i["sign"]) for i in items[:3]] == [(1, 1), (2, -1), (2, 1)]
    assert [type(i["row"]["i"]) for i in items[:3]] == [int] * 3 and items[2]["row"]["i"] == 2**62
    assert [type(i["row"]["f"]) for i in items[:3]] == [float] * 3
    assert [i["row"]["b"] for i in items[:3]] == [True, False, True]
    assert items[3] == {"heartbeat": 5}
