"""One table of good and bad values through every entry point (issue 11, "one home for types and time"): the
engine's push, HTTP bodies in JSON, NDJSON and msgpack, and MQTT through a real mosquitto into a real server
must give each value the same verdict, because they all go through ``dsms.types``.

Before, a float 2**60 as a timestamp was refused over HTTP and accepted by the engine and MQTT."""

from __future__ import annotations

import asyncio
import json

import aiomqtt
import msgpack
import pytest
from httpkit import Server
from httpkit import wait_for as wait

from dsms import Engine, InputError

GOOD_ROW = {"v": 1, "f": 1.0, "t": 0}

# (field, value, accepted?): values of the INT column v, the FLOAT column f, the TIMESTAMP column t
VALUES = [
    ("v", 3, True), ("v", 3.0, True), ("v", 2.0**60, True), ("v", 3.5, False), ("v", True, False),
    ("v", "3", False), ("v", 2**63, False), ("v", None, False),
    ("f", 2, True), ("f", 1.5, True), ("f", "x", False), ("f", False, False),
    ("t", 7, True), ("t", "1970-01-01T00:00:01Z", True), ("t", 7.5, False), ("t", "yesterday", False),
    ("t", 2**62 + 1, False),
]
# (element timestamp, accepted?), in the order sent: the good ones ascend, so none is late
TIMESTAMPS = [
    (5, True), (5.0, True), ("1970-01-01T00:00:00.007Z", True), (1.5, False), (True, False),
    ("yesterday", False), (2.0**60, True), (2**62, True), (2**62 + 1, False), (2.0**63, False),
]
CASES = [({**GOOD_ROW, k: v}, 1, ok) for k, v, ok in VALUES] + [(GOOD_ROW, ts, ok) for ts, ok in TIMESTAMPS]
DDL = "(v INT, f FLOAT, t TIMESTAMP)"


def engine_verdicts() -> list[bool]:
    eng = Engine()
    eng.execute(f"REGISTER STREAM S {DDL}")
    out = []
    for row, ts, _ in CASES:
        try:
            eng.push("S", [row], ts=ts)
            out.append(True)
        except InputError:
            out.append(False)
    return out


def http_verdicts(srv: Server, stream: str, fmt: str) -> list[bool]:
    out = []
    for row, ts, _ in CASES:
        item = {"ts": ts, "row": row}
        if fmt == "json":
            body, ctype = json.dumps([item]).encode(), "application/json"
        elif fmt == "ndjson":
            body, ctype = (json.dumps(item) + "\n").encode(), "application/x-ndjson"
        else:
            body, ctype = msgpack.packb([item]), "application/msgpack"
        r = srv.post(f"/streams/{stream}/elements", body=body, headers={"Content-Type": ctype})
        assert r.status in (200, 400), r
        if r.status == 400:
            assert r.json()["error"] == "bad input" and r.json()["detail"], r
        out.append(r.status == 200)
    return out


def mqtt_verdicts(srv: Server, port: int, stream: str) -> list[bool]:
    def mqtt_stats() -> dict:
        return srv.get(f"/streams/{stream}").json()["stats"].get("mqtt") or {}

    wait(lambda: mqtt_stats().get("connected"), what="MQTT source connected")
    out = []

    async def go() -> None:
        async with aiomqtt.Client("127.0.0.1", port) as c:
            for k, (row, ts, _) in enumerate(CASES):
                before = mqtt_stats().get("accepted", 0)
                await c.publish(f"in/{stream}", json.dumps({"ts": ts, **row}), qos=1)
                st = await asyncio.to_thread(
                    wait, lambda k=k: (s := mqtt_stats()).get("accepted", 0) + s.get("dead_lettered", 0) == k + 1
                    and s, what=f"message {k} accepted or dead-lettered")
                out.append(st["accepted"] == before + 1)
    asyncio.run(go())
    return out


@pytest.mark.timeout(180)
def test_every_entry_point_gives_each_value_the_same_verdict(tmp_path, mosquitto):
    want = [ok for _, _, ok in CASES]
    assert engine_verdicts() == want
    srv = Server(tmp_path / "data", "--mqtt-url", mosquitto.url).start()
    try:
        for fmt in ("json", "ndjson", "msgpack"):
            srv.cql(f"REGISTER STREAM h_{fmt} {DDL}")
            assert http_verdicts(srv, f"h_{fmt}", fmt) == want, fmt
        srv.cql(f"REGISTER STREAM m {DDL} FROM MQTT 'in/m' FORMAT JSON TIMESTAMP ts")
        assert mqtt_verdicts(srv, mosquitto.port, "m") == want
    finally:
        srv.stop()
