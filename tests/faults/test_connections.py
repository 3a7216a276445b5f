"""Fault injection: connections that misbehave below HTTP (issue 18, low items).

What is injected against a real server: a request line of 20,000 bytes, a header of 20,000 bytes, a method
that is not a token, a method no route knows, a connection that sends nothing, one that stops in the middle of
its request headers, one that finishes a request and then stays idle.
What must hold: every refusal is a JSON error like every other (``{"error", "detail"}``), never plain text;
idle and stuck connections are closed after ``limits.idle_timeout_s``; the log has no traceback.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import Server  # noqa: E402


def raw(port: int, data: bytes, timeout: float = 10.0) -> tuple[bytes, float]:
    """Send ``data``, read until the server closes; returns what came back and how long the server took."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    t = time.monotonic()
    if data:
        s.sendall(data)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except TimeoutError:
        out += b"<still open>"
    finally:
        s.close()
    return out, time.monotonic() - t


def status_and_json(resp: bytes) -> tuple[int, dict]:
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"application/json" in head.lower(), head
    return status, json.loads(body)


def test_malformed_requests_get_json_errors_and_idle_connections_close(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data", config="[limits]\nidle_timeout_s = 1.0\n").start()
    try:
        cases = {
            "long URL": b"GET /streams?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            "long header": b"GET /streams HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n",
            "bad method": b"GE(T /streams HTTP/1.1\r\nHost: x\r\n\r\n",
            "unknown method": b"BREW /streams HTTP/1.1\r\nHost: x\r\n\r\n",
            "not HTTP": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40 + b"\r\n\r\n",
        }
        for what, data in cases.items():
            resp, _ = raw(srv.port, data)
            status, body = status_and_json(resp)
            assert status == 400 and body["error"] and body["detail"], (what, resp[:300])
        resp, _ = raw(srv.port, b"BREW /streams HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, body = status_and_json(resp)
        assert status == 400 and "method" in body["detail"].lower() and "\n" not in body["detail"], body
        r = srv.request("PUT", "/streams")                       # a method the parser knows, no route has
        assert r.status == 405 and r.json()["error"], r

        for what, data in {"silent": b"", "stuck in its headers": b"GET /system HTTP/1.1\r\nHost"}.items():
            resp, took = raw(srv.port, data)
            assert resp == b"" and took < 5, (what, resp[:200], took)
        resp, took = raw(srv.port, b"GET /system HTTP/1.1\r\nHost: x\r\n\r\n")    # keep-alive, then idle
        assert resp.startswith(b"HTTP/1.1 200") and not resp.endswith(b"<still open>") and took < 5, took
        assert srv.get("/system").status == 200
    finally:
        srv.stop()
    log = srv.log.read_text()
    assert "Traceback" not in log, log[-3000:]
