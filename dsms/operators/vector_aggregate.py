"""Grouped COUNT, SUM, AVG, and MIN/MAX of INT, maintained with numpy: the vectorised form of ``AggregateOp``.

Source: as ``aggregate.py`` (digest-003 section 3.9; digest-002a section 3.11). Used when every aggregate is
COUNT, SUM or AVG without DISTINCT, whose state is a running sum per group, so that a whole batch of deltas
folds into the state with cumulative sums instead of a Python loop, or MIN/MAX of an INT or TIMESTAMP
argument, kept by ``synopses/int_extremes.py`` (a running maximum over value ranks for groups that only grow
in a batch, a recomputation over the group's netted multiset when a delete removes its extreme); without GROUP
BY by ``synopses/fifo_extremes.py`` while deletes retract the oldest rows (a window over a stream), else by
``synopses/int_value_counts.py``. Groups get
dense ids; a batch is sorted by (group, timestamp), the running count and sums give each group's value after
every instant, and each touched (instant, group) emits its old row as a delete and its new row as an insert. A group whose count reaches zero
disappears and its sums are reset to exactly zero, so no rounding residue outlives it.

FLOAT sums are kept exactly, as ``AggregateOp`` keeps them (``synopses/float_sums.py``: a double-double sum
per group while that is provably exact, int64 limbs otherwise, plus counts of +inf, -inf and nan; no Python
object per value). A plain float running sum is not the sum of the window: it turns {1e17, 1.0} minus 1e17
into 0.0, and its last-bit drift makes a value that did not change look changed (a spurious delete and
insert), while SPEC section 3 asks for SUM over the instantaneous relation. SUM is then the correctly rounded
sum of the group.
"""

from __future__ import annotations

import numpy as np

from control_tables import Stat
from dsms.batch import Batch
from dsms.operators import extreme_inserts, sums_by_instant
from dsms.operators.base import FinalInstantsOperator
from dsms.operators.int_sums import fits, report
from dsms.queues import Queue
from synopses.base import array_bytes, deep_bytes
from synopses.fifo_extremes import FifoExtremes
from synopses.float_sums import FloatSums, running
from synopses.group_ids import IntGroupIds, PackedIntGroupIds
from synopses.int_extremes import IntExtremes
from synopses.rowcodes import row_codes
from synopses.sort_order import stable_argsort
from synopses.state import StateSynopsis

VECTOR_FUNCS = ("COUNT", "SUM", "AVG")
EXTREME_FUNCS = ("MIN", "MAX")          # vectorised over INT and TIMESTAMP arguments (synopses/int_extremes.py)


def vectorisable(aggs, arg_types=None) -> bool:
    """Whether every aggregate has a vectorised form: COUNT, SUM, AVG, and MIN/MAX of an INT or TIMESTAMP."""
    return all(not d and (f in VECTOR_FUNCS or (f in EXTREME_FUNCS and arg_types is not None
                                                 and arg_types[j] in ("INT", "TIMESTAMP")))
               for j, (f, _, d) in enumerate(aggs))


