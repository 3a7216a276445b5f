"""The Spark job of a replay: tasks per strategy, the session, and the merge of the partitions' results
(SPEC section 9; docs/replay.md).

Tasks are plain RDD functions over pickled numpy records, so nothing beyond PySpark is needed (no Arrow):

* single: one task reads every input and runs the engine;
* time-sliced: one task per slice reads its slice plus the warm-up before it, and keeps its own instants;
* key-partitioned: one task per archive segment decodes it and splits each batch by the key's hash (heartbeats go
  to every partition); ``partitionBy`` shuffles the pieces; each partition sorts them back into append order per
  input and runs the engine over them.

The driver merges the partitions' results by timestamp (a stable sort, so each partition's order within an
instant is kept) and hands them to a writer.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dsms.spark.archive_input import ArchiveIndex, merged, read_input, read_segment
from dsms.spark.feed import TaskResult, run_engine
from dsms.spark.partitioning import buckets
from dsms.spark.spec import ReplayError, ReplaySpec
from dsms.spark.strategy import KEY, TIME, Strategy

_ROOT = str(Path(__file__).resolve().parents[2])      # the directory holding the dsms package


@dataclass
class JobResult:
    """The merged results (columnar, in timestamp order) and what the job did."""

    ts: np.ndarray
    sign: np.ndarray
    cols: list[np.ndarray]
    rows_in: int
    rows_read: int
    tasks: int
    seconds: float
    errors: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the session


def check_master(master: str, timeout: float = 3.0) -> None:
    """Refuse a master URL that cannot work before Spark spends a minute retrying it: ``local``,
    ``local[N]``, ``local[*]`` or ``spark://host:port`` that accepts a connection (others pass through)."""
    if master.startswith("local"):
        if master not in ("local", "local[*]") and not (master.startswith("local[") and master.endswith("]")
                                                        and master[6:-1].isdigit() and int(master[6:-1]) > 0):
            raise ReplayError(f"bad master '{master}': use local, local[N] (N >= 1), local[*] or spark://host:port")
        return
    if master.startswith("spark://"):
        for hostport in master[len("spark://"):].split(","):
            host, _, port = hostport.rpartition(":")
            if not host or not port.isdigit():
                raise ReplayError(f"bad master '{master}': expected spark://host:port")
            try:
                with socket.create_connection((host, int(port)), timeout=timeout):
                    return
            except OSError as e:
                last = e
        raise ReplayError(f"Spark master {master} cannot be reached: {last.strerror or last}")


