"""Grouped MIN/MAX folded from rows that only ever arrive: the state and the fold of ``JoinExtremeOp``.

Source: digest-004 R-PLAN-06 (MIN/MAX keep their window only because a delete may take the extreme away) and
SPEC section 3 (an instant's result is final once every input has passed it; changes that cancel within an
instant emit nothing). Over rows that are never deleted a group's extreme only ever improves, so the state is
one running extreme per group and aggregate, and a row can change the answer only if it beats the extreme
before it (or founds its group): a *record*. ``offer`` holds rows as they come (past ``HOLD`` rows held, while
the join's frontier is held back, only those that beat the committed extreme: the extremes committed are those
of the instants before every row still held, so a row dropped is below (MIN: above) the extreme at its own
instant too). ``finish`` folds the held rows of the instants now final: sorted by group, time order kept
within, one cumulative maximum per aggregate starting from the committed extreme finds the records, and per
(instant, group) with records it emits the old row as a delete and the new row as an insert, in (instant,
group id) order: what ``extreme_inserts.py`` emits for the same rows, with the group ids given
(``GroupTable``) instead of found per row.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch
from dsms.operators.extreme_inserts import delete_then_insert
from synopses.group_ids import IntGroupIds, PackedIntGroupIds
from synopses.sort_order import stable_argsort

I64 = np.int64
I64_MIN = -(2**63)
HOLD = 1 << 16      # rows held as they come; past this many, only those that can change the answer


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
                self._add(cols if self.one.fresh else [self.one.key_of()[start:]])
            return g
        if self.packed is not None:
            g = self.packed.ids(cols)
            if g is not None:
                if self.packed.n > start:           # (keys all new, in row order: the rows are the keys)
                    self._add(cols if self.packed.ids_of.fresh else self.packed.key_cols(start))
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
    values) that are never deleted, in time order.

    Values are kept as MAX of a key: a MAX's value itself, a MIN's bitwise complement (``~v = -1 - v`` reverses
    the order of int64 exactly, with no overflow), so one fold serves both; ``best`` starts at the smallest
    int64, the identity of MAX, so a group's first rows need no case of their own."""

    def __init__(self, funcs: list[str], groups: GroupTable, dtypes: list) -> None:
        self.want_max = [f == "MAX" for f in funcs]
        self.groups = groups
        self.dtypes = dtypes                         # of the output: key columns, then one per aggregate
        self.best = [np.full(64, I64_MIN, dtype=I64) for _ in funcs]     # as keys (class docstring)
        self.has = np.zeros(64, dtype=bool)          # the group has a value (its first row has been folded)
        self.held: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []
        self.held_n = 0                              # rows in ``held``

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
            self.best = [np.concatenate([b, np.full(size - len(b), I64_MIN, dtype=I64)]) for b in self.best]

    def offer(self, ts: np.ndarray, gid: np.ndarray, vals: list[np.ndarray]) -> None:
        """Hold the rows until their instants are final (``finish``). While few rows are held they are held as
        they come; past ``HOLD`` rows (the join's frontier held back) only those that found their group or beat
        its committed extreme in some aggregate are (the others can never change the answer: the extreme at
        their instant is at least the committed one)."""
        if not len(ts):
            return
        keys = [v.astype(I64, copy=False) if mx else ~v.astype(I64, copy=False)
                for mx, v in zip(self.want_max, vals)]
        if self.held_n + len(ts) > HOLD:
            self._cover(self.groups.n)
            at = self._beating(gid, keys)
            if at is not None:
                ts, gid, keys = ts[at], gid[at], [k[at] for k in keys]
        if len(ts):
            self.held.append((ts, gid, keys))
            self.held_n += len(ts)

    def _beating(self, gid: np.ndarray, keys: list[np.ndarray]) -> np.ndarray | None:
        """The positions of the rows that found their group or beat its committed extreme in some aggregate;
        None when that is every row."""
        keep = None
        for b, k in zip(self.best, keys):
            beat = k > b[gid]
            keep = beat if keep is None else keep | beat
        if any(int(k.min()) == I64_MIN for k in keys):       # a first value equal to ``best``'s start
            keep |= ~self.has[gid]
        if keep.all():
            return None
        return np.flatnonzero(keep)

    def finish(self, f: int) -> Batch | None:
        """Fold the rows held of instants before ``f`` (final now); the changes they make, or None."""
        if not self.held or self.held[0][0][0] >= f:
            return None
        if len(self.held) == 1:
            ts, gid, keys = self.held[0]
        else:
            ts = np.concatenate([h[0] for h in self.held])
            gid = np.concatenate([h[1] for h in self.held])
            keys = [np.concatenate([h[2][j] for h in self.held]) for j in range(len(self.best))]
        cut = int(np.searchsorted(ts, f, side="left"))
        if cut < len(ts):
            self.held = [(ts[cut:], gid[cut:], [k[cut:] for k in keys])]
            self.held_n = len(ts) - cut
            ts, gid, keys = ts[:cut], gid[:cut], [k[:cut] for k in keys]
        else:
            self.held, self.held_n = [], 0
        self._cover(self.groups.n)
        return self._fold(ts, gid, keys)

    def _fold(self, ts: np.ndarray, gid: np.ndarray, keys: list[np.ndarray]) -> Batch | None:
        """The changes the rows make, or None.

        Sorted by group (time order kept within), each aggregate's running extreme starts from the committed
        one (folded into the group's first row). A row is a record when it founds its group or some running
        extreme rises there (at a group's first row: when it beats the committed extreme), and only records
        change anything. Of the records of one (group, instant) the last holds the new row; the old row is the
        one before the first of them: the committed extreme for the group's first change, else the running
        extreme just before it (between records it does not move): the previous change's new row."""
        n = len(ts)
        gid = gid.astype(I64, copy=False)
        lo_g, hi_g = int(gid.min()), int(gid.max())
        bits = n.bit_length()
        if (hi_g - lo_g) < (1 << (62 - bits)):         # group, then position: one fast unstable sort
            key = (gid - lo_g) << bits
            key |= np.arange(n, dtype=I64)
            key.sort()
            o = key & ((1 << bits) - 1)
            gi = key >> bits                           # the group, less ``lo_g``, per sorted row
        else:
            o = stable_argsort(gid)
            gi = gid[o] - lo_g
        start = np.empty(n, dtype=bool)                # a group's first row
        start[0] = True
        np.not_equal(gi[1:], gi[:-1], out=start[1:])
        starts = np.flatnonzero(start)
        g_first = gi[starts] + lo_g
        rec = np.empty(n, dtype=bool)
        opened = ~self.has[g_first]                    # at a group's first row: founds it, or beats the committed
        runs, sorted_keys = [], []
        for b, k in zip(self.best, keys):
            k_s = k[o]
            first, base = k_s[starts], b[g_first]
            opened |= first > base
            k_s[starts] = np.maximum(first, base)
            run = _Running(k_s, gi)
            if runs:
                rec[1:] |= run.acc[1:] != run.acc[:-1]
            else:
                np.not_equal(run.acc[1:], run.acc[:-1], out=rec[1:])
            runs.append(run)
            sorted_keys.append(k_s)
        rec[starts] = opened
        r = np.flatnonzero(rec)                        # the records, by group then time
        if not len(r):
            return None
        g_r = gi[r] + lo_g
        t_r = ts[o[r]]
        m = len(r)
        last = np.empty(m, dtype=bool)                 # the last record of its (group, instant)
        last[-1] = True
        np.logical_or(g_r[1:] != g_r[:-1], t_r[1:] != t_r[:-1], out=last[:-1])
        e = np.flatnonzero(last)                       # one per change
        g_e = g_r[e]
        opens = np.empty(len(e), dtype=bool)           # the group's first change here
        opens[0] = True
        np.not_equal(g_e[1:], g_e[:-1], out=opens[1:])
        existed = self.has[g_e]
        closes = np.empty(len(e), dtype=bool)          # the group's last change here
        closes[-1] = True
        closes[:-1] = opens[1:]
        at_e = r[e]
        one = len(runs) == 1
        news, olds = [], []
        for b, run, k_s in zip(self.best, runs, sorted_keys):
            # one aggregate: every record is a rise of its running extreme to the record's own value; several:
            # a record of one may leave another's where it was
            new = k_s[at_e] if one else run.value(at_e)
            old = np.empty_like(new)                   # the group's previous change's new row, or the committed
            old[1:] = new[:-1]
            old = np.where(opens, b[g_e], old)
            b[g_e[closes]] = new[closes]
            news.append(new)
            olds.append(old)
        self.has[g_e[opens]] = True
        c = stable_argsort(t_r[e])                     # (instant, group id) order
        dele = ~(opens[c] & ~existed[c])
        seg, sgn = delete_then_insert(c, dele)
        is_del = sgn < 0
        g_out = g_e[seg]
        cols = [kc[g_out] for kc in self.groups.keys]
        width = len(cols)
        for j, (mx, nv, ov) in enumerate(zip(self.want_max, news, olds)):
            v = np.where(is_del, ov[seg], nv[seg])
            cols.append((v if mx else ~v).astype(self.dtypes[width + j], copy=False))
        return Batch(t_r[e[seg]].astype(I64, copy=False), sgn, cols)


