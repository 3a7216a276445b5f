"""bench/push_cycle_parts.py at a small size: it runs end to end and prints, per query, every part of a push
cycle, each at least 0, the operators' share positive, and "outside" the sum of push, heartbeat, loop and drain."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_push_cycle_parts_bench_prints_every_part_per_query() -> None:
    r = subprocess.run([sys.executable, "bench/push_cycle_parts.py", "--queries", "q2,q3", "--events", "5000",
                        "--rounds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert [ln.split()[0] for ln in lines] == ["q2", "q3"], r.stdout
    for ln in lines:
        got = dict((k, float(v)) for k, v in re.findall(r"(\w+) (-?[\d.]+)", ln))
        assert set(got) >= {"push", "heartbeat", "run", "drain", "operators", "loop", "outside"}, ln
        assert got["push"] > 0 and got["operators"] > 0 and got["run"] >= got["operators"] - 0.05, ln
        parts = got["push"] + got["heartbeat"] + got["loop"] + got["drain"]
        assert abs(got["outside"] - parts) <= 0.5, ln
