"""The server's result output path alone: NDJSON encoding, the streaming response's writes and the reader's
wake-ups, without ingest or the engine (issue 15, item 5).

    python bench/results_path.py [--seconds S] [--batch N] [--random-values] [--reader python|curl] [--rounds R]
                                 [--compare TREE]

Why a separate bench: ``bench/http_ingest.py``'s end-to-end stage measures this path together with ingest,
the engine and a client that competes for the same two cores, and on this shared machine its figures move
by 20-30% from run to run, more than any change to this path. Here one process serves one results stream
(``web.streaming.stream_results``, the server's own handler) from a subscriber that a producer task keeps fed
with result batches shaped like the ingest bench's (``k`` INT, ``v`` FLOAT, ``tag`` STRING, one timestamp per
batch), to one reader in a subprocess: the ingest bench's own ``Reader`` (``--reader python``) or ``curl``
writing to /dev/null. It prints this process's CPU time per result element, which is the output path's cost
and nothing else (the producer's copy of three columns per batch, a few ns per element, included).

``--compare TREE`` runs the same measurement with another source tree's ``web`` and ``dsms`` (say, the
previous commit in a scratch directory), alternately with this one's, round by round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SERVER = r"""
import asyncio, os, socket, subprocess, sys, time
import numpy as np
from aiohttp import web
from web.malloc import keep_freed_memory
from dsms.runtime.results import ResultChunk, Subscriber
from web.streaming import stream_results

n, seconds, random_values, reader_kind, bench_dir = (int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1",
                                                     sys.argv[4], sys.argv[5])
keep_freed_memory()                      # as the server does (web/server.py)
if random_values:
    rng = np.random.default_rng(1)
    K, V = rng.integers(0, 1 << 40, n), rng.random(n) * 1000
else:
    K = np.arange(1, n + 1, dtype=np.int64) % 100
    V = (np.arange(n, dtype=np.int64) + 31).astype(np.float64) % 1000
TAG = np.array(["abcdefgh"[(1 + i) % 8] * 4 for i in range(n)], dtype=object)


class OneQuery:
    # the two Runtime methods stream_results calls
    sub = None

    def subscribe(self, query, **kw):
        self.sub = Subscriber(query, 1_000_000)
        return self.sub

    def unsubscribe(self, sub):
        pass


rt = OneQuery()


async def results(request):
    return await stream_results(request, rt, "q1", "q1", from_ts=None, follow=True, buffer=None)


async def main():
    app = web.Application()
    app.router.add_get("/queries/{id}/results", results)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}"
    if reader_kind == "curl":
        reader = subprocess.Popen(["curl", "-sN", "-o", "/dev/null", url + "/queries/q1/results"])
    else:
        code = (f"import asyncio, sys; sys.path.insert(0, {bench_dir!r}); from http_ingest import Reader; "
                f"asyncio.run(Reader().run({url!r}, 'q1'))")
        reader = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.perf_counter() + 30
    while rt.sub is None:                             # the reader's subscription, or a clear failure
        if time.perf_counter() > deadline or reader.poll() is not None:
            raise SystemExit("the reader did not subscribe within 30 s")
        await asyncio.sleep(0.01)
    ts, sent = 1764125000000, 0
    c0, w0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - w0 < seconds:
        while rt.sub.buffered >= 2 * n:               # keep two batches waiting, no more
            await asyncio.sleep(0.0005)
        ts += 1
        chunk = ResultChunk(["k", "v", "tag"], np.full(n, ts, np.int64), np.ones(n, np.int8),
                            [K.copy(), V.copy(), TAG.copy()])
        rt.sub.offer(chunk)
        sent += n
    deadline = time.perf_counter() + 30
    while rt.sub.buffered:                            # until the last batch is written
        if time.perf_counter() > deadline:
            raise SystemExit("the reader stopped reading: batches still buffered after 30 s")
        await asyncio.sleep(0.001)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    print(f"{cpu * 1e6 / sent:.4f} {sent / wall:.0f}")
    reader.kill()


asyncio.run(main())
"""


def measure(tree: Path, args: argparse.Namespace) -> tuple[float, float]:
    """(server CPU us per element, elements/s) of one run with ``tree``'s code."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", SERVER, str(args.batch), str(args.seconds),
                          "1" if args.random_values else "0", args.reader, str(ROOT / "bench")],
                         cwd=tree, env=env, capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--batch", type=int, default=5000, help="elements per result batch")
    p.add_argument("--random-values", action="store_true",
                   help="40-bit ints and full-precision floats instead of small whole numbers")
    p.add_argument("--reader", choices=("python", "curl"), default="python")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compare", metavar="TREE", help="another source tree, run alternately with this one")
    args = p.parse_args(argv)
    trees = {"this": ROOT} if not args.compare else {"compare": Path(args.compare).resolve(), "this": ROOT}
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(measure(tree, args))
    for name, rs in runs.items():
        cpu = sorted(r[0] for r in rs)
        rate = sorted(r[1] for r in rs)
        print(f"{name} ({trees[name]}): server CPU {cpu[len(cpu) // 2]:.4f} us/element (rounds "
              f"{', '.join(f'{c:.4f}' for c in cpu)}), {rate[len(rate) // 2]:,.0f} elements/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
