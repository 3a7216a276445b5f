"""The benchmark's row-at-a-time baselines (bench/row_at_a_time.py) are what the engine runs when the benchmark
asks for them, and give the vectorised operators' changelog, so bench/operators.py compares like with like."""

import sys
from pathlib import Path

import numpy as np
import pytest

from dsms import Engine

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from row_at_a_time import DistinctRowOp, SetOpRowOp, use_row_at_a_time  # noqa: E402

BODIES = ["SELECT DISTINCT k, w FROM S [RANGE 7]"] + [
    f"SELECT k, w FROM S [RANGE 7] {op} SELECT k, w FROM T [RANGE 5]"
    for op in ("UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL", "INTERSECT", "INTERSECT ALL")]
# ISTREAM shows the rows the operator inserts, DSTREAM the ones it deletes
QUERIES = [f"{op}({body})" for body in BODIES for op in ("ISTREAM", "DSTREAM")]


def changelog(eng: Engine, query: str) -> list:
    eng.execute("REGISTER STREAM S (k INT, w STRING)")
    eng.execute("REGISTER STREAM T (k INT, w STRING)")
    q = eng.execute(query)
    rng = np.random.default_rng(3)
    for t in range(0, 60, 4):          # few rows over many keys: rows enter and leave every result
        for name in ("S", "T"):
            k = rng.integers(0, 6, 3).tolist()
            eng.push(name, [{"k": x, "w": "ab"[x % 2]} for x in k], ts=[t, t, t + 1])
        eng.run()
    eng.heartbeat(80)
    eng.run()
    return sorted((e.ts, e.sign, tuple(e.row.values())) for e in q.drain())   # within an instant: any order


@pytest.mark.parametrize("query", QUERIES)
def test_row_at_a_time_baseline_matches_the_vectorised_operator(query):
    slow = use_row_at_a_time(Engine())
    got = changelog(slow, query)
    assert any(isinstance(op, DistinctRowOp | SetOpRowOp) for op in slow.ops)
    expected = changelog(Engine(), query)
    assert got == expected and len(expected) >= 10


def test_only_a_fresh_engine_can_take_the_baseline_planner():
    eng = Engine()
    eng.execute("REGISTER STREAM S (k INT, w STRING)")
    eng.execute("SELECT DISTINCT k FROM S")
    with pytest.raises(ValueError, match="no plan built"):
        use_row_at_a_time(eng)
