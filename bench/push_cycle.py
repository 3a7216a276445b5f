"""The fixed cost of a push cycle that carries only time: ``heartbeat(t)``, ``run()``, ``drain_batches()`` on a
NEXMark query's plan, in microseconds of CPU time per cycle (issue 15).

    python3 bench/push_cycle.py [--queries q0,q2,q3,q5,q7,q8] [--cycles 1000] [--rounds 5]

Each query's engine is first fed 20,000 events at 1,000 per push (as ``bench/nexmark.py`` does), so its
statistics, chains and state are those of a running query; then every cycle moves time on by one tick with no
data. The windows (10 s, sliding by 2 s or tumbling) end rarely within a round, so what is timed is what every
push of ``bench/nexmark.py`` pays besides its rows: the heartbeat entering the sources, every operator's run
that only moves its frontier and forwards it, the scheduler's picks and bookkeeping, and the drain. At 1,000
events per push most operator runs of q5, q7 and q8 are such runs (the windows release rows once per slide).
Best of ``--rounds`` rounds of ``--cycles`` cycles; runs per cycle are printed beside it.
"""

from __future__ import annotations

import argparse
import sys
import time

sys.path.insert(0, ".")
from bench import nexmark  # noqa: E402
from bench.nexmark_gen import generate  # noqa: E402
from bench.nexmark_queries import BY_NAME, Windows  # noqa: E402


def cycle_cost(name: str, ev: dict, warm: int, cycles: int, rounds: int) -> tuple[float, float]:
    """(CPU microseconds per heartbeat-only cycle, best round; operator runs per cycle)."""
    eng, query = nexmark.engine_for(BY_NAME[name], Windows())
    last = 0
    for parts in nexmark._pushes(ev, warm, 1000):
        for s, cols, ts in parts:
            eng.push(s, cols, ts)
            last = int(ts[-1])
        eng.heartbeat(last)
        eng.run()
        query.drain_batches()
    t = last + 1
    best, runs = float("inf"), 0
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(cycles):
            eng.heartbeat(t)
            runs += eng.run()
            query.drain_batches()
            t += 1
        best = min(best, (time.process_time() - t0) / cycles)
        t += 20_000                       # past the windows, so the next round starts between two slides
        eng.heartbeat(t)
        eng.run()
        query.drain_batches()
        t += 1
    return best * 1e6, runs / (rounds * cycles)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", default="q0,q2,q3,q5,q7,q8")
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    warm = 20_000
    ev = generate(warm)
    for name in a.queries.split(","):
        us, runs = cycle_cost(name, ev, warm, a.cycles, a.rounds)
        print(f"{name}  {us:6.1f} us of CPU per heartbeat-only cycle  ({runs:.1f} operator runs)")


if __name__ == "__main__":
    main()
