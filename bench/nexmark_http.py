"""NEXMark through a real ``dsms serve`` over HTTP: columnar msgpack in, one NDJSON reader out (the server
column of ``bench/nexmark.py --http``).

Per query a fresh server (subprocess on loopback, archive ``--fsync group``) gets the three streams, the query's
views and the query by ``POST /cql``; a reader follows ``GET /queries/{id}/results``. Each push of P events is
one POST per stream, sequential: the stream's rows among the P events as one columnar msgpack item
(``{"ts": [...], "cols": {...}}``) followed by a heartbeat item at the push's last timestamp; the bodies are
encoded before the clock starts. The time is from the first POST to the reader's receipt of the final
heartbeat (every result is then in), as wall time and as the server process's CPU time; the client shares
the machine. The reader's rows are parsed afterwards and compared with the in-process answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
import msgpack

from bench.http_ingest import ROOT, free_port, proc_cpu, wait_up
from bench.nexmark_gen import SCHEMAS
from bench.nexmark_queries import NexQuery, Windows


def bodies(ev: dict, pushes: list, final: int) -> list[list[tuple[str, bytes]]]:
    """Per push, (stream, body) for every stream: its rows (if any) and a heartbeat at the push's last ts."""
    out = []
    for parts in pushes:
        last = max(int(ts[-1]) for _, _, ts in parts)
        got = {s: (cols, ts) for s, cols, ts in parts}
        push = []
        for s in SCHEMAS:
            body = b""
            if s in got:
                cols, ts = got[s]
                body = msgpack.packb({"ts": ts.tolist(), "cols": {c: v.tolist() for c, v in cols.items()}})
            push.append((s, body + msgpack.packb({"heartbeat": last})))
        out.append(push)
    out.append([(s, msgpack.packb({"heartbeat": final})) for s in SCHEMAS])
    return out


async def _read(url: str, qid: str, final: int, sink: list, ready: asyncio.Event, done: asyncio.Event) -> None:
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        async with s.get(f"{url}/queries/{qid}/results?buffer=1000000") as r:
            if r.status != 200:
                raise RuntimeError(f"results of {qid}: {r.status} {await r.text()}")
            ready.set()
            tail = b""
            async for chunk in r.content.iter_any():
                data = tail + chunk
                cut = data.rfind(b"\n") + 1
                tail = data[cut:]
                sink.append(data[:cut])
                at = data.rfind(b'{"heartbeat"', 0, cut)
                if at >= 0 and json.loads(data[at:data.index(b"\n", at)])["heartbeat"] >= final:
                    done.set()
                    return


async def _run(q: NexQuery, w: Windows, posts: list, final: int) -> tuple[float, float | None, list[bytes]]:
    data = Path(tempfile.mkdtemp(prefix="dsms-nexmark-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "dsms.cli", "serve", "--port", str(port), "--data-dir",
                             str(data / "d"), "--fsync", "group"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_up(url, proc)
        async with aiohttp.ClientSession() as s:
            ddl = ";\n".join(f"REGISTER STREAM {n} ({', '.join(f'{c} {t}' for c, t in cols)})"
                             for n, cols in SCHEMAS.items())
            *views, body = q.cql(w)
            async with s.post(url + "/cql", data=";\n".join([ddl, *views])) as r:
                assert r.status == 200, await r.text()
            async with s.post(url + "/queries", json={"cql": body}) as r:
                assert r.status == 201, await r.text()
                qid = (await r.json())["id"]
            sink: list[bytes] = []
            ready, done = asyncio.Event(), asyncio.Event()
            reader = asyncio.create_task(_read(url, qid, final, sink, ready, done))
            await asyncio.wait_for(ready.wait(), 10)
            hdr = {"Content-Type": "application/msgpack"}
            c0, t0 = proc_cpu(proc.pid), time.perf_counter()
            for push in posts:
                for stream, b in push:
                    async with s.post(f"{url}/streams/{stream}/elements", data=b, headers=hdr) as r:
                        if r.status != 200:
                            raise RuntimeError(f"{stream}: {r.status} {await r.text()}")
            await asyncio.wait_for(asyncio.wait([asyncio.ensure_future(done.wait()), reader],
                                                return_when=asyncio.FIRST_COMPLETED), 600)
            if not done.is_set():
                await reader                     # raises what ended the reader early
                raise RuntimeError("the results stream ended before the final heartbeat")
            wall = time.perf_counter() - t0
            c1 = proc_cpu(proc.pid)
            await reader
        return wall, (None if c0 is None or c1 is None else c1 - c0), sink
    finally:
        proc.terminate()
        proc.wait(10)


def run_http(q: NexQuery, pushes: list, ev: dict, n_events: int, w: Windows, final: int
             ) -> tuple[float, float | None, Counter]:
    """(events/s of wall time, events/s of server CPU time, the answer as ``canonical_dsms`` gives it)."""
    from bench.nexmark import _norm
    posts = bodies(ev, pushes, final)
    wall, cpu, sink = asyncio.run(_run(q, w, posts, final))
    names = None
    got: Counter = Counter()
    for line in b"".join(sink).split(b"\n"):
        if not line.startswith(b'{"ts"'):
            continue
        e = json.loads(line)
        row = e["row"]
        names = names or list(row)
        vals = tuple(_norm(row[c]) for c in names)
        if q.relation:
            got[vals] += e["sign"]
        else:
            got[(e["ts"],) + vals] += 1
    return n_events / wall, (n_events / cpu if cpu else None), +got
