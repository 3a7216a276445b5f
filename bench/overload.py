"""Overload benchmark (issue 14; docs/approximation.md): the same aggregate workload at 1x, 2x and 3x the
engine's measured capacity, shed by the load shedder's rates (Babcock-Datar-Motwani, ``dsms.load_shedder``)
and, as the naive baseline, by uniform input dropping at the same CPU budget, in one run.

Workload: one stream ``S (g INT, v FLOAT, f FLOAT)`` with ``--groups`` groups (1,000), and ``--queries`` (100)
aggregate queries ``SELECT g, SUM(v), COUNT(*), AVG(v) FROM S [RANGE ...] WHERE f < sel_i GROUP BY g`` whose
selectivities ``sel_i`` spread from 5% to 100% (the queries differ in cost and in rows per group, which is
where an allocation beats one rate for all).

Method, all in one process:

1. The exact answer of every query, computed offline with numpy from the whole stream (``offline_exact``),
   and the exact run of the engine, which must agree with it (the benchmark stops otherwise) and gives the
   engine's measured capacity: its CPU per batch, ``interval`` (T / batches, T the CPU of the whole run).
2. For load L in 1x, 2x, 3x the stream is fed at L times that capacity, a batch every ``interval / L``
   seconds of virtual time, to an engine whose load shedder runs its own closed loop (``closed_loop``):
   before every run it steps on the virtual clock with the CPU the runs took as the engine's busy time
   (so it measures the demand, calibrates its cost model and sees the input backlog as in the server,
   with the system's ``load_threshold`` ``--threshold`` and ``lag_target`` ``--lag-target`` batches of
   exact CPU). Every batch that has arrived when a run starts is pushed first and waits in the input
   queue (the backlog, in bytes); the run processes what is queued; a batch's latency is the run's end
   minus its arrival. The baseline, uniform input dropping, runs under the same loop (``UniformShedder``:
   the same capacity, one rate for every query). The exact engine's latency at load L is that of its
   measured batches in a FIFO queue fed at L times the capacity (``fifo_latencies``).
3. Per run: the relative error of each query (per aggregate column, the mean over groups of
   |estimate - exact| / |exact|, a group missing from the estimate counting 1; the query's error is its
   largest column), max and mean over queries; peak bytes (``Engine.memory_bytes`` when a run starts),
   split into queued bytes (every queue: the backlog) and state (the rest: windows, aggregates); p99
   latency over the whole stream and over each half (bounded: the second half's no higher than the
   first's); the CPU the run took, the shedder's steps (factor, lag, planned capacity, smallest rate).

Cheap per row: columns go in as numpy arrays, results are folded with numpy (a group's last changelog row
wins), errors are computed with numpy, and batches are 100,000 rows, so the CPU is the engine's (about
28 us per row for the 100 queries on this machine: 2M rows in about 1 minute per exact run).

Besides, the P3-style selection workload of X8 (digest-004 section 4): ``--queries`` selection queries
``f >= lo AND f < lo + w``, w uniform in 5-10%, over ``--sel-rows`` rows, at 1x, 2x, 3x: the load shedder's
promising-region drops (``dsms/operators/promising.py``, rates from ``allot``) against uniform input
dropping at the same share of the input evaluated (1 / L), each query's output as a fraction of its exact
output (computed offline; every row returned is checked to satisfy the query's predicate) averaged over
queries, peak bytes and p99 latency as above. Run on data with locality (``f`` in runs, ``selection_data``)
and, for contrast, on independent values.

Usage::

    python3 bench/overload.py [--rows 60000] [--groups 1000] [--queries 100] [--batch 100000]
        [--sel-rows 500000] [--sel-batch 10000] [--run-length 300] [--threshold 0.9] [--lag-target 1]
        [--only all|aggregate|selection] [--json FILE]
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
from dsms.load_shedder import LoadShedder, allot  # noqa: E402


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
    """One pass over the stream: final answers, CPU time per batch, peak bytes, per-query costs. Columns go
    in as numpy arrays (no per-row conversion) and results are folded with numpy, so the run's CPU is the
    engine's."""
    eng, qs = build(args, sels)
    ids = [q.id for q in qs]
    if rates is not None:
        eng.shedder.shed({ids[k]: p for k, p in rates.items()})
    n = len(data["g"])
    service, peak = [], 0
    results = [Answer(args.groups) for _ in qs]
    for lo in range(0, n, args.batch):
        hi = min(n, lo + args.batch)
        t0 = time.process_time()
        eng.push("S", {c: data[c][lo:hi] for c in ("g", "v", "f")}, ts=np.arange(lo, hi))
        eng.run()
        for q, a in zip(qs, results):
            for b in q.drain_batches():
                a.fold(b)
        service.append(time.process_time() - t0)
        peak = max(peak, eng.memory_bytes())
    t0 = time.process_time()
    eng.heartbeat(n + 1)
    eng.run()
    for q, a in zip(qs, results):
        for b in q.drain_batches():
            a.fold(b)
    service[-1] += time.process_time() - t0
    costs = {}
    for q in qs:
        costs[q.id] = sum(op.cost_ns_per_tuple * op.tuples_in / len(op.owners) for op in eng.ops
                          if q.id in op.owners) / 1e9
    profiles = {q.id: eng.shedder.profile(q.id) for q in qs}
    return {"results": results, "service": service, "peak": peak, "ids": ids,
            "costs": [costs[i] for i in ids], "profiles": [profiles[i] for i in ids]}


