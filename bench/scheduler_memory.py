"""Scheduler memory benchmark: peak and average queue bytes and p99 latency of every policy on bursty input.

    python3 bench/scheduler_memory.py [--driver engine|sim] [--clock model|cpu] [--batches N] [--seed S]
                                      [--bound-factor F] [--costs PATH] [--calibrate] [--json PATH]

Source: digest-004 section 2.G (R-SCH-02: the objective is the peak total queue size during bursts; R-SCH-05:
Chain's latency cost) and BBDM03 section 5 (its experiments: bursty on/off input, plans whose operators differ
in selectivity and cost, several queries sharing subplans). SPEC section 11: ratios within one run.

Input. Each workload is fed by on/off sources (exponential on and off periods, on 30% of the time on
average, so the peak rate is 2.3-3.2x the capacity) at a utilisation of 70-95%. The utilisation holds for
the input actually drawn: the mean gap is searched (``solve_gap``) until FIFO's work, charged by the cost
model, is the stated share of the input's span (within 2%).

Latency and Chain-Flush's bound. Latency is a result's emission time minus its timestamp. Part of it no
schedule can avoid: a result is final only once a later element or heartbeat has arrived; the engine driver
measures that part by a replay in which processing takes no time (``forced_wait``, "unavoidable wait") and
prints it. The best longest latency a schedule can achieve is about FIFO's (it drains each batch before the
next, the order that minimises the longest wait on one processor), which includes that part. So the bound is
stated relative to it: ``--bound-factor`` (1.25) times FIFO's longest latency on the same input and the same
clock, and Chain-Flush passes when its own longest latency is within it.

Drivers.
  engine (default): the real engine, ``Engine(config={"policy": name, "batch_budget": 2})``, one operator
      run at a time (``run(max_steps=1)``) under a simulated clock; arrivals are pushed when the clock passes
      them, timestamps are microseconds, a silent source sends heartbeats. Each workload is the CQL in
      ``Workload.queries``; the engine shares their common subplans. What a run costs on the clock:
        model (default): a cost per run, per batch, per heartbeat, per row read, per row released (read and
            held-before rows, minus held-after rows: what a join or aggregate actually processed), per row
            out and per row of state when it released rows (``FEATURES``) for each operator, fitted
            (non-negative least squares) on the measured CPU time of the runs of every
            policy (``calibrate``) and stored in ``scheduler_memory_costs.json`` (``--calibrate`` measures
            it again). Every policy is charged the same for the same work, whatever else the machine does
            and whatever the policy's own code does to the caches, and the operators' cost statistics (which
            greedy and Chain read) are fed the same charged time, so a run is deterministic: the same
            command gives the same figures. Why stored: fitted afresh in each run (on a FIFO pilot, as
            before), the costs moved with the machine's load (up to 2x on this shared machine), and with
            them the pace of the input and every figure (see docs/scheduling.md).
        cpu: each run's measured CPU time (``time.thread_time_ns``). Real, but noisy: on a shared machine
            FIFO's longest latency varied by up to 2x between identical runs, and a policy whose decisions
            touch much memory slows the operators it schedules (20-50% measured), although its own time is
            never charged. The input's pace still comes from the stored model, so both clocks see the same
            input.
      Either way "work ms" is the clock time charged to operator runs (the same work costs the same under
      the model; under the measured clock it also shows how much slower a run went), "cpu ms" their
      measured CPU time (under the model clock, work / cpu shows how fairly the model priced each policy's
      runs, give or take the machine's drift), and the policy's own CPU time per pick is measured apart and
      printed ("sched us"); it never advances the clock.
  sim: the deterministic simulator of ``tests/scheduler/schedsim.py`` on ``Workload.ops``: the same shapes
      with per-batch plus per-tuple costs of the order the engine measures, selectivities drawn per batch,
      statistics learned as the engine does (EWMA, alpha 0.2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "scheduler"))
from schedsim import SimOp, SimQueue, Simulator  # noqa: E402

from dsms.batch import Batch  # noqa: E402
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
    sources: dict[str, float]          # source -> bytes per tuple (simulator)
    ops: list[OpSpec]                  # the simulator's plan
    queries: list[str]                 # the same workload in CQL, for the engine
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
    ], [
        "SELECT ISTREAM(a, SUM(b) AS s) FROM S [RANGE 2000] WHERE c < 15 GROUP BY a",
        "SELECT ISTREAM(d, AVG(e) AS m) FROM S [RANGE 2000] WHERE c < 15 GROUP BY d",
        "SELECT a, e FROM S WHERE c < 15 AND d > 50",
    ], 0.85, "2 queries share a selective filter; expensive operators after it"),
    Workload("window_join", {"S": 40, "T": 40}, [
        op("selS", "S", 0.3, 40, 4_000, 40),
        op("winS", "selS", 2.0, 150, 6_000, 40),           # RANGE window: every tuple in and, later, out
        op("selT", "T", 0.4, 40, 4_000, 40),
        op("winT", "selT", 2.0, 150, 6_000, 40),
        op("join", "winS winT", 0.4, 1_500, 20_000, 64),   # windowed equi-join
        op("proj", "join", 1.0, 120, 3_000, 24),
        op("istream", "proj", 0.5, 200, 4_000),
    ], [
        "SELECT ISTREAM(S.a, S.b, T.e) FROM S [RANGE 300], T [RANGE 300] WHERE S.a = T.a AND S.c < 30 AND T.c < 40",
    ], 0.8, "two filtered streams, windows feeding a join (selectivity above 1 before the join)"),
    Workload("greedy_trap", {"S": 48, "T": 48}, [
        op("winS", "S", 1.0, 250, 5_000, 48),              # ROWS window: releases nothing by itself ...
        op("selS", "winS", 0.05, 100, 3_000, 48),          # ... but feeds a very selective filter
        op("aggS", "selS", 0.2, 2_000, 8_000),
        op("selT", "T", 0.35, 250, 4_000, 48),             # another query, moderately selective
        op("projT", "selT", 1.0, 400, 4_000, 24),
        op("outT", "projT", 1.0, 300, 3_000),
    ], [
        "SELECT ISTREAM(a, COUNT(*) AS n) FROM S [RANGE 2000] WHERE c < 5 GROUP BY a",
        "SELECT a, d, e FROM T WHERE c < 35",
    ], 0.9, "E2 in the large: a non-reducing operator feeding a selective one, beside a second query"),
    Workload("shared_fanout", {"S": 48}, [
        op("selS", "S", 0.6, 40, 4_000, 48),               # shared subplan, read by three queries
        op("q1sel", "selS", 0.02, 60, 3_000, 48),
        op("q1agg", "q1sel", 0.5, 800, 6_000),
        op("q2proj", "selS", 1.0, 150, 3_000, 16),
        op("q2agg", "q2proj", 0.05, 3_000, 10_000),
        op("q3win", "selS", 2.0, 200, 5_000, 48),
        op("q3dist", "q3win", 0.05, 1_200, 8_000),
    ], [
        "SELECT ISTREAM(a, SUM(b) AS s) FROM S [RANGE 2000] WHERE c < 60 GROUP BY a",
        "SELECT ISTREAM(d, MAX(e) AS m) FROM S [RANGE 2000] WHERE c < 60 GROUP BY d",
        "SELECT ISTREAM(COUNT(*) AS n) FROM S [RANGE 2000] WHERE c < 60",
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
    ], [
        "SELECT ISTREAM(a, SUM(b) AS s) FROM S [ROWS 500] GROUP BY a",
        "SELECT a, b FROM S WHERE c < 25",
        "SELECT DISTINCT a FROM T [RANGE 1000] WHERE c < 40",
        "SELECT ISTREAM(d, COUNT(*) AS n) FROM T [RANGE 1000] WHERE c < 40 GROUP BY d",
        "SELECT a, e FROM T WHERE c < 10",
    ], 0.7, "5 queries over 2 streams with different selectivities and costs"),
]


def work_per_batch(w: Workload, source: str, rows: float) -> float:
    """Simulator: expected processing time of one source batch of ``rows`` tuples through its plan."""
    def down(producer: str, r: float) -> float:
        total = 0.0
        for o in w.ops:
            for inp in o.inputs:
                if inp == producer:
                    total += o.ns_batch + r * o.ns_tuple + (down(o.name, r * o.selectivity) if o.width else 0)
        return total
    return down(source, rows)


def arrivals(sources: list[str], mean_gap: float, batches: int, seed: int) -> list[tuple[float, str]]:
    """On/off sources: exponential on and off periods (on 30% of the time, bursts of 120 batches on
    average), batches at a constant peak rate while on; ``mean_gap`` (ns) is the mean time between two
    batches of one source. Every draw is proportional to ``mean_gap``, so ``paced`` can scale one shape."""
    rng = random.Random(seed)
    on_frac, mean_burst = 0.3, 120
    per_source = batches // len(sources)
    out = []
    for s in sources:
        peak_gap = mean_gap * on_frac
        t = rng.uniform(0, mean_gap * mean_burst)
        n = 0
        while n < per_source:
            burst = max(1, round(rng.expovariate(1 / mean_burst)))
            for _ in range(min(burst, per_source - n)):
                out.append((t, s))
                t += peak_gap
                n += 1
            t += rng.expovariate(1 / (burst * peak_gap * (1 - on_frac) / on_frac))
    return sorted(out)


def paced(w: Workload, gap: float, batches: int, seed: int) -> list[tuple[float, str]]:
    """The workload's arrivals for ``seed`` at mean gap ``gap``: one shape of on/off periods, scaled, so that
    changing the gap changes the pace and nothing else (``arrivals`` draws the same periods in units of
    the gap)."""
    return [(t * gap, s) for t, s in arrivals(list(w.sources), 1.0, batches, seed)]


def summary(peak: float, avg: float, lat: np.ndarray, longest: float, policy) -> dict:
    return {"peak": peak, "avg": avg, "p99": float(np.percentile(lat, 99)) / 1e6 if len(lat) else 0.0,
            "max": longest / 1e6, "stats": policy.stats() if policy is not None else {}}


# ------------------------------------------------------------------------------------------- simulator driver

def run_sim(w: Workload, name: str, arr: list, batch_rows: int, seed: int, bound: float | None) -> dict:
    queues = {s: SimQueue(s, width) for s, width in w.sources.items()}
    ops = []
    for k, spec in enumerate(w.ops):
        out = SimQueue(spec.name, spec.width) if spec.width else None
        ops.append(SimOp(spec.name, [queues[i] for i in spec.inputs], out, selectivity=spec.selectivity,
                         cost=spec.ns_tuple, batch_cost=spec.ns_batch, learn=True, jitter=0.3,
                         seed=seed * 1000 + k))
        if out is not None:
            queues[spec.name] = out
    sim = Simulator(ops, [(t, queues[s], float(batch_rows)) for t, s in arr])
    knobs = {"clock": sim.clock, "latency_bound": bound} if name == "chain_flush" else {}
    policy = POLICIES[name](**knobs)
    tr = sim.run(policy)
    assert not any(o.ready() for o in ops), "a policy left work behind"
    return summary(tr.peak_bytes, tr.avg_bytes(), np.asarray(tr.latencies), tr.max_wait, policy)


def sim_gap(w: Workload, batch_rows: int) -> float:
    work = sum(work_per_batch(w, s, batch_rows) for s in w.sources)
    return work / w.utilisation


# ------------------------------------------------------------------------------------------- engine driver

COLUMNS = "a INT, b FLOAT, c INT, d INT, e FLOAT"
BUDGET = 2                      # input items per operator run: one from each input of a join
HEARTBEAT_NS = 100_000          # a source that falls silent sends a heartbeat 100 us after its last batch,
HEARTBEAT_EVERY_NS = 1_000_000  # then one every millisecond
COSTS = Path(__file__).resolve().with_name("scheduler_memory_costs.json")   # the stored cost models
CAL_SEEDS, CAL_BATCHES = (1, 2, 3), 1200   # the calibration's inputs (the benchmark reports other seeds)
BOUND_FACTOR = 1.25             # Chain-Flush's bound: this times FIFO's longest latency
FEATURES = ("batches", "heartbeats", "rows read", "rows released", "rows out", "state rows")   # of a run, besides the run itself
GAP_TRIES, GAP_TOLERANCE = 8, 0.02


class EngineRun:
    """The real engine under a simulated clock: every operator run advances the clock by its cost; arrivals
    are pushed when the clock passes them; timestamps are microseconds.

    The cost of a run is its measured CPU time (``clock="cpu"``), what ``model`` (see ``fit_costs``) says a
    run of that operator with those items and rows costs (``clock="model"``), or nothing (``clock="zero"``:
    every input is processed the moment it arrives, so a result's latency is the wait for time alone).
    ``record`` collects the features of every run per operator (``run_features``) and its measured ns, to
    fit a model.
    The scheduling policy's own CPU time is measured apart (``sched_ns``) and never advances the clock.
    """

    def __init__(self, w: Workload, policy: str, batch_rows: int, seed: int, clock: str = "cpu",
                 model: dict[str, np.ndarray] | None = None, record: dict[str, list] | None = None) -> None:
        from dsms import Engine
        self.eng = Engine({"policy": policy, "batch_budget": BUDGET})
        for src in w.sources:
            self.eng.execute(f"REGISTER STREAM {src} ({COLUMNS})")
        self.queries = [self.eng.execute(q) for q in w.queries]
        rng = np.random.default_rng(seed)
        n = batch_rows * 4096
        self.pool = {s: {"a": rng.integers(0, 50, n), "b": rng.random(n), "c": rng.integers(0, 100, n),
                         "d": rng.integers(0, 100, n), "e": rng.random(n)} for s in w.sources}
        self.rows = batch_rows
        self.sent = dict.fromkeys(w.sources, 0)
        self.last_ts = dict.fromkeys(w.sources, 0)
        self.now = 0.0
        self.ran_ns = 0
        self.busy = 0
        self.cpu = 0                    # measured CPU time of the operator runs, whatever the clock
        self.clock, self.model, self.record = clock, model, record
        self.sched_ns, self.picks = 0, 0
        for o in self.eng.ops:
            o.run = self._timed(o, o.run)
        pol = self.eng.policy
        if pol is not None:
            pol.pick, pol.on_ran = self._sched(pol.pick, True), self._sched(pol.on_ran, False)

    def _timed(self, op, run):
        """``op.run`` timed and charged to the clock. The operator's own statistics (cost per tuple, read by
        greedy and Chain) are fed the charged time instead of the wall time it measures: the policies then
        see the costs of the processor the clock simulates, and other work on the machine cannot change
        their decisions (with the model clock a run is then deterministic)."""
        model = None if self.model is None else self.model.get(op.id)
        account, held = getattr(op, "_account", None), []
        if account is not None:
            op._account = lambda rows_in, rows_out, ns: held.append((rows_in, rows_out, ns))
        batches, on_batch = [0], op.on_batch

        def counted(i: int, batch) -> None:
            batches[0] += 1
            on_batch(i, batch)
        op.on_batch = counted

        def timed(budget: int) -> int:
            rows_in, rows_out, kept, state = op.tuples_in, op.output.tuples_in, held_rows(op), state_rows(op)
            batches[0] = 0
            t0 = time.thread_time_ns()     # CPU time: other processes on the machine do not count
            done = run(budget)
            ns = time.thread_time_ns() - t0
            rows_out = op.output.tuples_in - rows_out
            rows_in = sum(h[0] for h in held) if account is not None else op.tuples_in - rows_in
            released = max(kept + rows_in - held_rows(op), 0)
            feats = (batches[0], done - batches[0], rows_in, released, rows_out, state if released else 0)
            self.cpu += ns
            if self.record is not None:
                self.record.setdefault(op.id, []).append((*feats, ns))
            if self.clock == "zero":
                ns = 0
            elif self.clock == "model" and model is not None:
                ns = float(model @ (1.0, *feats))
            for r_in, r_out, wall in held:
                account(r_in, r_out, ns if self.clock != "zero" else wall)
            held.clear()
            self.ran_ns = ns
            self.now += ns                  # before the engine calls policy.on_ran, which reads the clock
            self.busy += ns
            return done
        return timed

    def _sched(self, method, is_pick: bool):
        def timed(*args):
            t0 = time.thread_time_ns()
            out = method(*args)
            self.sched_ns += time.thread_time_ns() - t0
            self.picks += is_pick
            return out
        return timed

    def push(self, src: str, t: float) -> None:
        k = (self.sent[src] % 4096) * self.rows
        ts = self.last_ts[src] = max(self.last_ts[src], int(t // 1000))
        self.eng.push(src, {c: v[k:k + self.rows] for c, v in self.pool[src].items()}, ts=ts)
        self.sent[src] += 1

    def heartbeat(self, src: str, t: float) -> None:
        ts = int(t // 1000)
        if ts > self.last_ts[src]:
            self.last_ts[src] = ts
            self.eng.heartbeat(ts, src)

    def step(self) -> bool:
        self.ran_ns = 0
        return bool(self.eng.run(max_steps=1))

    def drain(self) -> list[np.ndarray]:
        return [self.now - b.ts * 1000.0 for q in self.queries for b in q.drain_batches() if len(b)]


def engine_events(arr: list[tuple[float, str]]) -> list[tuple[float, int, str]]:
    """Batches (kind 0), plus heartbeats (kind 1) from a source that has fallen silent: 100 us after its
    last batch, then every millisecond until its next batch, as a real source's keep-alive would."""
    events, last = [], {}
    def silence(s: str, until: float) -> None:
        t = last[s] + HEARTBEAT_NS
        while t < until:
            events.append((t, 1, s))
            t += HEARTBEAT_EVERY_NS
    for t, s in arr:
        if s in last:
            silence(s, t)
        last[s] = t
        events.append((t, 0, s))
    for s in last:
        silence(s, max(last.values()) + 2 * HEARTBEAT_EVERY_NS)
    return sorted(events)


