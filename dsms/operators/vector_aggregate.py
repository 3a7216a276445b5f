"""Grouped COUNT, SUM and AVG maintained with numpy: the vectorised form of ``AggregateOp``.

Source: as ``aggregate.py`` (digest-003 section 3.9; digest-002a section 3.11). Used when every aggregate is
COUNT, SUM or AVG without DISTINCT, whose state is a running sum per group, so that a whole batch of deltas
folds into the state with cumulative sums instead of a Python loop. Groups get dense ids; a batch is sorted by
(group, timestamp), the running count and sums give each group's value after every instant, and each touched
(instant, group) emits its old row as a delete and its new row as an insert. A group whose count reaches zero
disappears and its sums are reset to exactly zero, so no rounding residue outlives it.
"""

from __future__ import annotations

import numpy as np

from control_tables import Stat
from dsms.batch import Batch
from dsms.operators.base import FinalInstantsOperator
from dsms.queues import Queue
from synopses.base import array_bytes, deep_bytes
from synopses.rowcodes import row_codes
from synopses.state import StateSynopsis

VECTOR_FUNCS = ("COUNT", "SUM", "AVG")
LUT_SPAN = 1 << 16          # integer group keys spanning at most this many values get a direct lookup table


def vectorisable(aggs) -> bool:
    return all(f in VECTOR_FUNCS and not d for f, _, d in aggs)


