"""CPU time per run of one operator class in a NEXMark query run through the engine as ``bench/nexmark.py`` does
(a push of the three streams, a heartbeat, a run and a drain per push): median and mean over its runs, best of
``ROUNDS`` rounds (by mean). The median is the usual run (for a tumbling join, one that only buffers); the mean
includes the few heavy ones (a window end).

    python3 bench/nexmark_op_runs.py QUERY PER_PUSH EVENTS [OPERATOR [ROUNDS]]
    python3 bench/nexmark_op_runs.py q3 1000 200000 JoinOp 3
"""

from __future__ import annotations

import statistics
import sys
import time

sys.path.insert(0, ".")
from bench import nexmark as nm  # noqa: E402
from bench.nexmark_gen import generate  # noqa: E402
from bench.nexmark_queries import BY_NAME, Windows  # noqa: E402
from dsms import operators  # noqa: E402, F401
from dsms.operators.base import Operator  # noqa: E402


def _classes(name: str) -> list[type]:
    """The loaded operator classes called ``name`` (subclasses of ``Operator``, searched recursively)."""
    out, todo = [], [Operator]
    while todo:
        c = todo.pop()
        if c.__name__ == name:
            out.append(c)
        todo.extend(c.__subclasses__())
    return out


def main() -> None:
    query, per, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    name = sys.argv[4] if len(sys.argv) > 4 else "JoinOp"
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    import dsms.operators.join  # noqa: F401  (JoinOp and the classes it imports)
    times: list[int] = []
    saved = [(cls, cls.__dict__.get("run")) for cls in _classes(name)]
    for cls, own in saved:
        orig = own or cls.run

        def run(self, *a, _orig=orig, **k):
            t = time.process_time_ns()
            r = _orig(self, *a, **k)
            times.append(time.process_time_ns() - t)
            return r
        cls.run = run
    try:
        ev = generate(n)
        best = None
        for _ in range(rounds):
            times.clear()
            nm.run_dsms(BY_NAME[query], ev, n, per, Windows(10000, 2000, 10000, 10000))
            if not times:
                raise SystemExit(f"no run of {name} in {query}")
            cur = (statistics.median(times) / 1e3, sum(times) / len(times) / 1e3, sum(times) / 1e6, len(times))
            best = cur if best is None or cur[1] < best[1] else best
    finally:
        for cls, own in saved:
            if own is None:
                del cls.run
            else:
                cls.run = own
    print(f"{query} at {per} per push: {name} median {best[0]:.1f} us, mean {best[1]:.1f} us per run, "
          f"{best[2]:.2f} ms over {best[3]} runs ({n} events)")


if __name__ == "__main__":
    main()
