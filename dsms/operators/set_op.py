"""UNION, EXCEPT and INTERSECT over relations, with set (distinct) and bag (ALL) semantics.

Source: SPEC section 3 (SQL semantics: the set forms remove duplicates); digest-003 section 3.14-3.15
(windowed union and difference, where expiry on the right can revive a row). The operator keeps each row's
multiplicity on both sides and emits the change of the output multiplicity f(left, right). ``SetOpOp`` does
it for a whole release of both inputs at once with numpy (``distinct.RowCounts``); the row-at-a-time form it
is measured against lives in bench/row_at_a_time.py.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat
from dsms.operators.binary import BinaryOperator
from dsms.operators.distinct import RowCounts, emit_changes
from dsms.operators.row_state_kind import RowStateKind
from dsms.queues import Queue

# the output multiplicity f(left, right) of each operation, over int64 arrays of counts
VECTOR_MULTIPLICITY = {
    ("UNION", True): lambda a, b: a + b,
    ("UNION", False): lambda a, b: (a + b > 0).astype(np.int64),
    ("EXCEPT", True): lambda a, b: np.maximum(a - b, 0),
    ("EXCEPT", False): lambda a, b: ((a > 0) & (b == 0)).astype(np.int64),
    ("INTERSECT", True): np.minimum,
    ("INTERSECT", False): lambda a, b: ((a > 0) & (b > 0)).astype(np.int64),
}


class SetOpOp(RowStateKind, BinaryOperator):
    # every release of deltas from both inputs is merged into the order the binary base would apply them in
    # (timestamp, left before right at equal timestamps, arrival order within a side) and folded into the
    # per-row counts in one pass: the output is the same sequence of changes as applying them one by one
    kind = "set_op"

    def __init__(self, op: str, all_: bool, left: Queue, right: Queue, out: Queue, dtypes: list,
                 insert_only: bool = False) -> None:
        super().__init__([left, right], out, f"{op}{' ALL' if all_ else ''}")
        self.f = VECTOR_MULTIPLICITY[(op, all_)]
        self.passthrough = op == "UNION" and all_
        self.table = RowCounts(dtypes, 2)
        self.dtypes = dtypes
        self.synopses = [self.init_row_state("row counts", 2, insert_only, lambda: RowCounts(dtypes, 2))]

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
        emit_changes(self, b, self.counted_changes(b, [left, sign - left], self.f))

    def apply_run(self, side: int, batch: Batch) -> None:
        self.process([(side, batch)])
