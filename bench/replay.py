"""Benchmark of ``dsms replay`` (SPEC sections 9 and 11): one archive of ``--rows`` rows (default 10M, written
through the archive's own writer), the same query replayed by (a) the in-process engine reading the archive
directly (the same feed code, no Spark), (b) Spark ``local[1]`` and (c) Spark ``local[2]``, for a
key-partitioned plan (tumbling-window GROUP BY over 10,000 keys), a time-sliced plan (RANGE window aggregate)
and a single-partition plan (ROWS window aggregate).

Reported per plan: rows/s of each, the speed-up from 1 to 2 Spark cores, Spark's over the in-process replay;
and Spark's fixed start-up cost (JVM, session and a trivial job, in a fresh process: each Spark master runs in
its own process), all measured in one run. Rates are input
rows over the job's own time (start-up excluded; it is reported on its own line). Results of the three runs
are checked to be equal, so a fast wrong plan cannot pass. Usage::

    python3 bench/replay.py [--rows 10000000] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsms.archive import Archive  # noqa: E402
from dsms.spark.archive_input import merged, read_input  # noqa: E402
from dsms.spark.feed import run_engine  # noqa: E402
from dsms.spark.replay import prepare, run  # noqa: E402

KEYS = 10_000
ROWS_PER_MS = 100            # 10M rows span 100,000 ms of application time
BATCH = 8192
PLANS = {
    "key_groupby": "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM S [RANGE 10 SECONDS SLIDE 10 SECONDS] GROUP BY k",
    "time_range_agg": "SELECT COUNT(*) AS n, SUM(v) AS s, MAX(v) AS m FROM S [RANGE 1 SECOND SLIDE 1 SECOND]",
    "single_rows_agg": "SELECT COUNT(*) AS n, MAX(v) AS m FROM S [ROWS 1000]",
}


def make_archive(data_dir: Path, rows: int, segment_bytes: int) -> None:
    """``S(k INT, v FLOAT)``: keys uniform over 10,000, ``ROWS_PER_MS`` rows a millisecond, and the catalog."""
    rng = np.random.default_rng(7)
    with Archive(data_dir, fsync="never", segment_bytes=segment_bytes) as a:
        for lo in range(0, rows, BATCH):
            n = min(BATCH, rows - lo)
            idx = np.arange(lo, lo + n, dtype=np.int64)
            a.append_batch("s", idx // ROWS_PER_MS, None,
                           {"k": rng.integers(0, KEYS, n, dtype=np.int64), "v": rng.random(n)})
        a.append_heartbeat("s", rows // ROWS_PER_MS + 1)
    log = [{"op": "cql", "cql": "REGISTER STREAM S (k INT, v FLOAT)", "at": {}}]
    (data_dir / "catalog.json").write_text(json.dumps({"version": 1, "log": log}))


def inprocess(data_dir: Path, query: str) -> tuple[float, int, int]:
    """The in-process replay: the archive read and fed to one engine in this process. (seconds, rows, results)"""
    p = prepare(str(data_dir), query=query, master="local[1]", strategy="single")
    t0 = time.perf_counter()
    feed = merged({n: read_input(p.index.segments[n], n) for n in p.spec.inputs})
    res = run_engine(p.spec, feed)
    return time.perf_counter() - t0, res.rows_in, len(res)


def spark_runs(data_dir: Path, master: str, cores: int) -> tuple[float, dict[str, tuple[float, int, int, str]]]:
    """Every plan on ``master``, in a fresh process (so the JVM's start is part of the measured start-up)."""
    cmd = [sys.executable, __file__, "--spark-worker", master, "--cores", str(cores), "--dir", str(data_dir.parent)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    return doc["startup"], {k: tuple(v) for k, v in doc["plans"].items()}


def spark_worker(data_dir: Path, master: str, cores: int) -> None:
    from dsms.spark.job import session

    t0 = time.perf_counter()
    spark = session(master, "dsms replay bench")
    spark.sparkContext.parallelize([0], 1).count()
    startup = time.perf_counter() - t0
    out = {}
    try:
        for name, q in PLANS.items():
            p = prepare(str(data_dir), query=q, master=master, partitions=cores)
            summary, _ = run(p, spark=spark)
            out[name] = (summary["job_seconds"], summary["rows_in"], summary["results"], summary["strategy"])
    finally:
        spark.stop()
    print(json.dumps({"startup": startup, "plans": out}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segment-mb", type=int, default=16, help="archive segment size (key partitioning reads one "
                                                                "task per segment)")
    ap.add_argument("--dir", help="where to build the archive (default: a temporary directory, removed after)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--spark-worker", help=argparse.SUPPRESS)
    ap.add_argument("--cores", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.spark_worker:
        spark_worker(Path(args.dir) / "data", args.spark_worker, args.cores)
        return 0
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="dsms-replay-bench-"))
    data = base / "data"
    try:
        t0 = time.perf_counter()
        make_archive(data, args.rows, args.segment_mb << 20)
        print(f"archive: {args.rows:,} rows written in {time.perf_counter() - t0:.1f}s", flush=True)
        inproc = {name: inprocess(data, q) for name, q in PLANS.items()}
        print("in-process done", flush=True)
        start1, local1 = spark_runs(data, "local[1]", 1)
        print("local[1] done", flush=True)
        start2, local2 = spark_runs(data, "local[2]", 2)
        plans = {}
        print(f"\n{'plan':18} {'strategy':16} {'rows':>12} {'in-process/s':>14} {'local[1]/s':>12} "
              f"{'local[2]/s':>12} {'2 vs 1':>7} {'l2/inproc':>9}")
        for name in PLANS:
            s_in, rows, res = inproc[name]
            s1, r1, res1, strat = local1[name]
            s2, r2, res2, _ = local2[name]
            assert rows == r1 == r2 and res == res1 == res2, (name, rows, r1, r2, res, res1, res2)
            rec = {"strategy": strat, "rows": rows, "results": res, "inprocess_rows_s": rows / s_in,
                   "local1_rows_s": rows / s1, "local2_rows_s": rows / s2, "speedup_1_to_2": s1 / s2,
                   "local2_vs_inprocess": s_in / s2}
            plans[name] = rec
            print(f"{name:18} {strat:16} {rows:>12,} {rec['inprocess_rows_s']:>14,.0f} {rec['local1_rows_s']:>12,.0f} "
                  f"{rec['local2_rows_s']:>12,.0f} {rec['speedup_1_to_2']:>7.2f} {rec['local2_vs_inprocess']:>9.2f}")
        print(f"\nSpark start-up (JVM, session and a first job, in a fresh process): local[1] {start1:.2f}s, "
              f"local[2] {start2:.2f}s")
        doc = {"rows": args.rows, "keys": KEYS, "plans": plans,
               "spark_startup_s": {"local1": start1, "local2": start2}}
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