def held_rows(op) -> int:
    """Rows ``op`` holds until its input frontier passes them (``held_stamps``, read only)."""
    f = getattr(op, "held_stamps", None)
    return sum(rows for _, rows in f()) if f is not None else 0


def held_bytes(op) -> int:
    """Bytes of the input rows ``op`` has read from its queues but holds until its input frontier passes them
    (a join's or set operation's deltas waiting for the other input, an aggregate's or sink's instant not
    final yet): queued input in all but name, which the queues' bytes do not show (read only)."""
    total = 0
    for attr in ("pending", "held", "buffer"):
        got = getattr(op, attr, None)
        if not isinstance(got, list):       # (a ROWS window's ``held`` counts the rows in its window)
            continue
        for x in got:
            for b in (x if isinstance(x, list) else (x,)):
                total += getattr(b, "nbytes", 0)
    return total


def state_rows(op) -> int:
    """Rows in the operator's synopses (windows, join tables, groups), read only."""
    return sum(s.rows() for s in getattr(op, "synopses", ()))


def fit_costs(record: dict[str, list]) -> dict[str, np.ndarray]:
    """Per operator, ns per run = c_run + c_item * items + c_in * rows read + c_rel * rows released +
    c_out * rows out: non-negative least squares (exact, over every support) on the recorded runs.

    Rows released (held before + read - held after) is what an operator that holds rows (a join waiting
    for its other input, an aggregate for a final instant) actually processes in a run: a join's run that
    reads 64 rows may process none or a thousand; and a join's release costs in proportion to its tables
    (state rows). Without these two the join was priced by schedule: in three calibrations FIFO's runs
    of `window_join` were charged 1.17-1.31x their CPU time, round-robin's 0.81-1.10x."""
    model = {}
    k = 1 + len(FEATURES)
    for op_id, runs in record.items():
        a = np.asarray(runs, dtype=float)
        x = np.column_stack([np.ones(len(a)), a[:, :-1]])
        y = a[:, -1]
        best, err = np.zeros(k), float(y @ y)
        for mask in range(1, 1 << k):
            cols = [j for j in range(k) if mask >> j & 1]
            c = np.linalg.lstsq(x[:, cols], y, rcond=None)[0]
            if (c < 0).any():
                continue
            coef = np.zeros(k)
            coef[cols] = c
            e = float(((x @ coef - y) ** 2).sum())
            if e < err:
                best, err = coef, e
        model[op_id] = best
    return model