class VectorAggregateOp(FinalInstantsOperator):
    kind = "aggregate"
    groups_live = Stat(int, compute="_groups_live", name="groups", doc="groups with at least one row")

    def __init__(self, group: tuple[int, ...], aggs: tuple, arg_types: list[str], inp: Queue, out: Queue,
                 dtypes: list) -> None:
        label = ", ".join(f"{f}({'*' if a is None else f'${a}'})" for f, a, _ in aggs)
        if group:
            label = f"GROUP BY {', '.join(f'${g}' for g in group)}: " + label
        super().__init__([inp], out, label + " [vectorised]")
        self.group = group
        self.aggs = aggs
        self.dtypes = dtypes
        # distinct argument columns that need a running sum
        self.sum_cols = sorted({a for f, a, _ in aggs if f in ("SUM", "AVG")})
        self.sum_float = {a: arg_types[j] == "FLOAT" for j, (f, a, _) in enumerate(aggs) if a in self.sum_cols}
        self.gid_of: dict[tuple, int] = {}
        self._int_table = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        self._lut: tuple[np.ndarray, int] = (np.empty(0, dtype=np.int64), 0)   # key - lo -> group id, or -1
        self.key_cols: list[np.ndarray] = [np.empty(0, dtype=dtypes[i]) for i in range(len(group))]
        self.count = np.zeros(0, dtype=np.int64)
        self.sums = {a: np.zeros(0, dtype=np.float64 if self.sum_float[a] else np.int64) for a in self.sum_cols}
        self.synopses = [StateSynopsis("group table", self._groups_live, self._state_bytes)]

    def _state_bytes(self) -> int:
        return (deep_bytes(self.gid_of) + sum(array_bytes(k) for k in self.key_cols) + self.count.nbytes
                + sum(a.nbytes for a in self.sums.values()) + sum(t.nbytes for t in self._int_table)
                + self._lut[0].nbytes
                + sum(b.nbytes for b in self.held))

    def _groups_live(self) -> int:
        return int((self.count > 0).sum())


    def _gids(self, batch: Batch) -> np.ndarray:
        """Dense group id per row; new groups are appended to the state arrays."""
        n = len(batch)
        if not self.group:
            if not self.gid_of:
                self._add_groups([()])
            return np.zeros(n, dtype=np.int64)
        kcols = [batch.cols[g] for g in self.group]
        if len(kcols) == 1 and kcols[0].dtype.kind in "iu":
            return self._int_gids(kcols[0])
        code = row_codes(kcols)
        if code is None:
            keys = list(zip(*[c.tolist() for c in kcols]))
            uniq_keys = list(dict.fromkeys(keys))
            missing = [k for k in uniq_keys if k not in self.gid_of]
            if missing:
                self._add_groups(missing)
            return np.fromiter((self.gid_of[k] for k in keys), dtype=np.int64, count=n)
        uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
        ukeys = list(zip(*[c[first].tolist() for c in kcols]))
        missing = [k for k in ukeys if k not in self.gid_of]
        if missing:
            self._add_groups(missing)
        gid_u = np.fromiter((self.gid_of[k] for k in ukeys), dtype=np.int64, count=len(ukeys))
        return gid_u[inv.reshape(-1)]

    def _int_gids(self, keys: np.ndarray) -> np.ndarray:
        """Group ids for one integer key column: a direct lookup table while the known keys span a small
        range, else a binary search in a sorted key table (no Python per row either way)."""
        lut, lo = self._lut
        if len(lut) and len(keys):
            kmin, kmax = int(keys.min()), int(keys.max())
            if kmin >= lo and kmax < lo + len(lut):
                gids = lut[keys - lo]
                if gids.min() >= 0:
                    return gids
        uniq, inv = np.unique(keys, return_inverse=True)
        table, gids = self._int_table
        pos = np.searchsorted(table, uniq)
        found = (pos < len(table)) & (table[np.minimum(pos, len(table) - 1)] == uniq) if len(table) else \
            np.zeros(len(uniq), dtype=bool)
        if not found.all():
            self._add_groups([(k,) for k in uniq[~found].tolist()])
            allk = self.key_cols[0]
            o = np.argsort(allk, kind="stable")
            self._int_table = (allk[o], o.astype(np.int64))
            table, gids = self._int_table
            pos = np.searchsorted(table, uniq)
            span = int(table[-1]) - int(table[0]) + 1
            if span <= max(LUT_SPAN, 4 * len(table)):
                lut = np.full(span, -1, dtype=np.int64)
                lut[table - table[0]] = gids
                self._lut = (lut, int(table[0]))
        return gids[pos][inv.reshape(-1)]

    def _add_groups(self, keys: list[tuple]) -> None:
        start = len(self.count)
        for i, k in enumerate(keys):
            self.gid_of[k] = start + i
        m = len(keys)
        for j in range(len(self.group)):
            col = np.empty(m, dtype=self.dtypes[j])
            col[:] = [k[j] for k in keys]
            self.key_cols[j] = np.concatenate([self.key_cols[j], col])
        self.count = np.concatenate([self.count, np.zeros(m, dtype=np.int64)])
        for a in self.sum_cols:
            self.sums[a] = np.concatenate([self.sums[a], np.zeros(m, dtype=self.sums[a].dtype)])

    def process(self, batch: Batch) -> None:
        n = len(batch)
        gid = self._gids(batch)
        # by group, time order (and arrival order) kept within; small ids sort by radix as int16
        order = _stable_order(gid)
        g_s = gid[order]
        t_s = batch.ts[order]
        sign = batch.sign[order].astype(np.int64)
        # segment = run of one (group, instant); values are taken at segment ends
        seg_end = np.ones(n, dtype=bool)
        seg_end[:-1] = (g_s[1:] != g_s[:-1]) | (t_s[1:] != t_s[:-1])
        ends = np.nonzero(seg_end)[0]
        grp_start = np.ones(n, dtype=bool)
        grp_start[1:] = g_s[1:] != g_s[:-1]
        starts_idx = np.nonzero(grp_start)[0]
        # running count after each row, per group
        run_cnt = self._running(sign, grp_start, starts_idx, self.count[g_s])
        run_sum = {}
        for a in self.sum_cols:
            v = batch.cols[a][order]
            vals = (sign * v) if not self.sum_float[a] else sign.astype(np.float64) * v
            run_sum[a] = self._running(vals, grp_start, starts_idx, self.sums[a][g_s])
        seg_g = g_s[ends]
        seg_t = t_s[ends]
        new_cnt = run_cnt[ends]
        # the value before each segment: the previous segment of the same group, else the stored state
        first_of_group = np.ones(len(ends), dtype=bool)
        first_of_group[1:] = seg_g[1:] != seg_g[:-1]
        prev = np.concatenate([[0], ends[:-1]])
        old_cnt = np.where(first_of_group, self.count[seg_g], run_cnt[prev])
        new_vals, old_vals = [], []
        for f, a, _ in self.aggs:
            if f == "COUNT":
                nv, ov = new_cnt, old_cnt
            else:
                ns = run_sum[a][ends]
                os_ = np.where(first_of_group, self.sums[a][seg_g], run_sum[a][prev])
                ns = np.where(new_cnt > 0, ns, 0)            # an emptied group leaves no residue
                os_ = np.where(old_cnt > 0, os_, 0)
                if f == "AVG":
                    with np.errstate(invalid="ignore", divide="ignore"):
                        nv = np.where(new_cnt > 0, ns / np.maximum(new_cnt, 1), 0.0)
                        ov = np.where(old_cnt > 0, os_ / np.maximum(old_cnt, 1), 0.0)
                else:
                    nv, ov = ns, os_
            new_vals.append(nv)
            old_vals.append(ov)
        # store the final state of each touched group
        last_of_group = np.ones(len(ends), dtype=bool)
        last_of_group[:-1] = seg_g[1:] != seg_g[:-1]
        fg = seg_g[last_of_group]
        self.count[fg] = new_cnt[last_of_group]
        for a in self.sum_cols:
            fin = run_sum[a][ends][last_of_group]
            self.sums[a][fg] = np.where(self.count[fg] > 0, fin, 0)
        # emit: -old where the group existed and changed, +new where it exists and changed
        changed = (old_cnt > 0) != (new_cnt > 0)
        for nv, ov in zip(new_vals, old_vals):
            changed |= nv != ov
        dele = changed & (old_cnt > 0)
        ins = changed & (new_cnt > 0)
        if not (dele.any() or ins.any()):
            return
        # segments are in (group, instant) order; a stable sort by instant gives (instant, group) order,
        # and each segment emits its delete before its insert
        o = _stable_order(seg_t)
        d_o, i_o = dele[o], ins[o]
        cnt = d_o.astype(np.int64) + i_o
        seg = np.repeat(o, cnt)
        sgn = np.ones(len(seg), dtype=np.int8)
        sgn[(np.cumsum(cnt) - cnt)[d_o]] = -1
        is_del = sgn < 0
        cols = [kc[seg_g[seg]] for kc in self.key_cols]
        for j, (nv, ov) in enumerate(zip(new_vals, old_vals)):
            v = np.where(is_del, ov[seg], nv[seg]).astype(self.dtypes[len(self.group) + j], copy=False)
            cols.append(v)
        self.emit(Batch(seg_t[seg].astype(np.int64), sgn, cols))

    @staticmethod
    def _running(vals: np.ndarray, grp_start: np.ndarray, starts_idx: np.ndarray, base: np.ndarray):
        """Per-group running total after each row (rows sorted by group), starting from ``base``.

        Integers use one cumulative sum. Floats are summed in each group's own order, as a sequential loop
        would (a padded group x position matrix), so that one group's large values never cost another group
        precision; when a few groups hold most rows the padding would be large, and one extended-precision
        cumulative sum is used instead.
        """
        group_no = np.cumsum(grp_start) - 1
        if vals.dtype.kind != "f":
            cs = np.cumsum(vals)
            before = cs[starts_idx] - vals[starts_idx]
            return cs - before[group_no] + base
        n = len(vals)
        pos = np.arange(n) - starts_idx[group_no]
        m = int(pos.max()) + 1 if n else 0
        g = len(starts_idx)
        if g * (m + 1) <= 8 * n + 64:
            mat = np.zeros((g, m + 1), dtype=np.float64)
            mat[:, 0] = base[starts_idx]
            mat[group_no, pos + 1] = vals
            return np.cumsum(mat, axis=1)[group_no, pos + 1]
        ext = vals.astype(np.longdouble)
        cs = np.cumsum(ext)
        before = cs[starts_idx] - ext[starts_idx]
        return (cs - before[group_no] + base.astype(np.longdouble)).astype(np.float64)


def _stable_order(v: np.ndarray) -> np.ndarray:
    """``argsort(v, kind="stable")`` for integers, by radix sort (as int16) when their span allows."""
    if len(v) and int(v.max()) - int(v.min()) < 2**15:
        return np.argsort((v - v.min()).astype(np.int16), kind="stable")
    return np.argsort(v, kind="stable")
