"""Scheduler memory benchmark: peak and average queue bytes and p99 latency of every policy on bursty input.

    python3 bench/scheduler_memory.py [--batches N] [--seed S] [--bound-factor F] [--json PATH]

Source: digest-004 section 2.G (R-SCH-02: the objective is the peak total queue size during bursts; R-SCH-05:
Chain's latency cost) and BBDM03 section 5 (its experiments: bursty on/off input, plans whose operators differ
in selectivity and cost, several queries sharing subplans). SPEC section 11: ratios within one run.

Driver. ``Engine.run()`` does not take a policy yet (``Engine(config={"policy": ...})`` is refused), so this
runs the deterministic simulator of ``tests/scheduler/schedsim.py``: toy operators with the engine's queue
semantics (a shared queue holds an item until its slowest reader has read it), per-batch plus per-tuple costs
in simulated nanoseconds of the order the engine measures (``bench/engine_throughput.py``, the operators'
``cost_ns_per_tuple``), selectivities drawn per batch around their mean, and statistics learned as the engine
does (EWMA, alpha 0.2): the policies see measured, not true, values. Each workload is fed by on/off sources
(exponential on and off periods, on 30% of the time, so the peak rate is 2.3-3.2x the capacity) at a mean
utilisation of 70-95%. Chain-Flush's bound is ``--bound-factor`` times FIFO's longest latency on the same
input (a feasible bound), in simulated time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "scheduler"))
from schedsim import SimOp, SimQueue, Simulator  # noqa: E402

from scheduler import POLICIES  # noqa: E402

ORDER = ["fifo", "round_robin", "greedy", "chain", "chain_flush"]


@dataclass
class OpSpec:
    """One operator: inputs (source or operator names), selectivity, ns per tuple, ns per batch, output width
    in bytes per tuple (None: a sink, its output leaves the plan)."""

    name: str
    inputs: tuple[str, ...]
    selectivity: float
    ns_tuple: float
    ns_batch: float
    width: float | None


@dataclass
class Workload:
    name: str
    sources: dict[str, float]          # source -> bytes per tuple
    ops: list[OpSpec]
    utilisation: float
    note: str


def op(name: str, inputs: str, sel: float, ns_tuple: float, ns_batch: float, width: float | None = None) -> OpSpec:
    return OpSpec(name, tuple(inputs.split()), sel, ns_tuple, ns_batch, width)


WORKLOADS = [
    Workload("filter_then_aggregate", {"S": 48}, [
        op("sel_S", "S", 0.15, 40, 4_000, 48),             # cheap, selective WHERE shared by two queries
        op("proj1", "sel_S", 1.0, 300, 3_000, 16),         # Q1: a projection to 2 columns ...
        op("agg1", "proj1", 0.1, 900, 8_000),              # ... then GROUP BY: the result leaves
        op("sel2", "sel_S", 0.5, 60, 4_000, 48),           # Q2: one more predicate ...
        op("udf2", "sel2", 1.0, 2_500, 5_000),             # ... and an expensive expression
    ], 0.85, "2 queries share a selective filter; expensive operators after it"),
    Workload("window_join", {"S": 40, "T": 40}, [
        op("selS", "S", 0.3, 40, 4_000, 40),
        op("winS", "selS", 2.0, 150, 6_000, 40),           # RANGE window: every tuple in and, later, out
        op("selT", "T", 0.4, 40, 4_000, 40),
        op("winT", "selT", 2.0, 150, 6_000, 40),
        op("join", "winS winT", 0.4, 1_500, 20_000, 64),   # windowed equi-join
        op("proj", "join", 1.0, 120, 3_000, 24),
        op("istream", "proj", 0.5, 200, 4_000),
    ], 0.8, "two filtered streams, windows feeding a join (selectivity above 1 before the join)"),
    Workload("greedy_trap", {"S": 48, "T": 48}, [
        op("winS", "S", 1.0, 250, 5_000, 48),              # ROWS window: releases nothing by itself ...
        op("selS", "winS", 0.05, 100, 3_000, 48),          # ... but feeds a very selective filter
        op("aggS", "selS", 0.2, 2_000, 8_000),
        op("selT", "T", 0.35, 250, 4_000, 48),             # another query, moderately selective
        op("projT", "selT", 1.0, 400, 4_000, 24),
        op("outT", "projT", 1.0, 300, 3_000),
    ], 0.9, "E2 in the large: a non-reducing operator feeding a selective one, beside a second query"),
    Workload("shared_fanout", {"S": 48}, [
        op("selS", "S", 0.6, 40, 4_000, 48),               # shared subplan, read by three queries
        op("q1sel", "selS", 0.02, 60, 3_000, 48),
        op("q1agg", "q1sel", 0.5, 800, 6_000),
        op("q2proj", "selS", 1.0, 150, 3_000, 16),
        op("q2agg", "q2proj", 0.05, 3_000, 10_000),
        op("q3win", "selS", 2.0, 200, 5_000, 48),
        op("q3dist", "q3win", 0.05, 1_200, 8_000),
    ], 0.95, "3 queries read one shared queue (P-12: it holds items until the slowest reader)"),
    Workload("mixed_queries", {"S": 40, "T": 56}, [
        op("winS", "S", 2.0, 120, 5_000, 40),              # a window shared by two aggregates
        op("aggS1", "winS", 0.05, 700, 8_000),
        op("aggS2", "winS", 0.1, 1_100, 9_000),
        op("selS", "S", 0.25, 40, 4_000, 40),
        op("projS", "selS", 1.0, 250, 3_000, 16),
        op("outS", "projS", 1.0, 200, 3_000),
        op("selT", "T", 0.4, 50, 4_000, 56),
        op("distT", "selT", 0.3, 900, 7_000, 56),
        op("outT", "distT", 1.0, 150, 3_000),
    ], 0.7, "5 queries over 2 streams with different selectivities and costs"),
]


def work_per_batch(w: Workload, source: str, rows: float) -> float:
    """Expected processing time of one source batch of ``rows`` tuples through everything downstream."""
    def down(producer: str, r: float) -> float:
        total = 0.0
        for op in w.ops:
            for inp in op.inputs:
                if inp == producer:
                    total += op.ns_batch + r * op.ns_tuple + (down(op.name, r * op.selectivity) if op.width else 0)
        return total
    return down(source, rows)


def arrivals(w: Workload, batches: int, batch_rows: int, seed: int) -> list[tuple[float, str, float]]:
    """On/off sources: exponential on and off periods (on 30% of the time), batches at a constant peak rate
    while on; mean rates set so that the expected work is ``utilisation`` of the processor."""
    rng = random.Random(seed)
    on_frac, mean_on_batches = 0.3, 120
    per_source = batches // len(w.sources)
    work = {s: work_per_batch(w, s, batch_rows) for s in w.sources}
    # every source gets the same share of the utilisation
    share = w.utilisation / len(w.sources)
    out = []
    for s in w.sources:
        mean_gap = work[s] / share                         # ns between batches on average
        peak_gap = mean_gap * on_frac
        t = rng.uniform(0, mean_gap * mean_on_batches)
        n = 0
        while n < per_source:
            burst = max(1, round(rng.expovariate(1 / mean_on_batches)))
            for _ in range(min(burst, per_source - n)):
                out.append((t, s, float(batch_rows)))
                t += peak_gap
                n += 1
            t += rng.expovariate(1 / (burst * peak_gap * (1 - on_frac) / on_frac))
    return sorted(out)


def build(w: Workload, seed: int) -> tuple[list[SimOp], dict[str, SimQueue]]:
    queues = {s: SimQueue(s, width) for s, width in w.sources.items()}
    ops = []
    for k, spec in enumerate(w.ops):
        out = SimQueue(spec.name, spec.width) if spec.width else None
        ops.append(SimOp(spec.name, [queues[i] for i in spec.inputs], out, selectivity=spec.selectivity,
                         cost=spec.ns_tuple, batch_cost=spec.ns_batch, learn=True, jitter=0.3,
                         seed=seed * 1000 + k))
        if out is not None:
            queues[spec.name] = out
    return ops, queues


def simulate(w: Workload, name: str, arr: list, seed: int, bound: float | None) -> dict:
    ops, queues = build(w, seed)
    sim = Simulator(ops, [(t, queues[s], rows) for t, s, rows in arr])
    knobs = {"clock": sim.clock, "latency_bound": bound} if name == "chain_flush" else {}
    policy = POLICIES[name](**knobs)
    tr = sim.run(policy)
    assert not any(op.ready() for op in ops), "a policy left work behind"
    return {"peak": tr.peak_bytes, "avg": tr.avg_bytes(), "p99": tr.latency_quantile(0.99) / 1e6,
            "max": tr.max_wait / 1e6, "picks": len(tr.picks), "stats": policy.stats()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=3000, help="source batches per workload")
    ap.add_argument("--batch-rows", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--bound-factor", type=float, default=1.25,
                    help="Chain-Flush latency bound as a multiple of FIFO's longest latency")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    started = time.perf_counter()
    rows = []
    for k, w in enumerate(WORKLOADS):
        arr = arrivals(w, args.batches, args.batch_rows, args.seed + k)
        res = {"fifo": simulate(w, "fifo", arr, args.seed, None)}
        bound_ms = args.bound_factor * res["fifo"]["max"]
        for name in ORDER[1:]:
            res[name] = simulate(w, name, arr, args.seed, bound_ms * 1e6 if name == "chain_flush" else None)
        rows.append({
            "name": w.name, "note": w.note, "utilisation": w.utilisation, "input_batches": len(arr),
            "peak_bytes": {n: round(res[n]["peak"]) for n in ORDER},
            "avg_bytes": {n: round(res[n]["avg"]) for n in ORDER},
            "p99_latency_ms": {n: round(res[n]["p99"], 3) for n in ORDER},
            "max_latency_ms": {n: round(res[n]["max"], 3) for n in ORDER},
            "chain_flush_bound_ms": round(bound_ms, 3),
            "chain_recomputes": res["chain"]["stats"]["recomputes"],
        })

    hdr = f"{'workload':22} {'util':>4} {'policy':12} {'peak KB':>9} {'avg KB':>8} {'p99 ms':>8} {'max ms':>8}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        for n in ORDER:
            print(f"{r['name']:22} {r['utilisation']:>4} {n:12} {r['peak_bytes'][n] / 1024:>9.1f} "
                  f"{r['avg_bytes'][n] / 1024:>8.1f} {r['p99_latency_ms'][n]:>8.2f} {r['max_latency_ms'][n]:>8.2f}")
        print(f"{'':22} Chain-Flush bound {r['chain_flush_bound_ms']:.2f} ms")
    print()
    ratios = {
        "fifo/chain": [r["peak_bytes"]["fifo"] / r["peak_bytes"]["chain"] for r in rows],
        "round_robin/chain": [r["peak_bytes"]["round_robin"] / r["peak_bytes"]["chain"] for r in rows],
        "greedy/chain": [r["peak_bytes"]["greedy"] / r["peak_bytes"]["chain"] for r in rows],
        "chain_flush/chain": [r["peak_bytes"]["chain_flush"] / r["peak_bytes"]["chain"] for r in rows],
    }
    print("peak-memory ratios against Chain, per workload, and the median:")
    for k, v in ratios.items():
        print(f"  {k:18} " + " ".join(f"{x:6.2f}" for x in v) + f"   median {statistics.median(v):.2f}")
    within = all(r["max_latency_ms"]["chain_flush"] <= r["chain_flush_bound_ms"] for r in rows)
    print(f"Chain-Flush longest latency within its bound on every workload: {within}")
    print(f"({time.perf_counter() - started:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({
            "driver": "simulator (tests/scheduler/schedsim.py); Engine.run() takes no policy yet",
            "batches": args.batches, "batch_rows": args.batch_rows, "seed": args.seed,
            "bound_factor": args.bound_factor, "workloads": rows,
            "median_ratios": {k: round(statistics.median(v), 3) for k, v in ratios.items()},
        }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
