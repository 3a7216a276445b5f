"""UNION, EXCEPT and INTERSECT over relations, with set (distinct) and bag (ALL) semantics.

Source: SPEC section 3 (SQL semantics: the set forms remove duplicates); digest-003 section 3.14-3.15
(windowed union and difference, where expiry on the right can revive a row). The operator keeps each row's
multiplicity on both sides and emits the change of the output multiplicity f(left, right).
"""

from __future__ import annotations

from dsms.batch import Batch, from_rows
from dsms.operators.binary import BinaryOperator
from dsms.queues import Queue
from synopses.base import deep_bytes
from synopses.state import StateSynopsis

MULTIPLICITY = {
    ("UNION", True): lambda a, b: a + b,
    ("UNION", False): lambda a, b: 1 if a + b > 0 else 0,
    ("EXCEPT", True): lambda a, b: max(0, a - b),
    ("EXCEPT", False): lambda a, b: 1 if a > 0 and b == 0 else 0,
    ("INTERSECT", True): lambda a, b: min(a, b),
    ("INTERSECT", False): lambda a, b: 1 if a > 0 and b > 0 else 0,
}


class SetOpOp(BinaryOperator):
    kind = "set_op"

    def __init__(self, op: str, all_: bool, left: Queue, right: Queue, out: Queue, dtypes: list) -> None:
        super().__init__([left, right], out, f"{op}{' ALL' if all_ else ''}")
        self.f = MULTIPLICITY[(op, all_)]
        self.passthrough = op == "UNION" and all_
        self.counts: dict[tuple, list[int]] = {}
        self.dtypes = dtypes
        self.synopses = [StateSynopsis("row counts", lambda: len(self.counts),
                                       lambda: deep_bytes(self.counts))]

    @property
    def size(self) -> int:
        return len(self.counts)

    def apply_run(self, side: int, batch: Batch) -> None:
        if self.passthrough:
            self.emit(batch)
            return
        f, counts = self.f, self.counts
        out_ts, out_sign, out_rows = [], [], []
        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
            c = counts.get(row)
            if c is None:
                c = counts[row] = [0, 0]
            old = f(c[0], c[1])
            c[side] += s
            new = f(c[0], c[1])
            if c[0] == 0 and c[1] == 0:
                del counts[row]
            d = new - old
            for _ in range(abs(d)):
                out_ts.append(t)
                out_sign.append(1 if d > 0 else -1)
                out_rows.append(row)
        if out_rows:
            self.emit(from_rows(out_ts, out_sign, out_rows, self.dtypes))