def session(master: str, app_name: str = "dsms replay") -> Any:
    """A SparkSession on ``master``: an active one on the same master is reused (tests share one), otherwise
    a new one whose Python workers run this interpreter and can import dsms from where the driver does."""
    check_master(master)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master == master:
        return active
    path = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
         .config("spark.executorEnv.PYTHONPATH", path)
         .config("spark.driver.host", "127.0.0.1" if master.startswith(("local", "spark://127.", "spark://localhost"))
                 else socket.gethostname()))
    if master.startswith("spark://"):
        b = b.config("spark.executor.memory", os.environ.get("DSMS_SPARK_EXECUTOR_MEMORY", "512m"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# ---------------------------------------------------------------- task plans


def _stream_from(spec: ReplaySpec, strategy: Strategy, start: int | None) -> int | None:
    """Where stream input is read from for results from ``start`` on: warm-up before it, or everything."""
    if start is None or strategy.warmup is None:
        return None
    return start - strategy.warmup


def _read_all(spec: ReplaySpec, index: ArchiveIndex, stream_from: int | None, to: int | None) -> Any:
    per_input = {}
    for name, kind in spec.inputs.items():
        lo = stream_from if kind == "stream" else None
        per_input[name] = read_input(index.segments.get(name, []), name, lo, to, spec.start_seq.get(name, 0))
    return merged(per_input)


def slices(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into at most ``n`` non-empty slices of (nearly) equal length.

    >>> slices(0, 10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    cuts = sorted({lo + (hi - lo) * i // n for i in range(n)} | {hi})
    return list(zip(cuts, cuts[1:]))


def plan_tasks(spec: ReplaySpec, strategy: Strategy, index: ArchiveIndex) -> list[dict[str, Any]]:
    """What each engine task reads and owns: ``{"from": .., "to": .., "close": .., "stream_from": ..}``."""
    if strategy.kind != TIME:
        return [{"from": spec.from_ts, "to": spec.to_ts, "close": spec.to_ts,
                 "stream_from": _stream_from(spec, strategy, spec.from_ts)}]
    lo = spec.from_ts if spec.from_ts is not None else index.first_ts
    hi = spec.to_ts if spec.to_ts is not None else index.last_ts + 1
    parts = slices(lo, hi, max(1, strategy.partitions))
    out = []
    for i, (a, b) in enumerate(parts):
        first, last = i == 0, i == len(parts) - 1
        start = spec.from_ts if first else a
        out.append({"from": start, "to": spec.to_ts if last else b, "close": spec.to_ts if last else b,
                    "stream_from": _stream_from(spec, strategy, start)})
    return out


# ---------------------------------------------------------------- the job


def run_job(spark: Any, spec: ReplaySpec, strategy: Strategy, index: ArchiveIndex,
            on_progress: Callable[[dict[str, int]], None] | None = None) -> JobResult:
    """Run the replay on ``spark``; ``on_progress`` is called about four times a second with
    ``{"tasks_done", "tasks", "rows", "results", "instants"}`` while the job runs (rows read and results and
    result instants of the finished tasks; instants of key partitions overlap, so the sum is an upper bound)."""
    sc = spark.sparkContext
    rows_acc, res_acc, inst_acc = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)
    tasks = plan_tasks(spec, strategy, index)
    t0 = time.monotonic()

    def finish(res: TaskResult) -> TaskResult:
        rows_acc.add(res.rows_read)
        res_acc.add(len(res))
        inst_acc.add(int(len(np.unique(res.ts))))
        return res

    if strategy.kind == KEY:
        n = max(1, strategy.partitions)
        t = tasks[0]
        seg_tasks = [(name, info) for name in spec.inputs for info in index.segments.get(name, [])]
        keys = dict(strategy.keys)
        inputs = dict(spec.inputs)

        def split(item: tuple[str, Any]) -> Any:
            name, info = item
            lo = t["stream_from"] if inputs[name] == "stream" else None
            for rec in read_segment(info, name, lo, t["to"], spec.start_seq.get(name, 0)):
                if rec.is_heartbeat:
                    for b in range(n):
                        yield b, rec
                    continue
                if not len(rec.ts):
                    continue
                bk = buckets(rec.cols[keys[name]], n)
                for b in np.unique(bk).tolist():
                    yield b, (rec if n == 1 else rec.select(bk == b))

        def run_bucket(items: Any) -> Any:
            per_input: dict[str, list] = {}
            for _, rec in items:
                per_input.setdefault(rec.input, []).append(rec)
            for recs in per_input.values():
                recs.sort(key=lambda r: r.seq)
            yield finish(run_engine(spec, merged(per_input), t["from"], t["to"], t["close"],
                                    changelog=strategy.net is not None))

        rdd = (sc.parallelize(seg_tasks, max(1, len(seg_tasks))).flatMap(split)
               .partitionBy(n, lambda b: b).mapPartitions(run_bucket))
    else:
        def run_slice(it: Any) -> Any:
            for task in it:
                feed = _read_all(spec, index, task["stream_from"], task["to"])
                yield finish(run_engine(spec, feed, task["from"], task["to"], task["close"]))

        rdd = sc.parallelize(tasks, len(tasks)).mapPartitions(run_slice)

    group = f"dsms-replay-{os.getpid()}-{time.monotonic_ns()}"
    box: dict[str, Any] = {}

    def collect() -> None:
        try:
            # set in the thread that submits the job: PySpark pins local properties to Python threads
            sc.setJobGroup(group, "dsms replay", interruptOnCancel=True)
            box["out"] = rdd.collect()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["err"] = e

    worker = threading.Thread(target=collect, name="dsms-replay-collect", daemon=True)
    worker.start()
    tracker = sc.statusTracker()
    total = 0
    while worker.is_alive():
        worker.join(0.25)
        if on_progress is not None:
            done = total = 0
            for jid in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(jid)
                for sid in info.stageIds if info else ():
                    st = tracker.getStageInfo(sid)
                    if st is not None:
                        done += st.numCompletedTasks
                        total += st.numTasks
            on_progress({"tasks_done": done, "tasks": total, "rows": rows_acc.value, "results": res_acc.value,
                         "instants": inst_acc.value})
    if "err" in box:
        raise _spark_error(box["err"]) from None
    parts: list[TaskResult] = box["out"]
    errors = [e for p in parts for e in p.errors]
    ts = np.concatenate([p.ts for p in parts]) if parts else np.empty(0, np.int64)
    order = np.argsort(ts, kind="stable")
    sign = np.concatenate([p.sign for p in parts])[order] if parts else np.empty(0, np.int8)
    ncols = len(parts[0].cols) if parts else 0
    cols = []
    for i in range(ncols):
        pieces = [p.cols[i] for p in parts]
        if len({c.dtype for c in pieces}) > 1:
            pieces = [c.astype(object) for c in pieces]
        cols.append(np.concatenate(pieces)[order])
    ts, sign, cols = ts[order], sign, cols
    if strategy.net is not None:
        ts, sign, cols = net_changes(ts, sign, cols, strategy.net)
    if on_progress is not None:
        total = max(total, len(parts))
        on_progress({"tasks_done": total, "tasks": total, "rows": rows_acc.value, "results": res_acc.value,
                     "instants": inst_acc.value})
    return JobResult(ts, sign, cols, sum(p.rows_in for p in parts), sum(p.rows_read for p in parts), len(parts),
                     time.monotonic() - t0, errors)


def net_changes(ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray],
                op: str) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The partitions' changelogs (in timestamp order) summed per instant and row, then ``op``: ISTREAM emits
    the positive net changes as insertions, DSTREAM the negative ones as insertions (a stream's sign is always
    +1), CHANGELOG both with their signs (SPEC section 3: changes that cancel within an instant emit nothing).

    >>> t, s, c = net_changes(np.array([5, 5, 5]), np.array([-1, 1, 1], np.int8), [np.array([3, 3, 4])], "ISTREAM")
    >>> t.tolist(), s.tolist(), c[0].tolist()
    ([5], [1], [4])
    """
    out_ts: list[int] = []
    out_sign: list[int] = []
    out_rows: list[tuple] = []
    rows = list(zip(*[c.tolist() for c in cols])) if cols else [()] * len(ts)
    tsl, sl = ts.tolist(), sign.tolist()
    i, n = 0, len(tsl)
    while i < n:
        j = i
        counts: dict[tuple, int] = {}
        while j < n and tsl[j] == tsl[i]:
            counts[rows[j]] = counts.get(rows[j], 0) + sl[j]
            j += 1
        for row, c in counts.items():
            if c > 0 and op in ("ISTREAM", "CHANGELOG"):
                k, s = c, 1
            elif c < 0 and op in ("DSTREAM", "CHANGELOG"):
                k, s = -c, (1 if op == "DSTREAM" else -1)
            else:
                continue
            out_ts.extend([tsl[i]] * k)
            out_sign.extend([s] * k)
            out_rows.extend([row] * k)
        i = j
    new_cols = [np.array([r[x] for r in out_rows], dtype=c.dtype) if out_rows else c[:0]
                for x, c in enumerate(cols)]
    return np.array(out_ts, dtype=np.int64), np.array(out_sign, dtype=np.int8), new_cols


def _spark_error(e: BaseException) -> BaseException:
    """A failed task's Python error, without the JVM's pages of stack: the archive's own errors (a corrupt
    frame names its file and offset) reach the user as they were raised."""
    text = str(e)
    for marker in ("ArchiveCorrupt: ", "ReplayError: ", "InputError: ", "SchemaError: ", "CQLError: "):
        if marker in text:
            line = text.split(marker, 1)[1].splitlines()[0]
            return ReplayError(f"{marker[:-2]}: {line}")
    first = next((ln for ln in text.splitlines() if ln.strip()), type(e).__name__)
    return ReplayError(f"the Spark job failed: {first[:500]}")
