"""Overload benchmark (issue 14; docs/approximation.md): the same aggregate workload at 1x, 2x and 3x the
engine's measured capacity, shed by the load shedder's rates (Babcock-Datar-Motwani, ``dsms.load_shedder``)
and, as the naive baseline, by uniform input dropping at the same CPU budget, in one run.

Workload: one stream ``S (g INT, v FLOAT, f FLOAT)`` with ``--groups`` groups (1,000), and ``--queries`` (100)
aggregate queries ``SELECT g, SUM(v), COUNT(*), AVG(v) FROM S [RANGE ...] WHERE f < sel_i GROUP BY g`` whose
selectivities ``sel_i`` spread from 5% to 100% (the queries differ in cost and in rows per group, which is
where an allocation beats one rate for all).

Method, all in one process:

1. The exact run: every query's final answer (the offline exact answer the errors are measured against),
   each query's CPU cost (its operators' cost per tuple times the tuples they read; shared ones split), and
   its aggregate's error profile; the total CPU time T of the stream is the measured capacity.
2. For load L in 1x, 2x, 3x the per-tuple CPU budget is C / L, C the queries' per-tuple costs measured in
   the exact run; the shedder's rates are ``solve_rates`` of the costs and profiles within it, and the
   baseline drops the input uniformly at the one rate that fits the same budget (1 / L). Each is run over
   the same stream with its drops in place; per-run overheads do not shrink with the rates, so the CPU
   time a run takes (``cpu_s``, process time) is reported beside it.
3. Per run: the relative error of each query (per aggregate column, the mean over groups of
   |estimate - exact| / |exact|, a group missing from the estimate counting 1; the query's error is its
   largest column), max and mean over queries; peak bytes (``Engine.memory_bytes`` after each batch);
   p99 latency of a batch in a single-server queue fed at L times the exact rate (arrival every T / (L n)
   seconds, service the batch's measured processing time), so a run that cannot keep up shows a growing
   latency and one that can shows a bounded one; the exact run's latency at load L is shown beside it.

Besides, the P3-style selection workload of X8 (digest-004 section 4): ``--queries`` selection queries of
selectivity 5-10%, with the fraction of the exact output each method returns at 2x and 3x and its CPU time.
The load shedder sheds aggregates only (selections have no relative-error bound), so it leaves them exact.

Usage::

    python3 bench/overload.py [--rows 60000] [--groups 1000] [--queries 100] [--batch 5000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsms import Engine  # noqa: E402
from dsms.load_shedder import solve_rates  # noqa: E402


def workload(args: argparse.Namespace) -> tuple[dict, list[float]]:
    rng = np.random.default_rng(args.seed)
    n = args.rows
    data = {"g": rng.integers(0, args.groups, n), "v": rng.gamma(4.0, 2.5, n), "f": rng.random(n)}
    sels = np.linspace(0.05, 1.0, args.queries).round(4).tolist()
    return data, sels


def build(args: argparse.Namespace, sels: list[float]) -> tuple[Engine, list]:
    eng = Engine({"seed": args.seed})
    eng.execute("REGISTER STREAM S (g INT, v FLOAT, f FLOAT)")
    qs = [eng.execute(f"SELECT g, SUM(v) AS s, COUNT(*) AS c, AVG(v) AS a FROM S [RANGE 1000000000] "
                      f"WHERE f < {s} GROUP BY g") for s in sels]
    return eng, qs


def run(args: argparse.Namespace, data: dict, sels: list[float], rates: dict | None) -> dict:
    """One pass over the stream: final answers, CPU time per batch, peak bytes, per-query costs."""
    eng, qs = build(args, sels)
    ids = [q.id for q in qs]
    if rates is not None:
        eng.shedder.shed({ids[k]: p for k, p in rates.items()})
    n = len(data["g"])
    service, peak = [], 0
    results = {q.id: {} for q in qs}
    for lo in range(0, n, args.batch):
        hi = min(n, lo + args.batch)
        t0 = time.process_time()
        eng.push("S", {c: data[c][lo:hi].tolist() for c in ("g", "v", "f")}, ts=list(range(lo, hi)))
        eng.run()
        for q in qs:
            for b in q.drain_batches():
                _fold(results[q.id], b)
        service.append(time.process_time() - t0)
        peak = max(peak, eng.memory_bytes())
    t0 = time.process_time()
    eng.heartbeat(n + 1)
    eng.run()
    for q in qs:
        for b in q.drain_batches():
            _fold(results[q.id], b)
    service[-1] += time.process_time() - t0
    costs = {}
    for q in qs:
        costs[q.id] = sum(op.cost_ns_per_tuple * op.tuples_in / len(op.owners) for op in eng.ops
                          if q.id in op.owners) / 1e9
    profiles = {q.id: eng.shedder.profile(q.id) for q in qs}
    return {"results": [results[i] for i in ids], "service": service, "peak": peak, "ids": ids,
            "costs": [costs[i] for i in ids], "profiles": [profiles[i] for i in ids]}


def _fold(table: dict, b) -> None:
    """Apply a changelog batch to the per-group table (g -> (s, c, a))."""
    g, s, c, a = (col.tolist() for col in b.cols)
    for k, sign in enumerate(b.sign.tolist()):
        if sign > 0:
            table[g[k]] = (s[k], c[k], a[k])
        elif table.get(g[k]) == (s[k], c[k], a[k]):
            del table[g[k]]


def errors(exact: list[dict], est: list[dict]) -> list[float]:
    out = []
    for ex, es in zip(exact, est):
        worst = 0.0
        for j in range(3):
            errs = [abs(es[g][j] - v[j]) / abs(v[j]) if g in es else 1.0 for g, v in ex.items() if v[j]]
            worst = max(worst, float(np.mean(errs)) if errs else 0.0)
        out.append(worst)
    return out


def p99_latency(service: list[float], interval: float) -> float:
    """p99 of (finish - arrival) in a FIFO single server with arrivals every ``interval`` seconds."""
    free, lat = 0.0, []
    for k, s in enumerate(service):
        arrive = k * interval
        start = max(arrive, free)
        free = start + s
        lat.append(free - arrive)
    return float(np.percentile(lat, 99))


def selection_run(args: argparse.Namespace, data: dict, rate: float | None, shedder_load: int | None) -> dict:
    """The X8 workload (digest-004 section 4): 100 selection queries of selectivity 5-10% over the stream;
    output rows and CPU, with the input dropped uniformly at ``rate``, or with the load shedder asked to fit
    1/``shedder_load`` of the measured demand (it sheds aggregates only, so selections stay exact)."""
    rng = np.random.default_rng(args.seed + 1)
    eng = Engine({"seed": args.seed})
    eng.execute("REGISTER STREAM S (g INT, v FLOAT, f FLOAT)")
    qs = []
    for _ in range(args.queries):
        lo, width = float(rng.random() * 0.9), float(rng.uniform(0.05, 0.10))
        qs.append(eng.execute(f"SELECT ISTREAM(g, v) FROM S WHERE f >= {lo:.4f} AND f < {lo + width:.4f}"))
    if rate is not None:
        from dsms.operators.shed import Shedder
        for op in eng.ops:                            # uniform input dropping: one drop on every input edge
            for r in op.readers:
                if r.queue is eng.source_queue("S"):
                    r.shed = Shedder(r, "uniform", eng.next_seed(), rate)
    n, out_rows, cpu = len(data["g"]), 0, 0.0
    for lo in range(0, n, args.batch):
        hi = min(n, lo + args.batch)
        t0 = time.process_time()
        eng.push("S", {c: data[c][lo:hi].tolist() for c in ("g", "v", "f")}, ts=list(range(lo, hi)))
        eng.run()
        if shedder_load is not None:
            eng.shedder.step(capacity=1e-12)          # as overloaded as can be
        out_rows += sum(len(b) for q in qs for b in q.drain_batches())
        cpu += time.process_time() - t0
    return {"rows": out_rows, "cpu_s": cpu, "shed": len(eng.shedder.rates)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    data, sels = workload(args)
    exact = run(args, data, sels, None)
    total = sum(exact["service"])
    interval = total / len(exact["service"])
    ids = exact["ids"]
    costs = {i: c for i, c in zip(ids, exact["costs"])}
    profiles = {i: p for i, p in zip(ids, exact["profiles"]) if p is not None}
    out = {"workload": {"rows": args.rows, "groups": args.groups, "queries": args.queries, "batch": args.batch,
                        "exact_cpu_s": round(total, 3)}, "loads": {}}
    print(f"exact run: {total:.2f} s CPU for {args.rows} rows x {args.queries} queries "
          f"({args.groups} groups); peak {exact['peak'] / 1e6:.1f} MB")
    print(f"{'load':>4} {'method':>8} {'max err':>8} {'mean err':>8} {'peak MB':>8} {'p99 ms':>8} "
          f"{'exact p99 ms':>12} {'cpu s':>7}")
    var = sum(costs.values())
    out["workload"]["per_tuple_cpu_s"] = round(var, 3)
    for load in (1, 2, 3):
        cap = var / load                          # what the rates must fit, the same for both methods
        rates, _ = solve_rates(costs, profiles, {i: 1.0 for i in ids}, cap)
        uniform = min(1.0, cap / var)
        ours = run(args, data, sels, {k: rates[i] for k, i in enumerate(ids)})
        uni = run(args, data, sels, {k: uniform for k in range(len(ids))})
        row = {}
        for name, r in (("shedder", ours), ("uniform", uni)):
            e = errors(exact["results"], r["results"])
            row[name] = {"max_rel_error": round(max(e), 5), "mean_rel_error": round(float(np.mean(e)), 5),
                         "peak_bytes": int(r["peak"]), "cpu_s": round(sum(r["service"]), 3),
                         "p99_latency_ms": round(1000 * p99_latency(r["service"], interval / load), 2)}
        exact_p99 = round(1000 * p99_latency(exact["service"], interval / load), 2)
        out["loads"][f"{load}x"] = {
            "max_rel_error": row["shedder"]["max_rel_error"], "mean_rel_error": row["shedder"]["mean_rel_error"],
            "uniform_max_rel_error": row["uniform"]["max_rel_error"],
            "uniform_mean_rel_error": row["uniform"]["mean_rel_error"],
            "peak_bytes": row["shedder"]["peak_bytes"], "uniform_peak_bytes": row["uniform"]["peak_bytes"],
            "p99_latency_ms": row["shedder"]["p99_latency_ms"],
            "uniform_p99_latency_ms": row["uniform"]["p99_latency_ms"], "exact_p99_latency_ms": exact_p99,
            "cpu_s": row["shedder"]["cpu_s"], "uniform_cpu_s": row["uniform"]["cpu_s"],
            "rates_min": round(min(rates.values()), 4), "rates_max": round(max(rates.values()), 4),
            "uniform_rate": round(uniform, 4)}
        for name in ("shedder", "uniform"):
            r = row[name]
            print(f"{load}x {name:>10} {r['max_rel_error']:8.4f} {r['mean_rel_error']:8.4f} "
                  f"{r['peak_bytes'] / 1e6:8.1f} {r['p99_latency_ms']:8.1f} {exact_p99:12.1f} {r['cpu_s']:7.2f}")
    exact_sel = selection_run(args, data, None, None)
    out["selection"] = {"exact_rows": exact_sel["rows"], "exact_cpu_s": round(exact_sel["cpu_s"], 3), "loads": {}}
    print(f"selection workload (X8): {args.queries} queries of 5-10% selectivity, exact output "
          f"{exact_sel['rows']} rows, {exact_sel['cpu_s']:.2f} s CPU")
    for load in (2, 3):
        uni = selection_run(args, data, 1.0 / load, None)
        ours = selection_run(args, data, None, load)
        out["selection"]["loads"][f"{load}x"] = {
            "uniform_output_fraction": round(uni["rows"] / max(exact_sel["rows"], 1), 4),
            "uniform_cpu_s": round(uni["cpu_s"], 3),
            "shedder_output_fraction": round(ours["rows"] / max(exact_sel["rows"], 1), 4),
            "shedder_cpu_s": round(ours["cpu_s"], 3), "shedder_queries_shed": ours["shed"]}
        print(f"{load}x uniform: {uni['rows'] / max(exact_sel['rows'], 1):.3f} of the output, {uni['cpu_s']:.2f} s; "
              f"shedder: {ours['rows'] / max(exact_sel['rows'], 1):.3f}, {ours['cpu_s']:.2f} s "
              f"({ours['shed']} queries shed: selections have no error bound)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
