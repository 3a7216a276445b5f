"""Test helper: run a workload live through the embedded engine while writing what the server would write for
the same input into a data directory: the archive (through ``dsms.archive.Archive``, one frame per pushed batch,
one per relation instant, heartbeats per input, as ``dsms/runtime.py`` appends them) and ``catalog.json`` (the
runtime's log format: one ``cql`` entry per statement, stamped with the archive position). The test server path
(tests/spark/test_replay_server.py) checks the same against a real server's data directory."""

from __future__ import annotations

import json
from pathlib import Path

from oracle.generators import CATALOG, Workload, apply

from dsms import Engine
from dsms.archive import Archive


def _cols(names, rows):
    return {n: [r[n] for r in rows] for n in names}


def archive_and_run(data_dir: Path, w: Workload, query_name: str | None = None) -> tuple[list, str]:
    """Archive ``w`` under ``data_dir`` and run it live; returns (live results as (ts, sign, row), query id)."""
    eng = Engine()
    log = []
    arch = Archive(data_dir, fsync="never")
    try:
        def positions():
            return {name: r.next_seq for name, r in arch.ranges().items()}

        for s in w.statements:
            eng.execute(s)
            log.append({"op": "cql", "cql": s, "at": positions()})
        q = eng.execute(w.query)
        log.append({"op": "cql", "cql": w.query, "at": positions()})
        for a in w.actions:
            if a[0] == "push" and a[2]:
                src = eng.sources[a[1].lower()]
                ts = [a[3]] * len(a[2]) if isinstance(a[3], int) else list(a[3])
                arch.append_batch(a[1].lower(), ts, None, _cols(src.names, a[2]))
            elif a[0] == "update" and (a[2] or a[3]):
                src = eng.sources[a[1].lower()]
                rows = list(a[2]) + list(a[3])
                arch.append_batch(a[1].lower(), [a[4]] * len(rows), [1] * len(a[2]) + [-1] * len(a[3]),
                                  _cols(src.names, rows))
            elif a[0] == "heartbeat":
                targets = [a[2].lower()] if len(a) > 2 else list(eng.sources)
                for name in targets:
                    f = eng.sources[name].frontier
                    if f is None or a[1] > f:
                        arch.append_heartbeat(name, a[1])
            apply(eng, a)
        for name, src in eng.sources.items():
            if src.frontier is None or w.until > src.frontier:
                arch.append_heartbeat(name, w.until)
        eng.heartbeat(w.until)
        eng.run()
    finally:
        arch.close()
    (Path(data_dir) / "catalog.json").write_text(json.dumps({"version": 1, "log": log}))
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()], q.id


def replay_rows(result, names) -> list:
    """A job result as (ts, sign, row) tuples, for oracle.generators.compare."""
    cols = [c.tolist() for c in result.cols]
    return [(t, s, dict(zip(names, vals))) for t, s, *vals in zip(result.ts.tolist(), result.sign.tolist(), *cols)]


def dense_workload(query: str, seed: int) -> Workload:
    """Hundreds of elements over a few hundred instants, relation updates and heartbeats among them: dense
    enough that every slice boundary and every key partition holds state (the generated workloads are sparse)."""
    import random

    rnd = random.Random(seed)
    actions, t = [], 0
    bag: list = []
    for _ in range(160):
        t += rnd.choice([0, 1, 1, 2, 3])
        k = rnd.random()
        if k < 0.55:
            rows = [{"a": rnd.randrange(5), "b": rnd.randrange(-3, 6), "c": rnd.choice("xyz")}
                    for _ in range(rnd.randint(1, 3))]
            actions.append(("push", "S", rows, [t] * len(rows)))
        elif k < 0.85:
            actions.append(("push", "T", [{"a": rnd.randrange(5), "d": rnd.choice([0.5, 1.0, 2.25])}], [t]))
        elif k < 0.95:
            ins = [{"a": rnd.randrange(5), "e": rnd.choice(["x", "y"])}]
            dels = [bag.pop(rnd.randrange(len(bag)))] if bag and rnd.random() < 0.5 else []
            bag.extend(ins)
            actions.append(("update", "R", ins, dels, t))
        else:
            actions.append(("heartbeat", t))
    return Workload(CATALOG, query, tuple(actions), t + 5)