class UniformShedder(LoadShedder):
    """The naive baseline under the same control loop: the same measurement, calibration and lag feedback
    decide the capacity, and every query gets the one rate that fits it (uniform input dropping at the same
    CPU budget) instead of BDM04's rates."""

    def allocate(self, demand: dict[str, float], cap: float) -> dict[str, float]:
        total = sum(demand.values())
        p = 1.0 if total <= 0 else min(1.0, max(1e-6, cap / total))
        return {q: p for q in demand}


def closed_loop(args: argparse.Namespace, data: dict, sels: list[float], load: float, interval: float,
                method: str) -> dict:
    """The stream fed at ``load`` times the engine's measured capacity (a batch every ``interval / load``
    seconds of virtual time, ``interval`` the exact run's mean CPU per batch) to one engine whose load
    shedder (``method`` shedder: BDM04's rates; uniform: ``UniformShedder``; exact: none) steps before every
    run, on the virtual clock and with the CPU the runs took as the engine's busy time: the feedback loop
    of the server, with the CPU the only resource. Every batch that has arrived by the time a run starts is
    pushed first (it waits in the input queue: that is the backlog, measured in bytes), the run processes
    what is queued (``Engine.run`` to idle), and each batch's latency is the run's end minus its arrival."""
    eng, qs = build(args, sels)
    clock, spent = [0.0], [0.0]
    if method != "exact":
        kind = LoadShedder if method == "shedder" else UniformShedder
        eng.shedder = kind(eng, clock=lambda: clock[0], busy=lambda: spent[0])
        eng.set("sys:0", "load_threshold", args.threshold)
        eng.set("sys:0", "lag_target", args.lag_target * interval)
    n = len(data["g"])
    starts = list(range(0, n, args.batch))
    gap = interval / load
    results = [Answer(args.groups) for _ in qs]
    now, k, lat, pending = 0.0, 0, [0.0] * len(starts), []
    peak = peak_queue = peak_state = 0
    steps: list[dict] = []
    while k < len(starts) or pending:
        if not pending and k * gap > now:
            now = k * gap                         # idle until the next batch arrives
        t0 = time.process_time()
        while k < len(starts) and k * gap <= now:
            lo = starts[k]
            hi = min(n, lo + args.batch)
            eng.push("S", {c: data[c][lo:hi] for c in ("g", "v", "f")}, ts=np.arange(lo, hi))
            pending.append(k)
            k += 1
        if k == len(starts):
            eng.heartbeat(n + 1)
        queued = sum(q.bytes for q in eng.queues)
        total = eng.memory_bytes()
        peak, peak_queue, peak_state = max(peak, total), max(peak_queue, queued), max(peak_state, total - queued)
        push = time.process_time() - t0
        clock[0] = now
        if method != "exact":
            eng.shedder.step()
            sh = eng.shedder
            steps.append({"t": round(now, 3), "factor": round(sh.factor, 4), "lag_s": round(sh.lag, 3),
                          "planned": round(sh.planned, 4), "load": round(sh.load, 4),
                          "rate_min": round(min(sh.rates.values(), default=1.0), 4), "queued": len(pending)})
        t0 = time.process_time()
        eng.run()
        for q, a in zip(qs, results):
            for b in q.drain_batches():
                a.fold(b)
        took = push + time.process_time() - t0
        spent[0] += took
        now += took
        for j in pending:
            lat[j] = now - j * gap
        pending = []
    half = len(lat) // 2
    return {"results": results, "peak": peak, "peak_queue": peak_queue, "peak_state": peak_state,
            "cpu": spent[0], "p99": float(np.percentile(lat, 99)), "lat": lat,
            "p99_first": float(np.percentile(lat[:half], 99)) if half else 0.0,
            "p99_second": float(np.percentile(lat[half:], 99)), "steps": steps,
            "shed": any(s["rate_min"] < 1.0 for s in steps)}


