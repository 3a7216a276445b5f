"""NEXMark on dsms: events per second per query at 1,000 and 10,000 events per push, beside a plain-Python
dict/deque loop and DuckDB computing the same answers in the same run, every answer checked equal (issue 15).

    python3 bench/nexmark.py [--events N] [--queries q0,q5] [--pushes 1000,10000] [--rounds R] [--json PATH]
                             [--window MS] [--http P] [--clock cpu|wall]
    python3 bench/nexmark.py --sweep PATH.png | --q7-window | --unread-columns     (other measurements)

The generator is ``bench/nexmark_gen.py`` (shared/nexmark.md section 2: 1 person : 3 auctions : 46 bids, 10
events per ms of event time); the queries are ``bench/nexmark_queries.py``. dsms runs each query in its own
in-process engine fed with all three streams: a push of P events is the Person, Auction and Bid rows among P
consecutive events (three ``push`` calls of numpy columns), then a heartbeat at the last event's timestamp, a
``run`` and a ``drain_batches``; the time counted is all of that, over every push, plus the final heartbeat.
The loop gets the merged event list as Python tuples (made before its clock starts) and keeps its state in
dicts and deques. DuckDB (one thread) has the three tables loaded before its clock starts; its time is the
``CREATE TEMP TABLE ... AS`` of the query, the batch floor for a columnar engine. Ratios keep the best of
``--rounds`` rounds of each side. Times are the process's CPU time by default (``--clock cpu``): on a machine
shared with other work, elapsed time measures the neighbours as much as the engine.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from collections import Counter

import numpy as np

sys.path.insert(0, ".")
from bench.nexmark_gen import SCHEMAS, generate  # noqa: E402
from bench.nexmark_queries import BY_NAME, QUERIES, NexQuery, Windows  # noqa: E402
from dsms import Engine  # noqa: E402

KIND = {"Person": 0, "Auction": 1, "Bid": 2}
CLOCK = [time.process_time]      # --clock cpu (default): CPU time of this process; --clock wall: perf_counter


def start_clock() -> float:
    """The clock's reading at the start of a timed run, after a full garbage collection that then freezes what
    survives (``gc.freeze``): the harness holds millions of objects (the loop's event tuples, earlier answers),
    and a full collection that falls inside a timed run traverses all of them. At 10,000 events per push q1's
    whole dsms run takes about 7 ms of CPU, and one such collection cut its figure from about 150M to 46M
    events/s at 1M events. Every side (dsms, the loop, DuckDB) is timed from here."""
    gc.collect()
    gc.freeze()
    return CLOCK[0]()


def register(eng: Engine) -> None:
    for s, cols in SCHEMAS.items():
        eng.execute(f"REGISTER STREAM {s} ({', '.join(f'{c} {t}' for c, t in cols)})")


def merged_events(ev: dict) -> list[tuple]:
    """The events in id order as (kind, ts, row tuple): the plain loop's input."""
    items = []
    for s, cols in SCHEMAS.items():
        d = ev[s]
        rows = zip(*[d[c].tolist() for c, _ in cols])
        items.extend(zip(d["event"].tolist(), [KIND[s]] * len(d["ts"]), d["ts"].tolist(), rows))
    items.sort(key=lambda x: x[0])
    return [(k, t, r) for _, k, t, r in items]


def _pushes(ev: dict, n_events: int, per_push: int, first: int = 0) -> list[list[tuple]]:
    """Per push: (stream, columns, ts) for each stream with rows among the push's events, and the last ts."""
    out = []
    bounds = {s: np.searchsorted(ev[s]["event"], np.arange(first, first + n_events + per_push, per_push))
              for s in SCHEMAS}
    for i in range(math.ceil(n_events / per_push)):
        parts = []
        for s, cols in SCHEMAS.items():
            lo, hi = bounds[s][i], bounds[s][i + 1]
            if hi > lo:
                parts.append((s, {c: ev[s][c][lo:hi] for c, _ in cols}, ev[s]["ts"][lo:hi]))
        out.append(parts)
    return out


def final_heartbeat(last: int, w: Windows) -> int:
    """A heartbeat past which every window has closed and emptied."""
    return last + 10 * max(w.q5_range, w.q7, w.q8)


def engine_for(q: NexQuery, w: Windows) -> tuple[Engine, object]:
    """A fresh engine with the NEXMark streams, ``q``'s views and ``q`` registered; (engine, query handle)."""
    eng = Engine()
    register(eng)
    *views, body = q.cql(w)
    for v in views:
        eng.execute(v)
    return eng, eng.execute(body)


def run_dsms(q: NexQuery, ev: dict, n_events: int, per_push: int, w: Windows) -> tuple[float, list]:
    """Events per second through the engine, and the result batches."""
    eng, query = engine_for(q, w)
    pushes = _pushes(ev, n_events, per_push)
    out = []
    t0 = start_clock()
    last = None
    for parts in pushes:
        for s, cols, ts in parts:
            eng.push(s, cols, ts)
            last = ts[-1]
        eng.heartbeat(int(last))
        eng.run()
        out.extend(query.drain_batches())
    eng.heartbeat(final_heartbeat(int(last), w))
    eng.run()
    out.extend(query.drain_batches())
    return n_events / (CLOCK[0]() - t0), out


def run_loop(q: NexQuery, events: list, w: Windows) -> tuple[float, list]:
    t0 = start_clock()
    res = q.loop(events, w)
    return len(events) / (CLOCK[0]() - t0), res


def duckdb_connection(ev: dict):
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 1")
    for s, cols in SCHEMAS.items():
        con.register(f"{s}_np", {"ts": ev[s]["ts"], **{c: ev[s][c] for c, _ in cols}})
        con.execute(f"CREATE TABLE {s.lower()} AS SELECT * FROM {s}_np")
        con.unregister(f"{s}_np")
    return con


def run_duckdb(q: NexQuery, con, n_events: int, w: Windows) -> tuple[float, list]:
    con.execute("DROP TABLE IF EXISTS r")
    t0 = start_clock()
    con.execute(f"CREATE TEMP TABLE r AS {q.sql(w)}")
    dt = CLOCK[0]() - t0
    rows = con.execute("SELECT * FROM r").fetchall()
    return n_events / dt, rows


def _norm(v):
    if isinstance(v, float):
        return float(f"{v:.12g}")
    if isinstance(v, np.generic):
        return _norm(v.item())
    return v


def canonical_dsms(q: NexQuery, batches: list) -> Counter:
    """Stream answers: the multiset of (ts, row); relation answers: the final contents (signs summed)."""
    c: Counter = Counter()
    for b in batches:
        for t, s, row in zip(b.ts.tolist(), b.sign.tolist(), b.rows()):
            row = tuple(_norm(v) for v in row)
            if q.relation:
                c[row] += s
            else:
                if s != 1:
                    raise AssertionError(f"{q.name}: a stream answer with a delete at {t}")
                c[(t,) + row] += 1
    return +c


def canonical_loop(q: NexQuery, res: list) -> Counter:
    if q.relation:
        return Counter(tuple(_norm(v) for v in r) for r in res)
    return Counter((t,) + tuple(_norm(v) for v in r) for t, r in res)


def canonical_duckdb(q: NexQuery, rows: list) -> Counter:
    return Counter(tuple(_norm(v) for v in r) for r in rows)


def compare(name: str, a: Counter, b: Counter, what: str) -> None:
    if a != b:
        only_a, only_b = list((a - b).items())[:3], list((b - a).items())[:3]
        raise AssertionError(f"{name}: dsms and {what} differ ({sum(a.values())} vs {sum(b.values())} rows); "
                             f"only dsms: {only_a}; only {what}: {only_b}")


def q7_window(args, ev: dict, w: Windows) -> dict:
    """Bid rows per second through ``SELECT ISTREAM(f(price)) FROM Bid [RANGE W SLIDE W]`` alone, pushes of
    10,000 events (the Bid rows among them): the window and its aggregate, MAX against SUM."""
    out: dict = {"events": args.events, "clock": args.clock, "rows_per_s": {}}
    bids = len(ev["Bid"]["ts"])
    for f in ("MAX", "SUM", "MAX", "SUM"):
        q = NexQuery(f, f"{f}(price)", lambda w, f=f: [f"SELECT ISTREAM({f}(price) AS m) FROM Bid "
                                                      f"[RANGE {w.q7} SLIDE {w.q7}]"], False, None, None, ("Bid",))
        rate = run_dsms(q, ev, args.events, 10_000, w)[0] * bids / args.events
        out["rows_per_s"][f] = max(out["rows_per_s"].get(f, 0.0), rate)
    for f, r in out["rows_per_s"].items():
        print(f"q7's window, {f}(price): {r:,.0f} bid rows/s ({args.clock} time, best of two)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


NARROW_BID = [("auction", "INT"), ("bidder", "INT"), ("price", "INT"), ("dateTime", "TIMESTAMP")]
NARROW_QUERIES = {"q1": "SELECT auction, bidder, price * 0.908 AS price, dateTime FROM Bid",
                  "q2": "SELECT auction, price FROM Bid WHERE auction % 123 = 0"}


def unread_columns(args, ev: dict) -> dict:
    """Bid rows per second of q1 (without ``extra``) and q2, Bid pushed alone, with Bid's full schema and with
    its numeric columns only: the stateless plans' per-row cost should not depend on columns they do not read."""
    b = ev["Bid"]
    n = len(b["ts"])
    out: dict = {"bids": n, "clock": args.clock, "rows_per_s": {}}
    for name, text in NARROW_QUERIES.items():
        for per in (1_000, 10_000):
            for label, schema in (("full", SCHEMAS["Bid"]), ("numeric", NARROW_BID)):
                best = 0.0
                for _ in range(max(1, args.rounds)):
                    eng = Engine()
                    eng.execute(f"REGISTER STREAM Bid ({', '.join(f'{c} {t}' for c, t in schema)})")
                    q = eng.execute(text)
                    t0 = start_clock()
                    for i in range(0, n, per):
                        eng.push("Bid", {c: b[c][i:i + per] for c, _ in schema}, b["ts"][i:i + per])
                        eng.heartbeat(int(b["ts"][min(i + per, n) - 1]))
                        eng.run()
                        q.drain_batches()
                    best = max(best, n / (CLOCK[0]() - t0))
                out["rows_per_s"][f"{name}@{per} {label}"] = best
            full, num = out["rows_per_s"][f"{name}@{per} full"], out["rows_per_s"][f"{name}@{per} numeric"]
            print(f"{name}, {per:,} bid rows per push: full schema {full:,.0f}, numeric columns only {num:,.0f} "
                  f"rows/s ({full / num:.2f}x)", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


SWEEP_PUSHES = (100, 250, 500, 1000, 2000, 4000, 4048, 4140, 6000, 10000, 20000, 50000)


def sweep(args, ev: dict, w: Windows) -> dict:
    """Events per second against events per push, one engine run per point (best of ``--rounds``)."""
    names = args.queries.split(",")
    result: dict = {"events": args.events, "clock": args.clock, "pushes": list(SWEEP_PUSHES), "queries": {}}
    print(f"{'events/push':>12}" + "".join(f"{n:>12}" for n in names))
    for p in SWEEP_PUSHES:
        row = []
        for n in names:
            rate = max(run_dsms(BY_NAME[n], ev, args.events, p, w)[0] for _ in range(max(1, args.rounds)))
            result["queries"].setdefault(n, []).append(rate)
            row.append(rate)
        print(f"{p:>12,}" + "".join(f"{r:>12,.0f}" for r in row), flush=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for n in names:
        ax.plot(SWEEP_PUSHES, result["queries"][n], marker="o", label=f"{n} {BY_NAME[n].title}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("events per push (person + auction + bid rows)")
    ax.set_ylabel(f"events per second ({args.clock} time)")
    ax.set_title(f"dsms on NEXMark, {args.events:,} events, one core")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.sweep, dpi=110)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", default=",".join(q.name for q in QUERIES))
    ap.add_argument("--pushes", default="1000,10000", help="events per push, comma-separated")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--window", type=int, default=10_000,
                    help="q7/q8 tumbling window and q5 range in ms (q5 slides by a fifth of it)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--sweep", metavar="PNG",
                    help="instead of the table: events/s against events per push (SWEEP_PUSHES) for --queries, "
                         "plotted to PNG (needs matplotlib, a benchmark-only dependency) and written to --json")
    ap.add_argument("--q7-window", action="store_true",
                    help="instead of the table: rows/s of q7's window aggregate alone, MAX(price) beside SUM(price)")
    ap.add_argument("--http", type=int, metavar="P", default=0,
                    help="add a column: the same queries through a real server over HTTP (columnar msgpack in, "
                         "NDJSON out), P events per push; wall time and the server's CPU time")
    ap.add_argument("--unread-columns", action="store_true",
                    help="instead of the table: q1's and q2's Bid rows/s with Bid's full schema (three string "
                         "columns they do not read) against a Bid of only the numeric columns")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="cpu: the process's CPU time (fair on a shared machine); wall: elapsed time")
    args = ap.parse_args(argv)
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    w = Windows(args.window, args.window // 5, args.window, args.window)
    pushes = [int(x) for x in args.pushes.split(",")]
    ev = generate(args.events)
    if args.sweep:
        return sweep(args, ev, w)
    if args.q7_window:
        return q7_window(args, ev, w)
    if args.unread_columns:
        return unread_columns(args, ev)
    events = merged_events(ev)
    con = duckdb_connection(ev)
    result: dict = {"events": args.events, "clock": args.clock, "windows": w.__dict__, "queries": {}}
    head = "".join(f"{f'dsms@{p}':>14}" for p in pushes)
    ratios = "".join(f"{f'{p}/loop':>11}" for p in pushes) + "".join(f"{f'{p}/duck':>11}" for p in pushes)
    if args.http:
        head += f"{f'http@{args.http}':>14}{'http cpu':>14}"
    print(f"{'query':<6}{head}{'loop':>14}{'duckdb':>14}{ratios}{'rows out':>10}")
    for name in args.queries.split(","):
        q = BY_NAME[name]
        best: dict = {}
        loop = duck = 0.0
        for _ in range(max(1, args.rounds)):
            for p in pushes:
                rate, batches = run_dsms(q, ev, args.events, p, w)
                if rate > best.get(p, 0):
                    best[p] = rate
                got = canonical_dsms(q, batches)
            rate, res = run_loop(q, events, w)
            loop = max(loop, rate)
            want = canonical_loop(q, res)
            rate, rows = run_duckdb(q, con, args.events, w)
            duck = max(duck, rate)
            compare(name, got, want, "the plain loop")
            compare(name, got, canonical_duckdb(q, rows), "DuckDB")
        http = ""
        r = {"dsms": {str(p): best[p] for p in pushes}, "loop": loop, "duckdb": duck,
             "rows_out": sum(got.values()), "title": q.title}
        if args.http:
            from bench.nexmark_http import run_http
            last = int(max(ev[s]["ts"][-1] for s in SCHEMAS if len(ev[s]["ts"])))
            wall, cpu, ans = run_http(q, _pushes(ev, args.events, args.http), ev, args.events, w,
                                      final_heartbeat(last, w))
            compare(name, got, ans, "the server over HTTP")
            r["http"] = {"events_per_push": args.http, "wall": wall, "server_cpu": cpu}
            http = f"{wall:>14,.0f}{cpu or 0:>14,.0f}"
        result["queries"][name] = r
        print(f"{name:<6}" + "".join(f"{best[p]:>14,.0f}" for p in pushes) + http + f"{loop:>14,.0f}{duck:>14,.0f}"
              + "".join(f"{best[p] / loop:>10.2f}x" for p in pushes)
              + "".join(f"{best[p] / duck:>10.2f}x" for p in pushes) + f"{r['rows_out']:>10,}", flush=True)
    print(f"(events per second by {args.clock} time, {args.events:,} events, one core; answers equal across the three:"
          " checked)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
