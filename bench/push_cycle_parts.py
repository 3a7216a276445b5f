"""Where a NEXMark push cycle's time goes outside the operators: the three ``push`` calls, the heartbeat, the
run loop around the operator runs (policy, readiness, plan summary) and the drain, in microseconds of CPU time
per cycle of 1,000 events (issue 15).

    python3 bench/push_cycle_parts.py [--queries q2,q3,q8] [--events 200000] [--rounds 5]

The cycle is ``bench/nexmark.py``'s ``run_dsms`` loop. Each operator's ``run`` is wrapped to time it, so
"operators" is their runs and "loop" is ``Engine.run`` less those (it includes the wrapper's own call and two
clock reads per run, about 0.5 us a run); "outside" is push + heartbeat + loop + drain. Best of ``--rounds``
rounds per part, each round a fresh engine with the garbage collector's survivors frozen first.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

sys.path.insert(0, ".")
from bench import nexmark  # noqa: E402
from bench.nexmark_gen import generate  # noqa: E402
from bench.nexmark_queries import BY_NAME, Windows  # noqa: E402
from dsms import Engine  # noqa: E402

PARTS = ("push", "heartbeat", "run", "drain", "operators", "loop", "outside")


def timed_cycle(eng: Engine, query, cycle, clk) -> tuple[int, int, int, int]:
    """One push cycle as the NEXMark bench runs it (each stream's push of the step, a heartbeat, a run, a
    drain), the time of each part by ``clk``; both cycle benches time it this way."""
    t0 = clk()
    for s, cols, ts in cycle:
        eng.push(s, cols, ts)
    t1 = clk()
    eng.heartbeat(int(ts[-1]))
    t2 = clk()
    eng.run()
    t3 = clk()
    query.drain_batches()
    t4 = clk()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3


def parts(name: str, ev: dict, events: int, rounds: int) -> dict[str, float]:
    """Microseconds of CPU time per push cycle of each part, best of ``rounds``."""
    clk = time.process_time
    best = dict.fromkeys(PARTS, float("inf"))
    for _ in range(rounds):
        eng, query = nexmark.engine_for(BY_NAME[name], Windows())
        pushes = nexmark._pushes(ev, events, 1000)
        spent = [0.0]
        for op in eng.ops:
            def timed(budget: int = 1 << 30, run=op.run, spent=spent) -> int:
                t = clk()
                done = run(budget)
                spent[0] += clk() - t
                return done
            op.run = timed
        t = dict.fromkeys(PARTS, 0.0)
        gc.collect()
        gc.freeze()
        for cycle in pushes:
            for part, spent_ns in zip(("push", "heartbeat", "run", "drain"), timed_cycle(eng, query, cycle, clk)):
                t[part] += spent_ns
        gc.unfreeze()
        t["operators"] = spent[0]
        t["loop"] = t["run"] - spent[0]
        t["outside"] = t["push"] + t["heartbeat"] + t["loop"] + t["drain"]
        for k, v in t.items():
            best[k] = min(best[k], v / len(pushes) * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", default="q2,q3,q8")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    ev = generate(a.events)
    for name in a.queries.split(","):
        got = parts(name, ev, a.events, a.rounds)
        print(f"{name}  " + "  ".join(f"{k} {v:.1f}" for k, v in got.items()) + "  (us of CPU per push cycle)")


if __name__ == "__main__":
    main()