class Answer:
    """A query's result table, one slot per group (groups are 0..G-1): values (SUM, COUNT, AVG) and whether
    the group is present."""

    def __init__(self, groups: int) -> None:
        self.vals = np.zeros((3, groups))
        self.present = np.zeros(groups, dtype=bool)

    def fold(self, b) -> None:
        """Apply a changelog batch: per group its last row wins (a changelog deletes a group's old row before
        it inserts the new one at an instant), a delete last leaving the group absent."""
        g = np.asarray(b.cols[0], dtype=np.int64)
        if not len(g):
            return
        rev = g[::-1]
        _, first = np.unique(rev, return_index=True)
        last = len(g) - 1 - first
        gl = g[last]
        self.present[gl] = b.sign[last] > 0
        for j in range(3):
            self.vals[j, gl] = b.cols[1 + j][last]


def offline_exact(data: dict, sels: list[float], groups: int) -> list[Answer]:
    """Every query's exact final answer computed with numpy from the whole stream, no engine involved."""
    out = []
    g, v, f = data["g"], data["v"], data["f"]
    for s in sels:
        m = f < s
        a = Answer(groups)
        c = np.bincount(g[m], minlength=groups).astype(float)
        sm = np.bincount(g[m], weights=v[m], minlength=groups)
        a.present = c > 0
        a.vals[0], a.vals[1] = sm, c
        a.vals[2] = np.divide(sm, c, out=np.zeros(groups), where=c > 0)
        out.append(a)
    return out


def errors(exact: list[Answer], est: list[Answer]) -> list[float]:
    """Per query: the largest over its columns of the mean over the exact answer's groups of
    |estimate - exact| / |exact| (a group missing from the estimate counting 1; zero exact values skipped)."""
    out = []
    for ex, es in zip(exact, est):
        worst = 0.0
        for j in range(3):
            keep = ex.present & (ex.vals[j] != 0)
            if not keep.any():
                continue
            rel = np.abs(es.vals[j][keep] - ex.vals[j][keep]) / np.abs(ex.vals[j][keep])
            rel = np.where(es.present[keep], rel, 1.0)
            worst = max(worst, float(rel.mean()))
        out.append(worst)
    return out


def fifo_latencies(service: list[float], interval: float) -> list[float]:
    """(finish - arrival) of each batch in a FIFO single server with arrivals every ``interval`` seconds."""
    free, lat = 0.0, []
    for k, s in enumerate(service):
        arrive = k * interval
        start = max(arrive, free)
        free = start + s
        lat.append(free - arrive)
    return lat


def p99_latency(service: list[float], interval: float) -> float:
    """p99 of ``fifo_latencies``."""
    return float(np.percentile(fifo_latencies(service, interval), 99))


