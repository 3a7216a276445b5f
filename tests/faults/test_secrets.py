"""Fault injection: a broker password in the MQTT URL (issue 18 item 3, the part in the configuration).

What is injected: ``--mqtt-url mqtt://alice:<password>@...`` with a token set, then unauthenticated reads of
``GET /system`` and ``/openapi.json``, and a URL of the wrong scheme that makes ``dsms serve`` refuse to start.
What must hold: the password appears in no response, in neither the server's log nor the refusal message;
the user name and host still do, so an operator can tell which broker is meant.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import ROOT, Server  # noqa: E402

PASSWORD = "s3cret-Pa55word"


def test_the_mqtt_password_is_never_served_or_logged(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data", "--mqtt-url", f"mqtt://alice:{PASSWORD}@127.0.0.1:1", token="a-long-token-1")
    srv.start()
    try:
        for path in ("/system", "/openapi.json", "/streams", "/"):
            r = srv.get(path, auth=False)
            assert r.status == 200, (path, r)
            assert PASSWORD.encode() not in r.body, path
        config = srv.get("/system", auth=False).json()["config"]
        assert config["mqtt_url"] == "mqtt://alice:***@127.0.0.1:1" and config["token"] == "***"
    finally:
        srv.stop()
    assert PASSWORD not in srv.log.read_text()


def test_a_refused_mqtt_url_does_not_echo_its_password(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "dsms.cli", "serve", "--data-dir", str(tmp_path / "d"),
                        "--mqtt-url", f"tcp://alice:{PASSWORD}@broker"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode != 0
    assert "mqtt_url" in p.stderr and "alice:***@broker" in p.stderr
    assert PASSWORD not in p.stderr + p.stdout
