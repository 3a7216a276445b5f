"""End to end through the real server and a real mosquitto (issue 3): a stream registered over HTTP is fed
over MQTT, results are read over HTTP and published to MQTT, and the source carries on after the broker
restarts. Results are compared with the engine's own answer for the same input."""

from __future__ import annotations

import asyncio
import json
import time

import aiomqtt
from httpkit import Server, bag_by_ts, elements
from httpkit import wait_for as wait

from dsms import Engine


def publish(port: int, topic: str, payloads: list[dict]) -> None:
    async def go():
        async with aiomqtt.Client("127.0.0.1", port) as c:
            for p in payloads:
                await c.publish(topic, json.dumps(p), qos=1)
    asyncio.run(go())


def test_mqtt_in_http_out_and_publish_to_mqtt(tmp_path, mosquitto):
    srv = Server(tmp_path / "data", "--mqtt-url", mosquitto.url).start()
    try:
        srv.cql("REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' FORMAT JSON "
                "TIMESTAMP ts;")
        srv.cql("REGISTER QUERY hot AS SELECT sensor, celsius FROM Temp WHERE celsius > 30.0 "
                "PUBLISH TO MQTT 'alerts/hot';")
        srv.cql("REGISTER QUERY avg AS SELECT sensor, AVG(celsius) AS a FROM Temp [RANGE 10] GROUP BY sensor;")
        got_published: list[dict] = []

        async def subscribe_then_publish():
            async with aiomqtt.Client("127.0.0.1", mosquitto.port) as c:
                await c.subscribe("alerts/hot", qos=1)
                async with aiomqtt.Client("127.0.0.1", mosquitto.port) as p:
                    readings = [{"sensor": f"s{i % 3}", "celsius": 20.0 + 3 * i, "ts": 10 * i} for i in range(8)]
                    for r in readings:
                        await p.publish(f"sensors/{r['sensor']}/temp", json.dumps(r), qos=1)
                deadline = time.monotonic() + 20
                async for msg in c.messages:
                    got_published.append(json.loads(msg.payload))
                    if len(got_published) >= 3 or time.monotonic() > deadline:
                        break

        # make sure the server's source is connected before publishing
        wait(lambda: (srv.get("/streams/Temp").json()["stats"].get("mqtt") or {}).get("connected"),
             what="MQTT source connected")
        asyncio.run(asyncio.wait_for(subscribe_then_publish(), 30))
        readings = [{"sensor": f"s{i % 3}", "celsius": 20.0 + 3 * i} for i in range(8)]
        ts = [10 * i for i in range(8)]
        eng = Engine()
        eng.execute("REGISTER STREAM Temp (sensor STRING, celsius FLOAT)")
        hot = eng.execute("SELECT sensor, celsius FROM Temp WHERE celsius > 30.0")
        avg = eng.execute("SELECT sensor, AVG(celsius) AS a FROM Temp [RANGE 10] GROUP BY sensor")
        eng.push("Temp", readings, ts=ts)
        eng.heartbeat(70)
        eng.run()
        want_hot, want_avg = hot.drain(), avg.drain()
        items = srv.wait_results("hot", lambda it: len(elements(it)) >= len(want_hot))
        assert bag_by_ts(elements(items)) == bag_by_ts(want_hot)
        srv.ndjson("Temp", [{"heartbeat": 70}])
        items = srv.wait_results("avg", lambda it: any(e.get("ts") == 60 for e in elements(it)))
        assert bag_by_ts([e for e in elements(items) if e["ts"] < 70]) == bag_by_ts(want_avg)
        assert {(p["ts"], p["row"]["sensor"]) for p in got_published} <= {(e.ts, e.row["sensor"])
                                                                           for e in want_hot}
        assert got_published
    finally:
        srv.stop()


def test_source_resumes_after_broker_restart(tmp_path, mosquitto):
    srv = Server(tmp_path / "data", "--mqtt-url", mosquitto.url).start()
    try:
        srv.cql("REGISTER STREAM T (v INT) FROM MQTT 'in/t' FORMAT JSON TIMESTAMP ts;")
        srv.cql("REGISTER QUERY all_t AS SELECT v FROM T;")

        def source_stats():
            r = srv.get("/streams/T").json()
            return r["stats"].get("mqtt") or {}

        wait(lambda: source_stats().get("connected"), what="source connected")
        publish(mosquitto.port, "in/t", [{"v": 1, "ts": 1}, {"v": 2, "ts": 2}])
        srv.wait_results("all_t", lambda it: len(elements(it)) == 2)
        mosquitto.stop()
        wait(lambda: source_stats().get("connected") is False, what="source noticed the broker went away")
        mosquitto.start()
        wait(lambda: source_stats().get("connected") and source_stats().get("reconnects", 0) >= 1,
             what="source reconnected")
        publish(mosquitto.port, "in/t", [{"v": 3, "ts": 3}, {"not": "a row"}])
        items = srv.wait_results("all_t", lambda it: len(elements(it)) == 3)
        assert [e["row"]["v"] for e in elements(items)] == [1, 2, 3]
        wait(lambda: source_stats().get("malformed", 0) >= 1, what="malformed payload counted")
        # the file docs/mqtt.md names: <data_dir>/dead-letter/<stream name in lower case>.ndjson
        assert [p.name for p in (tmp_path / "data" / "dead-letter").iterdir()] == ["t.ndjson"]
        assert "not" in (tmp_path / "data" / "dead-letter" / "t.ndjson").read_text()
    finally:
        srv.stop()


def test_registering_while_the_broker_is_down_warns_and_shows_the_state(tmp_path, mosquitto):
    """Issue 17: FROM MQTT with the broker down is registered (201) with a warning naming the broker and the
    error; /streams/{name} shows the connection state, which turns to connected when the broker comes up."""
    mosquitto.stop()
    srv = Server(tmp_path / "data", "--mqtt-url", mosquitto.url).start()
    try:
        r = srv.post("/streams", json_body={"name": "Down", "columns": {"v": "INT"},
                                            "source": {"mqtt": "in/down", "timestamp": "ts"}})
        assert r.status == 201, r
        warning = r.json()["warning"]
        assert f"127.0.0.1:{mosquitto.port}" in warning and "cannot connect" in warning
        assert "refused" in warning.lower(), warning                # the error itself, as the OS gave it
        [res] = srv.cql("REGISTER STREAM Down2 (v INT) FROM MQTT 'in/down2' TIMESTAMP ts")
        assert res["created"] == "stream" and f"127.0.0.1:{mosquitto.port}" in res["warning"]
        conn = srv.get("/streams/Down").json()["connection"]
        assert conn["state"] == "disconnected" and conn["broker"] == mosquitto.url and conn["error"]
        mosquitto.start()
        wait(lambda: srv.get("/streams/Down").json()["connection"]["state"] == "connected",
             what="the source connected once the broker is up")
        [res] = srv.cql("REGISTER STREAM Up (v INT) FROM MQTT 'in/up' TIMESTAMP ts")
        assert "warning" not in res
        assert srv.get("/streams/Up").json()["connection"]["state"] == "connected"
        assert srv.get("/streams").json()["streams"][0]["connection"]["topic"] == "in/down"
    finally:
        srv.stop()
