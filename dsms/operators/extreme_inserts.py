"""Grouped MIN/MAX over an input that never deletes: the vectorised aggregate's lean path.

Source: digest-004 R-PLAN-06 (MIN/MAX keep their window only because a delete may take the extreme away) and
the plan's monotonicity (``L.Node.monotone``: a stream, an unbounded window, joins of those). Over such an
input, NEXMark q4's ``MAX(B.price) GROUP BY A.id, A.category`` and q9's ``MAX(price) GROUP BY id`` over an
unbounded join, a group's extreme only ever improves, so it is one running extreme per group: no multiset (the
log ``synopses/int_extremes.py`` keeps for deletes, a copy and a netting sort of every row), no running count
per row. A batch is sorted by group (arrival order kept within), one running extreme per group over the sorted
values gives each (group, instant) segment its value, and only the segments whose value changed (or whose group
is new) are ordered by instant and emitted, exactly as the general path emits them: per (instant, group id), the
old row as a delete, then the new row.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from synopses.sort_order import stable_argsort

I64 = np.int64


def applies(group: tuple, aggs: tuple, extremes: dict) -> bool:
    """Whether the lean path computes this aggregate: grouped, and every aggregate a MIN or MAX kept by
    ``IntExtremes`` (an INT or TIMESTAMP argument)."""
    return bool(group) and len(extremes) == len(aggs)


def delete_then_insert(c: np.ndarray, dele: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The output rows of changed extremes ``c``: each once as an insert, preceded by a delete of its old value
    where ``dele`` says it had one; (the change each row is of, its sign). Both the fold of an aggregate's
    inserts and the fold of a join's pairs (``extreme_fold.py``) emit their changes this way."""
    cnt = dele.astype(I64) + 1
    seg = np.repeat(c, cnt)
    sgn = np.ones(len(seg), dtype=np.int8)
    sgn[(np.cumsum(cnt) - cnt)[dele]] = -1
    return seg, sgn


def fold_inserts(op, batch: Batch) -> None:
    """Fold a batch of inserts (complete instants, in time order) into ``op`` (a ``VectorAggregateOp``), and
    emit each changed (instant, group)'s old row as a delete and its new row as an insert."""
    n = len(batch)
    if not n:
        return
    if (batch.sign < 0).any():
        raise RuntimeError(f"{op.detail}: a delete reached an aggregate planned over an input that never "
                           "deletes")
    gid = op._gids(batch)
    order = None if bool((gid[1:] >= gid[:-1]).all()) else stable_argsort(gid)
    g_s = gid if order is None else gid[order]
    t_s = batch.ts if order is None else batch.ts[order]
    grp_start = np.empty(n, dtype=bool)
    grp_start[0] = True
    np.not_equal(g_s[1:], g_s[:-1], out=grp_start[1:])
    seg_end = np.empty(n, dtype=bool)
    seg_end[-1] = True
    np.logical_or(grp_start[1:], t_s[1:] != t_s[:-1], out=seg_end[:-1])
    ends = np.flatnonzero(seg_end)
    starts = np.flatnonzero(grp_start)
    g_u = g_s[starts]                                  # the batch's groups, ascending
    gi = np.cumsum(grp_start) - 1                      # group index within the batch, per row
    seg_gi = gi[ends]
    nseg = len(ends)
    first = np.empty(nseg, dtype=bool)                 # a group's first segment in the batch
    first[0] = True
    np.not_equal(seg_gi[1:], seg_gi[:-1], out=first[1:])
    last = np.empty(nseg, dtype=bool)
    last[-1] = True
    last[:-1] = first[1:]
    existed_u = op.count[g_u] > 0                      # the group had rows before the batch
    existed = existed_u[seg_gi]
    born = first & ~existed                            # the segment that creates its group
    changed = born.copy()
    new_vals, old_vals = [], []
    for j, (_f, a, _) in enumerate(op.aggs):
        ext = op.extremes[j]
        v = batch.cols[a] if order is None else batch.cols[a][order]
        v = v.astype(I64, copy=False)
        base = ext.ext[g_u][seg_gi]
        _, best = ext._running_best(v, None, gi, ends, base)        # the batch's own running extreme
        new = np.where(existed, np.maximum(base, best) if ext.want_max else np.minimum(base, best), best)
        old = np.empty(nseg, dtype=I64)
        old[0] = 0
        old[1:] = new[:-1]
        old = np.where(first, np.where(existed, base, 0), old)
        changed |= new != old
        ext.ext[g_u] = new[last]
        new_vals.append(new)
        old_vals.append(old)
    op.count[g_u] += np.diff(np.append(starts, n))
    c = np.flatnonzero(changed)
    if not len(c):
        return
    c = c[stable_argsort(t_s[ends[c]])]                # (instant, group id) order
    dele = ~born[c]
    seg, sgn = delete_then_insert(c, dele)
    is_del = sgn < 0
    rows = ends[seg]
    cols = [kc[g_s[rows]] for kc in op.key_cols]
    k = len(op.group)
    for j, (nv, ov) in enumerate(zip(new_vals, old_vals)):
        cols.append(np.where(is_del, ov[seg], nv[seg]).astype(op.dtypes[k + j], copy=False))
    op.emit(Batch(t_s[rows].astype(I64, copy=False), sgn, cols))
