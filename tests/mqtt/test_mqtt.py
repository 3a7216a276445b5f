"""MQTT input and output against a real mosquitto and a real Engine (SPEC sections 1, 4, 6, 10; docs/mqtt.md).

Nothing here is mocked: messages go through the broker, rows through ``Engine.push``. Every wait is a condition
with a deadline. The reference for "the right result" is the same engine fed the same rows directly with
``eng.push``: MQTT must not change what a query computes.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import msgpack
import numpy as np
import pytest

from dsms import Element, Engine
from dsms.ingest import MqttIngest, MqttPublisher, parse_mqtt_url, parse_timestamp

BASE = 1_700_000_000_000          # ms since the epoch: 2023-11-14T22:13:20Z


class EngineSink:
    """The smallest real sink: push into an Engine and run it (what the server's Runtime does, minus locking)."""

    def __init__(self, eng: Engine) -> None:
        self.eng = eng
        self.calls = 0

    async def ingest(self, stream: str, rows: list[dict], ts: list[int]) -> int:
        n = self.eng.push(stream, rows, ts)
        self.eng.run()
        self.calls += 1
        return n


async def wait_until(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


async def publish(port: int, messages: list[tuple[str, bytes]]) -> None:
    """Publish in order, QoS 1, each acknowledged before the next: one subscriber then sees them in order."""
    async with aiomqtt.Client("127.0.0.1", port) as c:
        for topic, payload in messages:
            await c.publish(topic, payload, qos=1)


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def bag(elements: list[Element]) -> list[tuple]:
    """Order within an instant is not part of the contract (docs/contract-engine-api.md)."""
    return sorted((e.ts, e.sign, tuple(sorted(e.row.items()))) for e in elements)


def make_ingest(eng: Engine, stream: str, url: str, dead: Path, clock: Callable[[], int] | None = None,
                **kw: Any) -> MqttIngest:
    sd = next(s for s in eng.streams() if s.name == stream)
    return MqttIngest(EngineSink(eng), sd.name, sd.columns, sd.source, url, dead, clock, **kw)


# ---------------------------------------------------------------------------------------------- payloads


@pytest.mark.parametrize("fmt", ["JSON", "MSGPACK"])
@pytest.mark.parametrize("ts_field", ["ts", None])
def test_payloads_reach_queries_as_a_direct_push_would(mosquitto, tmp_path, fmt, ts_field):
    """JSON and msgpack, with a TIMESTAMP field (ints, ISO strings, a msgpack Timestamp) and without one
    (arrival time from the clock), through the wildcard 'sensors/+/temp': SELECT * and a windowed aggregate
    give what a direct push of the same rows gives."""
    queries = ["SELECT * FROM Temp",
               "SELECT sensor, COUNT(*) AS n, AVG(celsius) AS a FROM Temp [RANGE 5 SECONDS] GROUP BY sensor"]
    ts_clause = f" TIMESTAMP {ts_field}" if ts_field else ""
    live, ref = Engine(), Engine()
    live.execute(f"REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' "
                 f"FORMAT {fmt}{ts_clause}")
    ref.execute("REGISTER STREAM Temp (sensor STRING, celsius FLOAT)")
    live_q = [live.execute(q) for q in queries]
    ref_q = [ref.execute(q) for q in queries]

    # Messages: (topic, [(sensor, celsius)], ts). Arrays carry several elements at one timestamp.
    plan = [("sensors/a/temp", [("a", 20.5)]),
            ("sensors/b/temp", [("b", 18.0), ("b", 18.25)]),
            ("sensors/a/humidity", [("a", 99.0)]),          # not matched by sensors/+/temp
            ("sensors/a/temp", [("a", 21.0)]),
            ("sensors/a/b/temp", [("x", 0.0)]),             # '+' is one level only
            ("sensors/c/temp", [("c", -3.5), ("c", -4.0), ("a", 22.0)]),
            ("other/a/temp", [("a", 50.0)]),
            ("sensors/b/temp", [("b", 19.0)]),
            ("sensors/a/temp", [("a", 23.5)])]
    arrival = itertools.count(BASE, 1500)
    clock = (lambda: next(arrival)) if ts_field is None else None
    pack = (lambda o: json.dumps(o).encode()) if fmt == "JSON" else msgpack.packb

    out: list[tuple[str, bytes]] = []
    exp_rows: list[dict] = []
    exp_ts: list[int] = []
    matched = 0
    for i, (topic, els) in enumerate(plan):
        t = BASE + 1500 * i
        objs = []
        for sensor, c in els:
            o: dict[str, Any] = {"sensor": sensor, "celsius": c}
            if ts_field:
                o[ts_field] = (iso(t) if i % 3 == 1 else
                               msgpack.Timestamp.from_unix_nano(t * 1_000_000) if fmt == "MSGPACK" and i == 5
                               else t)
            objs.append(o)
        out.append((topic, pack(objs[0] if len(objs) == 1 and i % 2 == 0 else objs)))
        parts = topic.split("/")
        if len(parts) == 3 and parts[0] == "sensors" and parts[2] == "temp":
            msg_ts = t if ts_field else BASE + 1500 * matched
            matched += 1
            exp_rows += [{"sensor": s, "celsius": c} for s, c in els]
            exp_ts += [msg_ts] * len(els)

    async def main() -> None:
        ing = make_ingest(live, "Temp", mosquitto.url, tmp_path / "dead.jsonl", clock)
        await ing.start()
        try:
            assert ing.stats["connected"]
            await publish(mosquitto.port, out)
            await wait_until(lambda: ing.stats["accepted"] >= len(exp_rows), "all elements accepted")
        finally:
            await ing.stop()
        st = ing.stats
        assert st["accepted"] == len(exp_rows)
        assert st["received"] == matched          # the broker never sent the non-matching topics
        assert st["malformed"] == st["late"] == st["dropped"] == 0
        assert not (tmp_path / "dead.jsonl").exists()

    asyncio.run(main())
    ref.push("Temp", exp_rows, exp_ts)
    ref.run()
    got_star, want_star = live_q[0].drain(), ref_q[0].drain()
    assert got_star == want_star
    assert [e.row for e in got_star] == exp_rows and [e.ts for e in got_star] == exp_ts
    end = exp_ts[-1] + 10_000
    for eng in (live, ref):
        eng.heartbeat(end)
        eng.run()
    got_agg, want_agg = live_q[1].drain(), ref_q[1].drain()
    assert bag(got_agg) == bag(want_agg)
    assert any(e.sign == -1 for e in got_agg)        # the window really slid


# ---------------------------------------------------------------------------------------------- bad input


def test_malformed_and_late_payloads_are_counted_dead_lettered_and_skipped(mosquitto, tmp_path):
    eng = Engine()
    eng.execute("REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' "
                "FORMAT JSON TIMESTAMP ts")
    eng.execute("REGISTER STREAM Hum (sensor STRING, pct INT) FROM MQTT 'hum/#' FORMAT MSGPACK")
    star, hum = eng.execute("SELECT * FROM Temp"), eng.execute("SELECT * FROM Hum")

    def j(o: Any) -> bytes:
        return json.dumps(o).encode()

    # (payload, reason it is refused, or None when (part of) it is accepted)
    cases: list[tuple[bytes, str | None]] = [
        (j({"sensor": "a", "celsius": 1.0, "ts": BASE}), None),
        (b"not json", "not JSON"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"42", "expected an object or an array of them, got a number"),
        (j([{"sensor": "a", "celsius": 1.0, "ts": BASE + 1}, 7]), "element 1: expected an object, got a number"),
        (j({"sensor": "a", "ts": BASE + 2}), "missing column 'celsius'"),
        (j({"sensor": "a", "celsius": 1.0, "humidity": 3, "ts": BASE + 2}), "unknown column 'humidity'"),
        (j([{"sensor": "a", "celsius": 2.0, "ts": BASE + 2}, {"sensor": "a", "celsius": "hot", "ts": BASE + 3}]),
         "element 1: column 'celsius': expected FLOAT"),
        (j({"sensor": "a", "celsius": 1.0, "ts": "yesterday"}), "not an ISO 8601 date-time"),
        (j({"sensor": "a", "celsius": 1.0}), "missing timestamp field 'ts'"),
        (j({"sensor": "a", "celsius": 5.0, "ts": BASE - 500}), "late"),
        (j([{"sensor": "b", "celsius": 6.0, "ts": BASE + 2000}, {"sensor": "b", "celsius": 7.0, "ts": BASE + 900}]),
         None),
        (j({"sensor": "c", "celsius": 8.0, "ts": iso(BASE + 3000)}), None),
    ]
    hum_cases = [(b"\xc1", "not msgpack"), (msgpack.packb("hello"), "expected a map or an array of them"),
                 (msgpack.packb({"sensor": "h", "pct": 40}), None)]

    async def main() -> None:
        dead, dead_h = tmp_path / "dl" / "temp.jsonl", tmp_path / "dl" / "hum.jsonl"
        ing = make_ingest(eng, "Temp", mosquitto.url, dead)
        ing_h = make_ingest(eng, "Hum", mosquitto.url, dead_h, clock=lambda: 77)
        await ing.start()
        await ing_h.start()
        try:
            await publish(mosquitto.port, [("sensors/x/temp", p) for p, _ in cases] +
                          [("hum/room1", p) for p, _ in hum_cases])
            await wait_until(lambda: ing.stats["received"] == len(cases) and ing.stats["pending"] == 0
                             and ing.stats["accepted"] == 3, "the Temp messages processed")
            await wait_until(lambda: ing_h.stats["accepted"] == 1, "the good Hum message")
        finally:
            await ing.stop()
            await ing_h.stop()
        st = ing.stats
        assert (st["malformed"], st["late"], st["accepted"]) == (9, 2, 3), st
        lines = [json.loads(x) for x in dead.read_text().splitlines()]
        assert len(lines) == 11 and st["dead_lettered"] == 11
        for rec in lines:
            assert set(rec) >= {"at", "topic", "reason", "payload", "encoding"}
            assert rec["topic"] == "sensors/x/temp"
            dt.datetime.fromisoformat(rec["at"])
        reasons = [r["reason"] for r in lines]
        expected = [why for _, why in cases if why is not None] + ["late"]
        for want, got in zip(expected, reasons):
            assert want in got, (want, got)
        binary = next(r for r in lines if "not UTF-8" in r["reason"])
        assert binary["encoding"] == "base64" and base64.b64decode(binary["payload"]) == b"\xff\xfe\x00garbage"
        text = next(r for r in lines if "not JSON" in r["reason"])
        assert (text["encoding"], text["payload"]) == ("text", "not json")
        late_el = lines[-1]        # the late element of the two-element message, dead-lettered on its own
        assert late_el["index"] == 1 and json.loads(late_el["payload"])["ts"] == BASE + 900

        sth = ing_h.stats
        assert (sth["malformed"], sth["accepted"]) == (2, 1)
        hl = [json.loads(x) for x in dead_h.read_text().splitlines()]
        assert hl[0]["encoding"] == "base64" and base64.b64decode(hl[0]["payload"]) == b"\xc1"
        assert "expected a map" in hl[1]["reason"]

    asyncio.run(main())
    assert [(e.ts, e.row) for e in star.drain()] == [
        (BASE, {"sensor": "a", "celsius": 1.0}), (BASE + 2000, {"sensor": "b", "celsius": 6.0}),
        (BASE + 3000, {"sensor": "c", "celsius": 8.0})]
    assert [(e.ts, e.row) for e in hum.drain()] == [(77, {"sensor": "h", "pct": 40})]


def test_elements_behind_a_time_set_by_another_input_are_late(mosquitto, tmp_path):
    """The stream's time can move through another input (here a heartbeat, as the HTTP API would send); an
    MQTT message behind it is refused by the engine and counted as late, not malformed."""
    eng = Engine()
    eng.execute("REGISTER STREAM T (a INT) FROM MQTT 't/#' FORMAT JSON TIMESTAMP ts")
    star = eng.execute("SELECT * FROM T")

    def m(a: int, t: int) -> tuple[str, bytes]:
        return "t/x", json.dumps({"a": a, "ts": t}).encode()

    async def main() -> None:
        ing = make_ingest(eng, "T", mosquitto.url, tmp_path / "dead.jsonl")
        await ing.start()
        try:
            await publish(mosquitto.port, [m(1, 5)])
            await wait_until(lambda: ing.stats["accepted"] == 1, "the first message")
            eng.heartbeat(100)
            await publish(mosquitto.port, [m(2, 50), m(3, 150)])
            await wait_until(lambda: ing.stats["accepted"] == 2 and ing.stats["late"] == 1, "late and good")
        finally:
            await ing.stop()
        assert ing.stats["malformed"] == 0
        (rec,) = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
        assert rec["reason"].startswith("late") and json.loads(rec["payload"]) == {"a": 2, "ts": 50}

    asyncio.run(main())
    assert [(e.ts, e.row["a"]) for e in star.drain()] == [(5, 1), (150, 3)]


# ---------------------------------------------------------------------------------------------- connections


def test_source_reconnects_after_a_broker_restart(mosquitto, tmp_path):
    """Stop the broker under a subscribed source, start it again on the same port: the source reconnects with
    backoff, subscribes again (the broker, without persistence, forgot the session) and gets what is published
    after the restart."""
    eng = Engine()
    eng.execute("REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' "
                "FORMAT JSON TIMESTAMP ts")
    star = eng.execute("SELECT * FROM Temp")

    async def main() -> None:
        ing = make_ingest(eng, "Temp", mosquitto.url, tmp_path / "dead.jsonl")
        await ing.start()
        try:
            await publish(mosquitto.port, [("sensors/a/temp", json.dumps(
                {"sensor": "a", "celsius": 1.0, "ts": BASE}).encode())])
            await wait_until(lambda: ing.stats["accepted"] == 1, "the first message")
            await asyncio.to_thread(mosquitto.stop)
            await wait_until(lambda: not ing.stats["connected"], "the source to notice the broker is gone")
            assert ing.stats["last_error"]
            await asyncio.to_thread(mosquitto.start)
            await wait_until(lambda: ing.stats["connected"] and ing.stats["reconnects"] >= 1,
                             "the source to reconnect", timeout=15)
            await publish(mosquitto.port, [("sensors/b/temp", json.dumps(
                {"sensor": "b", "celsius": 2.0, "ts": BASE + 10}).encode())])
            await wait_until(lambda: ing.stats["accepted"] == 2, "the message published after the restart")
        finally:
            await ing.stop()
        st = ing.stats
        assert st["reconnects"] >= 1 and st["session_lost"] >= 1 and st["session_present"] is False
        assert st["disconnected_seconds"] > 0 and st["malformed"] == 0

    asyncio.run(main())
    assert [e.row["sensor"] for e in star.drain()] == ["a", "b"]


def test_persistent_session_keeps_messages_published_while_the_source_was_away(mosquitto, tmp_path):
    """QoS 1 and a persistent session under a stable client id: what is published while the source is stopped
    (the broker still running) is delivered when a source for the same stream comes back."""
    eng = Engine()
    eng.execute("REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' "
                "FORMAT JSON TIMESTAMP ts")
    star = eng.execute("SELECT * FROM Temp")

    def msg(sensor: str, t: int) -> tuple[str, bytes]:
        return f"sensors/{sensor}/temp", json.dumps({"sensor": sensor, "celsius": 1.5, "ts": t}).encode()

    async def main() -> None:
        first = make_ingest(eng, "Temp", mosquitto.url, tmp_path / "dead.jsonl")
        await first.start()
        await publish(mosquitto.port, [msg("a", BASE)])
        await wait_until(lambda: first.stats["accepted"] == 1, "the first message")
        await first.stop()
        await publish(mosquitto.port, [msg("b", BASE + 1), msg("c", BASE + 2)])   # nobody connected
        second = make_ingest(eng, "Temp", mosquitto.url, tmp_path / "dead.jsonl")
        assert second.client_id == first.client_id
        await second.start()
        try:
            await wait_until(lambda: second.stats["accepted"] == 2, "the queued messages")
            assert second.stats["session_present"] is True
        finally:
            await second.stop(discard_session=True)
        # DROP STREAM's stop: the broker no longer queues for the stream, so 'd' is not delivered later;
        # 'e', published once a source is back, is (and would come after 'd' if 'd' had been queued).
        await publish(mosquitto.port, [msg("d", BASE + 3)])
        third = make_ingest(eng, "Temp", mosquitto.url, tmp_path / "dead.jsonl")
        await third.start()
        try:
            await publish(mosquitto.port, [msg("e", BASE + 4)])
            await wait_until(lambda: third.stats["accepted"] == 1, "the message published after the restart")
            assert third.stats["received"] == 1
        finally:
            await third.stop()

    asyncio.run(main())
    assert [e.row["sensor"] for e in star.drain()] == ["a", "b", "c", "e"]


def test_source_started_while_the_broker_is_down_keeps_trying(mosquitto, tmp_path):
    """start() returns after the first (failed) attempt; the source retries with backoff until the broker is
    there, without being restarted."""
    eng = Engine()
    eng.execute("REGISTER STREAM T (a INT) FROM MQTT 't' FORMAT JSON TIMESTAMP ts")
    star = eng.execute("SELECT * FROM T")

    async def main() -> None:
        await asyncio.to_thread(mosquitto.stop)
        ing = make_ingest(eng, "T", mosquitto.url, tmp_path / "dead.jsonl")
        await ing.start()
        try:
            assert not ing.stats["connected"] and ing.stats["failed_attempts"] == 1
            assert "refused" in ing.stats["last_error"].lower()
            await wait_until(lambda: ing.stats["failed_attempts"] >= 3, "more attempts")
            await asyncio.to_thread(mosquitto.start)
            await wait_until(lambda: ing.stats["connected"], "a connection once the broker is up", timeout=15)
            await publish(mosquitto.port, [("t", json.dumps({"a": 1, "ts": 5}).encode())])
            await wait_until(lambda: ing.stats["accepted"] == 1, "the message")
            assert (ing.stats["connects"], ing.stats["reconnects"]) == (1, 0)
        finally:
            await ing.stop()

    asyncio.run(main())
    assert star.drain() == [Element(5, 1, {"a": 1})]


# ---------------------------------------------------------------------------------------------- output


def test_publisher_round_trip(mosquitto):
    """Query results published one element per message as SPEC section 6 JSON; a plain subscriber reads them."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b FLOAT)")
    q = eng.execute("SELECT a, SUM(b) AS s FROM S [RANGE 10] GROUP BY a")
    eng.push("S", [{"a": 1, "b": 2.0}, {"a": 1, "b": 3.0}], ts=[5, 7])
    eng.heartbeat(30)
    eng.run()
    results = q.drain()
    assert any(e.sign == -1 for e in results)
    extra = {"ts": 40, "sign": 1, "row": {"a": np.int64(2), "s": np.float64(0.5)},
             "approx": {"sampling_rate": 0.5, "rel_error": 0.1}}
    want = [{"ts": e.ts, "sign": e.sign, "row": e.row} for e in results] + [
        {"ts": 40, "sign": 1, "row": {"a": 2, "s": 0.5}, "approx": {"sampling_rate": 0.5, "rel_error": 0.1}}]

    async def main() -> list[dict]:
        got: list[dict] = []
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as sub:
            await sub.subscribe("results/q1", qos=1)
            pub = MqttPublisher(mosquitto.url, "results/q1")
            await pub.start()
            try:
                assert await pub.publish(results + [extra]) == len(want)
                async with asyncio.timeout(10):
                    async for m in sub.messages:
                        assert m.qos == 1
                        got.append(json.loads(m.payload))
                        if len(got) == len(want):
                            break
            finally:
                await pub.stop()
            assert pub.stats["published"] == len(want) and pub.stats["dropped"] == 0
        return got

    assert asyncio.run(main()) == want


def test_publisher_buffers_across_a_broker_restart_and_counts_drops(mosquitto_persistent):
    """While the broker is down, publish() buffers up to max_buffer and counts the rest as dropped; after the
    restart the buffer is sent. The broker here keeps sessions, so an offline persistent subscriber gets them."""
    broker = mosquitto_persistent

    def el(i: int) -> dict:
        return {"ts": i, "sign": 1, "row": {"i": i}}

    async def main() -> None:
        async with aiomqtt.Client("127.0.0.1", broker.port, identifier="dsms-test-sub",
                                  clean_session=False) as sub:
            await sub.subscribe("results/r", qos=1)
        pub = MqttPublisher(broker.url, "results/r", max_buffer=3)
        await pub.start()
        try:
            await pub.publish([el(0)])
            await wait_until(lambda: pub.stats["published"] == 1, "the first element")
            await asyncio.to_thread(broker.stop)
            await wait_until(lambda: not pub.stats["connected"], "the publisher to notice")
            assert await pub.publish([el(i) for i in range(1, 6)]) == 3
            assert (pub.stats["buffered"], pub.stats["dropped"]) == (3, 2)
            await asyncio.to_thread(broker.start)
            await wait_until(lambda: pub.stats["published"] == 4 and pub.stats["buffered"] == 0,
                             "the buffer to be sent after the restart", timeout=15)
            assert pub.stats["reconnects"] >= 1
        finally:
            await pub.stop()
        got: list[dict] = []
        async with aiomqtt.Client("127.0.0.1", broker.port, identifier="dsms-test-sub",
                                  clean_session=False) as sub:
            await sub.subscribe("results/r", qos=1)
            async with asyncio.timeout(10):
                async for m in sub.messages:
                    got.append(json.loads(m.payload))
                    if len(got) == 4:
                        break
        assert got == [el(i) for i in range(4)]

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------- helpers


def test_urls_and_timestamps():
    u = parse_mqtt_url("mqtt://user:p%40ss@broker.example:1999")
    assert (u.host, u.port, u.username, u.password, u.tls) == ("broker.example", 1999, "user", "p@ss", False)
    assert parse_mqtt_url("tcp://10.0.0.1").port == 1883
    assert parse_mqtt_url("mqtts://h").port == 8883 and parse_mqtt_url("mqtts://h").tls
    assert "p@ss" not in repr(u)
    for bad in ["broker:1883", "http://h", "mqtt://h:99999", "mqtt://h/topic", "mqtt://"]:
        with pytest.raises(ValueError):
            parse_mqtt_url(bad)
    assert parse_timestamp(5) == 5 and parse_timestamp(7.0) == 7
    assert parse_timestamp("1970-01-01T00:00:01.5Z") == 1500
    assert parse_timestamp("1970-01-01T01:00:00+01:00") == 0
    assert parse_timestamp("1970-01-01T00:00:02") == 2000           # no zone: UTC
    assert parse_timestamp(iso(BASE)) == BASE
    assert parse_timestamp(msgpack.Timestamp.from_unix_nano(3_000_000)) == 3
    for bad in [True, 1.5, "soon", None, [1], float("nan")]:
        with pytest.raises(ValueError):
            parse_timestamp(bad)
