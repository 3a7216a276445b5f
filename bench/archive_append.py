"""Benchmark of the input archive's append path (SPEC sections 9 and 11): appends/s and MB/s for fsync modes
never / group / always and batches of 1, 64 and 1024 rows, each against plain file writes of the same bytes.

Baselines, measured in the same run on the same directory:

* ``raw``: the very frames the archive wrote, written again with one ``os.write`` each and the same fsync
  policy (per write for ``always``, every ``--group-ms`` for ``group``, none for ``never``). archive/raw is the
  cost of encoding (msgpack, CRC) and bookkeeping on top of the unavoidable I/O.
* ``seq``: the same bytes as one sequential stream of 1 MiB writes and a single fsync: the machine's limit.

Each timing starts after ``os.sync()`` so that write-back of the previous one does not land in it; baselines are
the best of two runs.

Group commit runs as the server does it: a committer thread calls ``Archive.sync()`` every ``--group-ms``
while the appender keeps going. Rows have an int, a float and a short string column (strings are the part
that cannot use the typed-array fast path). Usage::

    python3 bench/archive_append.py [--seconds 0.6] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsms.archive import Archive  # noqa: E402
from dsms.archive.frames import ScanEnd, iter_frames  # noqa: E402

MODES = ("never", "group", "always")
ROWS = (1, 64, 1024)
MB = 1e6
MAX_BYTES = 192 << 20  # per configuration: keeps disk use and page-cache effects bounded


def make_batch(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict[str, object]]:
    rng = np.random.default_rng(seed)
    ts = np.arange(rows, dtype=np.int64)
    sign = np.ones(rows, dtype=np.int8)
    cols = {"a": rng.integers(0, 1000, rows, dtype=np.int64), "b": rng.random(rows),
            "s": np.array([f"key{i % 97}" for i in range(rows)], dtype=object)}
    return ts, sign, cols


class Committer:
    """Calls ``sync`` every ``period`` seconds in a thread, like the server's group commit."""

    def __init__(self, sync: object, period: float) -> None:
        self.sync = sync
        self.period = period
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(self.period):
            self.sync()  # type: ignore[operator]

    def __enter__(self) -> Committer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def bench_archive(d: Path, mode: str, rows: int, seconds: float, group_s: float) -> dict[str, float]:
    ts, sign, cols = make_batch(rows)
    n = 0
    with Archive(d, fsync=mode) as a:  # type: ignore[arg-type]
        committer = Committer(a.sync, group_s) if mode == "group" else None
        t0 = time.perf_counter()
        if committer:
            committer.__enter__()
        try:
            while True:
                for _ in range(16):
                    a.append_batch("S", ts, sign, cols)
                n += 16
                elapsed = time.perf_counter() - t0
                if elapsed >= seconds or a.stats()["appended_bytes"] >= MAX_BYTES:
                    break
        finally:
            if committer:
                committer.__exit__()
        if mode != "never":
            a.sync()  # the last group must be durable too before the clock stops
        elapsed = time.perf_counter() - t0
        nbytes = a.stats()["appended_bytes"]
    return {"appends": n, "bytes": nbytes, "seconds": elapsed}


def archived_frames(d: Path) -> list[bytes]:
    out: list[bytes] = []
    for seg in sorted((d / "archive" / "S").glob("*.seg")):
        data = seg.read_bytes()
        with open(seg, "rb") as f:
            out.extend(data[fr.offset:fr.offset + fr.size] for fr in iter_frames(f, len(data), ScanEnd()))
    return out


def bench_raw(path: Path, frames: list[bytes], mode: str, group_s: float) -> float:
    """Seconds to write ``frames`` with one os.write each and the same fsync policy."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        t0 = time.perf_counter()
        if mode == "group":
            with Committer(lambda: os.fsync(fd), group_s):
                for fr in frames:
                    os.write(fd, fr)
        else:
            for fr in frames:
                os.write(fd, fr)
                if mode == "always":
                    os.fsync(fd)
        if mode != "never":
            os.fsync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def bench_seq(path: Path, frames: list[bytes]) -> float:
    """Seconds to write the same bytes as 1 MiB sequential writes plus one fsync."""
    blob = memoryview(b"".join(frames))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for off in range(0, len(blob), 1 << 20):
            os.write(fd, blob[off:off + (1 << 20)])
        os.fsync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=0.6, help="time budget per configuration (default 0.6)")
    ap.add_argument("--group-ms", type=float, default=5.0, help="group commit period (default 5 ms)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)

    base = Path(tempfile.mkdtemp(prefix="dsms-archive-bench-", dir=args.dir))
    results = []
    try:
        hdr = (f"{'fsync':<7}{'rows':>6}{'appends/s':>12}{'rows/s':>12}{'MB/s':>9}{'raw MB/s':>10}"
               f"{'arch/raw':>10}{'seq MB/s':>10}{'arch/seq':>10}")
        print(f"archive append benchmark in {base} ({args.seconds:g} s per configuration, "
              f"group commit every {args.group_ms:g} ms)")
        print(hdr)
        print("-" * len(hdr))
        for mode in MODES:
            for rows in ROWS:
                d = base / f"{mode}_{rows}"
                os.sync()  # start every timing with no dirty pages of the previous one still being written back
                r = bench_archive(d, mode, rows, args.seconds, args.group_ms / 1000)
                frames = archived_frames(d)
                shutil.rmtree(d)
                assert len(frames) == r["appends"] and sum(map(len, frames)) == r["bytes"]
                raw_s = seq_s = float("inf")
                for _ in range(2):  # best of two: the baselines should be the machine at its best
                    os.sync()
                    raw_s = min(raw_s, bench_raw(base / "raw.bin", frames, mode, args.group_ms / 1000))
                    os.sync()
                    seq_s = min(seq_s, bench_seq(base / "seq.bin", frames))
                row = {
                    "fsync": mode, "rows_per_batch": rows, "appends": r["appends"], "bytes": r["bytes"],
                    "frame_bytes": r["bytes"] / r["appends"],
                    "appends_per_s": r["appends"] / r["seconds"],
                    "rows_per_s": r["appends"] * rows / r["seconds"],
                    "mb_per_s": r["bytes"] / MB / r["seconds"],
                    "raw_mb_per_s": r["bytes"] / MB / raw_s,
                    "seq_mb_per_s": r["bytes"] / MB / seq_s,
                }
                row["archive_over_raw"] = row["mb_per_s"] / row["raw_mb_per_s"]
                row["archive_over_seq"] = row["mb_per_s"] / row["seq_mb_per_s"]
                results.append(row)
                print(f"{mode:<7}{rows:>6}{row['appends_per_s']:>12,.0f}{row['rows_per_s']:>12,.0f}"
                      f"{row['mb_per_s']:>9.1f}{row['raw_mb_per_s']:>10.1f}{row['archive_over_raw']:>10.2f}"
                      f"{row['seq_mb_per_s']:>10.1f}{row['archive_over_seq']:>10.2f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "archive_append", "seconds_per_config": args.seconds,
                                         "group_ms": args.group_ms, "results": results}, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
