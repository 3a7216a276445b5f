"""Fault injection: secrets in responses, logs and errors, and reads protected by the token (issue 18 item 3,
the runtime's part; ``test_secrets.py`` covers the configuration's).

What is injected: a broker URL with a password (``mqtt://alice:<password>@...``) used by a real MQTT source and
publisher against a real mosquitto, then every read endpoint; a URL whose port is not a number (valid for the
configuration, refused when the server starts); ``--protect-reads`` with and without a token.
What must hold: the password is in no response, in no line of the server's log and in no refusal; the user
name and host still show which broker is meant. With ``--protect-reads`` every read without the token is a
401 JSON error and with it a 200; without the setting reads stay open; the setting without a token refuses to
start.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiomqtt

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import ROOT, Server, elements, wait_for  # noqa: E402

PASSWORD = "pw-Zq81-secret"
TOKEN = "a-long-token-for-reads"


def test_the_broker_password_is_in_no_response_and_no_log_line(tmp_path: Path, mosquitto) -> None:
    url = f"mqtt://alice:{PASSWORD}@127.0.0.1:{mosquitto.port}"
    srv = Server(tmp_path / "data", "--mqtt-url", url, token=TOKEN).start()
    try:
        srv.cql("REGISTER STREAM S (v INT) FROM MQTT 'sec/in' FORMAT JSON TIMESTAMP ts;"
                "REGISTER QUERY q AS SELECT v FROM S PUBLISH TO MQTT 'sec/out';")
        wait_for(lambda: (srv.get("/streams/S").json()["stats"].get("mqtt") or {}).get("connected"),
                 what="source connected")

        async def pub() -> None:
            async with aiomqtt.Client("127.0.0.1", mosquitto.port) as c:
                await c.publish("sec/in", json.dumps({"v": 1, "ts": 5}), qos=1)
        asyncio.run(pub())
        srv.wait_results("q", lambda it: len(elements(it)) == 1)
        bodies = {}
        for path in ("/system", "/streams", "/streams/S", "/queries", "/queries/q", "/entities", "/metrics",
                     "/openapi.json", "/", "/queries/q/plan", "/nothing-here"):
            r = srv.get(path, auth=False)
            bodies[path] = r.body
            assert PASSWORD.encode() not in r.body, path
        assert json.loads(bodies["/system"])["config"]["mqtt_url"] == \
            f"mqtt://alice:***@127.0.0.1:{mosquitto.port}"
    finally:
        srv.stop()
    log = srv.log.read_text()
    assert "subscribed" in log                  # the log does talk about the broker...
    assert PASSWORD not in log                  # ...never with its password


def test_a_broker_url_refused_at_start_does_not_echo_its_password(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "dsms.cli", "serve", "--data-dir", str(tmp_path / "d"),
                        "--port", "0", "--mqtt-url", f"mqtt://alice:{PASSWORD}@broker:notaport"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "mqtt_url" in p.stderr and "alice:***@broker" in p.stderr, p.stderr
    assert PASSWORD not in p.stderr + p.stdout


READS = ("/", "/system", "/streams", "/streams/S", "/queries", "/queries/q", "/queries/q/plan",
         "/queries/q/results?follow=false", "/entities", "/metrics", "/openapi.json")


def test_protect_reads_makes_every_read_need_the_token(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data", "--protect-reads", token=TOKEN).start()
    try:
        srv.cql("REGISTER STREAM S (v INT); REGISTER QUERY q AS SELECT v FROM S;")
        for path in READS:
            r = srv.get(path, auth=False)
            assert r.status == 401, (path, r)
            assert r.json()["error"] == "unauthorized" and r.headers["www-authenticate"].startswith("Bearer")
            r = srv.get(path, headers={"Authorization": "Bearer wrong-token-123"}, auth=False)
            assert r.status == 401, (path, r)
            assert srv.get(path).status == 200, path
    finally:
        srv.stop()


def test_reads_stay_open_without_the_setting(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data", token=TOKEN).start()
    try:
        srv.cql("REGISTER STREAM S (v INT); REGISTER QUERY q AS SELECT v FROM S;")
        for path in READS:
            assert srv.get(path, auth=False).status == 200, path
        assert srv.post("/cql", body="REGISTER STREAM T (v INT)", auth=False).status == 401
    finally:
        srv.stop()


def test_protect_reads_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "dsms.cli", "serve", "--data-dir", str(tmp_path / "d"), "--port",
                        "0", "--protect-reads"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert p.returncode == 2 and "protect_reads" in p.stderr and "token" in p.stderr, p.stderr