def run_engine(w: Workload, name: str, arr: list, batch_rows: int, seed: int, bound: float | None,
               clock: str = "cpu", model: dict | None = None, record: dict | None = None,
               setup: Callable[[EngineRun], object] | None = None) -> dict:
    run = EngineRun(w, name, batch_rows, seed, clock, model, record)
    if setup is not None:                # (``release_bound`` watches FIFO's runs)
        setup(run)
    policy = run.eng.policy
    if name == "chain_flush":            # the policy's clock counts microseconds, like the timestamps
        policy.clock = lambda: run.now / 1000
        policy.set_many({"latency_bound": bound / 1000, "cost_scale": 0.001})
    queues = run.eng.queues
    events = engine_events(arr)
    run.now = events[0][0]
    times, sizes, lats, i = [], [], [], 0
    holders = [o for o in run.eng.ops if any(isinstance(getattr(o, a, None), list) for a in ("pending", "held", "buffer"))]
    with_held = 0
    while True:
        while i < len(events) and events[i][0] <= run.now:
            t, kind, src = events[i]
            run.push(src, t) if kind == 0 else run.heartbeat(src, t)
            i += 1
        times.append(run.now)
        sizes.append(sum(q.bytes for q in queues))
        with_held = max(with_held, sizes[-1] + sum(held_bytes(o) for o in holders))
        ran = run.step()
        lats += run.drain()
        if not ran:
            if i >= len(events):
                break
            run.now = max(run.now, events[i][0])
    times.append(run.now)
    span = times[-1] - times[0]
    avg = sum(b * (t1 - t0) for b, t0, t1 in zip(sizes, times, times[1:])) / span if span else 0.0
    lat = np.concatenate(lats) if lats else np.zeros(0)
    out = summary(max(sizes), avg, lat, float(lat.max()) if len(lat) else 0.0, policy)
    out["peak_with_held"] = with_held
    out["busy_ns"] = run.busy
    out["cpu_ns"] = run.cpu
    out["sched_us_per_pick"] = run.sched_ns / 1e3 / max(run.picks, 1)
    return out


