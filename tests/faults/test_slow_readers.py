"""Fault injection: readers that never read (issue 18 item 8).

What is injected: against a real server whose readers may hold 3 MB unread in all (``results.reader_memory``),
three result readers ask for the largest buffer and never read a byte, while 16 MB of wide results are produced;
a fourth reader reads as fast as it can. And ``?buffer=`` far above the cap.
What must hold: the readers' unread bytes stay within the budget (plus one batch), each slow reader is
disconnected and its stream ends with a final ``closed`` item saying why and the ``?from=`` to resume at; the
fast reader gets every element with no gap; an absurd ``?buffer=`` is a 400 naming the limit.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import Server, wait_for  # noqa: E402

BUDGET = 3 * 1024 * 1024
ROWS, REQUESTS, WIDTH = 400, 40, 1000


def slow_reader(port: int) -> socket.socket:
    """A reader that sends its request and then never reads: its kernel buffers fill, then the server's."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /queries/q/results?buffer=1000000 HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def read_all(s: socket.socket, timeout: float = 30.0) -> bytes:
    s.settimeout(timeout)
    out = b""
    while b'"closed"' not in out or not out.endswith(b"\r\n\r\n"):
        try:
            data = s.recv(1 << 16)
        except TimeoutError:
            break
        if not data:
            break
        out += data
    return out


def test_readers_that_never_read_are_disconnected_within_the_budget(tmp_path: Path) -> None:
    cfg = f"[results]\nreader_memory = {BUDGET}\nreader_buffer_bytes = {BUDGET}\nretention = 100\n"
    srv = Server(tmp_path / "data", "--fsync", "never", config=cfg).start()
    try:
        srv.cql("REGISTER STREAM S (i INT, pad STRING); REGISTER QUERY q AS SELECT i, pad FROM S;")
        r = srv.get("/queries/q/results?buffer=10000000")
        assert r.status == 400 and "buffer" in r.json()["detail"], r

        fast: list[int] = []
        fast_other: list[dict] = []

        def read_fast() -> None:
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            c.request("GET", "/queries/q/results")
            resp = c.getresponse()
            while len(fast) < ROWS * REQUESTS:
                line = resp.readline()
                if not line:
                    break
                item = json.loads(line)
                if "row" in item:
                    fast.append(item["row"]["i"])
                elif "heartbeat" not in item:
                    fast_other.append(item)
            c.close()

        slow = [slow_reader(srv.port) for _ in range(3)]
        reader = threading.Thread(target=read_fast, daemon=True)
        reader.start()
        wait_for(lambda: srv.get("/system").json()["runtime"]["subscribers"] == 4, what="four readers")
        pad = "x" * WIDTH
        for k in range(REQUESTS):
            rows = [{"ts": k, "row": {"i": k * ROWS + j, "pad": pad}} for j in range(ROWS)]
            assert srv.ndjson("S", rows).status == 200
        readers = wait_for(lambda: (st := srv.get("/system").json()["runtime"]["readers"])["disconnected"] >= 3
                           and st, timeout=30, what="three slow readers disconnected")
        reader.join(60)
        assert sorted(fast) == list(range(ROWS * REQUESTS)) and not fast_other, fast_other[:3]
        chunk = ROWS * (WIDTH + 100)
        print(f"readers: {readers}")
        assert readers["disconnected"] == 3 and readers["peak_bytes"] <= BUDGET + chunk, readers
        for s in slow:
            body = read_all(s)
            s.close()
            last = [json.loads(line) for line in body.split(b"\r\n") if line.startswith(b'{"closed"')]
            assert len(last) == 1, body[-500:]
            closed = last[0]["closed"]
            assert "results.reader_memory" in closed["reason"] and "fell too far behind" in closed["reason"]
            assert isinstance(closed["resume_from"], int)
        wait_for(lambda: srv.get("/system").json()["runtime"]["readers"]["bytes"] == 0,
                 what="the readers' bytes released")
    finally:
        srv.stop()
