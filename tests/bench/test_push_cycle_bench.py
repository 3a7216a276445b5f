"""bench/push_cycle.py at a small size: it runs end to end and prints, per query, a positive cost and the
operator runs of one heartbeat-only cycle (at least one: the heartbeat reaches every query's plan)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_push_cycle_bench_prints_a_cost_per_query() -> None:
    r = subprocess.run([sys.executable, "bench/push_cycle.py", "--queries", "q0,q5", "--cycles", "20",
                        "--rounds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    got = re.findall(r"^(q\d)\s+([\d.]+) us of CPU per heartbeat-only cycle\s+\(([\d.]+) operator runs\)$",
                     r.stdout, re.M)
    assert [g[0] for g in got] == ["q0", "q5"], r.stdout
    for _, us, runs in got:
        assert float(us) > 0 and float(runs) >= 1
