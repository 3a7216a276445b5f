"""Fault injection: input that used to be accepted and fail later, or fail with a 500 (issue 18 item 9 and the
low items), sent to a real server process.

What is injected: msgpack Timestamps whose milliseconds do not fit in int64 (as an element's ts, in a columnar
ts list, as a heartbeat); a lone surrogate in a CQL string literal and in an identifier; MQTT topics that
cannot work ('', NUL, '#' not last, a '+' inside a level, over 65,535 bytes, a wildcard in PUBLISH TO);
columns whose names differ only in case, in row JSON, columnar JSON, columnar msgpack and XML. What must hold:
each is a 400 with a JSON error saying what is wrong, nothing is registered or ingested, and the server keeps
serving (GET / and /system answer 200, a good element is still accepted afterwards).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgpack
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import Server  # noqa: E402

MSGPACK = {"Content-Type": "application/msgpack"}
BIG = msgpack.Timestamp(2**62, 0)          # seconds fit in int64; milliseconds do not


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory):
    s = Server(tmp_path_factory.mktemp("door") / "data").start()
    assert s.post("/cql", body="REGISTER STREAM S (a INT, t TIMESTAMP)").status == 200
    yield s
    s.stop()


def _refused(r, *words: str) -> None:
    assert r.status == 400, r
    err = r.json()
    assert "error" in err and all(w in json.dumps(err) for w in words), err


@pytest.mark.parametrize("body", [
    msgpack.packb([{"ts": BIG, "row": {"a": 1, "t": 0}}], datetime=False),
    msgpack.packb({"ts": [1, BIG], "cols": {"a": [1, 2], "t": [0, 0]}}),
    msgpack.packb([{"heartbeat": msgpack.Timestamp(-(2**62), 0)}]),
], ids=["row ts", "columnar ts", "heartbeat"])
def test_msgpack_timestamp_outside_int64_is_a_400(srv: Server, body: bytes) -> None:
    _refused(srv.post("/streams/S/elements", body=body, headers=MSGPACK), "out of range")


@pytest.mark.parametrize("cql", [
    "SELECT * FROM S WHERE a = LENGTH('x\ud800')",
    "REGISTER STREAM T\udfff (a INT)",
], ids=["literal", "identifier"])
def test_lone_surrogate_in_cql_is_refused(srv: Server, cql: str) -> None:
    before = srv.get("/queries").json()
    _refused(srv.post("/cql", json_body={"cql": cql}), "lone surrogate", "line 1")
    assert srv.get("/queries").json() == before
    assert srv.get("/").status == 200


@pytest.mark.parametrize(("topic", "words"), [
    ("", "must not be empty"), ("a\u0000b", "NUL"), ("a/#/b", "'#' must be the last level"),
    ("a/b+", "'+' must be a whole level"), ("x" * 70_000, "65535 bytes"),
], ids=["empty", "nul", "hash inside", "plus inside", "70 KB"])
def test_mqtt_topics_that_cannot_work_are_refused_at_registration(srv: Server, topic: str, words: str) -> None:
    cql = f"REGISTER STREAM M (a INT) FROM MQTT '{topic}'"
    r = srv.post("/cql", json_body={"cql": cql})
    assert r.status in (400, 413), r
    if r.status == 400:
        _refused(r, words)
    assert srv.get("/streams/M").status == 404


def test_publishing_to_a_wildcard_topic_is_refused(srv: Server) -> None:
    r = srv.post("/cql", json_body={"cql": "REGISTER QUERY pub AS SELECT * FROM S PUBLISH TO MQTT 'a/#'"})
    _refused(r, "wildcards")


@pytest.mark.parametrize(("body", "headers"), [
    (json.dumps([{"ts": 5, "row": {"a": 1, "A": 2, "t": 0}}]), {"Content-Type": "application/json"}),
    (json.dumps({"ts": [5], "cols": {"a": [1], "A": [2], "t": [0]}}), {"Content-Type": "application/json"}),
    (msgpack.packb({"ts": [5], "cols": {"a": [1], "A": [2], "t": [0]}}), MSGPACK),
    ('<in><element ts="5"><a>1</a><A>2</A><t>0</t></element></in>', {"Content-Type": "application/xml"}),
    ('<in><element ts="5"><a>1</a><a>2</a><t>0</t></element></in>', {"Content-Type": "application/xml"}),
], ids=["row json", "columnar json", "columnar msgpack", "xml case", "xml same name"])
def test_columns_differing_only_in_case_are_refused_everywhere(srv: Server, body, headers) -> None:
    _refused(srv.post("/streams/S/elements", body=body, headers=headers), "given twice")


def test_the_server_still_takes_good_input(srv: Server) -> None:
    r = srv.post("/streams/S/elements", body=msgpack.packb([{"ts": 6, "row": {"a": 1, "t": 0}}]), headers=MSGPACK)
    assert r.status in (200, 202), r
    assert srv.get("/system").status == 200
