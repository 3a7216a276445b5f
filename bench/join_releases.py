"""CPU time of one NEXMark query's first join alone: the releases its JoinOp applies in a run of
``bench/nexmark.py``'s engine are recorded, then applied again (``_bounded`` and ``process``, output dropped) to a
fresh JoinOp of the same shape, best of ``--rounds``. Apart from the rest of the plan and the engine loop, the
figure moves less with the load of a shared machine than a whole query's (docs/benchmarks.md, issue 15).

    python3 bench/join_releases.py [--queries q3,q4,q9] [--pushes 10000,1000] [--events 300000] [--rounds 7]

Run from a tree's root; it uses that tree's engine, so two trees (one exported with ``git archive``) compare
one change.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import sys
import time

sys.path.insert(0, ".")
from bench.nexmark import run_dsms  # noqa: E402
from bench.nexmark_gen import generate  # noqa: E402
from bench.nexmark_queries import BY_NAME, Windows  # noqa: E402
from dsms.operators import join as join_mod  # noqa: E402


def releases(query: str, events: dict, n: int, per_push: int) -> tuple[join_mod.JoinOp, list[dict]]:
    """The first JoinOp of a run of ``query`` and the releases it applied, in order."""
    seen: list = []
    process = join_mod.JoinOp.process

    def record(self, parts):
        seen.append((self, dict(parts)))
        return process(self, parts)

    join_mod.JoinOp.process = record
    try:
        run_dsms(BY_NAME[query], events, n, per_push, Windows())
    finally:
        join_mod.JoinOp.process = process
    first = seen[0][0]
    return first, [p for op, p in seen if op is first]


def replay(first: join_mod.JoinOp, parts: list[dict], rounds: int) -> float:
    """Best CPU seconds of applying ``parts`` to a fresh JoinOp like ``first``."""
    extra = {}
    if "insert_only" in inspect.signature(join_mod.JoinOp).parameters:
        extra["insert_only"] = getattr(first, "append", None) is not None
    best = float("inf")
    for _ in range(rounds):
        op = join_mod.JoinOp(first.input_queues[0], first.input_queues[1], first.output, first.keys[0],
                             first.keys[1], first.predicate, first.dtypes, **extra)
        op.emit = lambda batch: None
        gc.collect()
        t = time.process_time()
        for p in parts:
            op.process(op._bounded(p))
            op._memo.clear()
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", default="q3,q4,q9")
    ap.add_argument("--pushes", default="10000,1000")
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    events = generate(a.events)
    for q in a.queries.split(","):
        for per in (int(x) for x in a.pushes.split(",")):
            first, parts = releases(q, events, a.events, per)
            best = replay(first, parts, a.rounds)
            print(f"{q} at {per:,} per push: {len(parts)} releases, {best * 1e3:.2f} ms, "
                  f"{best / len(parts) * 1e6:.0f} us a release")


if __name__ == "__main__":
    main()
