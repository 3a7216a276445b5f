"""Random updates of two relations, R (a INT, b INT, v FLOAT) and Q (a INT, b INT, w STRING), and elements of
a stream S (a INT, b INT), for the join tests that check relations updated at random against the reference
evaluator (tests/operators/test_join_signed_netting.py, test_join_keyed_side.py)."""

from __future__ import annotations

import random


def random_updates(seed: int, keys: list[int], n: int, inputs: str = "RQ", tail: int = 3) -> tuple[list, int]:
    """(actions, the instant to heartbeat at): ``n`` steps, each on an input drawn from ``inputs`` (a name
    repeated is drawn more often): an element of S, or an insert, a delete of a live row (a duplicate's copy
    too) or a row inserted and deleted in one call of R or Q, at instants that repeat; runs now and then, so
    that releases hold one update or many, and a group changes several times within one release or one
    instant. The heartbeat is ``tail`` after the last instant."""
    rng = random.Random(seed)
    live: dict[str, list[dict]] = {"R": [], "Q": []}
    out, ts = [], 0
    for _ in range(n):
        ts += rng.choice([0, 0, 1, 2])
        name = rng.choice(inputs)
        if name == "S":
            out.append(("push", "S", [{"a": rng.choice(keys), "b": rng.choice(keys)}], [ts]))
            continue
        if name == "R":
            row = {"a": rng.choice(keys), "b": rng.choice(keys), "v": rng.choice([0.0, -0.0, 1.5, 2.5])}
        else:
            row = {"a": rng.choice(keys), "b": rng.choice(keys), "w": rng.choice("xy")}
        rows = live[name]
        kind = rng.random()
        if kind < 0.35 and rows:
            out.append(("update", name, [], [rows.pop(rng.randrange(len(rows)))], ts))
        elif kind < 0.45:
            out.append(("update", name, [row], [row], ts))      # in and out at one instant
        else:
            copies = [row] * rng.choice([1, 1, 2])              # duplicate rows
            rows.extend(copies)
            out.append(("update", name, copies, [], ts))
        if rng.random() < 0.25:
            out.append(("run",))
    return out, ts + tail
