"""Join (⋈) of two relations given as delta streams: symmetric hash join with one hash synopsis per input.

Source: digest-004 R-PLAN-06 (one synopsis per input, a hash table over the window) and P-14 (deletes retract
results); digest-002a section 2.15 (positive/negative approach). A delta on one side joins the current state of
the other side and is then applied to its own side: Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR. Equi-join columns are the hash
key; any other predicate is applied to the joined rows, vectorised.
"""

from __future__ import annotations

from dsms.batch import Batch, from_rows
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import colmap
from dsms.operators.binary import BinaryOperator
from dsms.queues import Queue


class JoinOp(BinaryOperator):
    kind = "join"

    def __init__(self, left: Queue, right: Queue, out: Queue, left_keys: tuple[int, ...],
                 right_keys: tuple[int, ...], predicate: CompiledExpr | None, dtypes: list) -> None:
        label = " AND ".join(f"L${a} = R${b}" for a, b in zip(left_keys, right_keys))
        if predicate is not None:
            label = (label + " AND " if label else "") + predicate.text
        super().__init__([left, right], out, label or "cross product")
        self.keys = (left_keys, right_keys)
        self.predicate = predicate
        self.dtypes = dtypes
        # per side: key -> {row: multiplicity}
        self.state: tuple[dict, dict] = ({}, {})

    @property
    def size(self) -> int:
        return sum(sum(d.values()) for s in self.state for d in s.values())

    def apply_run(self, side: int, batch: Batch) -> None:
        rows = batch.rows()
        keys = self.keys[side]
        mine, other = self.state[side], self.state[1 - side]
        out_ts, out_sign, out_rows = [], [], []
        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), rows):
            k = tuple(row[c] for c in keys)
            matches = other.get(k)
            if matches:
                for orow, m in matches.items():
                    joined = row + orow if side == 0 else orow + row
                    for _ in range(m):
                        out_ts.append(t)
                        out_sign.append(s)
                        out_rows.append(joined)
            d = mine.get(k)
            if d is None:
                d = mine[k] = {}
            c = d.get(row, 0) + s
            if c:
                d[row] = c
            else:
                del d[row]
                if not d:
                    del mine[k]
        if not out_rows:
            return
        out = from_rows(out_ts, out_sign, out_rows, self.dtypes)
        if self.predicate is not None:
            out = out.take(self.predicate(colmap(out), len(out)))
        self.emit(out)