class VectorAggregateOp(FinalInstantsOperator):
    kind = "aggregate"
    groups_live = Stat(int, compute="_groups_live", name="groups", doc="groups with at least one row")
    int_overflows = Stat(int, default=0, unit="rows",
                         doc="result rows left out because an INT SUM was outside int64 (an error, never wrapped)")

    def __init__(self, group: tuple[int, ...], aggs: tuple, arg_types: list[str], inp: Queue, out: Queue,
                 dtypes: list, insert_only: bool = False) -> None:
        label = ", ".join(f"{f}({'*' if a is None else f'${a}'})" for f, a, _ in aggs)
        if group:
            label = f"GROUP BY {', '.join(f'${g}' for g in group)}: " + label
        super().__init__([inp], out, label + " [vectorised]")
        self.group = group
        self.aggs = aggs
        self.dtypes = dtypes
        self.overflow_errors: list[str] = []     # for Query.drain to raise (dsms/operators/int_sums.py)
        # distinct argument columns that need a running sum
        self.sum_cols = sorted({a for f, a, _ in aggs if f in ("SUM", "AVG")})
        self.sum_float = {a: arg_types[j] == "FLOAT" for j, (f, a, _) in enumerate(aggs) if a in self.sum_cols}
        self.n = 0                                  # groups with an id: 0 .. n-1 (arrays have capacity beyond)
        # one integer key column: ids from a lookup table while the keys are dense, a hash table otherwise (no
        # Python per key); other keys: a dict of key tuples, looked up once per distinct key of a batch
        int_key = len(group) == 1 and np.dtype(dtypes[0]).kind in "iu"
        self.int_ids = IntGroupIds() if int_key else None
        # several integer key columns: while the keys pack into one int64 (mixed radix over the ranges seen),
        # the packed keys get ids the same way (``_packed_gids``)
        several = len(group) > 1 and all(np.dtype(dtypes[i]).kind in "iu" for i in range(len(group)))
        self.packed_ids = PackedIntGroupIds(len(group)) if several else None
        self.gid_of: dict[tuple, int] = {}
        self.key_cols: list[np.ndarray] = [np.empty(0, dtype=dtypes[i]) for i in range(len(group))]
        self.count = np.zeros(0, dtype=np.int64)
        self.sums = {a: np.zeros(0, dtype=np.float64 if self.sum_float[a] else np.int64) for a in self.sum_cols}
        self.fsums = {a: FloatSums() for a in self.sum_cols if self.sum_float[a]}    # exact FLOAT sums
        # without GROUP BY: the live rows and a monotonic deque while deletes retract the oldest rows (a RANGE
        # window's; synopses/fifo_extremes.py), else counts per value while the values are close together
        # (synopses/int_value_counts.py)
        ext = IntExtremes if group else FifoExtremes
        self.extremes = {j: ext(f == "MAX") for j, (f, _, _) in enumerate(aggs) if f in EXTREME_FUNCS}
        # an input that never deletes (``insert_only``, the plan's monotonicity): no extreme keeps a multiset,
        # and MIN/MAX alone take the lean path (dsms/operators/extreme_inserts.py)
        self.insert_only = insert_only
        if insert_only and group:
            for x in self.extremes.values():
                x.keep_log = False
        self.lean_extremes = insert_only and extreme_inserts.applies(group, aggs, self.extremes)
        self.synopses = [StateSynopsis("group table", self._groups_live, self._state_bytes)]
        self._moments: dict[int, list[float]] = {}  # per SUM/AVG argument: decayed n, sum, sum of squares
        self.counts_only = all(f == "COUNT" for f, _, _ in aggs)    # ``_counts_by_instant`` may apply
        self.lean_sums = sums_by_instant.applies(self)     # by (instant, group) cells (sums_by_instant.py)

    def on_batch(self, i: int, batch: Batch) -> None:
        super().on_batch(i, batch)
        if self.sum_cols:                          # the moments the load shedder's error bound reads
            ins = batch.sign > 0
            for a in self.sum_cols:
                c = batch.cols[a]
                x = c[ins].astype(np.float64, copy=False)
                if c.dtype.kind == "f":                # (an integer converts to a finite float)
                    x = x[np.isfinite(x)]
                if len(x):
                    m = self._moments.setdefault(a, [0.0, 0.0, 0.0])
                    m[0] = 0.9 * m[0] + len(x)
                    m[1] = 0.9 * m[1] + float(x.sum())
                    m[2] = 0.9 * m[2] + float((x * x).sum())

    def error_profile(self) -> tuple[int, float, tuple[str, ...]]:
        """(rows of the smallest live group, the squared coefficient of variation of the SUM/AVG arguments
        seen lately (largest over columns), the aggregate functions): what the load shedder's error bound
        for this aggregate is computed from (docs/approximation.md)."""
        live = self.count[:self.n]
        live = live[live > 0]
        n_min = int(live.min()) if len(live) else 0
        k2 = 0.0
        for n, s1, s2 in getattr(self, "_moments", {}).values():
            if n > 0 and s1 != 0.0:
                mean = s1 / n
                k2 = max(k2, max(0.0, s2 / n - mean * mean) / (mean * mean))
        return n_min, k2, tuple(f for f, _, _ in self.aggs)

    def _state_bytes(self) -> int:
        return (deep_bytes(self.gid_of) + sum(array_bytes(k) for k in self.key_cols) + self.count.nbytes
                + sum(a.nbytes for a in self.sums.values())
                + sum(f.nbytes() for f in self.fsums.values())
                + sum(x.nbytes() for x in self.extremes.values())
                + (self.int_ids.nbytes() if self.int_ids is not None else 0)
                + (self.packed_ids.nbytes() if self.packed_ids is not None else 0)
                + sum(b.nbytes for b in self.held))

    def _groups_live(self) -> int:
        return int((self.count > 0).sum())


    def _gids(self, batch: Batch) -> np.ndarray:
        """Dense group id per row; new groups get the next ids (in ascending key order within a batch)."""
        n = len(batch)
        if not self.group:
            if not self.n:
                self._add_groups([()])
            return np.zeros(n, dtype=np.int64)
        kcols = [batch.cols[g] for g in self.group]
        if self.int_ids is not None:
            return self._int_gids(kcols[0])
        if self.packed_ids is not None:
            gids = self._packed_gids(kcols)
            if gids is not None:
                return gids
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
        """Group ids of one integer key column; new keys get the next ids, in ascending key order."""
        start = self.n
        gids = self.int_ids.ids(keys)
        if self.int_ids.n > start:
            self._reserve(self.int_ids.n)
            self.key_cols[0][start:self.n] = self.int_ids.key_of()[start:]
        return gids

    def _packed_gids(self, kcols: list[np.ndarray]) -> np.ndarray | None:
        """Group ids for keys of several integer columns packed into one int64 each (``PackedIntGroupIds``:
        they sort as the key tuples do, so new groups get their ids in the same order as through the dict
        below), with no Python per key. Keys that no longer pack (ranges too far apart for an int64) hand
        every key over to the dict for good; None then."""
        start = self.n
        gids = self.packed_ids.ids(kcols)
        if gids is None:
            known = [k[:self.n].tolist() for k in self.key_cols]
            self.gid_of = {key: i for i, key in enumerate(zip(*known))}
            self.packed_ids = None
            return None
        if self.packed_ids.n > start:
            self._reserve(self.packed_ids.n)
            for kc, col in zip(self.key_cols, self.packed_ids.key_cols(start)):
                kc[start:self.n] = col
        return gids

    def _reserve(self, n: int) -> None:
        """Make room for ``n`` groups: the state arrays double their capacity, so that adding groups costs
        O(new groups) amortised instead of a copy of every array per batch."""
        cap = len(self.count)
        if n > cap:
            size = max(n, 2 * cap, 64)
            self.count = _grown(self.count, size)
            self.sums = {a: _grown(v, size) for a, v in self.sums.items()}
            for f in self.fsums.values():
                f.grow(size)
            for x in self.extremes.values():
                x.grow(size)
            self.key_cols = [_grown(k, size) for k in self.key_cols]
        self.n = n

    def _add_groups(self, keys: list[tuple]) -> None:
        start = len(self.gid_of)
        for i, k in enumerate(keys):
            self.gid_of[k] = start + i
        self._reserve(start + len(keys))
        for j in range(len(self.group)):
            self.key_cols[j][start:self.n] = [k[j] for k in keys]

    def process(self, batch: Batch) -> None:
        if self.lean_extremes:
            extreme_inserts.fold_inserts(self, batch)
            return
        n = len(batch)
        if not self.group and self.extremes and not self.sum_cols and n:
            self._one_group_extremes(batch)
            return
        if self.counts_only and n and self.int_ids is not None \
                and self._counts_by_instant(batch, batch.cols[self.group[0]].astype(np.int64, copy=False), True):
            return
        if self.lean_sums and n and sums_by_instant.fold(self, batch):
            return
        gid = self._gids(batch)
        if self.counts_only and n and self._counts_by_instant(batch, gid, False):
            return
        # by group, time order (and arrival order) kept within; small ids sort by radix as int16
        # (one group, or groups in order already: no gathers of the batch's columns)
        order = None if not self.group or bool((gid[1:] >= gid[:-1]).all()) else stable_argsort(gid)

        def by_group(a: np.ndarray) -> np.ndarray:
            return a if order is None else a[order]
        g_s = by_group(gid)
        t_s = by_group(batch.ts)
        sign = by_group(batch.sign).astype(np.int64)
        # segment = run of one (group, instant); values are taken at segment ends
        seg_end = np.ones(n, dtype=bool)
        if self.group:
            seg_end[:-1] = (g_s[1:] != g_s[:-1]) | (t_s[1:] != t_s[:-1])
        else:                                      # one group: segments are instants
            seg_end[:-1] = t_s[1:] != t_s[:-1]
        ends = np.nonzero(seg_end)[0]
        grp_start = np.ones(n, dtype=bool)
        grp_start[1:] = g_s[1:] != g_s[:-1]
        starts_idx = np.nonzero(grp_start)[0]
        # running count after each row, per group (one group: a plain cumulative sum)
        run_cnt = running(sign, grp_start, starts_idx, self.count[g_s]) if self.group \
            else np.cumsum(sign) + self.count[0]
        run_sum = {}
        for a in self.sum_cols:
            v = by_group(batch.cols[a])
            if self.sum_float[a]:
                rs = np.zeros(n, dtype=np.float64)          # exact; values only at segment ends
                rs[ends] = self.fsums[a].step(v, sign, g_s, grp_start, starts_idx, ends)
                run_sum[a] = rs
            else:
                base = self.sums[a][g_s]
                if base.dtype != object and _may_overflow(base, v):
                    # INT sums beyond 64 bits: exact Python integers from now on (SUM wraps on output, as INT
                    # arithmetic does; AVG is the exact mean)
                    self.sums[a] = self.sums[a].astype(object)
                    base = base.astype(object)
                if base.dtype == object:
                    v = v.astype(object)
                run_sum[a] = running(sign * v, grp_start, starts_idx, base)
        seg_g = g_s[ends]
        seg_t = t_s[ends]
        new_cnt = run_cnt[ends]
        # the value before each segment: the previous segment of the same group, else the stored state
        first_of_group = np.ones(len(ends), dtype=bool)
        first_of_group[1:] = seg_g[1:] != seg_g[:-1]
        prev = np.concatenate([[0], ends[:-1]])
        old_cnt = np.where(first_of_group, self.count[seg_g], run_cnt[prev])
        new_vals, old_vals = [], []
        for j, (f, a, _) in enumerate(self.aggs):
            if f == "COUNT":
                nv, ov = new_cnt, old_cnt
            elif j in self.extremes:
                nv, ov = self.extremes[j].step(by_group(batch.cols[a]), sign, g_s, ends, old_cnt > 0, new_cnt)
            else:
                ns = run_sum[a][ends]
                os_ = np.where(first_of_group, self.sums[a][seg_g], run_sum[a][prev])
                ns = np.where(new_cnt > 0, ns, 0)            # an emptied group leaves no residue
                os_ = np.where(old_cnt > 0, os_, 0)
                if f == "AVG":
                    with np.errstate(invalid="ignore", divide="ignore"):
                        nc, oc = np.maximum(new_cnt, 1), np.maximum(old_cnt, 1)
                        if ns.dtype == object:          # exact integers: Python's correctly rounded quotient
                            nc, oc = nc.astype(object), oc.astype(object)
                        nv = np.where(new_cnt > 0, ns / nc, 0.0).astype(np.float64)
                        ov = np.where(old_cnt > 0, os_ / oc, 0.0).astype(np.float64)
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
            if a in self.fsums:
                self.fsums[a].commit(fg, ends[last_of_group], self.count[fg] > 0)
        # emit: -old where the group existed and changed, +new where it exists and changed
        changed = _changed(old_cnt, new_cnt, new_vals, old_vals)
        dele = changed & (old_cnt > 0)
        ins = changed & (new_cnt > 0)
        for j, (f, _, _) in enumerate(self.aggs):
            if f == "SUM" and new_vals[j].dtype == object:    # exact INT sums: rows outside int64 are left out
                bad_new = ~np.fromiter(map(fits, new_vals[j].tolist()), dtype=bool, count=len(ends))
                bad_old = ~np.fromiter(map(fits, old_vals[j].tolist()), dtype=bool, count=len(ends))
                for k in np.flatnonzero(bad_new & ins).tolist():
                    report(self, j, new_vals[j][k], int(seg_t[k]))
                ins &= ~bad_new
                dele &= ~bad_old
        if not (dele.any() or ins.any()):
            return
        # segments are in (group, instant) order; a stable sort by instant gives (instant, group) order,
        # and each segment emits its delete before its insert
        o = stable_argsort(seg_t)
        at, sgn = _delete_then_insert(dele[o], ins[o])
        seg = o[at]
        is_del = sgn < 0
        cols = [kc[seg_g[seg]] for kc in self.key_cols]
        for j, (nv, ov) in enumerate(zip(new_vals, old_vals)):
            v = np.where(is_del, ov[seg], nv[seg])
            v = v.astype(self.dtypes[len(self.group) + j], copy=False)
            cols.append(v)
        self.emit(Batch(seg_t[seg].astype(np.int64), sgn, cols))

    def _one_group_extremes(self, batch: Batch) -> None:
        """``process`` without GROUP BY, for MIN/MAX (and COUNT) alone: the segments are the instants, each
        one's count after it a cumulative sum at its end, and nothing is sorted or gathered per row (a
        tumbling window's turnover brings 184,000 rows in NEXMark q7, and each pass over them counts). The
        output is what ``process`` emits: per instant whose row changed, its old row as a delete, then its
        new row."""
        ts, sign = batch.ts, batch.sign
        n = len(ts)
        if not self.n:
            self._add_groups([()])
        c0 = int(self.count[0])
        if ts[0] == ts[-1]:
            ends = np.array([n - 1])
            new_cnt = np.array([c0 + int(sign.sum(dtype=np.int64))])
        else:
            ends = np.append(np.flatnonzero(ts[1:] != ts[:-1]), n - 1)
            new_cnt = c0 + np.cumsum(sign.astype(np.int64))[ends]
        old_cnt = np.empty_like(new_cnt)
        old_cnt[0] = c0
        old_cnt[1:] = new_cnt[:-1]
        g_s = np.zeros(n, dtype=np.int64)
        new_vals, old_vals = [], []
        for j, (f, a, _) in enumerate(self.aggs):
            if f == "COUNT":
                nv, ov = new_cnt, old_cnt
            else:
                nv, ov = self.extremes[j].step(batch.cols[a], sign, g_s, ends, old_cnt > 0, new_cnt)
            new_vals.append(nv)
            old_vals.append(ov)
        self.count[0] = new_cnt[-1]
        changed = _changed(old_cnt, new_cnt, new_vals, old_vals)
        dele = changed & (old_cnt > 0)
        ins = changed & (new_cnt > 0)
        if not (dele.any() or ins.any()):
            return
        seg, sgn = _delete_then_insert(dele, ins)            # per instant: its delete, then its insert
        is_del = sgn < 0
        cols = [np.where(is_del, ov[seg], nv[seg]).astype(self.dtypes[j], copy=False)
                for j, (nv, ov) in enumerate(zip(new_vals, old_vals))]
        self.emit(Batch(ts[ends][seg], sgn, cols))

    def _counts_by_instant(self, batch: Batch, code: np.ndarray, keyed: bool) -> bool:
        """COUNTs alone over a batch of few instants (a hopping window's slide is its inserts and deletes at
        one timestamp): each (instant, group)'s net change by one count weighted by sign over (instant,
        ``code`` span) cells, with no sort of the batch; a cumulative sum over the instants gives each
        group's count after each. ``code`` is per row its group id, or (``keyed``) its integer key, whose
        group ids are then looked up for the keys whose count changed alone (a slide of NEXMark q5 changes
        one auction in fifteen of the rows it brings), and a key whose rows net to nothing gets no id. The
        output is what ``process`` emits (per changed group and instant, in (instant, group id) order, its
        old row as a delete, then its new row). False, having done nothing, when there are too many cells
        for the counts to cost O(batch)."""
        cells_of = sums_by_instant.instant_key_cells(batch.ts, code)
        if cells_of is None:
            return False
        k, lo, span, cell, inst_ts = cells_of
        # net change per cell (float weights: exact, |change| <= rows < 2**53); a cell that nets to zero
        # leaves its group's count, so its row, unchanged
        delta = np.bincount(cell, weights=batch.sign, minlength=k * span).astype(np.int64).reshape(k, span)
        rel = np.flatnonzero(delta.any(axis=0)) if k > 1 else np.flatnonzero(delta[0])
        if keyed:                                        # the changed keys' groups, in id order
            g = self._int_gids(rel + lo)
            order = stable_argsort(g)
            rel, g = rel[order], g[order]
        else:
            g = rel + lo                                 # changed groups, ascending id
        delta = delta[:, rel]
        after = self.count[g] + np.cumsum(delta, axis=0)     # each changed group's count after each instant
        self.count[g] = after[-1]
        ii, jj = np.nonzero(delta) if k > 1 else (np.zeros(len(rel), dtype=np.int64), np.arange(len(rel)))
        new = after[ii, jj]
        old = new - delta[ii, jj]
        seg, sgn = _delete_then_insert(old > 0, new > 0)   # every cell here changed its group's count
        if not len(seg):
            return True
        gs = g[jj[seg]]
        val = np.where(sgn < 0, old[seg], new[seg])
        cols = [kc[gs] for kc in self.key_cols]
        for j in range(len(self.aggs)):
            cols.append(val.astype(self.dtypes[len(self.group) + j], copy=False))
        self.emit(Batch(inst_ts[ii[seg]].astype(np.int64), sgn, cols))
        return True


