"""bench/overload.py at a small size (a few seconds): it runs end to end, writes the JSON shape issue 14 names,
its unshed runs agree with the answers it computes offline (it exits otherwise), and on the X8 data with
locality the promising regions return more of the exact output than uniform dropping at the same share."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_overload_bench_small_run_writes_the_issue_json(tmp_path: Path) -> None:
    out = tmp_path / "overload.json"
    r = subprocess.run([sys.executable, "bench/overload.py", "--rows", "6000", "--groups", "20", "--queries", "6",
                        "--batch", "2000", "--sel-rows", "30000", "--sel-batch", "5000", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    got = json.loads(out.read_text())
    assert set(got["loads"]) == {"1x", "2x", "3x"}
    for load, row in got["loads"].items():
        for key in ("max_rel_error", "uniform_max_rel_error", "peak_bytes", "p99_latency_ms"):
            assert isinstance(row[key], int | float) and row[key] >= 0, (load, key)
    assert got["loads"]["1x"]["max_rel_error"] == 0 and got["loads"]["1x"]["uniform_max_rel_error"] == 0
    assert got["loads"]["3x"]["uniform_max_rel_error"] > 0
    sel = got["selection"]["data"]
    for load in ("2x", "3x"):
        local = sel["locality"]["loads"][load]
        assert local["promising"]["output_fraction"] > local["uniform"]["output_fraction"] + 0.2
        assert local["promising"]["drops"] == ["promising"]
    assert sel["locality"]["loads"]["1x"]["promising"]["output_fraction"] == 1.0
