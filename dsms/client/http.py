"""A small synchronous client of the HTTP API (docs/http-api.md): JSON requests, and a query's results read
line by line as the server streams them (NDJSON), so that the shell can show them as they come."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

DEFAULT_URL = "http://127.0.0.1:8080"
OLDEST = -(2**63)


class ServerError(Exception):
    """A refusal by the server: its status and JSON body (``error``, ``detail``, and where known ``line``,
    ``column``, ``statement``)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        super().__init__(body.get("detail") or body.get("error") or f"HTTP {status}")

    @property
    def line(self) -> int | None:
        return self.body.get("line")

    @property
    def column(self) -> int | None:
        return self.body.get("column")


class Unreachable(Exception):
    """The server cannot be reached at all (not running, wrong address)."""


class DsmsClient:
    """``DsmsClient("http://127.0.0.1:8080", token)``; every method raises ``ServerError`` for a refusal and
    ``Unreachable`` when there is no server."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, timeout: float = 60.0) -> None:
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"--url must be an http:// or https:// address, not {url!r}")
        self.url = f"{parts.scheme}://{parts.netloc}"
        self.secure = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.secure else 80)
        self.token = token
        self.timeout = timeout

    def _conn(self, timeout: float | None) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if content_type:
            h["Content-Type"] = content_type
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None) -> Any:
        """One request; the decoded JSON answer (None for an empty one)."""
        conn = self._conn(self.timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=self._headers(content_type))
                resp = conn.getresponse()
                data = resp.read()
            except OSError as e:
                raise Unreachable(f"cannot reach the server at {self.url}: {e.strerror or e}") from None
            try:
                doc = json.loads(data) if data.strip() else None
            except ValueError:
                doc = {"error": "bad answer", "detail": data[:300].decode("utf-8", "replace")}
            if resp.status >= 400:
                raise ServerError(resp.status, doc if isinstance(doc, dict) else {"detail": str(doc)})
            return doc
        finally:
            conn.close()

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def cql(self, text: str) -> list[dict[str, Any]]:
        """``POST /cql``: what each statement created, dropped, showed or explained."""
        return self.request("POST", "/cql", text.encode(), "text/plain; charset=utf-8")["results"]

    def register_query(self, text: str) -> dict[str, Any]:
        """``POST /queries``: a bare query registered anonymously; its id, kind and schema."""
        body = json.dumps({"cql": text}).encode()
        return self.request("POST", "/queries", body, "application/json")

    def query(self, name: str) -> dict[str, Any]:
        return self.get(f"/queries/{quote(name, safe='')}")

    def results(self, query_id: str, from_ts: int | None = OLDEST) -> Iterator[dict[str, Any]]:
        """The query's results as the server streams them (NDJSON items: elements, heartbeats, gaps), from
        ``from_ts`` (the oldest retained result by default), until the query is dropped or the caller stops
        iterating (which closes the connection; the query keeps running)."""
        path = f"/queries/{quote(query_id, safe='')}/results?format=ndjson"
        if from_ts is not None:
            path += f"&from={from_ts}"
        conn = self._conn(None)
        try:
            try:
                conn.request("GET", path, headers=self._headers(None))
                resp = conn.getresponse()
            except OSError as e:
                raise Unreachable(f"cannot reach the server at {self.url}: {e.strerror or e}") from None
            if resp.status >= 400:
                data = resp.read()
                raise ServerError(resp.status, json.loads(data) if data.strip() else {})
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()
