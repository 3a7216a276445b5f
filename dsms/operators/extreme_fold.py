"""Grouped MIN/MAX folded from rows that only ever arrive: the state and the fold of ``JoinExtremeOp``.

Source: digest-004 R-PLAN-06 (MIN/MAX keep their window only because a delete may take the extreme away) and
SPEC section 3 (an instant's result is final once every input has passed it; changes that cancel within an
instant emit nothing). Over rows that are never deleted a group's extreme only ever improves, so the state is
one running extreme per group and aggregate, and a row can change the answer only if it beats the extreme
committed so far (or founds its group): ``offer`` keeps those rows alone (after a batch of which nearly every
row passed, it keeps the next few whole: dropping rows saves work, keeping them is exact). ``finish`` folds the
kept rows of the instants now final, and emits, per (instant, group) whose row changed, its old row as a delete
and its new row as an insert, in (instant, group id) order: what ``extreme_inserts.py`` emits for the same
rows, with the group ids given (``GroupTable``) instead of found per row. The extremes committed are those of
the instants before every row still held, so a row dropped by ``offer`` is below (MIN: above) the extreme at
its own instant too.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from dsms.operators.extreme_inserts import delete_then_insert
from synopses.group_ids import IntGroupIds, PackedIntGroupIds
from synopses.sort_order import stable_argsort

I64 = np.int64
SKIP = 8            # batches kept whole after one whose rows nearly all passed the filter (it costs a gather)


class GroupTable:
    """Dense ids for group keys of INT or TIMESTAMP columns (one column: ``IntGroupIds``; several: packed by
    ``PackedIntGroupIds`` while they fit an int64, a dict of tuples after), and each id's key columns.

    >>> t = GroupTable(2)
    >>> t.ids([np.array([7, 7, 3]), np.array([1, 2, 1])]).tolist(), t.ids([np.array([7]), np.array([2])]).tolist()
    ([1, 2, 0], [2])
    >>> [c[:t.n].tolist() for c in t.keys]
    [[3, 7, 7], [1, 1, 2]]
    """

    def __init__(self, ncols: int) -> None:
        self.one = IntGroupIds() if ncols == 1 else None
        self.packed = PackedIntGroupIds(ncols) if ncols > 1 else None
        self.gid_of: dict[tuple, int] | None = None
        self.keys = [np.zeros(64, dtype=I64) for _ in range(ncols)]
        self.n = 0

    def nbytes(self) -> int:
        n = sum(k.nbytes for k in self.keys)
        if self.one is not None:
            n += self.one.nbytes()
        if self.packed is not None:
            n += self.packed.nbytes()
        return n + (64 * len(self.gid_of) if self.gid_of is not None else 0)

    def ids(self, cols: list[np.ndarray]) -> np.ndarray:
        """The id of each row's key; keys never seen get the next ids."""
        cols = [c.astype(I64, copy=False) for c in cols]
        start = self.n
        if self.one is not None:
            g = self.one.ids(cols[0])
            if self.one.n > start:
                self._add([self.one.key_of()[start:]])
            return g
        if self.packed is not None:
            g = self.packed.ids(cols)
            if g is not None:
                if self.packed.n > start:
                    self._add(self.packed.key_cols(start))
                return g
            self.packed = None                 # keys too far apart to pack: tuples from now on
            self.gid_of = {k: i for i, k in enumerate(zip(*[c[:self.n].tolist() for c in self.keys]))}
        keys = list(zip(*[c.tolist() for c in cols]))
        new = [k for k in dict.fromkeys(keys) if k not in self.gid_of]
        for i, k in enumerate(new):
            self.gid_of[k] = start + i
        if new:
            self._add([np.array(c, dtype=I64) for c in zip(*new)])
        return np.fromiter((self.gid_of[k] for k in keys), dtype=I64, count=len(keys))

    def _add(self, cols: list[np.ndarray]) -> None:
        m = self.n + len(cols[0])
        if m > len(self.keys[0]):
            size = max(m, 2 * len(self.keys[0]))
            self.keys = [np.concatenate([k[:self.n], np.zeros(size - self.n, dtype=I64)]) for k in self.keys]
        for k, c in zip(self.keys, cols):
            k[self.n:m] = c
        self.n = m


