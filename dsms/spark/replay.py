"""One replay from request to written results: resolve the query, plan, run on Spark, write, summarise. Used by
``dsms replay`` and by the server's ``POST /replays``; everything is checked before Spark starts, so bad input
fails in milliseconds and leaves ``out`` untouched."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsms.spark.archive_input import ArchiveIndex, open_index
from dsms.spark.job import check_master, run_job, session
from dsms.spark.output import check_out, write
from dsms.spark.spec import ReplayError, ReplaySpec, load_spec
from dsms.spark.strategy import Strategy, choose

DEFAULT_MASTER = "local[*]"


@dataclass
class Prepared:
    """A checked request: what to run, how, and on which input."""

    spec: ReplaySpec
    strategy: Strategy
    index: ArchiveIndex
    names: list[str]
    types: list[str]
    kind: str
    master: str


def default_partitions(master: str) -> int:
    """Partitions when none are asked for: the cores of a local master; 0 for a cluster, meaning Spark's
    default parallelism (the executors' cores), read once the session is up."""
    import os

    if master.startswith("local["):
        inner = master[6:-1]
        return (os.cpu_count() or 1) if inner == "*" else int(inner)
    if master == "local":
        return 1
    return 0


def prepare(data_dir: str, *, query: str | None = None, query_id: str | None = None, from_ts: int | None = None,
            to_ts: int | None = None, master: str = DEFAULT_MASTER, partitions: int | None = None,
            strategy: str | None = None, out: str | None = None) -> Prepared:
    """Check everything that can be checked without Spark; raise :class:`ReplayError` naming what is wrong."""
    if partitions is not None and partitions < 1:
        raise ReplayError(f"--partitions must be at least 1, got {partitions}")
    spec, eng, q = load_spec(data_dir, query=query, query_id=query_id, from_ts=from_ts, to_ts=to_ts)
    index = open_index(spec)
    if out is not None:
        check_out(out)
    check_master(master)
    n = partitions if partitions is not None else default_partitions(master)
    plan = choose(eng, q, n, strategy)
    return Prepared(spec, plan, index, [c for c, _ in q.schema], [t for _, t in q.schema], q.kind, master)


def run(p: Prepared, *, out: str | None = None, spark: Any = None,
        on_progress: Callable[[dict[str, int]], None] | None = None) -> tuple[dict[str, Any], Any]:
    """Run a prepared replay; returns ``(summary, result)`` (``result`` has ``ts``, ``sign``, ``cols``) and
    writes ``out`` when given."""
    t0 = time.monotonic()
    started_here = False
    if spark is None:
        from pyspark.sql import SparkSession

        had = SparkSession.getActiveSession()
        spark = session(p.master)
        started_here = spark is not had     # a session someone else started (tests share one) stays up
    startup = time.monotonic() - t0
    strategy = p.strategy
    try:
        if strategy.partitions == 0:
            n = max(1, spark.sparkContext.defaultParallelism)
            strategy = Strategy(strategy.kind, n if strategy.kind != "single" else 1, strategy.reason,
                                strategy.keys, strategy.warmup, strategy.alternatives)
        result = run_job(spark, p.spec, strategy, p.index, on_progress)
        summary = summarise(p, strategy, result, startup, time.monotonic() - t0)
        if out is not None:
            write(out, p.names, p.types, result.ts, result.sign, result.cols, summary, spark)
            summary["out"] = out
        return summary, result
    finally:
        if started_here:
            spark.stop()


def summarise(p: Prepared, strategy: Strategy, result: Any, startup: float, total: float) -> dict[str, Any]:
    return {
        "query": p.spec.query, "query_id": p.spec.query_id, "kind": p.kind,
        "columns": [list(c) for c in zip(p.names, p.types)],
        "from": p.spec.from_ts, "to": p.spec.to_ts, "master": p.master,
        "strategy": strategy.kind, "why": strategy.reason, "partitions": strategy.partitions,
        "partition_key": dict(strategy.keys), "warmup": strategy.warmup,
        "alternatives": dict(strategy.alternatives),
        "rows_in": int(result.rows_in), "rows_read": int(result.rows_read), "results": int(len(result.ts)),
        "instants": int(len(np.unique(result.ts))) if len(result.ts) else 0,
        "tasks": result.tasks, "seconds": round(total, 3), "spark_startup_seconds": round(startup, 3),
        "job_seconds": round(result.seconds, 3),
        "rows_per_second": round(result.rows_in / result.seconds, 1) if result.seconds > 0 else None,
        "warnings": list(p.index.warnings) + list(result.errors),
    }


def summary_text(s: dict[str, Any]) -> str:
    """The summary as the CLI prints it."""
    lines = [
        f"replayed {s['query_id'] or 'query'} ({s['kind']}) on {s['master']}",
        f"  strategy: {s['strategy']} on {s['partitions']} partition(s): {s['why']}",
        f"  rows in: {s['rows_in']:,}   results out: {s['results']:,} over {s['instants']:,} instants",
        f"  time: {s['seconds']:.2f}s (Spark start {s['spark_startup_seconds']:.2f}s, job {s['job_seconds']:.2f}s"
        + (f", {s['rows_per_second']:,.0f} rows/s)" if s["rows_per_second"] else ")"),
    ]
    if s.get("out"):
        lines.append(f"  written to {s['out']}")
    lines += [f"  warning: {w}" for w in s["warnings"]]
    return "\n".join(lines)
