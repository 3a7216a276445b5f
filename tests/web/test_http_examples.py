"""The papers' worked examples end to end through a real ``dsms serve`` (SPEC sections 6 and 7): catalog by
``POST /cql``, queries by ``POST /queries``, input as NDJSON (streams, with integer ``ts``) and JSON updates
(relations), a heartbeat on every input at the end; results read back as NDJSON and as XML.

Both readings must equal the example's hand-derived result (tests/oracle/examples.py) and the embedded engine's
answer, with values typed as the query's schema says (an INT is ``2``, a FLOAT ``2.0``), and the XML in SPEC 6's
form: ``<stream query="..">`` whose ``<element ts=".." sign="+|-">`` children hold one child per column, in the
schema's order.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from httpkit import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracle import examples as X  # noqa: E402
from oracle.generators import Workload, diff, run_engine  # noqa: E402

from dsms.cql.parser import parse  # noqa: E402

EXAMPLES = [X.E3_1, X.E3_2, X.E3_3, X.E5, X.E8_1, X.AGG_ROWS5, X.VANISHING, X.TIES]


def _typed(text: str | None, typ: str):
    text = text or ""
    if typ in ("INT", "TIMESTAMP"):
        return int(text)
    if typ == "FLOAT":
        return float({"INF": "inf", "-INF": "-inf"}.get(text, text))
    if typ == "BOOLEAN":
        assert text in ("true", "false"), text
        return text == "true"
    return text


def _inputs(ex) -> tuple[list[str], list[str]]:
    streams, relations = [], []
    for stmt in ex.statements:
        for s in parse(stmt):
            kind = type(s).__name__
            if kind == "RegisterStream":
                streams.append(s.name)
            elif kind == "RegisterRelation":
                relations.append(s.name)
    return streams, relations


def _heartbeat(srv, streams, relations, h: int) -> None:
    for s in streams:
        assert srv.ndjson(s, [{"heartbeat": h}]).status == 200
    for r in relations:
        assert srv.post(f"/relations/{r}/updates", json_body=[{"heartbeat": h}]).status == 200


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.id.split(" ")[0] + " " + e.id.split(" ")[1] for e in EXAMPLES])
def test_worked_example_over_http(make_server, ex):
    srv = make_server().start()
    srv.cql(";\n".join(ex.statements))
    registered = []
    for check in ex.checks:
        r = srv.post("/queries", json_body={"cql": check.query})
        assert r.status == 201, r
        body = r.json()
        assert body["kind"] == check.kind
        registered.append((check, body["id"], [(c["name"], c["type"]) for c in body["schema"]]))
    streams, relations = _inputs(ex)
    for a in ex.actions:
        if a[0] == "push":
            ts = a[3] if isinstance(a[3], list) else [a[3]] * len(a[2])
            r = srv.ndjson(a[1], [{"ts": t, "row": row} for t, row in zip(ts, a[2])])
        elif a[0] == "update":
            r = srv.post(f"/relations/{a[1]}/updates", json_body=[{"ts": a[4], "insert": a[2], "delete": a[3]}])
        else:
            _heartbeat(srv, streams, relations, a[1])
            continue
        assert r.status == 200, (a, r)
    _heartbeat(srv, streams, relations, ex.until)

    for check, qid, schema in registered:
        wait_for(lambda qid=qid: srv.get(f"/queries/{qid}").json()["stats"]["last_heartbeat"] == ex.until,
                 what=f"{qid} reaching the final heartbeat")
        engine = run_engine(Workload(ex.statements, check.query, ex.actions, ex.until))

        lines = srv.get(f"/queries/{qid}/results?follow=false").body.decode().splitlines()
        ndjson = [json.loads(line) for line in lines if line.strip()]
        assert all(set(i) == {"ts", "sign", "row"} and i["sign"] in (1, -1) for i in ndjson)
        assert all(list(i["row"]) == [n for n, _ in schema] for i in ndjson)
        got = [(i["ts"], i["sign"], i["row"]) for i in ndjson]
        assert diff(check.expected, got) is None, f"{check.query}\n{diff(check.expected, got)}"
        assert diff(engine, got) is None, f"{check.query}\n{diff(engine, got)}"

        root = ET.fromstring(srv.get(f"/queries/{qid}/results?follow=false&format=xml").body)
        assert root.tag == "stream" and root.get("query") == qid
        xml_got = []
        for el in root:
            assert el.tag == "element" and el.get("sign") in ("+", "-")
            assert [c.tag for c in el] == [n for n, _ in schema]
            row = {c.tag: _typed(c.text, t) for c, (_, t) in zip(el, schema)}
            xml_got.append((int(el.get("ts")), 1 if el.get("sign") == "+" else -1, row))
        assert diff(check.expected, xml_got) is None, f"{check.query}\n{diff(check.expected, xml_got)}"
    srv.stop()
