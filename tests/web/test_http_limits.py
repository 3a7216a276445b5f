"""Limits, auth and start-up failures of ``dsms serve`` (SPEC section 10): 413, 409, 401, clear exits."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from httpkit import ROOT, Server, free_port

LIMITS = """
[limits]
request_bytes = 2048
statement_chars = 300
max_queries = 2
"""

TOKEN = "s3cret-token-value"


def test_size_statement_and_query_limits(make_server) -> None:
    srv = make_server(config=LIMITS).start()
    srv.cql("REGISTER STREAM s (a INT, b STRING)")
    big = b'[{"ts": 1, "row": {"a": 1, "b": "' + b"x" * 4000 + b'"}}]'
    r = srv.post("/streams/s/elements", body=big, headers={"Content-Type": "application/json"})
    assert r.status == 413 and r.json()["error"] and "limit" in r.json()["detail"]
    # the same without a Content-Length (chunked): refused while reading
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    c.request("POST", "/streams/s/elements", body=iter([big[:1000], big[1000:]]),
              headers={"Content-Type": "application/json"}, encode_chunked=True)
    resp = c.getresponse()
    assert resp.status == 413
    c.close()
    long_cql = "SELECT a FROM s WHERE " + " OR ".join(f"a = {i}" for i in range(60))
    r = srv.post("/queries", json_body={"cql": long_cql})
    assert r.status == 413 and "statement_chars" in r.json()["detail"]
    r = srv.post("/cql", body=long_cql, headers={"Content-Type": "text/plain"})
    assert r.status == 413
    assert srv.post("/queries", json_body={"cql": "SELECT * FROM s"}).status == 201
    assert srv.post("/queries", json_body={"cql": "SELECT a FROM s"}).status == 201
    r = srv.post("/queries", json_body={"cql": "SELECT b FROM s"})
    assert r.status == 409 and "max_queries" in r.json()["detail"]
    assert srv.post("/streams/s/elements", json_body=[{"ts": 1, "row": {"a": 1, "b": "ok"}}]).status == 200


def test_token_is_required_on_mutating_requests(make_server) -> None:
    srv = make_server(token=TOKEN).start()
    ok = srv.post("/cql", body="REGISTER STREAM s (a INT)", headers={"Content-Type": "text/plain"})
    assert ok.status == 200
    r = srv.post("/cql", body="REGISTER STREAM t (a INT)", auth=False)
    assert r.status == 401 and r.json()["error"] == "unauthorized" and r.headers["www-authenticate"]
    r = srv.post("/streams/s/elements", json_body=[], headers={"Authorization": "Bearer wrong-token"}, auth=False)
    assert r.status == 401 and TOKEN not in r.body.decode()
    assert srv.request("DELETE", "/streams/s", auth=False).status == 401
    assert srv.request("PATCH", "/system", json_body={"policy": "fifo"}, auth=False).status == 401
    # reads stay open; the token never shows
    assert srv.get("/streams", auth=False).status == 200
    sysj = srv.get("/system", auth=False).json()
    assert sysj["config"]["token"] == "***"
    srv.stop()
    assert TOKEN not in srv.log.read_text()


def test_beyond_loopback_without_token_refuses_changes(make_server) -> None:
    srv = make_server("--host", "0.0.0.0").start()
    r = srv.post("/cql", body="REGISTER STREAM s (a INT)")
    assert r.status == 401 and "token" in r.json()["detail"]
    assert srv.get("/streams").status == 200


def _serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsms.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_serve_exits_with_a_clear_message(tmp_path: Path, make_server) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = _serve("serve", "--port", str(port), "--data-dir", str(tmp_path / "d1"))
    assert p.returncode != 0 and "cannot listen" in p.stderr and "in use" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = _serve("serve", "--port", str(free_port()), "--data-dir", str(blocker / "sub"))
    assert p.returncode != 0 and "data directory" in p.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('port = "eighty"\n')
    p = _serve("serve", "--config", str(bad))
    assert p.returncode == 2 and "'port'" in p.stderr
    bad.write_text("[limits]\nmax_querys = 3\n")
    p = _serve("serve", "--config", str(bad))
    assert p.returncode == 2 and "limits.max_querys" in p.stderr
    bad.write_text("this is not toml")
    p = _serve("serve", "--config", str(bad))
    assert p.returncode == 2 and "TOML" in p.stderr
    # a second server on the same data directory
    first = make_server().start()
    p = _serve("serve", "--port", str(free_port()), "--data-dir", str(first.data_dir))
    assert p.returncode != 0 and "already open" in p.stderr
    p = _serve("replay")                 # a usage error (tests/spark/test_replay_cli.py has the rest)
    assert p.returncode == 2 and "one of the arguments --query --query-id is required" in p.stderr


def test_archive_list_and_print(make_server) -> None:
    srv = make_server().start()
    srv.cql("REGISTER STREAM s (a INT, b STRING)")
    assert srv.post("/streams/s/elements", json_body=[{"ts": t, "row": {"a": t, "b": f"v{t}"}} for t in range(5)]
                    + [{"heartbeat": 9}]).status == 200
    srv.stop()
    p = _serve("archive", "list", "--data-dir", str(srv.data_dir))
    assert p.returncode == 0 and "s " in p.stdout and p.stdout.splitlines()[0].startswith("input")
    p = _serve("archive", "print", "--data-dir", str(srv.data_dir), "--input", "s", "--from", "2", "--to", "4")
    import json
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["row"]["a"] for x in lines] == [2, 3]
    p = _serve("archive", "print", "--data-dir", str(srv.data_dir))
    assert any('"heartbeat": 9' in x or '"heartbeat":9' in x for x in p.stdout.splitlines())
    p = _serve("archive", "list", "--data-dir", str(srv.data_dir / "nope"))
    assert p.returncode != 0 and "no archive" in p.stderr


@pytest.mark.parametrize("path", ["/queries/nope/results", "/queries/nope/plan", "/queries/nope",
                                  "/streams/nope", "/relations/nope", "/entities/nope:1"])
def test_unknown_names_are_404_json(server: Server, path: str) -> None:
    r = server.get(path)
    assert r.status == 404 and r.json()["error"] == "not found" and r.json()["detail"]