class ExtremeFold:
    """Per group id, one running extreme per aggregate (``funcs``: MAX or MIN), fed rows (instant, group id,
    values) that are never deleted, in time order."""

    def __init__(self, funcs: list[str], groups: GroupTable, dtypes: list) -> None:
        self.want_max = [f == "MAX" for f in funcs]
        self.groups = groups
        self.dtypes = dtypes                         # of the output: key columns, then one per aggregate
        self.best = [np.zeros(64, dtype=I64) for _ in funcs]
        self.has = np.zeros(64, dtype=bool)          # the group has a value (its first row has been folded)
        self.held: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []
        self.skip = 0                                # batches ``offer`` keeps whole before it filters again

    def nbytes(self) -> int:
        held = sum(t.nbytes + g.nbytes + sum(v.nbytes for v in vs) for t, g, vs in self.held)
        return self.has.nbytes + sum(b.nbytes for b in self.best) + held

    def live(self) -> int:
        return int(self.has.sum())

    def held_rows(self) -> int:
        return sum(len(t) for t, _, _ in self.held)

    def held_stamps(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for t, _, _ in self.held:
            if len(t):
                ts, rows = np.unique(t, return_counts=True)
                out += zip(ts.tolist(), rows.tolist())
        return out

    def _cover(self, n: int) -> None:
        if n > len(self.has):
            size = max(n, 2 * len(self.has))
            self.has = np.concatenate([self.has, np.zeros(size - len(self.has), dtype=bool)])
            self.best = [np.concatenate([b, np.zeros(size - len(b), dtype=I64)]) for b in self.best]

    def offer(self, ts: np.ndarray, gid: np.ndarray, vals: list[np.ndarray]) -> None:
        """Keep the rows that found their group or beat its committed extreme in some aggregate (the others
        can never change the answer: the extreme at their instant is at least the committed one)."""
        if not len(ts):
            return
        self._cover(self.groups.n)
        vals = [v.astype(I64, copy=False) for v in vals]
        if self.skip:                                  # the last batches kept nearly every row: not asked
            self.skip -= 1
            self.held.append((ts, gid, vals))
            return
        keep = ~self.has[gid]
        for mx, b, v in zip(self.want_max, self.best, vals):
            keep |= (v > b[gid]) if mx else (v < b[gid])
        at = np.flatnonzero(keep)
        if len(at) >= 0.9 * len(ts):                   # groups found and raised within one batch (q4 at
            self.skip = SKIP                           # 10,000 events a push): filtering pays nothing
        if len(at) == len(ts):
            self.held.append((ts, gid, vals))
        elif len(at):
            self.held.append((ts[at], gid[at], [v[at] for v in vals]))

    def finish(self, f: int) -> Batch | None:
        """Fold the rows held of instants before ``f`` (final now); the changes they make, or None."""
        if not self.held or self.held[0][0][0] >= f:
            return None
        if len(self.held) == 1:
            ts, gid, vals = self.held[0]
        else:
            ts = np.concatenate([h[0] for h in self.held])
            gid = np.concatenate([h[1] for h in self.held])
            vals = [np.concatenate([h[2][j] for h in self.held]) for j in range(len(self.best))]
        cut = int(np.searchsorted(ts, f, side="left"))
        self.held = [(ts[cut:], gid[cut:], [v[cut:] for v in vals])] if cut < len(ts) else []
        return self._fold(ts[:cut], gid[:cut], [v[:cut] for v in vals])

    def _fold(self, ts: np.ndarray, gid: np.ndarray, vals: list[np.ndarray]) -> Batch | None:
        n = len(ts)
        o = stable_argsort(gid)                        # by group, time order kept within
        g_s, t_s = gid[o], ts[o]
        grp_start = np.empty(n, dtype=bool)
        grp_start[0] = True
        np.not_equal(g_s[1:], g_s[:-1], out=grp_start[1:])
        seg_end = np.empty(n, dtype=bool)              # last row of each (group, instant)
        seg_end[-1] = True
        np.logical_or(grp_start[1:], t_s[1:] != t_s[:-1], out=seg_end[:-1])
        ends = np.flatnonzero(seg_end)
        gi = np.cumsum(grp_start) - 1                  # group index within the fold, per row
        seg_g = g_s[ends]
        first = np.empty(len(ends), dtype=bool)        # a group's first segment here
        first[0] = True
        np.not_equal(seg_g[1:], seg_g[:-1], out=first[1:])
        last = np.empty(len(ends), dtype=bool)
        last[-1] = True
        last[:-1] = first[1:]
        existed = self.has[seg_g]
        changed = first & ~existed                     # the segment that founds its group
        new_vals, old_vals = [], []
        for mx, b, v in zip(self.want_max, self.best, vals):
            run = _running(v[o], gi, mx)[ends]         # the fold's own running extreme after each segment
            base = b[seg_g]
            new = np.where(existed, np.maximum(base, run) if mx else np.minimum(base, run), run)
            old = np.empty_like(new)
            old[0] = 0
            old[1:] = new[:-1]
            old = np.where(first, np.where(existed, base, 0), old)
            changed |= new != old
            b[seg_g[last]] = new[last]
            new_vals.append(new)
            old_vals.append(old)
        self.has[seg_g[first]] = True
        c = np.flatnonzero(changed)
        if not len(c):
            return None
        c = c[stable_argsort(t_s[ends[c]])]            # (instant, group id) order
        dele = ~(first[c] & ~existed[c])
        seg, sgn = delete_then_insert(c, dele)
        is_del = sgn < 0
        g_out = seg_g[seg]
        cols = [k[g_out] for k in self.groups.keys]
        k = len(cols)
        for j, (nv, ov) in enumerate(zip(new_vals, old_vals)):
            cols.append(np.where(is_del, ov[seg], nv[seg]).astype(self.dtypes[k + j], copy=False))
        return Batch(t_s[ends[seg]].astype(I64, copy=False), sgn, cols)


def _running(v: np.ndarray, gi: np.ndarray, want_max: bool) -> np.ndarray:
    """Each row's running MAX (MIN) of ``v`` within its group (``gi``: the group's index, non-decreasing),
    by one cumulative maximum over values offset per group so that a later group's always lie above an
    earlier group's: offsets of the value span while the groups times the span fit an int64, else of the
    values' ranks (one sort).

    >>> _running(np.array([3, 1, 5, 2, 9, 4]), np.array([0, 0, 0, 1, 1, 1]), True).tolist()
    [3, 3, 5, 2, 9, 9]
    >>> _running(np.array([3, 1, 5, 2]), np.array([0, 0, 1, 1]), False).tolist()
    [3, 1, 5, 2]
    """
    lo, hi = int(v.min()), int(v.max())
    span = hi - lo + 1
    if span * (int(gi[-1]) + 1) < 2**62:
        acc = np.maximum.accumulate(gi * span + ((v - lo) if want_max else (hi - v))) - gi * span
        return acc + lo if want_max else hi - acc
    u, r = np.unique(v, return_inverse=True)
    r = r.reshape(-1)
    top = len(u) - 1
    acc = np.maximum.accumulate(gi * len(u) + (r if want_max else top - r)) - gi * len(u)
    return u[acc] if want_max else u[top - acc]
