"""The aggregate that the planner proved to be a lexicographic extreme (``dsms/plan/lex_extreme.py``): per group
of a relation that never deletes, a column of the rows at the group's extreme of a first value, ties broken by
the second's extreme (NEXMark q9's ``Q9T``: per auction, the earliest bidtime among its bids at the highest
price, ``MIN(bidtime)`` over the arg max of price).

Source: SPEC section 3 (a relation's value at each instant; an aggregate's output changes by a delete of the
group's old row and an insert of its new one, net per instant). At every instant the aggregate is, per group
with rows, the second value of the lexicographic extreme of (first value, second value) over the group's rows
so far: the rows at the first value's extreme are exactly the arg max below the aggregate, and the aggregate
of the second value over them is the second value of the pair's extreme. The pair's running extreme only ever
rises (the input never deletes), so an instant changes a group's row exactly when it raises the running pair
and the second value differs from the one before; the first value alone rising with an equal second value is
no change of the row (output net per instant, as ``FinalInstantsOperator`` promises the sink above).

State: per group slot (``KeySlots``) the running pair, two int64 each (MIN bit-inverted to MAX, ``~v``); the
pairs of one release are coded as one int64 each by ``_lex_ranks`` (``dsms/operators/arg_extreme.py``).
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from dsms.operators.arg_extreme import _grown, _lex_ranks, running_extreme, slot_instants, time_order
from dsms.operators.base import FinalInstantsOperator
from dsms.queues import Queue
from synopses.key_slots import KeySlots
from synopses.sort_order import stable_argsort
from synopses.state import StateSynopsis


class LexExtremeAggregateOp(FinalInstantsOperator):
    """GROUP BY ``group``: the second of ``values`` at the group's lexicographic extreme (see the module)."""

    kind = "aggregate"

    def __init__(self, inp: Queue, out: Queue, group: int, values: tuple[tuple[int, str], ...],
                 dtypes: list) -> None:
        by = ", then ".join(f"{fn} ${c}" for c, fn in values)
        super().__init__([inp], out, f"GROUP BY ${group}: ${values[-1][0]} at {by} [from the inserts alone]")
        self.group = group
        self.values = values
        self.dtypes = dtypes
        self.slots = KeySlots()
        self.best = [np.zeros(64, dtype=np.int64) for _ in values]    # per slot: the running pair
        self.has = np.zeros(64, dtype=bool)
        self.slots.rows = self._groups
        self.synopses = [StateSynopsis("group table", self._groups, self._state_bytes)]

    def _groups(self) -> int:
        return int(self.has[:self.slots.n].sum())

    def _state_bytes(self) -> int:
        return sum(a.nbytes for a in self.best) + self.has.nbytes

    def _grow(self, n: int) -> None:
        if n > len(self.has):
            cap = max(n, 2 * len(self.has))
            self.best = [_grown(a, cap, len(a)) for a in self.best]
            self.has = _grown(self.has, cap, len(self.has))

    def process(self, b: Batch) -> None:
        if (b.sign < 0).any():
            raise RuntimeError(f"{self.id}: the input of a lexicographic-extreme aggregate deleted a row; the "
                               "planner chose this form because it never deletes")
        if not (b.ts[1:] >= b.ts[:-1]).all():
            b = b.take(stable_argsort(b.ts))
        g = b.cols[self.group].astype(np.int64, copy=False)
        s = self.slots.of(g)
        self._grow(self.slots.n)
        o, _, _, _, starts, i_slot, i_ts, seg, f = slot_instants(s, b.ts)
        m = len(starts)
        fs = i_slot[f]
        had = self.has[fs]
        vals = []
        for col, fn in self.values:
            v = b.cols[col].astype(np.int64, copy=False)[o]
            vals.append(~v if fn == "MIN" else v)
        code, old, back = _lex_ranks(vals, [a[fs] for a in self.best], had)
        i_max = np.maximum.reduceat(code, starts)
        run, prev, value = running_extreme(i_max, old, had, seg, f)
        k = np.flatnonzero(run > prev)            # the instants that raise their slot's running pair
        new = back(value(run[k]))
        new_c = new[-1]
        was = prev[k] > 0
        old_c = np.zeros(len(k), dtype=np.int64)
        if was.any():
            old_c[was] = back(value(prev[k[was]]))[-1]
        changed = ~was | (old_c != new_c)
        dels = k[was & changed]
        ins = k[changed]
        last = np.append(f[1:] - 1, m - 1)
        for a, t in zip(self.best, back(value(run[last]))):
            a[fs] = t
        self.has[fs] = True
        if not len(ins):
            return
        fn = self.values[-1][1]
        del_c, ins_c = old_c[was & changed], new_c[changed]
        if fn == "MIN":
            del_c, ins_c = ~del_c, ~ins_c
        gk = g[o[starts]]                         # each instant's group value
        ts = np.concatenate([i_ts[dels], i_ts[ins]])
        sign = np.concatenate([np.full(len(dels), -1, dtype=np.int8), np.ones(len(ins), dtype=np.int8)])
        gcol = np.concatenate([gk[dels], gk[ins]])
        ccol = np.concatenate([del_c, ins_c])
        order = time_order(ts, sign)              # in time order, deletes first within an instant
        cols = [gcol[order].astype(self.dtypes[0], copy=False), ccol[order].astype(self.dtypes[1], copy=False)]
        self.emit(Batch(ts[order], sign[order], cols))
