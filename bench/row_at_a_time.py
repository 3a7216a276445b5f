"""The row-at-a-time duplicate elimination and set operations that bench/operators.py measures the vectorised
``DistinctOp`` and ``SetOpOp`` against, and a planner that builds them.

They apply the definitions literally, one delta at a time with a dict of row tuples -> counts, which is what
the vectorised operators must reproduce exactly (the benchmark stops if the two changelogs differ). They live
here, not in ``dsms/operators``, because nothing but the benchmark runs them: an engine gets them only when the
benchmark gives it a ``RowAtATimePlanner`` (``use_row_at_a_time``), so no production module is patched.
"""

from __future__ import annotations

from dsms.batch import Batch, from_rows
from dsms.engine import Engine
from dsms.operators.base import Operator
from dsms.operators.binary import BinaryOperator
from dsms.plan import logical as L
from dsms.plan.physical import PhysicalPlanner, dtypes_of
from dsms.queues import Queue
from synopses.base import deep_bytes
from synopses.state import StateSynopsis

# the output multiplicity f(left, right) of each set operation, on Python ints
MULTIPLICITY = {
    ("UNION", True): lambda a, b: a + b,
    ("UNION", False): lambda a, b: 1 if a + b > 0 else 0,
    ("EXCEPT", True): lambda a, b: max(0, a - b),
    ("EXCEPT", False): lambda a, b: 1 if a > 0 and b == 0 else 0,
    ("INTERSECT", True): lambda a, b: min(a, b),
    ("INTERSECT", False): lambda a, b: 1 if a > 0 and b > 0 else 0,
}


class DistinctRowOp(Operator):
    """δ one row at a time with a dict of row tuples -> counts."""

    kind = "distinct"

    def __init__(self, inp: Queue, out: Queue, dtypes: list) -> None:
        super().__init__([inp], out)
        self.counts: dict[tuple, int] = {}
        self.dtypes = dtypes
        self.synopses = [StateSynopsis("distinct rows", lambda: len(self.counts),
                                       lambda: deep_bytes(self.counts))]

    @property
    def size(self) -> int:
        return len(self.counts)

    def on_batch(self, i: int, batch: Batch) -> None:
        counts = self.counts
        out_ts, out_sign, out_rows = [], [], []
        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
            old = counts.get(row, 0)
            new = old + s
            if new:
                counts[row] = new
            else:
                del counts[row]
            if old == 0 and new > 0:
                out_ts.append(t)
                out_sign.append(1)
                out_rows.append(row)
            elif old > 0 and new == 0:
                out_ts.append(t)
                out_sign.append(-1)
                out_rows.append(row)
        if out_rows:
            self.emit(from_rows(out_ts, out_sign, out_rows, self.dtypes))


class SetOpRowOp(BinaryOperator):
    """The set operations one row at a time with a dict of row tuples -> [left, right] counts."""

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


class RowAtATimePlanner(PhysicalPlanner):
    """The engine's planner, building ``DistinctRowOp`` and ``SetOpRowOp`` where it would build the vectorised
    operators."""

    def _Distinct(self, node: L.Distinct, qid: str):
        inp = self.build(node.child, qid)
        out = self._new_queue()
        return out, DistinctRowOp(inp, out, dtypes_of(node.types))

    def _SetOp(self, node: L.SetOp, qid: str):
        left = self.build(node.left, qid)
        right = self.build(node.right, qid)
        out = self._new_queue()
        return out, SetOpRowOp(node.op, node.all, left, right, out, dtypes_of(node.types))


def use_row_at_a_time(eng: Engine) -> Engine:
    """Make ``eng`` (fresh: no query registered yet) plan DISTINCT and set operations row at a time."""
    if eng.planner.built:
        raise ValueError("use_row_at_a_time needs an engine with no plan built yet")
    eng.planner = RowAtATimePlanner(eng)
    return eng