def first_guess_gap(w: Workload, batch_rows: int, seed: int) -> float:
    """A rough mean gap (ns) from rounds spaced so that nothing queues, timed by the measured clock: only the
    starting point of the calibration, whose first pilot it spaces."""
    run = EngineRun(w, "fifo", batch_rows, seed)
    t, spent, rounds = 0.0, 0.0, 20
    for r in range(rounds):
        t += 1e6
        for src in w.sources:
            run.push(src, t)
        start = run.now
        while run.step():
            pass
        run.drain()
        if r >= rounds // 4:              # past the warm-up
            spent += run.now - start
    return spent / (rounds - rounds // 4) / w.utilisation


def solve_gap(w: Workload, model: dict[str, np.ndarray], batch_rows: int, batches: int, arr_seed: int,
              data_seed: int, start: float = 1e6) -> tuple[float, float]:
    """The mean gap (ns) at which FIFO's work on *this* input, charged by ``model``, is the workload's
    utilisation of the input's span; returns (gap, the utilisation reached).

    Why a search: the work of a batch depends on the gap (windows are in microseconds, so they hold more
    rows when batches come closer; a silent source sends a heartbeat every millisecond, and every heartbeat
    runs the plan), and one draw of on/off periods is on for more or less than 30% of its span. A first
    guess from a pilot on other input missed the stated utilisation by 0.5-2x. The arrivals scale with the
    gap (``arrivals`` is linear in it), so the input's shape is fixed and only its pace is searched:
    g <- g * u(g) / target (damped) until within 2%, by bisection once the target is bracketed (the
    utilisation is not smooth in the gap: more or fewer runs of the per-run costly aggregates as heartbeats
    and batches interleave differently), keeping the closest tried."""
    shape = paced(w, 1.0, batches, arr_seed)
    span = shape[-1][0] - shape[0][0]
    gap, best, lo, hi = start, (math.inf, start, 0.0), 0.0, math.inf
    for _ in range(GAP_TRIES):
        arr = paced(w, gap, batches, arr_seed)
        util = run_engine(w, "fifo", arr, batch_rows, data_seed, None, clock="model", model=model)["busy_ns"] \
            / (span * gap)
        best = min(best, (abs(util / w.utilisation - 1), gap, util))
        if best[0] <= GAP_TOLERANCE:
            break
        if util > w.utilisation:        # too busy: the gap must grow
            lo = max(lo, gap)
        else:
            hi = min(hi, gap)
        gap *= (util / w.utilisation) ** 0.8
        if lo > 0 and hi < math.inf and not lo < gap < hi:
            gap = math.sqrt(lo * hi)
    return best[1], best[2]


def start_gap(w: Workload, cal_gap: float, batches: int, seed: int) -> float:
    """Where ``solve_gap`` starts for this input: the calibration's gap, corrected for how much longer or
    shorter this draw of on/off periods is (same work per batch, so the same utilisation)."""
    def stretch(n: int, s: int) -> float:
        shape = paced(w, 1.0, n, s)
        return (shape[-1][0] - shape[0][0]) / n
    return cal_gap * stretch(CAL_BATCHES, CAL_SEEDS[0] + WORKLOADS.index(w)) / stretch(batches, seed)


def plan_signature(w: Workload) -> list[str]:
    """The operators the engine builds for the workload's queries, by id and kind: a cost model fitted on
    another plan (queries or planner changed) must not be used."""
    from dsms import Engine
    eng = Engine({"policy": "fifo", "batch_budget": BUDGET})
    for src in w.sources:
        eng.execute(f"REGISTER STREAM {src} ({COLUMNS})")
    for q in w.queries:
        eng.execute(q)
    return [f"{o.id} {o.explain()}" for o in eng.ops]


def model_work(model: dict[str, np.ndarray], record: dict[str, list]) -> float:
    """What ``model`` charges (ns) for the recorded runs."""
    return sum(float(model[k] @ (1.0, *r[:-1])) for k, runs in record.items() for r in runs)


def pilot_all(w: Workload, arr: list, batch_rows: int, seed: int, clock: str, model: dict | None,
              records: dict[str, dict], order: list[str] = ORDER, bound: float | None = None) -> float:
    """Run every policy on ``arr`` in ``order``, recording each one's runs; Chain-Flush's bound is ``bound``
    or the benchmark's (from a FIFO run first, when FIFO is not the first in ``order``). Returns the bound
    (ns)."""
    if bound is None and order[0] != "fifo":
        bound = pilot_all(w, arr, batch_rows, seed, clock, model, {"fifo": {}}, ["fifo"])
    for name in order:
        res = run_engine(w, name, arr, batch_rows, seed, bound if name == "chain_flush" else None,
                         clock=clock, model=model, record=records[name])
        if name == "fifo" and bound is None:   # (at least 1 ms: at a first guess's pace a join may emit nothing)
            bound = BOUND_FACTOR * max(res["max"], 1.0) * 1e6
    return bound


def calibrate(w: Workload, batch_rows: int, log: Callable[[str], object] = print) -> dict:
    """Fit the workload's cost model on the measured CPU time of runs of every policy.

    Every policy's runs are pooled because the policies make runs of different shapes (FIFO's runs nearly
    always carry a batch and a heartbeat, Chain's often one batch): a fit on FIFO's runs alone could not
    tell the cost per run from the cost per item, and it charged Chain's runs differently from one pilot
    to the next. A first round under the measured clock finds the pace; then one round of every policy
    under that model's clock on each input of ``CAL_SEEDS`` (arrival seed + the workload's index, as the
    benchmark does), so that the fit sees what the benchmark's inputs do (on one of them `window_join`'s
    two sources never burst together, and its join emitted nothing), each round in a rotated order of the
    policies: the machine's speed drifts with its other work (measured: one policy's every operator 0.8x,
    the next one's 1.15x, in the same minute), so each policy's runs are spread over the calibration."""
    k = WORKLOADS.index(w)
    gap = first_guess_gap(w, batch_rows, CAL_SEEDS[0])
    arr = paced(w, gap, CAL_BATCHES, CAL_SEEDS[0] + k)
    record: dict[str, list] = {}
    pilot_all(w, arr, batch_rows, CAL_SEEDS[0], "cpu", None, {name: record for name in ORDER})
    model = fit_costs(record)
    per_policy: dict[str, dict] = {name: {} for name in ORDER}
    for r, seed in enumerate(CAL_SEEDS):
        gap, _ = solve_gap(w, model, batch_rows, CAL_BATCHES, seed + k, seed, gap)
        arr = paced(w, gap, CAL_BATCHES, seed + k)
        pilot_all(w, arr, batch_rows, seed, "model", model, per_policy, ORDER[r:] + ORDER[:r])
    pooled: dict[str, list] = {}
    for rec in per_policy.values():
        for op_id, runs in rec.items():
            pooled.setdefault(op_id, []).extend(runs)
    fit = fit_costs(pooled)
    fairness = {name: model_work(fit, rec) / max(sum(r[-1] for runs in rec.values() for r in runs), 1)
                for name, rec in per_policy.items()}
    log(f"  {w.name}: {sum(map(len, pooled.values()))} runs; charged / measured CPU time per policy: "
        + " ".join(f"{n} {v:.2f}" for n, v in fairness.items()))
    gap, util = solve_gap(w, fit, batch_rows, CAL_BATCHES, CAL_SEEDS[0] + k, CAL_SEEDS[0], gap)
    return {"plan": plan_signature(w), "costs": {op_id: [round(float(x), 3) for x in c] for op_id, c in fit.items()},
            "gap_ns": round(gap), "gap_utilisation": round(util, 3),
            "charged_over_measured": {n: round(v, 3) for n, v in fairness.items()}}


ENGINE_CODE = ("dsms/operators", "synopses", "dsms/expr", "dsms/batch.py", "dsms/queues.py")


def engine_code() -> str:
    """A digest of the code whose cost the model stands for (operators, synopses, compiled expressions,
    batches, queues). The plan signature cannot see a change inside an operator: the stored model of
    2026-11-22 charged `window_join`'s join 1.5x its measured CPU time after the join and its index were
    rewritten (FIFO, seed 8: 74.6 ms charged for 46.4 ms measured), and nothing said so."""
    import hashlib
    h = hashlib.sha256()
    for part in ENGINE_CODE:
        p = ROOT / part
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def load_costs(path: Path, batch_rows: int, log: Callable[[str], object] = print
               ) -> dict[str, tuple[dict[str, np.ndarray], float]]:
    """The stored cost model and calibration gap (ns, on the calibration's input) per workload; a workload
    whose plan no longer matches (or is missing) is calibrated again in this run, and says so (its figures
    then depend on this run's measurements). When the operators' code has changed since the calibration the
    model is still used (the run stays reproducible), with a note that it may no longer be what runs cost."""
    stored = json.loads(path.read_text()) if path.exists() else {"workloads": {}}
    if stored.get("batch_rows", batch_rows) != batch_rows:
        log(f"note: {path.name} was calibrated with {stored['batch_rows']}-row batches")
    if stored["workloads"] and stored.get("engine_code") != engine_code():
        log(f"note: the operators' code ({', '.join(ENGINE_CODE)}) has changed since {path.name} was calibrated "
            f"({stored.get('calibrated', '?')}); its costs may no longer be what runs cost: --calibrate measures "
            "them again")
    out = {}
    for w in WORKLOADS:
        got = stored["workloads"].get(w.name)
        if got is None or got["plan"] != plan_signature(w):
            log(f"note: no current cost model for {w.name} in {path}; calibrating it in this run "
                f"(not reproducible; run --calibrate to store one)")
            got = calibrate(w, batch_rows, log=log)
        out[w.name] = ({k: np.asarray(c, dtype=float) for k, c in got["costs"].items()}, float(got["gap_ns"]))
    return out


def save_costs(path: Path, batch_rows: int, log: Callable[[str], object] = print) -> None:
    """Calibrate every workload and store the cost models (``--calibrate``)."""
    started = time.perf_counter()
    log(f"calibrating the cost models ({len(WORKLOADS)} workloads, every policy, seeds {CAL_SEEDS}) ...")
    rows = {w.name: calibrate(w, batch_rows, log=log) for w in WORKLOADS}
    path.write_text(json.dumps({
        "note": f"per operator: ns per run, then per {', '.join(FEATURES)} (FEATURES); fitted by "
                "bench/scheduler_memory.py --calibrate on the measured CPU time of every policy's runs",
        "calibrated": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} cpus, "
        f"python {sys.version.split()[0]}", "batch_rows": batch_rows, "seeds": CAL_SEEDS,
        "engine_code": engine_code(), "workloads": rows}, indent=1) + "\n")
    log(f"wrote {path} ({time.perf_counter() - started:.0f} s)")


