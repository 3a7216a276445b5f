"""Join (⋈) of two relations given as delta streams: a symmetric hash join, vectorised per run of deltas.

Source: digest-004 R-PLAN-06 (one synopsis per input, hashed on the join key) and P-14 (deletes retract
results); digest-002a section 2.15 (the positive/negative approach): Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR.

The binary base hands over runs of deltas from one side at a time, in timestamp order. A run only probes the
other side's state, which does not change during the run, so the whole run is joined at once: each side's
state is a table of signed rows kept sorted by key code, the run's keys are located with a binary search, and
the matching pairs are gathered with index arithmetic. A stored delete simply joins with the opposite sign,
so the table may hold a row and its delete until it is compacted (netted) once deletes make up half of it.
Equi-join columns are the key; any other predicate filters the joined rows.
"""

from __future__ import annotations

import numpy as np

from control_tables import Stat
from dsms.batch import Batch, concat
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import colmap
from dsms.operators.binary import BinaryOperator
from dsms.operators.rowcodes import row_codes, segments
from dsms.queues import Queue


class _Side:
    """One input's state: signed rows sorted by key code."""

    __slots__ = ("rows", "codes", "negatives")

    def __init__(self) -> None:
        self.rows: Batch | None = None
        self.codes = np.empty(0, dtype=np.int64)
        self.negatives = 0

    def __len__(self) -> int:
        return len(self.codes)


class JoinOp(BinaryOperator):
    kind = "join"
    state_rows = Stat(int, compute="_state_rows", name="state_rows", unit="rows",
                      doc="rows held in the two hash synopses (including deletes not yet netted)")

    def __init__(self, left: Queue, right: Queue, out: Queue, left_keys: tuple[int, ...],
                 right_keys: tuple[int, ...], predicate: CompiledExpr | None, dtypes: list) -> None:
        label = " AND ".join(f"L${a} = R${b}" for a, b in zip(left_keys, right_keys))
        if predicate is not None:
            label = (label + " AND " if label else "") + predicate.text
        super().__init__([left, right], out, label or "cross product")
        self.keys = (tuple(left_keys), tuple(right_keys))
        self.predicate = predicate
        self.dtypes = dtypes
        self.sides = (_Side(), _Side())
        self.key_ids: dict[tuple, int] = {}
        self.int_keys = False

    def _state_rows(self) -> int:
        return len(self.sides[0]) + len(self.sides[1])

    @property
    def size(self) -> int:
        return self._state_rows()

    def _codes(self, side: int, batch: Batch) -> np.ndarray:
        """An int64 per row, equal for equal join keys across both sides."""
        keys = self.keys[side]
        n = len(batch)
        if not keys:
            return np.zeros(n, dtype=np.int64)
        cols = [batch.cols[k] for k in keys]
        if len(cols) == 1 and cols[0].dtype.kind in "iu":
            return cols[0].astype(np.int64, copy=False)
        codes = row_codes(cols)
        if codes is None:
            tuples = list(zip(*[c.tolist() for c in cols]))
            return np.fromiter((self.key_ids.setdefault(t, len(self.key_ids)) for t in tuples),
                               dtype=np.int64, count=n)
        uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
        ukeys = zip(*[c[first].tolist() for c in cols])
        ids = np.fromiter((self.key_ids.setdefault(t, len(self.key_ids)) for t in ukeys), dtype=np.int64,
                          count=len(uniq))
        return ids[inv.reshape(-1)]

    def apply_run(self, side: int, batch: Batch) -> None:
        codes = self._codes(side, batch)
        other = self.sides[1 - side]
        if len(other):
            lo = np.searchsorted(other.codes, codes, side="left")
            hi = np.searchsorted(other.codes, codes, side="right")
            cnt = hi - lo
            total = int(cnt.sum())
            if total:
                probe = np.repeat(np.arange(len(batch)), cnt)
                starts = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
                match = np.arange(total) + starts
                mine = batch.take(probe)
                theirs = other.rows.take(match)
                cols = mine.cols + theirs.cols if side == 0 else theirs.cols + mine.cols
                out = Batch(mine.ts, (mine.sign * theirs.sign).astype(np.int8), cols)
                if self.predicate is not None:
                    out = out.take(self.predicate(colmap(out), len(out)))
                self.emit(out)
        self._store(side, batch, codes)

    def _store(self, side: int, batch: Batch, codes: np.ndarray) -> None:
        st = self.sides[side]
        st.negatives += int((batch.sign < 0).sum())
        if st.rows is None or not len(st):
            order = np.argsort(codes, kind="stable")
            st.rows, st.codes = batch.take(order), codes[order]
        else:
            rows = concat([st.rows, batch])
            allc = np.concatenate([st.codes, codes])
            order = np.argsort(allc, kind="stable")
            st.rows, st.codes = rows.take(order), allc[order]
        if st.negatives * 2 > len(st):
            self._compact(st)

    @staticmethod
    def _compact(st: _Side) -> None:
        """Net each distinct row's inserts and deletes, keeping rows with a positive count."""
        rows = st.rows
        code = row_codes(rows.cols)
        if code is None:
            return
        zeros = np.zeros(len(rows), dtype=np.int64)
        order, starts, _ = segments(zeros, code)
        net = np.add.reduceat(rows.sign[order].astype(np.int64), starts) if len(starts) else starts
        first = order[starts]
        keep = net > 0
        idx = np.repeat(first[keep], net[keep])
        kept_codes = st.codes[idx]
        o = np.argsort(kept_codes, kind="stable")
        st.rows = rows.take(idx[o])
        st.rows.sign = np.ones(len(o), dtype=np.int8)
        st.codes = kept_codes[o]
        st.negatives = 0
