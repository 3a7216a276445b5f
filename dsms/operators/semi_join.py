"""Semi-join (⋉) and anti-join (▷): left rows that have, or have no, matching right row.

Source: digest-002a section 3.3 (Q4 resolved by a semi-join, Q6's ``>= ALL`` by an anti-join) and 3.6. The
left rows are kept with their multiplicity; for each distinct left row the operator keeps how many right rows
match it, and emits the row when that count crosses zero. Equality columns hash; other predicates scan.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, from_rows
from dsms.expr.compile import CompiledExpr
from dsms.operators.binary import BinaryOperator
from dsms.queues import Queue
from synopses.base import deep_bytes
from synopses.state import StateSynopsis


class SemiJoinOp(BinaryOperator):
    kind = "semi_join"

    def __init__(self, left: Queue, right: Queue, out: Queue, left_keys, right_keys,
                 predicate: CompiledExpr | None, anti: bool, left_dtypes: list, right_dtypes: list) -> None:
        label = ("anti" if anti else "semi") + (f" on {predicate.text}" if predicate is not None else "")
        super().__init__([left, right], out, label)
        self.keys = (tuple(left_keys), tuple(right_keys))
        self.predicate = predicate
        self.anti = anti
        self.dtypes = (left_dtypes, right_dtypes)
        self.left: dict[tuple, dict[tuple, list[int]]] = {}    # key -> row -> [multiplicity, matches]
        self.right: dict[tuple, dict[tuple, int]] = {}         # key -> row -> multiplicity
        self.synopses = [
            StateSynopsis("left rows", lambda: sum(len(d) for d in self.left.values()),
                          lambda: deep_bytes(self.left)),
            StateSynopsis("right rows", lambda: sum(len(d) for d in self.right.values()),
                          lambda: deep_bytes(self.right)),
        ]

    def _matches(self, lrow: tuple, rrows: dict[tuple, int]) -> int:
        if not rrows:
            return 0
        if self.predicate is None:
            return sum(rrows.values())
        items = list(rrows.items())
        pairs = [lrow + r for r, _ in items]
        b = from_rows([0] * len(pairs), [1] * len(pairs), pairs, self.dtypes[0] + self.dtypes[1])
        mask = self.predicate({f"${i}": c for i, c in enumerate(b.cols)}, len(b))
        return int(sum(m for (_, m), ok in zip(items, mask.tolist()) if ok))

    def _visible(self, matches: int) -> bool:
        return (matches == 0) if self.anti else (matches > 0)

    def apply_run(self, side: int, batch: Batch) -> None:
        out_ts, out_sign, out_rows = [], [], []
        lk, rk = self.keys
        if side == 0:
            for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
                k = tuple(row[c] for c in lk)
                d = self.left.setdefault(k, {})
                ent = d.get(row)
                if ent is None:
                    ent = d[row] = [0, self._matches(row, self.right.get(k, {}))]
                ent[0] += s
                if self._visible(ent[1]):
                    out_ts.append(t)
                    out_sign.append(s)
                    out_rows.append(row)
                if ent[0] == 0:
                    del d[row]
                    if not d:
                        del self.left[k]
        else:
            for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
                k = tuple(row[c] for c in rk)
                if any(v != v for v in k):
                    continue                 # a NaN key equals nothing (= is IEEE 754), not even a NaN key
                rd = self.right.setdefault(k, {})
                c = rd.get(row, 0) + s
                if c:
                    rd[row] = c
                else:
                    del rd[row]
                    if not rd:
                        del self.right[k]
                lefts = self.left.get(k)
                if not lefts:
                    continue
                if self.predicate is None:
                    hits = list(lefts.items())
                else:
                    lrows = list(lefts.keys())
                    pairs = [lr + row for lr in lrows]
                    b = from_rows([0] * len(pairs), [1] * len(pairs), pairs, self.dtypes[0] + self.dtypes[1])
                    mask = self.predicate({f"${i}": c for i, c in enumerate(b.cols)}, len(b))
                    hits = [(lr, lefts[lr]) for lr, ok in zip(lrows, mask.tolist()) if ok]
                for lrow, ent in hits:
                    before = self._visible(ent[1])
                    ent[1] += s
                    after = self._visible(ent[1])
                    if before != after:
                        for _ in range(ent[0]):
                            out_ts.append(t)
                            out_sign.append(1 if after else -1)
                            out_rows.append(lrow)
        if out_rows:
            self.emit(from_rows(out_ts, out_sign, out_rows, self.dtypes[0]))


__all__ = ["SemiJoinOp", "np"]