def forced_wait(w: Workload, arr: list, batch_rows: int, seed: int) -> float:
    """Longest latency (ns) with processing that takes no time at all: each result waits only until the
    input that makes it final has arrived (a later element or heartbeat). No schedule can beat it."""
    return run_engine(w, "fifo", arr, batch_rows, seed, None, clock="zero")["max"] * 1e6


def release_bound(w: Workload, arr: list, batch_rows: int, seed: int, model: dict[str, np.ndarray]) -> dict | None:
    """A lower bound on any schedule's peak memory (queues and rows held in operators) for a plan whose two
    streams are selected, windowed and joined (``window_join``); None for other plans.

    The join releases in timestamp order (``dsms.operators.binary``), so a row newer than tau that passes its
    selection leaves memory only once the join has released everything up to tau. That needs (1) an item
    (batch or heartbeat) at or after tau on each input, so not before ``C`` when the later of the two has
    arrived, and (2) the selections, windows and join to have processed every item up to tau: with at least
    FIFO's charged time per item (its runs, each available from its oldest item's timestamp), a single
    processor doing nothing else still has ``W`` of that work left when the first newer batch arrives (a).
    Until the release the newer batches stay, at best selected (and projected onto the columns the query
    reads, where projection pushdown put a projection before the window): selecting them costs at least a
    selection run's charge per batch (sigma) and frees at most raw minus selected bytes; after the release the rest of
    the plan frees at most rho bytes per ns (the most a window run's charge can move, from the model). So at
    t, with N newer batches arrived (raw bytes R, selected bytes F): selection time f = min(t - a, N sigma),
    downstream time d = max(0, t - max(C, a + W + f)), and memory >= R - f (R - F) / (N sigma) - min(F, rho d).
    The bound is the largest such value over tau and t; the older rows still waiting are left out, so it is
    low. The one assumption is the work per item (every policy's runs carry up to two items, as FIFO's)."""
    from dsms.operators.base import colmap
    probe = EngineRun(w, "fifo", batch_rows, seed, "model", model)
    eng = probe.eng
    joins = [o for o in eng.ops if len(o.input_queues) == 2]
    selects = {s: next((o for o in eng.ops if o.kind == "select" and o.input_queues[0] is eng.source_queue(s)), None)
               for s in w.sources}
    windows = [o for o in eng.ops if o.kind == "range_window"]
    if len(joins) != 1 or len(w.sources) != 2 or None in selects.values() or not windows:
        return None
    # the projection onto the columns the query reads (projection pushdown), between selection and window
    projects = {s: next((o for o in eng.ops if o.kind == "project" and o.input_queues[0] is sel.output
                         and all(isinstance(e, int) for e in o.exprs)), None) for s, sel in selects.items()}
    upstream = {o.id for o in (*selects.values(), *windows, joins[0], *filter(None, projects.values()))}
    # every batch's raw and selected bytes and timestamp, as EngineRun.push sends it
    times, stamps, raw, sel, width = [], [], [], [], 0.0
    sent, last = dict.fromkeys(w.sources, 0), dict.fromkeys(w.sources, 0)
    for t, src in arr:
        k = (sent[src] % 4096) * batch_rows
        sent[src] += 1
        ts = last[src] = max(last[src], int(t // 1000))
        b = eng.prepare(src, {c: v[k:k + batch_rows] for c, v in probe.pool[src].items()}, ts)
        mask = selects[src].predicate(colmap(b), len(b))
        kept = b.take(mask)
        if projects[src] is not None:         # what a selected row is at the smallest: its columns read
            kept = Batch(kept.ts, kept.sign, [kept.cols[e] for e in projects[src].exprs])
        times.append(t)
        stamps.append(ts)
        raw.append(b.nbytes)
        sel.append(kept.nbytes)
        width = max(width, sel[-1] / max(int(mask.sum()), 1))     # bytes of a selected row
    times, stamps, raw, sel = (np.asarray(x, dtype=float) for x in (times, stamps, raw, sel))
    # the earliest moment each source has sent an item (batch or heartbeat) at or after a timestamp
    item_t = {s: [] for s in w.sources}
    for t, _, src in engine_events(arr):
        item_t[src].append(t)
    item_t = {s: np.asarray(v, dtype=float) for s, v in item_t.items()}
    item_ts = {s: np.maximum.accumulate(v // 1000) for s, v in item_t.items()}

    def charge(op, batches: float, rows_in: float, rows_out: float) -> float:
        c = model[op.id]
        return float(c[0] / BUDGET + c[1] * batches + (c[3] + c[4]) * rows_in + c[5] * rows_out)
    sigma = min(charge(o, 1, batch_rows, 0) for o in selects.values())     # the cheapest selection of a batch
    # what a window run's charge moves per ns at most; windows fused into the join run (and are charged) in the
    # join's runs, so then the join's charge for reading rows and writing none
    movers = [(o, 2) for o in windows if o.id in model] or [(joins[0], 0)]
    rho = max(width * n / charge(o, 1, n, k * n) for o, k in movers for n in range(1, batch_rows + 1))
    jobs = []                                 # FIFO's runs up to the join: (oldest item's timestamp, charge)

    def watch(run: EngineRun) -> None:
        for op in run.eng.ops:
            if op.id not in upstream:
                continue
            def watched(budget: int, op=op, inner=op.run) -> int:
                oldest = min((r.oldest_ts() for r in op.readers if r.pending()), default=None)
                done = inner(budget)
                if oldest is not None:
                    jobs.append((oldest, run.ran_ns))
                return done
            op.run = watched
    run_engine(w, "fifo", arr, batch_rows, seed, None, clock="model", model=model, setup=watch)
    jobs.sort()
    job_ts = np.asarray([j[0] for j in jobs], dtype=float)
    job_ns = np.asarray([j[1] for j in jobs], dtype=float)
    order = np.argsort(times, kind="stable")
    times, stamps, raw, sel = times[order], stamps[order], raw[order], sel[order]
    best = {"bytes": 0.0}
    for tau in np.unique(stamps):
        newer = stamps > tau
        if not newer.any():
            continue
        first = times[newer][0]
        reach = []
        for s in w.sources:
            k = int(np.searchsorted(item_ts[s], tau, side="left"))
            reach.append(item_t[s][k] if k < len(item_t[s]) else math.inf)
        release = max(reach)
        # work left at `first` on the items up to tau, by a processor that did only that work from the start
        m = job_ts <= tau
        left = 0.0
        clock = None
        for at, ns in zip(job_ts[m] * 1000.0, job_ns[m]):
            if at >= first:
                left += ns                    # available only after `first`: all of it is still to do
                continue
            if clock is not None:
                left = max(0.0, left - (at - clock))
            clock = at
            left += ns
        if clock is not None:
            left = max(0.0, left - (first - clock)) if clock < first else left
        n = np.cumsum(newer)                  # newer batches arrived by each arrival
        big_r, big_f = np.cumsum(raw * newer), np.cumsum(sel * newer)
        t = times
        f = np.minimum(t - first, n * sigma)
        freed = np.where(n > 0, f / np.maximum(n * sigma, 1e-9) * (big_r - big_f), 0.0)
        down = np.maximum(0.0, t - np.maximum(release, first + left + f)) * rho
        lb = np.where(newer & (t >= first), big_r - freed - np.minimum(big_f, down), 0.0)
        j = int(np.argmax(lb))
        if lb[j] > best["bytes"]:
            best = {"bytes": float(lb[j]), "at_ms": float(t[j] / 1e6), "newer_than_ms": float(tau / 1e3),
                    "batches": int(n[j]), "first_ms": float(first / 1e6), "inputs_at_ms": float(release / 1e6),
                    "older_work_ms": left / 1e6}
    best.update({"sigma_us": sigma / 1e3, "rho_bytes_per_us": float(rho * 1e3), "selected_row_bytes": float(width)})
    return best


# ------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--driver", choices=["engine", "sim"], default="engine")
    ap.add_argument("--clock", choices=["model", "cpu"], default="model",
                    help="engine driver: what a run costs on the simulated clock, the stored cost model "
                         "(reproducible) or each run's measured CPU time")
    ap.add_argument("--costs", type=Path, default=COSTS,
                    help="engine driver: the stored cost models (default: %(default)s)")
    ap.add_argument("--calibrate", action="store_true",
                    help="engine driver: measure the cost models again (every policy, 3 rounds, 3-5 min) and "
                         "store them in --costs before the benchmark")
    ap.add_argument("--batches", type=int, default=None,
                    help="source batches per workload (default: 1200 engine, 3000 simulator)")
    ap.add_argument("--batch-rows", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--bound-factor", type=float, default=BOUND_FACTOR,
                    help="Chain-Flush latency bound as a multiple of FIFO's longest latency")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    batches = args.batches or (1200 if args.driver == "engine" else 3000)
    engine = args.driver == "engine"

    started = time.perf_counter()
    if engine and args.calibrate:
        save_costs(args.costs, args.batch_rows)
    models = load_costs(args.costs, args.batch_rows) if engine else {}
    rows = []
    for k, w in enumerate(WORKLOADS):
        if engine:
            model, cal_gap = models[w.name]
            gap, _ = solve_gap(w, model, args.batch_rows, batches, args.seed + k, args.seed,
                               start_gap(w, cal_gap, batches, args.seed + k))
            def drive(w, name, arr, rows_, seed, bound, model=model):
                return run_engine(w, name, arr, rows_, seed, bound, clock=args.clock, model=model)
        else:
            gap, drive = sim_gap(w, args.batch_rows), run_sim
        arr = paced(w, gap, batches, args.seed + k)
        forced_ms = forced_wait(w, arr, args.batch_rows, args.seed) / 1e6 if engine else 0.0
        res = {"fifo": drive(w, "fifo", arr, args.batch_rows, args.seed, None)}
        bound_ms = args.bound_factor * res["fifo"]["max"]
        for name in ORDER[1:]:
            res[name] = drive(w, name, arr, args.batch_rows, args.seed, bound_ms * 1e6 if name == "chain_flush" else None)
        cf = res["chain_flush"]["stats"]
        span = arr[-1][0] - arr[0][0]
        lower = release_bound(w, arr, args.batch_rows, args.seed, model) if engine else None
        rows.append({
            "name": w.name, "note": w.note, "utilisation": w.utilisation, "input_batches": len(arr),
            "mean_gap_us": round(gap / 1e3, 2),
            "fifo_utilisation": round(res["fifo"]["busy_ns"] / span, 3) if engine else None,
            "queries": w.queries if engine else None,
            "peak_bytes": {n: round(res[n]["peak"]) for n in ORDER},
            "peak_with_held_bytes": {n: round(res[n].get("peak_with_held", 0)) for n in ORDER} if engine else None,
            "avg_bytes": {n: round(res[n]["avg"]) for n in ORDER},
            "p99_latency_ms": {n: round(res[n]["p99"], 3) for n in ORDER},
            "max_latency_ms": {n: round(res[n]["max"], 3) for n in ORDER},
            "sched_us_per_pick": {n: round(res[n].get("sched_us_per_pick", 0.0), 2) for n in ORDER} if engine else None,
            "work_ms": {n: round(res[n].get("busy_ns", 0.0) / 1e6, 2) for n in ORDER} if engine else None,
            "cpu_ms": {n: round(res[n].get("cpu_ns", 0.0) / 1e6, 2) for n in ORDER} if engine else None,
            "forced_wait_ms": round(forced_ms, 3),
            "chain_flush_bound_ms": round(bound_ms, 3),
            "chain_flush_within_bound": res["chain_flush"]["max"] <= bound_ms,
            "chain_flush_flushes": cf.get("flushes"), "chain_flush_scans": cf.get("scans"),
            "chain_recomputes": res["chain"]["stats"].get("recomputes"),
            "release_bound": ({k: round(v, 3) if isinstance(v, float) else v for k, v in lower.items()}
                              if lower else None),
        })

    hdr = (f"{'workload':22} {'util':>4} {'policy':12} {'peak KB':>9}" + (f" {'+held KB':>9}" if engine else "")
           + f" {'avg KB':>8} {'p99 ms':>8} {'max ms':>8}"
           + (f" {'work ms':>8} {'cpu ms':>8} {'sched us':>8}" if engine else ""))
    clock = f", clock {args.clock}" if engine else ""
    print(f"driver: {args.driver}{clock}, {batches} batches of {args.batch_rows} rows per workload, seed {args.seed}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        for n in ORDER:
            print(f"{r['name']:22} {r['utilisation']:>4} {n:12} {r['peak_bytes'][n] / 1024:>9.1f} "
                  + (f"{r['peak_with_held_bytes'][n] / 1024:>9.1f} " if engine else "")
                  + f"{r['avg_bytes'][n] / 1024:>8.1f} {r['p99_latency_ms'][n]:>8.2f} {r['max_latency_ms'][n]:>8.2f}"
                  + (f" {r['work_ms'][n]:>8.1f} {r['cpu_ms'][n]:>8.1f} {r['sched_us_per_pick'][n]:>8.1f}"
                     if engine else ""))
        forced = (f"; unavoidable wait {r['forced_wait_ms']:.2f} ms; mean gap {r['mean_gap_us']:.0f} us, "
                  f"FIFO work / input span {r['fifo_utilisation']:.2f}") if engine else ""
        print(f"{'':22} Chain-Flush bound {r['chain_flush_bound_ms']:.2f} ms "
              f"({args.bound_factor:g} x FIFO's longest{forced}): "
              f"{'within' if r['chain_flush_within_bound'] else 'EXCEEDED'}")
        if r["release_bound"]:
            b, held = r["release_bound"], r["peak_with_held_bytes"]
            print(f"{'':22} release-order bound on any schedule's peak (queues + held): {b['bytes'] / 1024:.1f} KB "
                  f"at {b['at_ms']:.1f} ms ({b['batches']} batches newer than {b['newer_than_ms']:.1f} ms wait for "
                  f"its release, {b['older_work_ms']:.1f} ms of older work left); FIFO / bound {r['peak_bytes']['fifo'] / b['bytes']:.2f} "
                  f"(+held {held['fifo'] / b['bytes']:.2f}), Chain / bound {r['peak_bytes']['chain'] / b['bytes']:.2f} "
                  f"(+held {held['chain'] / b['bytes']:.2f})")
    print()
    ratios = {f"{n}/chain": [r["peak_bytes"][n] / max(r["peak_bytes"]["chain"], 1) for r in rows]
              for n in ("fifo", "round_robin", "greedy", "chain_flush")}
    print("peak-memory ratios against Chain, per workload, and the median:")
    for key, v in ratios.items():
        print(f"  {key:18} " + " ".join(f"{x:6.2f}" for x in v) + f"   median {statistics.median(v):.2f}")
    if engine:
        held = {n: [r["peak_with_held_bytes"][n] / max(r["peak_with_held_bytes"]["chain"], 1) for r in rows]
                for n in ("fifo", "greedy")}
        print("  counting rows held inside operators too (+held):")
        for n, v in held.items():
            print(f"  {n + '/chain':18} " + " ".join(f"{x:6.2f}" for x in v) + f"   median {statistics.median(v):.2f}")
    lat = [r["max_latency_ms"]["chain_flush"] / max(r["max_latency_ms"]["fifo"], 1e-9) for r in rows]
    print("  longest latency chain_flush/fifo " + " ".join(f"{x:6.2f}" for x in lat)
          + f"   median {statistics.median(lat):.2f}")
    within = sum(r["chain_flush_within_bound"] for r in rows)
    print(f"Chain-Flush longest latency within its bound: {within} of {len(rows)} workloads")
    print(f"({time.perf_counter() - started:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps({
            "driver": args.driver, "clock": args.clock if engine else None, "batches": batches,
            "batch_rows": args.batch_rows, "seed": args.seed, "bound_factor": args.bound_factor,
            "workloads": rows, "chain_flush_within_bound": within,
            "median_ratios": {key: round(statistics.median(v), 3) for key, v in ratios.items()},
        }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
