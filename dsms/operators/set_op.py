"""UNION, EXCEPT and INTERSECT over relations, with set (distinct) and bag (ALL) semantics.

Source: SPEC section 3 (SQL semantics: the set forms remove duplicates); digest-003 section 3.14-3.15
(windowed union and difference, where expiry on the right can revive a row). The operator keeps each row's
multiplicity on both sides and emits the change of the output multiplicity f(left, right). ``SetOpOp`` does
it for a whole release of both inputs at once with numpy (``distinct.RowCounts``); ``SetOpRowOp`` is the
row-at-a-time form, kept as the benchmark's baseline.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat, from_rows
from dsms.operators.binary import BinaryOperator
from dsms.operators.distinct import RowCounts, emit_changes
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

# the same functions over int64 arrays of counts
VECTOR_MULTIPLICITY = {
    ("UNION", True): lambda a, b: a + b,
    ("UNION", False): lambda a, b: (a + b > 0).astype(np.int64),
    ("EXCEPT", True): lambda a, b: np.maximum(a - b, 0),
    ("EXCEPT", False): lambda a, b: ((a > 0) & (b == 0)).astype(np.int64),
    ("INTERSECT", True): np.minimum,
    ("INTERSECT", False): lambda a, b: ((a > 0) & (b > 0)).astype(np.int64),
}


class SetOpOp(BinaryOperator):
    # every release of deltas from both inputs is merged into the order the binary base would apply them in
    # (timestamp, left before right at equal timestamps, arrival order within a side) and folded into the
    # per-row counts in one pass: the output is the same sequence of changes as applying them one by one
    kind = "set_op"

    def __init__(self, op: str, all_: bool, left: Queue, right: Queue, out: Queue, dtypes: list) -> None:
        super().__init__([left, right], out, f"{op}{' ALL' if all_ else ''}")
        self.f = VECTOR_MULTIPLICITY[(op, all_)]
        self.passthrough = op == "UNION" and all_
        self.table = RowCounts(dtypes, 2)
        self.dtypes = dtypes
        self.synopses = [StateSynopsis("row counts", lambda: self.table.live, self.table.nbytes)]

    @property
    def size(self) -> int:
        return self.table.live

    def process(self, parts: list[tuple[int, Batch]]) -> None:
        if len(parts) == 1:
            side, b = parts[0]
            sides = np.full(len(b), side, dtype=np.int8)
        else:
            (_, b0), (_, b1) = parts                    # left, right: each in time order
            n0, n1 = len(b0), len(b1)
            # merged position of each row: left rows go before right rows of the same instant
            order = np.empty(n0 + n1, dtype=np.int64)
            order[np.arange(n0) + np.searchsorted(b1.ts, b0.ts, side="left")] = np.arange(n0)
            order[np.arange(n1) + np.searchsorted(b0.ts, b1.ts, side="right")] = np.arange(n0, n0 + n1)
            b = concat([b0, b1]).take(order)
            sides = (order >= n0).astype(np.int8)
        if not len(b):
            return
        if self.passthrough:
            self.emit(b)
            return
        sign = b.sign.astype(np.int64)
        left = np.where(sides == 0, sign, 0)
        emit_changes(self, b, self.table.changes(b.cols, [left, sign - left], self.f))

    def apply_run(self, side: int, batch: Batch) -> None:
        self.process([(side, batch)])


class SetOpRowOp(BinaryOperator):
    """The set operations one row at a time with a dict of row tuples -> [left, right] counts (the baseline
    ``SetOpOp`` is measured against in bench/operators.py)."""

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
