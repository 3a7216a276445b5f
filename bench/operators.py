"""Duplicate elimination and set operations: tuples per second through the engine, vectorised operators
(``DistinctOp``, ``SetOpOp``) beside the row-at-a-time ones (``DistinctRowOp``, ``SetOpRowOp`` in bench/row_at_a_time.py) in the same run.

    python3 bench/operators.py [--rows N] [--batch B] [--repeat R] [--json PATH]

Each plan reads RANGE windows over streams with one row per tick, fed in batches of 1,024 rows (a set
operation gets half of each batch on each input), so the operator sees every row twice: its insert and, when
it leaves the window, its delete. Two workloads: "small domain", a 1,000-tick window over 1,000 keys and 10
strings (a few hundred distinct rows, mostly repeats), and "large domain", a 20,000-tick window over 10**7
keys (nearly every row distinct, so nearly every delta changes the output; half as many rows). The time
counted is push + run + draining the results as batches; the operator columns count only the operator's own
runs: the deltas it consumes per second of its runs, which include putting its output on its queue. Both
implementations must produce the same changelog, or the run stops. Each figure is the best of three runs,
the two implementations taking turns (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

sys.path.insert(0, ".")
from row_at_a_time import use_row_at_a_time  # noqa: E402  (bench/, the script's own folder)

from dsms import Engine  # noqa: E402

WORKLOADS = {"small domain": (1000, 1000), "large domain": (20_000, 10**7)}      # (RANGE, keys)
WORDS = np.array([f"w{i}" for i in range(10)], dtype=object)

PLANS = {
    "DISTINCT k (INT)": "SELECT DISTINCT k FROM S [RANGE {r}]",
    "DISTINCT k, w (INT, STRING)": "SELECT DISTINCT k, w FROM S [RANGE {r}]",
    **{f"{op} (INT, STRING)": f"SELECT k, w FROM S [RANGE {{r}}] {op} SELECT k, w FROM T [RANGE {{r}}]"
       for op in ("UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL", "INTERSECT", "INTERSECT ALL")},
}
LARGE = ("DISTINCT k (INT)", "DISTINCT k, w (INT, STRING)", "UNION (INT, STRING)", "EXCEPT (INT, STRING)")


def make_input(n: int, keys: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"k": rng.integers(0, keys, n).astype(np.int64), "w": WORDS[rng.integers(0, len(WORDS), n)]}


def run_engine(query: str, data: dict, batch: int, rows: bool, range_: int) -> tuple[float, float, list]:
    """(engine tuples/s, operator tuples/s, result elements) for one plan."""
    n = len(data["k"])
    eng = use_row_at_a_time(Engine()) if rows else Engine()
    eng.execute("REGISTER STREAM S (k INT, w STRING)")
    eng.execute("REGISTER STREAM T (k INT, w STRING)")
    q = eng.execute(query.format(r=range_))
    op = next(o for o in eng.ops if o.kind in ("distinct", "set_op"))
    spent = [0]
    inner = op.run

    def timed(budget: int = 1 << 30) -> int:
        t = time.perf_counter_ns()
        try:
            return inner(budget)
        finally:
            spent[0] += time.perf_counter_ns() - t

    op.run = timed
    two = " T " in query
    ts = np.arange(n, dtype=np.int64)
    out = []
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        j = min(n, i + batch)
        if two:
            h = (i + j) // 2
            eng.push("S", {"k": data["k"][i:h], "w": data["w"][i:h]}, ts=ts[i:h])
            eng.push("T", {"k": data["k"][h:j], "w": data["w"][h:j]}, ts=ts[h:j])
        else:
            eng.push("S", {"k": data["k"][i:j], "w": data["w"][i:j]}, ts=ts[i:j])
        eng.run()
        out += q.drain_batches()
    eng.heartbeat(n + 2 * range_)
    eng.run()
    out += q.drain_batches()
    total = time.perf_counter() - t0
    rows_seen = [(t, s, r) for b in out for t, s, r in zip(b.ts.tolist(), b.sign.tolist(), b.rows())]
    return n / total, op.tuples_in / (spent[0] / 1e9), rows_seen


def measure(query: str, data: dict, batch: int, range_: int, repeat: int) -> dict:
    """Best of ``repeat`` runs of each implementation, taken in turns; they must agree."""
    fast, slow = [], []
    for _ in range(repeat):
        fast.append(run_engine(query, data, batch, False, range_))
        slow.append(run_engine(query, data, batch, True, range_))
    if fast[0][2] != slow[0][2]:
        raise SystemExit(f"{query}: the two implementations disagree")
    v, r = max(f[0] for f in fast), max(s[0] for s in slow)
    ov, orow = max(f[1] for f in fast), max(s[1] for s in slow)
    return {"vectorised": v, "row_at_a_time": r, "speedup": v / r,
            "operator_vectorised": ov, "operator_row_at_a_time": orow, "operator_speedup": ov / orow}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, best taken")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    result: dict = {}
    print(f"{'workload':<14}{'plan':<30}{'vectorised':>13}{'row-at-a-time':>15}{'speedup':>9}"
          f"{'operator vec':>15}{'operator row':>15}{'speedup':>9}")
    for workload, (range_, keys) in WORKLOADS.items():
        rows = args.rows if workload == "small domain" else args.rows // 2
        data = make_input(rows, keys)
        result[workload] = {}
        for name, query in PLANS.items():
            if workload != "small domain" and name not in LARGE:
                continue
            r = result[workload][name] = measure(query, data, args.batch, range_, args.repeat)
            print(f"{workload:<14}{name:<30}{r['vectorised']:>13,.0f}{r['row_at_a_time']:>15,.0f}"
                  f"{r['speedup']:>8.2f}x{r['operator_vectorised']:>15,.0f}{r['operator_row_at_a_time']:>15,.0f}"
                  f"{r['operator_speedup']:>8.2f}x")
    print(f"(input tuples per second through the engine, batches of {args.batch}; operator columns: deltas the "
          "operator consumes per second of its own runs; one core, higher is better)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "batch": args.batch, "workloads": result}, f, indent=2)


if __name__ == "__main__":
    main()
