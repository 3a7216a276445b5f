"""The release of a join that the planner proved to be an arg max (or min): a relation that never deletes joined
with its own per-group MAX (MIN) on the group and on the extreme (``dsms/plan/arg_extreme.py``; NEXMark q9's
bids joined with ``Q9M``).

Source: SPEC section 3 (a relation's value at each instant; only an instant's net change is observed). At every
instant the join holds exactly the left rows whose value is their group's extreme over the rows so far, each
with the right's columns, which are copies of its own. From the left's inserts alone (in time order): per group
the extreme of each instant of the release (the largest value among its rows) and the running extreme through
it (the extreme held before the release included). A row enters at its instant when its value is the running
extreme there, and leaves at the group's next instant whose running extreme is higher (strictly: ties stay,
so several rows of one value are all in); the rows held from earlier releases, the group's winners, leave at
the group's first such instant of the release. A row that enters and leaves within the release is emitted
both ways at two instants, never stored. Nothing of the right's changes is read but their frontier: their
rows are the same relation's extreme, which the join knows already.

State: per group slot (``KeySlots``: group values while dense, auction ids; a table otherwise) the extreme so
far, and the winners as rows of a ``HashRows`` (``synopses/hash_multi_index.py``) bucketed by group value; a
few rows per group instead of every row of the left input. Values are compared as int64 (INT, TIMESTAMP: the
planner's condition); MIN is MAX of the values bit-inverted (``~v``: order reversed, no overflow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dsms.batch import Batch
from synopses.hash_multi_index import HashRows
from synopses.key_slots import KeySlots
from synopses.sort_order import stable_argsort

if TYPE_CHECKING:
    from dsms.operators.join import JoinOp
    from dsms.plan.arg_extreme import ArgExtreme


class ArgExtremeRelease:
    """The state and release of a ``JoinOp`` that computes an arg max (min): see the module."""

    def __init__(self, spec: ArgExtreme) -> None:
        self.spec = spec
        self.slots = KeySlots()
        self.best = np.zeros(64, dtype=np.int64)      # per slot: the extreme so far (bit-inverted for MIN)
        self.has = np.zeros(64, dtype=bool)           # ... whether the group has any row yet
        self.winners = HashRows()                     # the rows at their group's extreme now
        self.slots.rows = lambda: self.winners.index.n

    def nbytes(self) -> int:
        return self.best.nbytes + self.has.nbytes + self.winners.nbytes()

    def __len__(self) -> int:
        return self.winners.n_live

    def _grow(self, n: int) -> None:
        if n > len(self.best):
            cap = max(n, 2 * len(self.best))
            best, has = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=bool)
            best[:len(self.best)], has[:len(self.has)] = self.best, self.has
            self.best, self.has = best, has

    def apply(self, op: JoinOp, parts: dict) -> None:
        """Emit the change of the arg-extreme rows that the left's released inserts make (the right's are not
        read), and keep the winners."""
        b = parts.get(0)
        if b is None or not len(b):
            return
        if type(b) is tuple or (b.sign < 0).any():
            raise RuntimeError(f"{op.id}: the left input of an arg-extreme join deleted a row; the planner "
                               "chose this form because it never deletes")
        spec = self.spec
        g = b.cols[spec.group].astype(np.int64, copy=False)
        v = b.cols[spec.value].astype(np.int64, copy=False)
        if spec.fn == "MIN":
            v = ~v
        s = self.slots.of(g)
        self._grow(self.slots.n)
        o = stable_argsort(s)                     # by slot, in time order within one (the batch's order)
        ss, tt, vv = s[o], b.ts[o], v[o]
        n = len(o)
        brk = np.ones(n, dtype=bool)
        brk[1:] = (ss[1:] != ss[:-1]) | (tt[1:] != tt[:-1])
        starts = np.flatnonzero(brk)              # the instants of each slot
        m = len(starts)
        inst = np.cumsum(brk) - 1                 # each row's instant
        i_slot, i_ts = ss[starts], tt[starts]
        i_max = np.maximum.reduceat(vv, starts)
        first = np.ones(m, dtype=bool)            # a slot's first instant
        first[1:] = i_slot[1:] != i_slot[:-1]
        seg = np.cumsum(first) - 1                # each instant's slot segment
        f = np.flatnonzero(first)
        had = self.has[i_slot[f]]
        old = self.best[i_slot[f]]
        # values as dense ranks (0: nothing held), so a running maximum per slot is one accumulate over keys
        uniq, inv = np.unique(np.concatenate([i_max, old[had]]), return_inverse=True)
        inv = inv.reshape(-1) + 1
        r_inst = inv[:m]
        r_old = np.zeros(len(f), dtype=np.int64)
        r_old[had] = inv[m:]
        width = len(uniq) + 1
        base = seg * width
        run = np.maximum.accumulate(base + np.maximum(r_inst, r_old[seg])) - base
        prev = np.empty(m, dtype=np.int64)
        prev[f] = r_old
        later = np.flatnonzero(~first)
        prev[later] = run[later - 1]
        rises = run > prev                        # the running extreme goes up at this instant
        # per instant, the next instant of its slot where it rises (m: none)
        key = seg * (m + 1) + np.where(rises, np.arange(m), m)
        suffix = np.minimum.accumulate(key[::-1])[::-1]
        nxt = np.full(m, m, dtype=np.int64)
        nxt[:-1] = suffix[1:] - seg[:-1] * (m + 1)
        nxt[nxt > m] = m
        # rows at their instant's running extreme enter; they leave at the next rise, or stay
        run_val = uniq[run - 1]                   # every instant has a row: run >= 1
        win = np.flatnonzero(vv == run_val[inst])
        leave = nxt[inst[win]]
        gone = leave < m
        stay = win[~gone]
        # the winners held before leave at their slot's first rise
        first_rise = np.where(rises[f], f, nxt[f])
        out_old = np.flatnonzero(had & (first_rise < m))
        # commit the extremes
        last = np.append(f[1:] - 1, m - 1)
        self.best[i_slot[f]] = run_val[last]
        self.has[i_slot[f]] = True
        left_cols = b.cols
        width_l = len(left_cols)
        parts_ts, parts_sign, parts_cols = [], [], []
        if len(out_old):
            gv = g[o][starts[f[out_old]]]
            p, cols = self.winners.pop(gv, gv)
            if len(p):
                parts_ts.append(i_ts[first_rise[out_old]][p])
                parts_sign.append(np.full(len(p), -1, dtype=np.int8))
                parts_cols.append(cols)
        if len(win):
            rows = o[win]
            cols = [c[rows] for c in left_cols]
            parts_ts.append(tt[win])
            parts_sign.append(np.ones(len(win), dtype=np.int8))
            parts_cols.append(cols)
            if gone.any():
                k = np.flatnonzero(gone)
                parts_ts.append(i_ts[leave[k]])
                parts_sign.append(np.full(len(k), -1, dtype=np.int8))
                parts_cols.append([c[k] for c in cols])
            if len(stay):
                kept = [c[o[stay]] for c in left_cols]
                gs = g[o[stay]]
                self.winners.add(kept, gs, gs)
        if not parts_ts:
            return
        ts = np.concatenate(parts_ts)
        sign = np.concatenate(parts_sign)
        cols = [np.concatenate([pc[j] for pc in parts_cols]) for j in range(width_l)]
        order = np.lexsort((sign > 0, ts))          # in time order, deletes first within an instant
        cols = [c[order] for c in cols]
        cols += [cols[j] for j in spec.right_from]
        op.emit(Batch(ts[order], sign[order], cols))
