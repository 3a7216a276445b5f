"""HTTP ingest benchmark (SPEC section 11): end-to-end tuples/s through a real ``dsms serve`` (columnar msgpack
batches in, ``SELECT * FROM S WHERE v >= 0`` in the engine, one NDJSON reader out) beside the ceiling of this
machine, a bare aiohttp server that accepts and discards the same bytes; and ingest-to-result latency (p50, p99)
at fixed offered rates.

    python bench/http_ingest.py [--json PATH] [--seconds S] [--rates 10000,50000,100000]

Both servers run as subprocesses on loopback; the client is this process (asyncio + aiohttp), so on a
2-core machine client and server share the CPU: the ratio e2e/ceiling is the figure to read, not the absolute
rate. Latency of a batch is measured from just before its request is sent to the arrival of its last result
line at the reader (the select keeps order, so counting lines suffices).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import msgpack

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_body(n: int, seed: int) -> bytes:
    """A columnar msgpack batch without timestamps (the server stamps arrival time), so concurrent senders
    can never be refused for going back in time."""
    return msgpack.packb({"cols": {
        "k": [(seed + i) % 100 for i in range(n)],
        "v": [float((seed * 31 + i) % 1000) for i in range(n)],
        "tag": ["abcdefgh"[(seed + i) % 8] * 4 for i in range(n)],
    }})


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


async def blast(url: str, body: bytes, rows: int, seconds: float, concurrency: int) -> tuple[int, float]:
    """Send ``body`` as fast as ``concurrency`` connections allow for ``seconds``; returns tuples acknowledged
    and the elapsed time."""
    sent = 0
    stop_at = time.perf_counter() + seconds
    headers = {"Content-Type": "application/msgpack"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def worker():
            nonlocal sent
            while time.perf_counter() < stop_at:
                async with s.post(url + "/streams/s/elements", data=body, headers=headers) as r:
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


class Reader:
    """Counts result lines of one NDJSON results stream; records when each cumulative count was reached."""

    def __init__(self) -> None:
        self.lines = 0
        self.missed = 0
        self.marks: list[tuple[int, float]] = []     # (cumulative lines wanted, arrival time) filled on demand
        self._want: list[int] = []
        self._task: asyncio.Task | None = None
        self._ready = asyncio.Event()

    async def run(self, url: str, qid: str) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with aiohttp.ClientSession(timeout=timeout) as s:
            async with s.get(f"{url}/queries/{qid}/results?buffer=10000000") as r:
                self._ready.set()
                tail = b""
                async for chunk in r.content.iter_any():
                    data = tail + chunk
                    cut = data.rfind(b"\n")
                    if cut < 0:
                        tail = data
                        continue
                    body, tail = data[:cut + 1], data[cut + 1:]
                    if b'"gap"' in body:
                        for line in body.split(b"\n"):
                            if line.startswith(b'{"gap"'):
                                self.missed += json.loads(line)["gap"]["missed"]
                    self.lines += body.count(b"\n") - body.count(b'{"heartbeat"') - body.count(b'{"gap"')
                    now = time.perf_counter()
                    while self._want and self.lines + self.missed >= self._want[0]:
                        self.marks.append((self._want.pop(0), now))

    def expect(self, cumulative: int) -> None:
        self._want.append(cumulative)

    async def until(self, n: int, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while self.lines + self.missed < n and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        return self.lines + self.missed >= n


async def dsms_bench(args: argparse.Namespace, bodies: dict[int, bytes]) -> dict:
    data = Path(tempfile.mkdtemp(prefix="dsms-bench-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "dsms.cli", "serve", "--port", str(port), "--data-dir",
                             str(data / "d"), "--fsync", args.fsync], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict = {}
    try:
        await wait_up(url, proc)
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/cql", data="REGISTER STREAM s (k INT, v FLOAT, tag STRING)") as r:
                assert r.status == 200, await r.text()
            async with s.post(url + "/queries", json={"cql": "SELECT * FROM s WHERE v >= 0"}) as r:
                qid = (await r.json())["id"]
        reader = Reader()
        rtask = asyncio.create_task(reader.run(url, qid))
        await asyncio.wait_for(reader._ready.wait(), 10)
        # end to end, as fast as it goes
        base = reader.lines
        t0 = time.perf_counter()
        sent, _ = await blast(url, bodies[args.batch], args.batch, args.seconds, args.concurrency)
        await reader.until(base + sent, 60)
        elapsed = time.perf_counter() - t0
        out["e2e_tps"] = (reader.lines + reader.missed - base) / elapsed
        out["e2e_sent"] = sent
        out["e2e_missed"] = reader.missed
        # latency at fixed offered rates: one batch every 10 ms
        out["latency_ms"] = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as s:
            for rate in args.rates:
                rows = max(1, rate // 100)
                body = bodies.get(rows) or make_body(rows, 7)
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


async def ceiling_bench(args: argparse.Namespace, body: bytes) -> float:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", BARE_SERVER, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        await wait_up(url, proc)
        sent, elapsed = await blast(url, body, args.batch, args.seconds, args.concurrency)
        return sent / elapsed
    finally:
        proc.terminate()
        proc.wait(10)


async def main_async(args: argparse.Namespace) -> dict:
    bodies = {args.batch: make_body(args.batch, 1)}
    for rate in args.rates:
        bodies.setdefault(max(1, rate // 100), make_body(max(1, rate // 100), 3))
    ceiling = await ceiling_bench(args, bodies[args.batch])
    res = await dsms_bench(args, bodies)
    return {"e2e_tps": round(res["e2e_tps"]), "ceiling_tps": round(ceiling),
            "ratio": round(res["e2e_tps"] / ceiling, 4) if ceiling else None,
            "latency_ms": res["latency_ms"], "batch_rows": args.batch, "concurrency": args.concurrency,
            "fsync": args.fsync, "e2e_missed": res["e2e_missed"],
            "engine_slice_ms_max": res.get("engine_slice_ms_max")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--seconds", type=float, default=6.0, help="length of the throughput runs")
    p.add_argument("--latency-seconds", type=float, default=4.0, help="length of each fixed-rate run")
    p.add_argument("--batch", type=int, default=5000, help="rows per request in the throughput runs")
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight in the throughput runs")
    p.add_argument("--rates", default="10000,50000,100000", help="offered rates for latency, tuples/s")
    p.add_argument("--fsync", default="group", choices=("always", "group", "never"))
    args = p.parse_args(argv)
    args.rates = [int(x) for x in args.rates.split(",") if x]
    out = asyncio.run(main_async(args))
    print(f"{'measure':<34}{'value':>14}")
    print(f"{'bare aiohttp ceiling (tuples/s)':<34}{out['ceiling_tps']:>14,}")
    print(f"{'dsms end to end (tuples/s)':<34}{out['e2e_tps']:>14,}")
    print(f"{'ratio e2e / ceiling':<34}{out['ratio']:>14}")
    for rate, v in out["latency_ms"].items():
        print(f"{'latency @ ' + format(int(rate), ',') + '/s p50 / p99 ms':<34}{v['p50']:>7} /{v['p99']:>6}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
