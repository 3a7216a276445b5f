"""bench/overload.py at a small size (a few seconds): it runs end to end, writes the JSON shape issue 14 names
(with latency per half of the stream and peak bytes split into the input backlog and the rest), its closed
loop sheds at 3x, its unshed runs agree with the answers it computes offline (it exits otherwise), and on the X8 data with
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
        for key in ("max_rel_error", "uniform_max_rel_error", "peak_bytes", "p99_latency_ms",
                    "p99_first_half_ms", "p99_second_half_ms", "peak_queue_bytes", "peak_state_bytes"):
            assert isinstance(row[key], int | float) and row[key] >= 0, (load, key)
        assert row["peak_queue_bytes"] + row["peak_state_bytes"] >= row["peak_bytes"] > 0
        assert row["p99_latency_ms"] >= max(row["p99_first_half_ms"], row["p99_second_half_ms"]) * 0.99
        assert row["steps"] and all(s["factor"] > 0 for s in row["steps"])   # the closed loop ran
    # (at 1x, utilization 1, the closed loop may shed a little: load_threshold is 0.9)
    assert got["loads"]["3x"]["uniform_max_rel_error"] > 0 and got["loads"]["3x"]["rate_min"] < 1.0
    sel = got["selection"]["data"]
    for load in ("2x", "3x"):
        local = sel["locality"]["loads"][load]
        assert local["promising"]["output_fraction"] > local["uniform"]["output_fraction"] + 0.2
        assert local["promising"]["drops"] == ["promising"]
    assert sel["locality"]["loads"]["1x"]["promising"]["output_fraction"] == 1.0