def selection_data(args: argparse.Namespace, local: bool) -> dict:
    """The X8 stream ``S (g INT, v FLOAT, f FLOAT)``; ``f`` is what the selections test. With locality (as in
    P3's retail logs, where values come in runs): ``f`` comes in runs of geometric length (mean
    ``--run-length`` rows) around a centre drawn uniformly from [0, 1), plus normal noise of sd 0.03,
    wrapped into [0, 1) (so ``f`` is uniform over the stream, and a range of width w selects about w of it).
    Without (``local`` false): ``f`` uniform and independent, row by row."""
    rng = np.random.default_rng(args.seed + 2)
    n = args.sel_rows
    if local:
        runs = rng.geometric(1.0 / args.run_length, size=n // max(1, args.run_length // 4) + 16)
        f = np.mod(np.repeat(rng.random(len(runs)), runs)[:n] + rng.normal(0.0, 0.03, n), 1.0)
    else:
        f = rng.random(n)
    return {"g": rng.integers(0, args.groups, n), "v": rng.gamma(4.0, 2.5, n), "f": f}


def selection_predicates(args: argparse.Namespace) -> list[tuple[float, float]]:
    """X8's queries: ``--queries`` ranges [lo, lo + w) of ``f``, w uniform in 5-10%."""
    rng = np.random.default_rng(args.seed + 1)
    out = []
    for _ in range(args.queries):
        lo, width = round(float(rng.random() * 0.9), 4), float(rng.uniform(0.05, 0.10))
        out.append((lo, round(lo + width, 4)))
    return out


def selection_run(args: argparse.Namespace, data: dict, preds: list[tuple[float, float]], method: str,
                  load: int) -> dict:
    """The X8 workload over ``data``: output rows per query, CPU per batch, peak bytes. ``method`` exact (no
    drop), promising (the load shedder's rates for 1/``load`` of the measured demand: ``allot``, which
    places promising-region drops on selections) or uniform (every query's input dropped at random at 1 /
    ``load``, SIMPLE-Selection: the same share of the input evaluated)."""
    eng = Engine({"seed": args.seed})
    eng.execute("REGISTER STREAM S (g INT, v FLOAT, f FLOAT)")
    qs = [eng.execute(f"SELECT ISTREAM(g, v, f) FROM S WHERE f >= {lo} AND f < {hi}") for lo, hi in preds]
    if method == "promising":
        rates = allot({q.id: 1.0 for q in qs}, {}, {}, len(qs) / load, {q.id for q in qs})
        eng.shedder.shed(rates)
    elif method == "uniform":
        from dsms.operators.shed import Shedder
        for op in eng.ops:                            # uniform input dropping: one drop on every input edge
            for r in op.readers:
                if r.queue is eng.source_queue("S"):
                    r.shed = Shedder(r, "uniform", eng.next_seed(), 1.0 / load)
    n, rows, service, peak, wrong = len(data["g"]), np.zeros(len(qs), dtype=np.int64), [], 0, 0
    for lo in range(0, n, args.sel_batch):
        hi = min(n, lo + args.sel_batch)
        t0 = time.process_time()
        eng.push("S", {c: data[c][lo:hi] for c in ("g", "v", "f")}, ts=np.arange(lo, hi))
        eng.run()
        for k, q in enumerate(qs):
            for b in q.drain_batches():
                rows[k] += len(b)
                f = b.cols[2]
                wrong += int(np.count_nonzero((f < preds[k][0]) | (f >= preds[k][1])))
        service.append(time.process_time() - t0)
        peak = max(peak, eng.memory_bytes())
    kinds = sorted({s.method for s in eng.shedder.placed.values()})
    return {"rows": rows, "service": service, "peak": peak, "wrong": wrong, "drops": kinds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--sel-rows", type=int, default=500_000, help="rows of the X8 selection workload")
    ap.add_argument("--sel-batch", type=int, default=10_000)
    ap.add_argument("--run-length", type=int, default=300, help="X8 data: mean rows per run of f")
    ap.add_argument("--threshold", type=float, default=0.9, help="the system's load_threshold in the closed loop")
    ap.add_argument("--lag-target", type=float, default=1.0,
                    help="the system's lag_target in the closed loop, in batches of the exact run's mean CPU")
    ap.add_argument("--only", choices=("all", "aggregate", "selection"), default="all",
                    help="run one of the two workloads (default: both)")
    args = ap.parse_args()
    out: dict = {}
    if args.only != "selection":
        out.update(aggregate_workload(args))
    if args.only != "aggregate":
        out["selection"] = selection_workload(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


def aggregate_workload(args: argparse.Namespace) -> dict:
    """The 100 aggregate queries at 1x, 2x, 3x, each load run closed-loop (``closed_loop``) with the load
    shedder and with uniform dropping under the same control loop: the figures the issue's JSON names, plus
    latency per half of the stream and peak bytes split into the input backlog and the rest."""
    data, sels = workload(args)
    truth = offline_exact(data, sels, args.groups)
    exact = run(args, data, sels, None)
    drift = max(errors(truth, exact["results"]))
    if drift > 1e-9:
        raise SystemExit(f"the unshed engine run differs from the offline exact answer ({drift})")
    total = sum(exact["service"])
    interval = total / len(exact["service"])
    out = {"workload": {"rows": args.rows, "groups": args.groups, "queries": args.queries, "batch": args.batch,
                        "seed": args.seed, "exact_cpu_s": round(total, 3), "load_threshold": args.threshold,
                        "lag_target_batches": args.lag_target,
                        "lag_target_s": round(args.lag_target * total / len(exact["service"]), 3)}, "loads": {}}
    print(f"exact run: {total:.2f} s CPU for {args.rows} rows x {args.queries} queries "
          f"({args.groups} groups, batches of {args.batch}); peak {exact['peak'] / 1e6:.1f} MB; "
          f"agrees with the offline numpy answer (largest relative difference {drift:.1e})")
    print(f"{'load':>4} {'method':>8} {'max err':>8} {'mean err':>8} {'peak MB':>8} {'queue MB':>8} "
          f"{'p99 ms':>8} {'1st half':>8} {'2nd half':>8} {'cpu s':>7} {'factor':>6}")
    half = len(exact["service"]) // 2
    for load in (1, 2, 3):
        ours = closed_loop(args, data, sels, load, interval, "shedder")
        # no step shed anything: the uniform loop decides the same (only the allocation differs)
        uni = ours if not ours["shed"] else closed_loop(args, data, sels, load, interval, "uniform")
        row = {}
        for name, r in (("shedder", ours), ("uniform", uni)):
            e = errors(truth, r["results"])
            rates = [st["rate_min"] for st in r["steps"]]
            row[name] = {"max_rel_error": round(max(e), 5), "mean_rel_error": round(float(np.mean(e)), 5),
                         "peak_bytes": int(r["peak"]), "peak_queue_bytes": int(r["peak_queue"]),
                         "peak_state_bytes": int(r["peak_state"]), "cpu_s": round(r["cpu"], 3),
                         "p99_latency_ms": round(1000 * r["p99"], 2),
                         "p99_first_half_ms": round(1000 * r["p99_first"], 2),
                         "p99_second_half_ms": round(1000 * r["p99_second"], 2),
                         "factor": r["steps"][-1]["factor"] if r["steps"] else 1.0,
                         "rate_min": min(rates, default=1.0), "steps": r["steps"]}
        gap = interval / load
        lat = fifo_latencies(exact["service"], gap)
        ex = {"p99_latency_ms": round(1000 * float(np.percentile(lat, 99)), 2),
              "p99_first_half_ms": round(1000 * float(np.percentile(lat[:half], 99)), 2) if half else 0.0,
              "p99_second_half_ms": round(1000 * float(np.percentile(lat[half:], 99)), 2)}
        sh, un = row["shedder"], row["uniform"]
        out["loads"][f"{load}x"] = {
            "max_rel_error": sh["max_rel_error"], "mean_rel_error": sh["mean_rel_error"],
            "uniform_max_rel_error": un["max_rel_error"], "uniform_mean_rel_error": un["mean_rel_error"],
            "peak_bytes": sh["peak_bytes"], "peak_queue_bytes": sh["peak_queue_bytes"],
            "peak_state_bytes": sh["peak_state_bytes"], "uniform_peak_bytes": un["peak_bytes"],
            "uniform_peak_queue_bytes": un["peak_queue_bytes"],
            "p99_latency_ms": sh["p99_latency_ms"], "p99_first_half_ms": sh["p99_first_half_ms"],
            "p99_second_half_ms": sh["p99_second_half_ms"],
            "uniform_p99_latency_ms": un["p99_latency_ms"], "uniform_p99_first_half_ms": un["p99_first_half_ms"],
            "uniform_p99_second_half_ms": un["p99_second_half_ms"],
            "exact_p99_latency_ms": ex["p99_latency_ms"], "exact_p99_first_half_ms": ex["p99_first_half_ms"],
            "exact_p99_second_half_ms": ex["p99_second_half_ms"],
            "cpu_s": sh["cpu_s"], "uniform_cpu_s": un["cpu_s"], "factor": sh["factor"],
            "rate_min": sh["rate_min"], "uniform_rate_min": un["rate_min"],
            "steps": sh["steps"], "uniform_steps": un["steps"]}
        for name in ("shedder", "uniform"):
            r = row[name]
            print(f"{load}x {name:>10} {r['max_rel_error']:8.4f} {r['mean_rel_error']:8.4f} "
                  f"{r['peak_bytes'] / 1e6:8.1f} {r['peak_queue_bytes'] / 1e6:8.1f} {r['p99_latency_ms']:8.1f} "
                  f"{r['p99_first_half_ms']:8.1f} {r['p99_second_half_ms']:8.1f} {r['cpu_s']:7.2f} "
                  f"{r['factor']:6.2f}")
        print(f"{load}x {'exact':>10} {0:8.4f} {0:8.4f} {exact['peak'] / 1e6:8.1f} {'':>8} "
              f"{ex['p99_latency_ms']:8.1f} {ex['p99_first_half_ms']:8.1f} {ex['p99_second_half_ms']:8.1f} "
              f"{total:7.2f}")
    return out


def selection_workload(args: argparse.Namespace) -> dict:
    """X8 (digest-004 section 4, P3 Fig. 15a) at 1x, 2x, 3x: per query the fraction of its exact output
    returned, averaged over queries, for promising regions and for uniform dropping at the same share of
    the input evaluated; on data with locality and, for contrast, without."""
    preds = selection_predicates(args)
    out: dict = {"rows": args.sel_rows, "queries": args.queries, "batch": args.sel_batch,
                 "run_length": args.run_length, "data": {}}
    print(f"selection workload (X8): {args.queries} queries f in [lo, lo + w), w uniform 5-10%, "
          f"{args.sel_rows} rows in batches of {args.sel_batch}")
    print(f"{'data':>8} {'load':>4} {'method':>9} {'output':>7} {'peak MB':>8} {'p99 ms':>8} {'cpu s':>7}")
    for local in (True, False):
        data = selection_data(args, local)
        f = data["f"]
        truth = np.array([np.count_nonzero((f >= lo) & (f < hi)) for lo, hi in preds])
        exact = selection_run(args, data, preds, "exact", 1)
        if not np.array_equal(exact["rows"], truth) or exact["wrong"]:
            raise SystemExit("the unshed selection run differs from the offline exact answer")
        interval = sum(exact["service"]) / len(exact["service"])
        name = f"runs~{args.run_length}" if local else "iid"
        res: dict = {}
        for load in (1, 2, 3):
            for method in ("promising", "uniform"):
                r = exact if load == 1 else selection_run(args, data, preds, method, load)
                if r["wrong"]:
                    raise SystemExit(f"{method} at {load}x returned {r['wrong']} rows outside the exact answer")
                frac = float(np.mean(r["rows"][truth > 0] / truth[truth > 0]))
                row = {"output_fraction": round(frac, 4), "peak_bytes": int(r["peak"]),
                       "p99_latency_ms": round(1000 * p99_latency(r["service"], interval / load), 2),
                       "cpu_s": round(sum(r["service"]), 3), "drops": r["drops"]}
                res.setdefault(f"{load}x", {})[method] = row
                print(f"{name:>8} {load}x {method:>10} {frac:7.3f} {r['peak'] / 1e6:8.2f} "
                      f"{row['p99_latency_ms']:8.1f} {row['cpu_s']:7.2f}")
            exact_p99 = round(1000 * p99_latency(exact["service"], interval / load), 2)
            res[f"{load}x"]["exact_p99_latency_ms"] = exact_p99
        out["data"]["locality" if local else "iid"] = {"exact_rows": int(truth.sum()),
                                                       "exact_cpu_s": round(sum(exact["service"]), 3),
                                                       "loads": res}
    return out


if __name__ == "__main__":
    main()
