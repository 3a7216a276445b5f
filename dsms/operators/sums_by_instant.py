"""Grouped COUNT, SUM and AVG of INT over one integer group column, by (instant, group) cells: the vectorised
aggregate's lean path for a batch of few groups (issue 15, NEXMark q4's ``AVG(final) GROUP BY category`` over
the changes of a view of per-auction maxima: a few categories, up to a thousand instants a push).

Source: as ``vector_aggregate.py``; ``_counts_by_instant`` there does the same for COUNTs alone. Each row adds
its sign to its (instant, group) cell's count and its sign times its value to the cell's sum (``np.bincount``,
whose float64 weights add up exactly while every partial sum stays below 2**53 in magnitude, checked per batch
from the largest value); a cumulative sum over the instants then gives each changed group's count and sums
after each instant, with no sort of the batch. The output is what ``VectorAggregateOp.process`` emits (per
changed group and instant, in (instant, group id) order, its old row as a delete, then its new row; a group
whose row did not change emits nothing; AVG the same int64 sum over int64 count quotient), and the state it
leaves is the same (counts, sums; a group that empties keeps sums of exactly zero). ``fold`` declines (False,
nothing changed) where those bounds do not hold: sums past 2**53 or that might leave int64, sums already kept
as Python integers, or more cells than a few times the batch's rows.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from synopses.sort_order import stable_argsort

EXACT = 2.0**53


def instant_key_cells(ts: np.ndarray, key: np.ndarray) -> tuple | None:
    """A batch's rows numbered by (instant, integer key) cell, instants in batch order and keys over their span,
    so that one ``np.bincount`` sums them with no sort: (instants k, lowest key, span, each row's cell, each
    instant's timestamp). None when the k x span cells would cost more than O(batch) (keys far apart, e.g. both
    ends of int64, also overflow the cells). The vectorised COUNT's slide path and the lean sums both count
    by these cells."""
    n = len(key)
    lo, hi = int(key.min()), int(key.max())
    span = hi - lo + 1
    if span > 4 * n + 1024:
        return None
    if ts[0] == ts[-1]:
        return 1, lo, span, key - lo, ts[:1]
    brk = np.flatnonzero(ts[1:] != ts[:-1]) + 1
    k = len(brk) + 1
    if k * span > 4 * n + 1024:
        return None
    step = np.zeros(n, dtype=np.int64)
    step[brk] = span
    return k, lo, span, np.cumsum(step) + (key - lo), ts[np.concatenate([[0], brk])]


def applies(op) -> bool:
    """Whether ``op`` (a ``VectorAggregateOp``) has the shape: one integer group column, every aggregate COUNT,
    SUM or AVG, every argument an INT, at least one SUM or AVG (COUNTs alone: ``_counts_by_instant``)."""
    return (op.int_ids is not None and not op.extremes and bool(op.sum_cols)
            and not any(op.sum_float.values()))


def fold(op, batch: Batch) -> bool:
    """Fold ``batch`` (complete instants, in time order) into ``op`` and emit its changes; False when the
    bounds of the module do not hold (the caller then takes the general path)."""
    n = len(batch)
    cells_of = instant_key_cells(batch.ts, batch.cols[op.group[0]])
    if cells_of is None:
        return False
    k, lo, span, cell, inst_ts = cells_of
    sign = batch.sign
    vals = {}
    for a in op.sum_cols:
        v = batch.cols[a]
        top = max(-float(v.min()), float(v.max()))      # (np.abs(-2**63) wraps to itself)
        if op.sums[a].dtype == object or top * n >= EXACT:
            return False
        vals[a] = (v, top * n)
    size = k * span
    dcnt = np.bincount(cell, weights=sign, minlength=size).astype(np.int64)
    dsum = {a: np.bincount(cell, weights=sign * v, minlength=size).astype(np.int64)
            for a, (v, _) in vals.items()}
    moved = dcnt != 0                                   # (instant, key) cells whose count or a sum changed
    for d in dsum.values():
        moved |= d != 0
    grid = moved.reshape(k, span)
    rel = np.flatnonzero(grid.any(axis=0))              # the keys that changed
    if not len(rel):
        return True
    g = op._int_gids(rel + lo)                          # their groups (new keys: new ids, as _gids gives)
    order = stable_argsort(g)
    rel, g = rel[order], g[order]
    sums = {}
    for a, d in dsum.items():
        base = op.sums[a][g]
        if max(-float(base.min()), float(base.max())) + vals[a][1] >= 2.0**62:
            return False                                # (new groups keep count 0: as the general path)
        d = d.reshape(k, span)[:, rel]
        sums[a] = (base + np.cumsum(d, axis=0), d)
    dcnt = dcnt.reshape(k, span)[:, rel]
    after = op.count[g] + np.cumsum(dcnt, axis=0)       # each changed group's count after each instant
    op.count[g] = after[-1]
    for a, (sm, _) in sums.items():
        op.sums[a][g] = np.where(after[-1] > 0, sm[-1], 0)
    ii, jj = np.nonzero(grid[:, rel])                   # the changed cells, in (instant, group id) order
    new_cnt = after[ii, jj]
    old_cnt = new_cnt - dcnt[ii, jj]
    new_vals, old_vals = [], []
    for f, a, _ in op.aggs:
        if f == "COUNT":
            nv, ov = new_cnt, old_cnt
        else:
            sm, d = sums[a]
            s_new = sm[ii, jj]
            ns = np.where(new_cnt > 0, s_new, 0)
            os_ = np.where(old_cnt > 0, s_new - d[ii, jj], 0)
            if f == "AVG":                         # (an empty group's sum is 0 here: 0 / 1 = 0.0)
                nv = ns / np.maximum(new_cnt, 1)
                ov = os_ / np.maximum(old_cnt, 1)
            else:
                nv, ov = ns, os_
        new_vals.append(nv)
        old_vals.append(ov)
    changed = (old_cnt > 0) != (new_cnt > 0)
    for nv, ov in zip(new_vals, old_vals):
        changed |= nv != ov
    dele = changed & (old_cnt > 0)
    ins = changed & (new_cnt > 0)
    cnt = dele.astype(np.int64) + ins
    seg = np.repeat(np.arange(len(cnt)), cnt)
    if not len(seg):
        return True
    sgn = np.ones(len(seg), dtype=np.int8)
    sgn[(np.cumsum(cnt) - cnt)[dele]] = -1
    is_del = sgn < 0
    cols = [kc[g[jj[seg]]] for kc in op.key_cols]
    for j, (nv, ov) in enumerate(zip(new_vals, old_vals)):
        cols.append(np.where(is_del, ov[seg], nv[seg]).astype(op.dtypes[len(op.group) + j], copy=False))
    op.emit(Batch(inst_ts[ii[seg]].astype(np.int64), sgn, cols))
    return True