def _changed(old_cnt: np.ndarray, new_cnt: np.ndarray, new_vals: list[np.ndarray],
             old_vals: list[np.ndarray]) -> np.ndarray:
    """Per segment, whether its group's row changed: it appeared, went, or an aggregate's value moved (NaN
    staying NaN is no change, as the contract says)."""
    changed = (old_cnt > 0) != (new_cnt > 0)
    for nv, ov in zip(new_vals, old_vals):
        differ = nv != ov
        if nv.dtype.kind == "f":
            differ &= ~(np.isnan(nv) & np.isnan(ov))
        changed |= differ
    return changed


def _delete_then_insert(dele: np.ndarray, ins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(segment of each output row, its sign): per segment its old row's delete where ``dele``, then its new
    row's insert where ``ins``, segments in order."""
    cnt = dele.astype(np.int64) + ins
    at = np.repeat(np.arange(len(cnt)), cnt)
    sgn = np.ones(len(at), dtype=np.int8)
    sgn[(np.cumsum(cnt) - cnt)[dele]] = -1
    return at, sgn


def _may_overflow(base: np.ndarray, v: np.ndarray) -> bool:
    """Whether a running INT sum starting from ``base`` (the touched groups' sums) and adding ``v`` can leave
    int64: a bound in floats, with a margin."""
    if not len(v):
        return False
    bound = float(np.abs(base.astype(np.float64)).max(initial=0.0)) + float(np.abs(v.astype(np.float64)).sum())
    return bound >= 2.0**62


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    """``a`` copied into a zeroed array of ``size`` along its last axis."""
    out = np.zeros(a.shape[:-1] + (size,), dtype=a.dtype)
    out[..., :a.shape[-1]] = a
    return out


