"""``/replays``: the server starts the same replay as ``dsms replay`` on its own data directory (SPEC section 9,
docs/replay.md), reports its progress, and serves its results as NDJSON.

The request is checked at once (query, range, master, strategy: 400, or 404 for an unknown query id) by
``dsms.spark.replay.prepare``, which needs no Spark. The job then runs in one worker thread, so replays queue
instead of competing for the cores the live engine needs, and never on the event loop. The Spark session is
started on the first replay (PySpark is imported only then: ``dsms serve`` never needs it) and kept for the next
ones on the same master; the app's cleanup stops it. Results go to ``<data_dir>/replays/<id>.ndjson``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiohttp import web

from dsms.errors import InputError
from dsms.runtime import Conflict, NotFound
from web.handlers.common import read_json_object
from web.keys import CONFIG

_FIELDS = {"query", "query_id", "from", "to", "master", "partitions", "strategy"}


class ReplayJob:
    """One replay's state, as ``GET /replays/{id}`` shows it."""

    def __init__(self, job_id: str, request: dict[str, Any], prepared: Any, out: Path) -> None:
        self.id = job_id
        self.request = request
        self.prepared = prepared
        self.out = out
        self.state = "queued"
        self.progress: dict[str, int] = {"tasks_done": 0, "tasks": 0, "rows": 0, "results": 0, "instants": 0}
        self.summary: dict[str, Any] | None = None
        self.error: str | None = None
        self.created_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None

    def describe(self) -> dict[str, Any]:
        s = self.prepared.strategy
        out: dict[str, Any] = {
            "id": self.id, "state": self.state, "request": self.request,
            "plan": {"strategy": s.kind, "partitions": s.partitions, "why": s.reason,
                     "partition_key": dict(s.keys), "warmup": s.warmup},
            "schema": [{"name": n, "type": t} for n, t in zip(self.prepared.names, self.prepared.types)],
            "progress": dict(self.progress), "created_at": self.created_at, "started_at": self.started_at,
            "finished_at": self.finished_at, "results": f"/replays/{self.id}/results",
        }
        if self.summary is not None:
            out["summary"] = self.summary
        if self.error is not None:
            out["error"] = self.error
        return out


class Replays:
    """The server's replays and the one worker thread (and Spark session) that runs them."""

    def __init__(self) -> None:
        self.jobs: dict[str, ReplayJob] = {}
        self._ids = itertools.count(1)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsms-replay")
        self._lock = threading.Lock()
        self._spark: Any = None

    def submit(self, job: ReplayJob) -> None:
        self.jobs[job.id] = job
        self._pool.submit(self._run, job)

    def _session(self, master: str) -> Any:
        from dsms.spark.job import session

        if self._spark is not None and self._spark.sparkContext.master != master:
            self._spark.stop()
            self._spark = None
        if self._spark is None:
            self._spark = session(master, "dsms server replays")
        return self._spark

    def _run(self, job: ReplayJob) -> None:
        from dsms.spark.replay import run

        job.state, job.started_at = "running", time.time()
        try:
            spark = self._session(job.prepared.master)
            job.out.parent.mkdir(parents=True, exist_ok=True)
            summary, _ = run(job.prepared, out=str(job.out), spark=spark,
                             on_progress=lambda p: job.progress.update(p))
            summary.pop("out", None)
            job.summary, job.state = summary, "done"
        except Exception as e:  # noqa: BLE001 - reported to the client through GET /replays/{id}
            job.error, job.state = str(e) or type(e).__name__, "failed"
        finally:
            job.finished_at = time.time()

    def close(self) -> None:
        if self._spark is not None:
            try:
                self._spark.sparkContext.cancelAllJobs()
            except Exception:  # noqa: BLE001 - the session may be half stopped already
                pass
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._spark is not None:
            self._spark.stop()
            self._spark = None


REPLAYS: web.AppKey[Replays] = web.AppKey("replays", Replays)


def setup(app: web.Application) -> None:
    """Give the app its replay registry, and stop the worker and the Spark session on cleanup."""
    app[REPLAYS] = Replays()

    async def _close(app: web.Application) -> None:
        await asyncio.get_running_loop().run_in_executor(None, app[REPLAYS].close)

    app.on_cleanup.append(_close)


def _ts(doc: dict[str, Any], key: str) -> int | None:
    from dsms.formats import parse_ts

    v = doc.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise InputError(f"'{key}' must be a timestamp (ms or ISO 8601), not {v!r}")
    return parse_ts(v)


async def post_replay(request: web.Request) -> web.Response:
    """Start a replay: ``{"query": CQL} | {"query_id": id}``, optional ``from``, ``to``, ``master``,
    ``partitions``, ``strategy``. 202 with the job; 400 for bad input, 404 for an unknown query id."""
    from dsms.spark.replay import prepare
    from dsms.spark.spec import ReplayError, UnknownQuery

    data_dir = request.app[CONFIG].data_dir
    doc = await read_json_object(request)
    extra = set(doc) - _FIELDS
    if extra:
        raise InputError(f"unknown field(s) {', '.join(sorted(extra))}; expected some of {', '.join(sorted(_FIELDS))}")
    for key in ("query", "query_id", "master", "strategy"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise InputError(f"'{key}' must be a string")
    parts = doc.get("partitions")
    if parts is not None and (isinstance(parts, bool) or not isinstance(parts, int)):
        raise InputError("'partitions' must be an integer")
    replays = request.app[REPLAYS]
    job_id = f"r{next(replays._ids)}"
    out = Path(data_dir) / "replays" / f"{job_id}.ndjson"
    kw = {"query": doc.get("query"), "query_id": doc.get("query_id"), "from_ts": _ts(doc, "from"),
          "to_ts": _ts(doc, "to"), "master": doc.get("master") or "local[*]", "partitions": parts,
          "strategy": doc.get("strategy")}
    loop = asyncio.get_running_loop()
    try:   # reads the catalog log and scans the archive index: off the event loop
        prepared = await loop.run_in_executor(None, lambda: prepare(str(data_dir), **kw))
    except UnknownQuery as e:
        raise NotFound(str(e)) from None
    except ReplayError as e:
        raise InputError(str(e)) from None
    job = ReplayJob(job_id, {k: v for k, v in doc.items() if v is not None}, prepared, out)
    replays.submit(job)
    return web.json_response(job.describe(), status=202, headers={"Location": f"/replays/{job_id}"})


def _job(request: web.Request) -> ReplayJob:
    job = request.app[REPLAYS].jobs.get(request.match_info["id"])
    if job is None:
        raise NotFound(f"no replay '{request.match_info['id']}'")
    return job


async def list_replays(request: web.Request) -> web.Response:
    return web.json_response([j.describe() for j in request.app[REPLAYS].jobs.values()])


async def get_replay(request: web.Request) -> web.Response:
    """A replay's state (queued, running, done, failed), progress, and its summary once done."""
    return web.json_response(_job(request).describe())


async def get_replay_results(request: web.Request) -> web.StreamResponse:
    """The results as NDJSON (the elements of ``GET /queries/{id}/results``), in timestamp order; 409 while the
    replay has not finished, with its state."""
    job = _job(request)
    if job.state != "done":
        raise Conflict(f"replay '{job.id}' is {job.state}" + (f": {job.error}" if job.error else
                                                             "; its results are served once it is done"))
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await resp.prepare(request)
    with open(job.out, "rb") as f:
        while chunk := f.read(1 << 20):
            await resp.write(chunk)
    await resp.write_eof()
    return resp
