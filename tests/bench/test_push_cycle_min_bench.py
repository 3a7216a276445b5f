"""bench/push_cycle_min.py at a small size: it runs end to end and prints, per query, every part of a push
cycle, each above 0 (a heartbeat and a drain happen every cycle), and the total at least the sum of the parts
less rounding (each cycle's total is its own least over the rounds, and the least of a sum is at least the sum
of the leasts)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_push_cycle_min_bench_prints_every_part_per_query() -> None:
    r = subprocess.run([sys.executable, "bench/push_cycle_min.py", "--queries", "q2,q7", "--events", "5000",
                        "--rounds", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert [ln.split()[0] for ln in lines] == ["q2", "q7"], r.stdout
    for ln in lines:
        got = dict((k, float(v)) for k, v in re.findall(r"(\w+) (-?[\d.]+)", ln))
        assert set(got) == {"push", "heartbeat", "run", "drain", "total"}, ln
        assert all(v > 0 for v in got.values()), ln
        assert got["total"] >= got["push"] + got["heartbeat"] + got["run"] + got["drain"] - 0.2, ln
