"""State scaling: tuples per second at input batches of 1,024 rows while an operator holds a small or a large
state, beside a plain-Python (dict-based) loop doing the same computation in the same run (SPEC section 11).

    python3 bench/state_scaling.py [--rows N] [--sizes 1000,100000,1000000] [--json PATH]

Cases: GROUP BY k with SUM and COUNT, and DISTINCT k, over an unbounded window whose state already holds
``size`` distinct keys (the even numbers below 2 * size), fed rows whose keys are drawn from 0 .. 2 * size - 1,
so that half the rows hit a known key and the other half bring new keys (until every key is known: with a
large state, nearly every batch brings new keys, the case where a per-batch rebuild of the key table shows);
and a RANGE-window GROUP BY (1,000 groups) whose window already holds ``size`` rows (one row per tick, RANGE =
size), where every measured row enters the window and one leaves it. The state is built first (not timed, in large batches); then ``rows``
rows are timed, push + run + draining the results as batches. A per-batch cost that grows with the state
shows as throughput falling from the small size to the large one while the loop's stays flat.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict, deque

import numpy as np

sys.path.insert(0, ".")
from dsms import Engine  # noqa: E402

BATCH = 1024
FILL_BATCH = 1 << 16
WINDOW_GROUPS = 1000
QUERIES = {
    "groupby": "SELECT k, SUM(v) AS s, COUNT(*) AS c FROM S GROUP BY k",
    "distinct": "SELECT DISTINCT k FROM S",
    "range_window": "SELECT k, SUM(v) AS s, COUNT(*) AS c FROM S [RANGE {size}] GROUP BY k",
}


def make_input(case: str, size: int, rows: int, seed: int = 1) -> tuple[dict, dict]:
    """(fill, timed): the rows that build the state and the rows that are measured."""
    rng = np.random.default_rng(seed)
    if case == "range_window":
        fill_k = rng.integers(0, WINDOW_GROUPS, size)
        timed_k = rng.integers(0, WINDOW_GROUPS, rows)
    else:
        fill_k = 2 * rng.permutation(size)             # the even keys once: the state holds ``size`` keys
        timed_k = rng.integers(0, 2 * size, rows)      # half of the draws known keys, half new (odd) ones
    n = size + rows
    ts = np.arange(n, dtype=np.int64)
    v = rng.random(n) * 100.0
    fill = {"k": fill_k.astype(np.int64), "v": v[:size], "ts": ts[:size]}
    timed = {"k": timed_k.astype(np.int64), "v": v[size:], "ts": ts[size:]}
    return fill, timed


def run_engine(case: str, size: int, fill: dict, timed: dict) -> float:
    eng = Engine()
    eng.execute("REGISTER STREAM S (k INT, v FLOAT)")
    q = eng.execute(QUERIES[case].format(size=size))

    def feed(d: dict, batch: int) -> None:
        for i in range(0, len(d["k"]), batch):
            j = i + batch
            eng.push("S", {"k": d["k"][i:j], "v": d["v"][i:j]}, ts=d["ts"][i:j])
            eng.run()
            q.drain_batches()

    feed(fill, FILL_BATCH)
    t0 = time.perf_counter()
    feed(timed, BATCH)
    return len(timed["k"]) / (time.perf_counter() - t0)


def run_loop(case: str, size: int, fill: dict, timed: dict) -> float:
    """The same computation one row at a time with dicts (and a deque for the window); only the timed rows
    are timed, after the same state is built."""
    out: list = []
    sums: dict = defaultdict(float)
    counts: dict = defaultdict(int)
    window: deque = deque()

    def step(ks: list, vs: list, ts: list) -> None:
        for t, k, v in zip(ts, ks, vs):
            if case == "distinct":
                c = counts[k]
                counts[k] = c + 1
                if c == 0:
                    out.append((k,))
                continue
            if case == "range_window":
                while window and window[0][0] <= t - size:
                    _, ok, ov = window.popleft()
                    sums[ok] -= ov
                    counts[ok] -= 1
                    out.append((ok, sums[ok], counts[ok]))
                window.append((t, k, v))
            sums[k] += v
            counts[k] += 1
            out.append((k, sums[k], counts[k]))

    step(fill["k"].tolist(), fill["v"].tolist(), fill["ts"].tolist())
    ks, vs, ts = timed["k"].tolist(), timed["v"].tolist(), timed["ts"].tolist()
    t0 = time.perf_counter()
    step(ks, vs, ts)
    return len(ks) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="timed rows per case")
    ap.add_argument("--sizes", default="1000,100000,1000000", help="state sizes (keys, or window rows)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = [("groupby", s) for s in sizes] + [("distinct", s) for s in sizes] + \
        [("range_window", s) for s in (sizes[0], sizes[-1])]
    result: dict = {"batch": BATCH, "rows": args.rows, "cases": []}
    print(f"{'case':<14} {'state':>10} {'engine tuples/s':>16} {'loop tuples/s':>14} {'engine/loop':>12}")
    for case, size in cases:
        fill, timed = make_input(case, size, args.rows)
        eng = run_engine(case, size, fill, timed)
        loop = run_loop(case, size, fill, timed)
        result["cases"].append({"case": case, "state": size, "engine": round(eng), "loop": round(loop)})
        print(f"{case:<14} {size:>10,} {eng:>16,.0f} {loop:>14,.0f} {eng / loop:>11.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
