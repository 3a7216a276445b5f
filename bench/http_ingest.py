"""HTTP ingest benchmark (SPEC section 11): end-to-end tuples/s through a real ``dsms serve`` (columnar msgpack
batches in, ``SELECT * FROM S WHERE v >= 0`` in the engine, one NDJSON reader out) beside baselines measured in
the same run with the same request stream; and ingest-to-result latency (p50, p99) at fixed offered rates.

    python bench/http_ingest.py [--json PATH] [--seconds S] [--rates 10000,50000,100000] [--random-values]
                                [--rounds N] [--compare TREE] [--reader raw|aiohttp]

Stages, each driven by the same client sending the same bodies over the same number of connections:

* ``ceiling``: a bare aiohttp server that reads each body and discards it (no decoding, no work at all). It is
  the rate at which this machine can move the bytes, and shows that the client can send far faster than dsms
  can take: the client is not the bottleneck.
* ``ingest``: dsms with the stream registered and no query: decode, validate, archive (group commit) and
  hand to the engine, which has nobody to give it to.
* ``query``: the select query registered, no reader: the engine runs the plan and results fill the retention
  ring, but nobody asks for them as JSON.
* ``e2e``: the same with one NDJSON reader (the figure issue 3 is about).

For each stage the bench reports tuples/s and the CPU time the server process and the client process used
(from ``/proc``), so the cost of each step is visible as server microseconds per tuple, and whether the client
kept up (its CPU share) can be read too. Both servers are subprocesses on loopback and the client is this
process (asyncio + aiohttp): on a 2-core machine client and server share the CPU.

Issue 15's figure is e2e / ingest: printed as the ratio of tuples/s and as the ratio of the server's CPU time
per tuple (ingest's over e2e's). The second is the one to read on a shared machine: the client and other
processes compete for the same cores, and more so in e2e, where the client reads 67 bytes of JSON per tuple.
``--rounds N`` runs the dsms stages N times on fresh servers and reports medians (ratios per round, then the
median); ``--compare TREE`` runs a second source tree's server (say, the previous commit in a scratch
directory) alternately with this one's, round by round, so a before/after comparison sees the same load.

The reader (``--reader raw``, the default) is a plain asyncio protocol on its own connection that decodes
the chunked transfer coding itself and counts lines in place with numpy (12 ns of client CPU a result line,
against 66 ns for the ``bytes.count``/``find`` scans it used before, on the two cores it shares with the
server); ``--reader aiohttp`` reads through aiohttp's client instead.

Latency of a batch is measured from just before its request is sent to the arrival of its last result line at
the reader (the select keeps order, so counting lines suffices).

``--random-values`` sends full-precision random floats and large integers instead of the default small whole
numbers, which the JSON encoder formats faster (see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import msgpack
import numpy as np

ROOT = Path(__file__).resolve().parents[1]

BARE_SERVER = r"""
import sys
from aiohttp import web
async def sink(request):
    await request.read()
    return web.json_response({"accepted": 0})
async def ok(request):
    return web.json_response({})
app = web.Application(client_max_size=64 << 20)
app.router.add_post("/streams/{name}/elements", sink)
app.router.add_get("/system", ok)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_body(n: int, seed: int, random_values: bool = False) -> bytes:
    """A columnar msgpack batch without timestamps (the server stamps arrival time), so concurrent senders
    can never be refused for going back in time."""
    if random_values:
        rng = random.Random(seed)
        return msgpack.packb({"cols": {
            "k": [rng.randrange(1 << 40) for _ in range(n)],
            "v": [rng.random() * 1000 for _ in range(n)],
            "tag": ["abcdefgh"[(seed + i) % 8] * 4 for i in range(n)],
        }})
    return msgpack.packb({"cols": {
        "k": [(seed + i) % 100 for i in range(n)],
        "v": [float((seed * 31 + i) % 1000) for i in range(n)],
        "tag": ["abcdefgh"[(seed + i) % 8] * 4 for i in range(n)],
    }})


def proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) used so far by process ``pid``; None where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


async def wait_up(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}")
            try:
                async with s.get(url + "/system") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError("server did not start")


async def blast(url: str, body: bytes, rows: int, seconds: float, concurrency: int,
                stream: str = "s") -> tuple[int, float]:
    """Send ``body`` as fast as ``concurrency`` connections allow for ``seconds``; returns tuples acknowledged
    and the elapsed time."""
    sent = 0
    stop_at = time.perf_counter() + seconds
    headers = {"Content-Type": "application/msgpack"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def worker():
            nonlocal sent
            while time.perf_counter() < stop_at:
                async with s.post(f"{url}/streams/{stream}/elements", data=body, headers=headers) as r:
                    await r.read()
                    if r.status == 200:
                        sent += rows
                    elif r.status == 503:
                        await asyncio.sleep(float(r.headers.get("Retry-After", "1")) / 10)
                    else:
                        raise RuntimeError(f"ingest failed: {r.status} {await r.text()}")
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return sent, time.perf_counter() - t0


class Chunks:
    """HTTP/1.1 chunked transfer decoding of a response body fed in pieces as they arrive (``feed`` returns
    where the payload is in each piece; ``done`` once the last, empty chunk is seen). The bench's raw reader
    uses it to count lines in place in what the transport received, without a stream buffer between."""

    def __init__(self) -> None:
        self.left = 0            # payload bytes of the current chunk still to come
        self.crlf = 0            # bytes of the CRLF after the current chunk's payload still to skip
        self.head = b""          # an incomplete chunk-size line
        self.done = False

    def feed(self, data: bytes) -> tuple[bytes, list[tuple[int, int]]]:
        """``data`` (with an incomplete size line held from before put in front) and the ranges of it that
        are payload: no payload byte is copied."""
        out = []
        if self.head:
            data, self.head = self.head + data, b""
        pos, n = 0, len(data)
        while pos < n and not self.done:
            if self.left:
                take = min(self.left, n - pos)
                out.append((pos, pos + take))
                self.left -= take
                pos += take
                continue
            if self.crlf:
                skip = min(self.crlf, n - pos)
                self.crlf -= skip
                pos += skip
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                self.head = data[pos:]
                break
            size = int(data[pos:eol].split(b";", 1)[0], 16)
            pos = eol + 2
            if size == 0:
                self.done = True
            else:
                self.left, self.crlf = size, 2
        return data, out


class _Sink(asyncio.Protocol):
    """The raw reader's connection: the response head checked, then each piece the transport receives
    decoded (``Chunks``) and counted in place, in ``data_received`` (no stream buffer, no copy)."""

    def __init__(self, reader: Reader, loop: asyncio.AbstractEventLoop) -> None:
        self.reader = reader
        self.finished = loop.create_future()
        self.head = b""
        self.chunks: Chunks | None = None
        self.tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            if self.chunks is None:
                self.head += data
                end = self.head.find(b"\r\n\r\n")
                if end < 0:
                    return
                head, data = self.head[:end], self.head[end + 4:]
                if head.split(b" ", 2)[1] != b"200":
                    raise RuntimeError(f"results reader refused: {head.decode('latin-1')!r}")
                if b"transfer-encoding: chunked" not in head.lower():
                    raise RuntimeError(f"results stream is not chunked: {head.decode('latin-1')!r}")
                self.chunks = Chunks()
                self.reader._ready.set()
            data, ranges = self.chunks.feed(data)
            for lo, hi in ranges:
                self.tail = self.reader._arrived(data, self.tail, lo, hi)
            if self.chunks.done and not self.finished.done():
                self.finished.set_result(None)
        except Exception as e:  # noqa: BLE001 - the bench says why its reader stopped
            if not self.finished.done():
                self.finished.set_exception(e)
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_result(None)


class Reader:
    """Counts result lines of one NDJSON results stream; records when each cumulative count was reached.

    Lines are counted in place in each received chunk (no copy of the stream), heartbeat and gap lines are
    told apart by their first bytes; only a line cut by a chunk boundary is reassembled."""

    def __init__(self) -> None:
        self.lines = 0
        self.missed = 0
        self.marks: list[tuple[int, float]] = []     # (cumulative lines wanted, arrival time) filled on demand
        self._want: list[int] = []
        self._ready = asyncio.Event()

    def _feed(self, data: bytes, tail: bytes, lo: int = 0, hi: int | None = None) -> bytes:
        """Count the lines ``data[lo:hi]`` completes (``tail``: the start of a line the previous piece cut);
        returns the start of the line this piece cuts."""
        if hi is None:
            hi = len(data)
        first = data.find(b"\n", lo, hi)
        if first < 0:
            return tail + data[lo:hi]
        if tail:                                      # the line that started in the previous piece
            whole = tail + data[lo:first + 1]
            self._count(whole, 0, len(whole))
        else:
            self._count(data, lo, first + 1)
        last = data.rfind(b"\n", lo, hi)
        if last > first:
            self._count(data, first + 1, last + 1)
        return data[last + 1:hi]

    def _count(self, data: bytes, lo: int, hi: int) -> None:
        """The complete lines of ``data[lo:hi]``: element lines (``{"ts":...``, told apart by their third byte)
        counted, gap lines' ``missed`` added up. numpy finds the line ends: ``bytes.count`` and ``bytes.find``
        cost the client 0.65-1.3 ns a byte (180 ns a result line for the three scans this did before), which
        it took from the two cores the server runs on."""
        a = np.frombuffer(data, np.uint8, hi - lo, lo)
        ends = np.flatnonzero(a == 10)
        if not len(ends):
            return
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        third = a[np.minimum(starts + 2, len(a) - 1)]
        self.lines += int(np.count_nonzero(third == 0x74))          # "t": {"ts":...
        odd = np.flatnonzero(third != 0x74)
        for i in odd.tolist():
            line = bytes(a[starts[i]:ends[i]])
            if line.startswith(b'{"gap"'):
                self.missed += json.loads(line)["gap"]["missed"]

    def _arrived(self, data: bytes, tail: bytes, lo: int = 0, hi: int | None = None) -> bytes:
        tail = self._feed(data, tail, lo, hi)
        if self._want:
            now = time.perf_counter()
            while self._want and self.lines + self.missed >= self._want[0]:
                self.marks.append((self._want.pop(0), now))
        return tail

    async def run(self, url: str, qid: str, kind: str = "raw") -> None:
        """Read the stream until cancelled: with ``kind`` "raw", over a plain asyncio connection that decodes
        the chunked transfer coding itself (``Chunks``); with "aiohttp", through aiohttp's client."""
        if kind == "raw":
            await self._run_raw(url, qid)
            return
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with aiohttp.ClientSession(timeout=timeout) as s:
            async with s.get(f"{url}/queries/{qid}/results?buffer=1000000") as r:
                if r.status != 200:
                    raise RuntimeError(f"results reader refused: {r.status} {await r.text()}")
                self._ready.set()
                tail = b""
                async for chunk in r.content.iter_any():
                    tail = self._arrived(chunk, tail)

    async def _run_raw(self, url: str, qid: str) -> None:
        host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
        loop = asyncio.get_running_loop()
        transport, sink = await loop.create_connection(lambda: _Sink(self, loop), host, int(port))
        try:
            transport.write(f"GET /queries/{qid}/results?buffer=1000000 HTTP/1.1\r\nHost: {host}:{port}\r\n"
                            f"Accept: application/x-ndjson\r\n\r\n".encode("ascii"))
            await sink.finished
        finally:
            transport.close()

    def expect(self, cumulative: int) -> None:
        self._want.append(cumulative)

    async def until(self, n: int, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while self.lines + self.missed < n and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        return self.lines + self.missed >= n


class Meter:
    """Wall time and the CPU time of the server process and of this (client) process over one stage."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> Meter:
        self.t0, self.c0, self.s0 = time.perf_counter(), time.process_time(), proc_cpu(self.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        s1 = proc_cpu(self.pid)
        self.wall = time.perf_counter() - self.t0
        self.client_cpu = time.process_time() - self.c0
        self.server_cpu = None if s1 is None or self.s0 is None else s1 - self.s0

    def figures(self, tuples: int) -> dict:
        out = {"tps": round(tuples / self.wall), "tuples": tuples, "seconds": round(self.wall, 3),
               "client_cpu_share": round(self.client_cpu / self.wall, 3)}
        if self.server_cpu is not None:
            out["server_cpu_share"] = round(self.server_cpu / self.wall, 3)
            out["server_us_per_tuple"] = round(self.server_cpu * 1e6 / max(tuples, 1), 3)
        out["client_us_per_tuple"] = round(self.client_cpu * 1e6 / max(tuples, 1), 3)
        return out


async def measure_blast(url: str, pid: int, args: argparse.Namespace, body: bytes) -> dict:
    with Meter(pid) as m:
        sent, _ = await blast(url, body, args.batch, args.seconds, args.concurrency)
    return m.figures(sent)


async def dsms_bench(args: argparse.Namespace, bodies: dict[int, bytes], root: Path = ROOT,
                     latency: bool = True) -> dict:
    """The ingest, query and end-to-end stages (and with ``latency``, the fixed-rate latency runs) against one
    fresh server run from the source tree ``root``."""
    data = Path(tempfile.mkdtemp(prefix="dsms-bench-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen([sys.executable, "-m", "dsms.cli", "serve", "--port", str(port), "--data-dir",
                             str(data / "d"), "--fsync", args.fsync], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict = {}
    body = bodies[args.batch]
    try:
        await wait_up(url, proc)
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/cql", data="REGISTER STREAM s (k INT, v FLOAT, tag STRING) TIME ARRIVAL") as r:
                assert r.status == 200, await r.text()
            out["ingest"] = await measure_blast(url, proc.pid, args, body)
            async with s.post(url + "/queries", json={"cql": "SELECT * FROM s WHERE v >= 0"}) as r:
                qid = (await r.json())["id"]
            out["query"] = await measure_blast(url, proc.pid, args, body)
        reader = Reader()
        rtask = asyncio.create_task(reader.run(url, qid, args.reader))
        ready = asyncio.create_task(reader._ready.wait())
        await asyncio.wait({rtask, ready}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if rtask.done():
            rtask.result()                    # the reader failed: say why
        if not ready.done():
            raise TimeoutError("the results reader did not start")
        # end to end, as fast as it goes: until the reader has every acknowledged tuple
        base = reader.lines
        with Meter(proc.pid) as m:
            sent, _ = await blast(url, body, args.batch, args.seconds, args.concurrency)
            await reader.until(base + sent, 60)
        out["e2e"] = m.figures(reader.lines + reader.missed - base)
        out["e2e"]["acknowledged"] = sent
        out["e2e_missed"] = reader.missed
        if args.interleave:
            out["interleaved"] = await interleaved(url, proc.pid, args, body, reader)
        # latency at fixed offered rates: one batch every 10 ms
        out["latency_ms"] = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as s:
            for rate in (args.rates if latency else []):
                rows = max(1, rate // 100)
                body = bodies.get(rows) or make_body(rows, 7, args.random_values)
                sends: list[float] = [0.0] * int(args.latency_seconds * 100)
                acks = 0
                start_lines = reader.lines + reader.missed
                n_batches = int(args.latency_seconds * 100)

                async def one(i: int, at: float, sends: list[float] = sends, body: bytes = body) -> None:
                    nonlocal acks
                    delay = at - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    sends[i] = time.perf_counter()
                    async with s.post(url + "/streams/s/elements", data=body,
                                      headers={"Content-Type": "application/msgpack"}) as r:
                        await r.read()
                        if r.status == 200:
                            acks += 1

                # a select keeps order: batch i's results end at line start + (i+1)*rows
                for i in range(n_batches):
                    reader.expect(start_lines + (i + 1) * rows)
                reader.marks.clear()
                t = time.perf_counter() + 0.05
                await asyncio.gather(*(one(i, t + i * 0.01) for i in range(n_batches)))
                await reader.until(start_lines + n_batches * rows, 30)
                reader._want.clear()
                lat = sorted((arr - sends[(want - start_lines) // rows - 1]) * 1000
                             for want, arr in reader.marks)
                if lat:
                    out["latency_ms"][str(rate)] = {"p50": round(lat[len(lat) // 2], 2),
                                                    "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2),
                                                    "batches": len(lat), "acked": acks}
        async with aiohttp.ClientSession() as s:
            async with s.get(url + "/system") as r:
                rt = (await r.json())["runtime"]
                out["engine_slice_ms_max"] = rt["engine"]["slice_ms_max"]
        rtask.cancel()
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data, ignore_errors=True)
    return out


async def interleaved(url: str, pid: int, args: argparse.Namespace, body: bytes, reader: Reader) -> dict:
    """Ingest alone and end to end on the same server, alternately in slices of ``args.interleave`` seconds
    (``--seconds`` of each in all): ingest alone is a second stream, ``s0``, that no query reads, so the two
    stages share one process, its warm state and the machine's load of the same seconds, which the sequential
    stages do not (their per-round ratios move by 0.3 or more with the load on this shared machine). An end-to-end
    slice ends when the reader has every acknowledged tuple. Returns the totals of each kind and their ratios."""
    async with aiohttp.ClientSession() as s:
        async with s.post(url + "/cql", data="REGISTER STREAM s0 (k INT, v FLOAT, tag STRING) TIME ARRIVAL") as r:
            assert r.status == 200, await r.text()
    tot = {k: {"tuples": 0, "wall": 0.0, "server": 0.0, "client": 0.0} for k in ("ingest", "e2e")}
    slices = max(1, round(args.seconds / args.interleave))
    for _ in range(slices):
        for kind, stream in (("ingest", "s0"), ("e2e", "s")):
            base = reader.lines + reader.missed
            with Meter(pid) as m:
                sent, _ = await blast(url.rstrip("/"), body, args.batch, args.interleave, args.concurrency,
                                      stream)
                if kind == "e2e":
                    await reader.until(base + sent, 60)
            t = tot[kind]
            t["tuples"] += sent
            t["wall"] += m.wall
            t["server"] += m.server_cpu or 0.0
            t["client"] += m.client_cpu
    out = {k: {"tps": round(t["tuples"] / t["wall"]), "tuples": t["tuples"],
               "server_us_per_tuple": round(t["server"] * 1e6 / max(t["tuples"], 1), 3),
               "client_us_per_tuple": round(t["client"] * 1e6 / max(t["tuples"], 1), 3)} for k, t in tot.items()}
    out["ratio_tps"] = round(out["e2e"]["tps"] / out["ingest"]["tps"], 3)
    out["ratio_cpu"] = round(out["ingest"]["server_us_per_tuple"] / out["e2e"]["server_us_per_tuple"], 3)
    return out


async def ceiling_bench(args: argparse.Namespace, body: bytes) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", BARE_SERVER, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        await wait_up(url, proc)
        return await measure_blast(url, proc.pid, args, body)
    finally:
        proc.terminate()
        proc.wait(10)


def _median_stage(runs: list[dict]) -> dict:
    """Per figure, the median over rounds (the machine is shared: single runs vary by 2x with its load)."""
    out = {}
    for key in runs[0]:
        vals = sorted(r[key] for r in runs if isinstance(r.get(key), int | float))
        if vals:
            out[key] = vals[len(vals) // 2]
    return out


def _summary(rounds: list[dict]) -> dict:
    stages = {k: _median_stage([r[k] for r in rounds]) for k in ("ingest", "query", "e2e")}
    cpu_i, cpu_e = stages["ingest"].get("server_us_per_tuple"), stages["e2e"].get("server_us_per_tuple")
    # per round, so that the two stages of one ratio saw the same load
    tps_ratios = sorted(r["e2e"]["tps"] / r["ingest"]["tps"] for r in rounds if r["ingest"]["tps"])
    cpu_ratios = sorted(r["ingest"]["server_us_per_tuple"] / r["e2e"]["server_us_per_tuple"] for r in rounds
                        if r["ingest"].get("server_us_per_tuple") and r["e2e"].get("server_us_per_tuple"))
    inter = [r["interleaved"] for r in rounds if "interleaved" in r]
    out_inter = {}
    if inter:
        it = sorted(x["ratio_tps"] for x in inter)
        ic = sorted(x["ratio_cpu"] for x in inter)
        out_inter = {"interleaved_ratio_tps": it[len(it) // 2], "interleaved_ratio_cpu": ic[len(ic) // 2],
                     "interleaved_ratio_tps_rounds": it, "interleaved_ratio_cpu_rounds": ic,
                     "interleaved_server_us_per_tuple": {
                         k: sorted(x[k]["server_us_per_tuple"] for x in inter)[len(inter) // 2]
                         for k in ("ingest", "e2e")}}
    return {"stages": stages, **out_inter,
            "ratio_to_ingest": round(tps_ratios[len(tps_ratios) // 2], 3) if tps_ratios else None,
            "ratio_to_ingest_cpu": round(cpu_ratios[len(cpu_ratios) // 2], 3) if cpu_ratios else None,
            "ratio_to_ingest_rounds": [round(x, 3) for x in tps_ratios],
            "ratio_to_ingest_cpu_rounds": [round(x, 3) for x in cpu_ratios],
            "server_us_per_tuple": {"ingest": cpu_i, "e2e": cpu_e}}


async def main_async(args: argparse.Namespace) -> dict:
    bodies = {args.batch: make_body(args.batch, 1, args.random_values)}
    for rate in args.rates:
        bodies.setdefault(max(1, rate // 100), make_body(max(1, rate // 100), 3, args.random_values))
    ceiling = await ceiling_bench(args, bodies[args.batch])
    trees = {"this": ROOT}
    if args.compare:
        trees = {"compare": Path(args.compare).resolve(), "this": ROOT}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for i in range(args.rounds):
        for name, root in trees.items():      # alternately, so both trees see the same load
            runs[name].append(await dsms_bench(args, bodies, root, latency=i == args.rounds - 1))
    summaries = {name: _summary(rs) for name, rs in runs.items()}
    res, last = summaries["this"], runs["this"][-1]
    e2e = res["stages"]["e2e"]["tps"]
    out = {"e2e_tps": e2e, "ceiling_tps": ceiling["tps"],
           "ratio": round(e2e / ceiling["tps"], 4) if ceiling["tps"] else None,
           "ingest_tps": res["stages"]["ingest"]["tps"], "query_tps": res["stages"]["query"]["tps"],
           "ratio_to_ingest": res["ratio_to_ingest"], "ratio_to_ingest_cpu": res["ratio_to_ingest_cpu"],
           "ratio_to_ingest_rounds": res["ratio_to_ingest_rounds"],
           "ratio_to_ingest_cpu_rounds": res["ratio_to_ingest_cpu_rounds"],
           **{k: v for k, v in res.items() if k.startswith("interleaved")},
           "stages": {"ceiling": ceiling, **res["stages"]},
           "latency_ms": last["latency_ms"], "batch_rows": args.batch, "body_bytes": len(bodies[args.batch]),
           "concurrency": args.concurrency, "fsync": args.fsync, "reader": args.reader,
           "random_values": args.random_values, "interleave_s": args.interleave,
           "rounds": args.rounds, "e2e_missed": sum(r["e2e_missed"] for r in runs["this"]),
           "engine_slice_ms_max": last.get("engine_slice_ms_max"), "cpus": os.cpu_count(),
           "per_round": runs["this"]}
    if args.compare:
        out["compare"] = {"tree": str(trees["compare"]), **summaries["compare"], "per_round": runs["compare"]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--seconds", type=float, default=6.0, help="length of each throughput run")
    p.add_argument("--latency-seconds", type=float, default=4.0, help="length of each fixed-rate run")
    p.add_argument("--batch", type=int, default=5000, help="rows per request in the throughput runs")
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight in the throughput runs")
    p.add_argument("--rates", default="10000,50000,100000", help="offered rates for latency, tuples/s")
    p.add_argument("--fsync", default="group", choices=("always", "group", "never"))
    p.add_argument("--random-values", action="store_true",
                   help="random full-precision floats and 40-bit ints instead of small whole numbers")
    p.add_argument("--reader", default="raw", choices=("raw", "aiohttp"),
                   help="the NDJSON reader: a plain asyncio connection decoding the chunked coding itself "
                        "(default), or aiohttp's client (the bench's reader before 2026-11-26)")
    p.add_argument("--interleave", type=float, default=0.0, metavar="S",
                   help="also measure ingest alone (a stream no query reads) and end to end on the same server, "
                        "alternately in slices of S seconds, --seconds of each in all")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the dsms stages this many times, each on a fresh server; figures are medians")
    p.add_argument("--compare", metavar="TREE",
                   help="another source tree of dsms (say, a checkout of the previous commit): its server is run "
                        "alternately with this one's, round by round, and both are reported")
    args = p.parse_args(argv)
    args.rates = [int(x) for x in args.rates.split(",") if x]
    out = asyncio.run(main_async(args))
    labels = {"ceiling": "bare aiohttp ceiling", "ingest": "dsms ingest only (no query)",
              "query": "dsms + select, no reader", "e2e": "dsms end to end (NDJSON reader)"}
    sections = [("this tree", out)]
    if args.compare:
        sections = [(f"compare: {out['compare']['tree']}", {**out["compare"], "stages": {
            "ceiling": out["stages"]["ceiling"], **out["compare"]["stages"]}}), ("this tree", out)]
    for title, sec in sections:
        print(f"-- {title}" + (f" (median of {args.rounds} rounds)" if args.rounds > 1 else ""))
        print(f"{'stage':<34}{'tuples/s':>12}{'server us/tuple':>17}{'server CPU':>12}{'client CPU':>12}")
        for key, label in labels.items():
            f = sec["stages"][key]
            print(f"{label:<34}{f['tps']:>12,}{f.get('server_us_per_tuple', float('nan')):>17.3f}"
                  f"{f.get('server_cpu_share', float('nan')):>12.2f}{f['client_cpu_share']:>12.2f}")
        print(f"{'ratio e2e / ingest only (tuples/s)':<34}{sec['ratio_to_ingest']:>12}")
        print(f"{'ratio e2e / ingest only (CPU)':<34}{sec['ratio_to_ingest_cpu']:>12}")
        if "interleaved_ratio_tps" in sec:
            us = sec["interleaved_server_us_per_tuple"]
            print(f"{'interleaved: server us/tuple':<34}{'ingest ' + str(us['ingest']):>17}{'e2e ' + str(us['e2e']):>14}")
            print(f"{'interleaved: ratio (tuples/s)':<34}{sec['interleaved_ratio_tps']:>12}  rounds "
                  f"{sec['interleaved_ratio_tps_rounds']}")
            print(f"{'interleaved: ratio (CPU)':<34}{sec['interleaved_ratio_cpu']:>12}  rounds "
                  f"{sec['interleaved_ratio_cpu_rounds']}")
    print(f"{'ratio e2e / ceiling':<34}{out['ratio']:>12}")
    for rate, v in out["latency_ms"].items():
        print(f"{'latency @ ' + format(int(rate), ',') + '/s p50 / p99 ms':<34}{v['p50']:>7} /{v['p99']:>6}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