class _Running:
    """Each row's running MAX of ``v`` within its group (``gi``: the group, non-decreasing), as one cumulative
    maximum ``acc`` over values offset per group so that a later group's always lie above an earlier group's:
    offsets of the value span while the groups times the span fit an int64, else of the values' ranks (one
    sort). ``acc`` moves exactly where the running maximum does; ``value`` decodes it at given rows.

    >>> r = _Running(np.array([3, 1, 5, 2, 9, 4]), np.array([0, 0, 0, 1, 1, 1]))
    >>> r.value(np.arange(6)).tolist()
    [3, 3, 5, 2, 9, 9]
    >>> r = _Running(np.array([-2**63, 2**63 - 1, 0, 5]), np.array([0, 0, 7, 7]))
    >>> r.value(np.arange(4)).tolist() == [-2**63, 2**63 - 1, 0, 5]
    True
    """

    __slots__ = ("acc", "gi", "lo", "span", "u")

    def __init__(self, v: np.ndarray, gi: np.ndarray) -> None:
        lo, hi = int(v.min()), int(v.max())
        span = hi - lo + 1
        self.gi = gi
        if span * (int(gi[-1]) + 1) < 2**62:
            self.lo, self.span, self.u = lo, span, None
            x = v - lo
            x += gi * span
        else:
            u, r = np.unique(v, return_inverse=True)
            self.lo, self.span, self.u = 0, len(u), u
            x = r.reshape(-1) + gi * len(u)
        self.acc = np.maximum.accumulate(x)

    def value(self, at: np.ndarray) -> np.ndarray:
        x = self.acc[at] - self.gi[at] * self.span
        return x + self.lo if self.u is None else self.u[x]
