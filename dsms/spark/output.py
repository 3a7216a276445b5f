"""Writers for a replay's results: an NDJSON file (the wire format of ``GET /queries/{id}/results``), a
directory (the NDJSON results and a ``_summary.json``), or a Parquet file (written by Spark itself, so no Arrow
is needed). Every writer writes beside its target under a temporary name and renames at the end, so a failed
replay leaves nothing at ``--out``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from dsms.formats.json_codec import rows_text
from dsms.spark.spec import ReplayError

CHUNK = 1 << 16


def out_kind(path: str) -> str:
    """``ndjson``, ``parquet`` or ``dir``, from the name: ``.parquet`` and ``.ndjson``/``.jsonl`` files,
    anything else a directory."""
    low = path.lower()
    if low.endswith(".parquet"):
        return "parquet"
    if low.endswith((".ndjson", ".jsonl", ".json")):
        return "ndjson"
    return "dir"


def check_out(path: str) -> None:
    """Refuse an output that cannot be written before the job runs: a missing parent directory, or a
    directory target that already exists (never merged into or overwritten)."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ReplayError(f"cannot write --out {path}: directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK):
        raise ReplayError(f"cannot write --out {path}: directory '{parent}' is not writable")
    if out_kind(path) == "dir" and p.exists():
        raise ReplayError(f"--out {path} already exists; give a new directory (or a .ndjson / .parquet file)")
    if p.is_dir() and out_kind(path) != "dir":
        raise ReplayError(f"--out {path} is a directory")


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_ndjson_stream(f: Any, names: list[str], ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray]) -> None:
    """NDJSON elements, one a line, written in chunks."""
    for lo in range(0, len(ts), CHUNK):
        hi = lo + CHUNK
        f.write(rows_text(names, ts[lo:hi], sign[lo:hi], [c[lo:hi] for c in cols]))


def write(path: str, names: list[str], types: list[str], ts: np.ndarray, sign: np.ndarray,
          cols: list[np.ndarray], summary: dict[str, Any], spark: Any = None) -> None:
    """Write the results (and, for a directory, the summary) to ``path`` atomically."""
    target = Path(path)
    tmp = _tmp(target)
    kind = out_kind(path)
    try:
        if kind == "ndjson":
            with open(tmp, "w", encoding="ascii") as f:
                write_ndjson_stream(f, names, ts, sign, cols)
            os.replace(tmp, target)
        elif kind == "dir":
            tmp.mkdir()
            with open(tmp / "results.ndjson", "w", encoding="ascii") as f:
                write_ndjson_stream(f, names, ts, sign, cols)
            (tmp / "_summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
            os.rename(tmp, target)
        else:
            _write_parquet(spark, tmp, target, names, types, ts, sign, cols)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


_SPARK_TYPES = {"INT": "LongType", "FLOAT": "DoubleType", "STRING": "StringType", "BOOLEAN": "BooleanType",
                "TIMESTAMP": "LongType"}


def _write_parquet(spark: Any, tmp: Path, target: Path, names: list[str], types: list[str], ts: np.ndarray,
                   sign: np.ndarray, cols: list[np.ndarray]) -> None:
    """One Parquet file with columns ``ts``, ``sign`` and the query's columns, in timestamp order."""
    if spark is None:
        raise ReplayError("Parquet output needs the Spark session")
    from pyspark.sql import types as T

    fields = [T.StructField("ts", T.LongType(), False), T.StructField("sign", T.ByteType(), False)]
    fields += [T.StructField(n, getattr(T, _SPARK_TYPES.get(t, "StringType"))(), True) for n, t in zip(names, types)]
    data = list(zip(ts.tolist(), sign.tolist(), *[c.tolist() for c in cols]))
    df = spark.createDataFrame(data, T.StructType(fields), verifySchema=False)
    df.coalesce(1).write.mode("error").parquet(str(tmp))
    part = sorted(tmp.glob("part-*.parquet"))
    if len(part) != 1:
        raise ReplayError(f"Spark wrote {len(part)} Parquet parts, expected one")
    os.replace(part[0], target)
