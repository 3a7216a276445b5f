"""Test harness for the HTTP API: a real ``dsms serve`` subprocess on a free loopback port, and small
synchronous HTTP helpers (http.client) with deadlines instead of sleeps."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<{self.status} {self.body[:300]!r}>"


class Server:
    """``python -m dsms.cli serve`` on 127.0.0.1:<free port> with its own data directory."""

    def __init__(self, data_dir: Path, *args: str, config: str | None = None, token: str | None = None,
                 port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.args = list(args)
        self.config = config
        self.token = token
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log = self.data_dir.parent / f"server-{self.data_dir.name}-{self.port}.log"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "dsms.cli", "serve", "--port", str(self.port), "--data-dir",
               str(self.data_dir), *self.args]
        if self.config is not None:
            cfg = self.data_dir.parent / f"config-{self.port}.toml"
            cfg.write_text(self.config)
            cmd += ["--config", str(cfg)]
        if self.token is not None:
            cmd += ["--token", self.token]
        return cmd

    def start(self, timeout: float = 30.0) -> Server:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("DSMS_TOKEN", None)
        self._logf = open(self.log, "ab")
        self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=env, stdout=self._logf, stderr=self._logf)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if self.request("GET", "/system", timeout=2).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"server did not come up: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._logf.close()
        return self.proc.returncode

    # ---------------------------------------------------------------- requests

    def conn(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                json_body: Any = None, timeout: float = 30.0, auth: bool = True) -> Response:
        h = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        if auth and self.token is not None:
            h.setdefault("Authorization", f"Bearer {self.token}")
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            c.close()

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Response:
        return self.request("POST", path, **kw)

    def cql(self, text: str) -> Any:
        r = self.post("/cql", body=text, headers={"Content-Type": "text/plain"})
        assert r.status == 200, r
        return r.json()["results"]

    def ndjson(self, stream: str, items: list[dict]) -> Response:
        body = "".join(json.dumps(i) + "\n" for i in items)
        return self.post(f"/streams/{stream}/elements", body=body,
                         headers={"Content-Type": "application/x-ndjson"})

    def results(self, query: str, **params: Any) -> list[dict]:
        """Everything retained (follow=false), as parsed NDJSON items."""
        q = "&".join(f"{k}={v}" for k, v in {"follow": "false", **params}.items())
        r = self.get(f"/queries/{query}/results?{q}")
        assert r.status == 200, r
        return [json.loads(line) for line in r.body.decode().splitlines() if line.strip()]

    def wait_results(self, query: str, pred, timeout: float = 20.0, **params: Any) -> list[dict]:
        """Poll (with a deadline) until ``pred(items)`` holds; returns the items."""
        last: list[dict] = []

        def ready():
            last[:] = self.results(query, **params)
            return pred(last)
        try:
            wait_for(ready, timeout=timeout)
        except AssertionError:
            raise AssertionError(f"condition not met before the deadline; last items: {last[-10:]}") from None
        return last


def wait_for(pred, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something true (returned), failing with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"{what} not met before the deadline")


def elements(items: list[dict]) -> list[dict]:
    return [i for i in items if "row" in i]


def bag_by_ts(elems: list[Any]) -> dict[int, Counter]:
    """Results compared as a bag per instant (order within an instant is not part of the contract)."""
    out: dict[int, Counter] = defaultdict(Counter)
    for e in elems:
        if isinstance(e, dict):
            ts, sign, row = e["ts"], e["sign"], e["row"]
        else:
            ts, sign, row = e.ts, e.sign, e.row
        out[ts][(sign, tuple(sorted((k, _norm(v)) for k, v in row.items())))] += 1
    return dict(out)


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 9)
    return v
