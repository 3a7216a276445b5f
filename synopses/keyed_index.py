"""A join input that holds at most one row per key code, kept as a hash map from key code to the row, besides
the sorted runs of ``SortedRunIndexSynopsis`` (digest-004 R-PLAN-06: one synopsis per join input, hashed on the
join key).

A GROUP BY's output joined on (a superset of) its group columns has at most one live row per join key at every
instant: NEXMark q9 joins the valid bids with ``Q9M`` (the MAX price per auction) on (auction, price), and with
``Q9T`` (the earliest time of the winning price per auction) on (auction, time). Each change of a group deletes
its old row and inserts its new one, at random places of the relation, so the sorted-run index keeps such an
input in its signed form: a table sorted by key code that every release merges into (a pass over every row
held), claims its deletes from (a search), and rebuilds its probe structure for. Here the rows sit in slots
numbered by a persistent hash table of key codes (``IntIds``): a release's deletes and inserts are overwrites
of a few slots, and a probe is one vectorised hash lookup that finds one row or none. The planner picks this
synopsis for an input it knows to be keyed so (``dsms/plan/unique_keys.py``).

The planner's knowledge is not trusted blindly: every release is checked against the invariant before it is
applied (changes within one instant are taken in any order, as only an instant's net change is observed):
a delete must retract the live row of its key with the very same values (floats by their bits), an insert must
find its key free once its instant's deletes are applied, and a row inserted and deleted within one instant
cancels. A release that breaks it (join codes that equate values the GROUP BY tells apart, say) turns the index
into the sorted-run form for good, with the rows it held, before the release is applied there; answers do
not depend on which form holds the rows.

Slots of keys that left stay numbered until they outnumber the live rows by far; then the table is rebuilt
from the live keys, so memory follows the relation, not its history.
"""

from __future__ import annotations

import numpy as np

from synopses.base import array_bytes
from synopses.rowcodes import IntIds
from synopses.sort_order import stable_argsort
from synopses.sorted_run_index import SortedRunIndexSynopsis

_EMPTY = np.empty(0, dtype=np.int64)
REBUILD_SLACK = 1024        # dead key slots tolerated beyond three times the live rows before a rebuild


class KeyedRows:
    """Rows by key code, at most one live row per code: ``ids`` numbers the codes seen, ``live`` says which
    numbers hold a row, and the columns hold each number's row (``store``, grown by doubling).

    >>> k = KeyedRows()
    >>> cols = [np.array([1, 2]), np.array([9.5, 7.0])]
    >>> k.apply(np.array([1, 1]), np.array([1, 1], np.int8), cols, np.array([10, 20]))
    True
    >>> k.apply(np.array([2, 2]), np.array([-1, 1], np.int8), [np.array([1, 1]), np.array([9.5, 8.0])],
    ...         np.array([10, 10]))
    True
    >>> ids = k.find(np.array([10, 20, 30]))
    >>> ids >= 0, [c[ids[:2]].tolist() for c in k.store]
    (array([ True,  True, False]), [[1, 2], [8.0, 7.0]])
    >>> k.apply(np.array([3]), np.array([1], np.int8), [np.array([5]), np.array([1.0])], np.array([20]))
    False
    """

    def __init__(self) -> None:
        self.ids = IntIds()
        self.live = np.zeros(64, dtype=bool)       # per id: holds a row
        self.store: list[np.ndarray] | None = None  # per column, the row of each id (None until a row is seen)
        self.n_live = 0

    def nbytes(self) -> int:
        n = self.ids.n
        held = sum(array_bytes(c[:n]) for c in self.store) if self.store is not None else 0
        return self.ids.nbytes() + self.live.nbytes + held

    def find(self, codes: np.ndarray) -> np.ndarray:
        """The id of the live row of each code, -1 where none."""
        if not self.n_live or not len(codes):
            return np.full(len(codes), -1, dtype=np.int64)
        ids = self.ids.find(codes)
        found = ids >= 0
        found[found] = self.live[ids[found]]
        return np.where(found, ids, -1)

    def rows(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The live rows: their key codes and columns."""
        ids = np.flatnonzero(self.live[:self.ids.n])
        return self.ids.keys[ids], ([c[ids] for c in self.store] if self.store is not None else [])

    def apply(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> bool:
        """Apply signed rows in time order with their key codes; False, with nothing changed, when they do
        not keep at most one row per code (or delete a row that is not held)."""
        if not len(codes):
            return True
        if self.store is None:
            self.store = [np.empty(len(self.live), dtype=c.dtype) for c in cols]
        groups = _groups(ts, sign, cols, codes)
        if groups is None:
            return False
        gc, d_pos, i_pos = groups
        if not len(gc):
            return True
        has_d, has_i = d_pos >= 0, i_pos >= 0
        first = np.ones(len(gc), dtype=bool)             # a code's first group in the release
        first[1:] = gc[1:] != gc[:-1]
        last = np.ones(len(gc), dtype=bool)
        last[:-1] = first[1:]
        f = np.flatnonzero(first)
        pre_id = self.ids.find(gc[f]) if self.ids.n else np.full(len(f), -1, dtype=np.int64)
        pre_live = pre_id >= 0
        pre_live[pre_live] = self.live[pre_id[pre_live]]
        prev_live = np.empty(len(gc), dtype=bool)        # the code holds a row just before the group
        prev_live[f] = pre_live
        later = np.flatnonzero(~first)
        prev_live[later] = has_i[later - 1]
        if (has_d & ~prev_live).any() or (~has_d & has_i & prev_live).any():
            return False
        # a delete carries the values of the row it retracts: held before the release, or the previous group's
        d_first = f[has_d[f]]
        if len(d_first):
            held = pre_id[has_d[f]]
            if not _rows_equal([c[held] for c in self.store], [c[d_pos[d_first]] for c in cols]):
                return False
        d_later = later[has_d[later]]
        if len(d_later) and not _rows_equal([c[i_pos[d_later - 1]] for c in cols],
                                            [c[d_pos[d_later]] for c in cols]):
            return False
        # commit: each code ends as its last group leaves it
        fin = has_i[last]
        gone = pre_id[pre_live & ~fin]
        self.live[gone] = False
        now = np.flatnonzero(fin)
        if len(now):
            ids = pre_id[now]
            new = ids < 0
            if new.any():
                ids[new] = self.ids.ids(gc[f[now[new]]])
                self._grow(self.ids.n)
            rows = i_pos[np.flatnonzero(last)[now]]
            for held, c in zip(self.store, cols):
                held[ids] = c[rows]
            self.live[ids] = True
        self.n_live += int(fin.sum()) - int(pre_live.sum())
        if self.ids.n > 4 * self.n_live + REBUILD_SLACK:
            self._rebuild()
        return True

    def _grow(self, n: int) -> None:
        """Room for ids below ``n``: the arrays double."""
        cap = len(self.live)
        if n <= cap:
            return
        cap = max(n, 2 * cap)
        live = np.zeros(cap, dtype=bool)
        live[:len(self.live)] = self.live
        self.live = live
        store = []
        for c in self.store:
            a = np.empty(cap, dtype=c.dtype)
            a[:len(c)] = c
            store.append(a)
        self.store = store

    def _rebuild(self) -> None:
        """Number the live codes alone again (ids of codes that left are dropped)."""
        codes, cols = self.rows()
        self.ids = IntIds()
        self.ids.append(codes)
        n = len(codes)
        cap = max(64, 2 * n)
        self.live = np.zeros(cap, dtype=bool)
        self.live[:n] = True
        store = []
        for c, old in zip(cols, self.store):
            a = np.empty(cap, dtype=old.dtype)
            a[:n] = c
            store.append(a)
        self.store = store


def _groups(ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray],
            codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The release as groups of one code at one instant, ordered by code and then time: each group's code,
    and the position of its delete and of its insert (-1: none). A row inserted and deleted at one instant
    cancels (and a group left empty goes). None when a group keeps two deletes or two inserts."""
    o = stable_argsort(codes)                           # by code; in time order within a code (input order)
    c, t = codes[o], ts[o]
    brk = np.ones(len(c), dtype=bool)
    brk[1:] = (c[1:] != c[:-1]) | (t[1:] != t[:-1])
    gid = np.cumsum(brk) - 1
    n_groups = int(gid[-1]) + 1
    neg = sign[o] < 0
    nd = np.bincount(gid[neg], minlength=n_groups)
    ni = np.bincount(gid[~neg], minlength=n_groups)
    if (nd > 1).any() or (ni > 1).any():
        return _netted_groups(ts, sign, cols, codes)
    d_pos = np.full(n_groups, -1, dtype=np.int64)
    d_pos[gid[neg]] = o[neg]
    i_pos = np.full(n_groups, -1, dtype=np.int64)
    i_pos[gid[~neg]] = o[~neg]
    gc = c[np.flatnonzero(brk)]
    both = np.flatnonzero((nd == 1) & (ni == 1))
    if len(both):
        same = _equal_rows([c[d_pos[both]] for c in cols], [c[i_pos[both]] for c in cols])
        if same.any():
            keep = np.ones(n_groups, dtype=bool)
            keep[both[same]] = False
            gc, d_pos, i_pos = gc[keep], d_pos[keep], i_pos[keep]
    return gc, d_pos, i_pos


def _netted_groups(ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray],
                   codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``_groups`` for a release where some code has several deletes or inserts at one instant: equal rows
    of opposite signs at one instant cancel (one pass in Python, over the release; an aggregate's changes
    never need it, other inputs rarely), and what is left must be at most one of each."""
    by_group: dict[tuple[int, int], dict[tuple, list[int]]] = {}
    rows = list(zip(*[_keys_of(c) for c in cols])) if cols else [()] * len(codes)
    for i, (t, c, s, r) in enumerate(zip(ts.tolist(), codes.tolist(), sign.tolist(), rows)):
        by_row = by_group.setdefault((c, t), {})
        pend = by_row.setdefault(r, [])
        if pend and (sign[pend[-1]] > 0) != (s > 0):
            pend.pop()                                  # cancels a row of the opposite sign
        else:
            pend.append(i)
    out_c, out_d, out_i = [], [], []
    for (c, _t), by_row in sorted(by_group.items()):
        left = [i for pend in by_row.values() for i in pend]
        dels = [i for i in left if sign[i] < 0]
        ins = [i for i in left if sign[i] > 0]
        if len(dels) > 1 or len(ins) > 1:
            return None
        if dels or ins:
            out_c.append(c)
            out_d.append(dels[0] if dels else -1)
            out_i.append(ins[0] if ins else -1)
    return (np.array(out_c, dtype=np.int64), np.array(out_d, dtype=np.int64),
            np.array(out_i, dtype=np.int64))


def _keys_of(c: np.ndarray) -> list:
    """A column's values as hashable keys that are equal exactly when ``_equal_rows`` says so."""
    if c.dtype.kind == "f":
        return c.view(np.dtype(f"i{c.dtype.itemsize}")).tolist()
    return c.tolist()


def _equal_rows(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """Per row, whether the rows of ``a`` and ``b`` are equal value for value (floats by their bits, so that
    NaN matches NaN and -0.0 does not match 0.0: a delete carries the very value its insert did)."""
    n = len(a[0]) if a else 0
    out = np.ones(n, dtype=bool)
    for x, y in zip(a, b):
        if x.dtype.kind == "f" and x.dtype == y.dtype:
            bits = np.dtype(f"i{x.dtype.itemsize}")
            x, y = x.view(bits), y.view(bits)
        out &= np.asarray(x == y, dtype=bool)
    return out


def _rows_equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return bool(_equal_rows(a, b).all())


class KeyedIndexSynopsis(SortedRunIndexSynopsis):
    """A join input the planner knows to hold at most one row per join key: held as ``KeyedRows`` while its
    releases keep that promise, in the sorted-run forms of the base class after one that does not (see the
    module). The join sees one index either way: ``lookup``, ``insert`` and the counts its bounded runs
    weigh releases by; a keyed side never matches first in, first out (``match`` gives None), so the join
    applies its releases as signed rows, which is what a relation updated at random needs."""

    def __init__(self) -> None:
        super().__init__()
        self.by_key: KeyedRows | None = KeyedRows()
        self._last: tuple[np.ndarray, np.ndarray] | None = None      # (probe codes, ids) of the last probe

    def keyed(self) -> bool:
        """Whether the rows are held by key (else in the base class's forms, for good)."""
        return self.by_key is not None

    def __len__(self) -> int:
        if self.by_key is not None:
            return self.by_key.n_live
        return super().__len__()

    def nbytes(self) -> int:
        if self.by_key is not None:
            return self.by_key.nbytes()
        return super().nbytes()

    def _ids(self, codes: np.ndarray) -> np.ndarray:
        """``KeyedRows.find``, kept for the same probe array: a join counts a release's matches and then
        looks them up with the same codes, unchanged in between."""
        last = self._last
        if last is not None and last[0] is codes:
            return last[1]
        ids = self.by_key.find(codes)
        self._last = (codes, ids)
        return ids

    def counts(self, codes: np.ndarray) -> np.ndarray:
        if self.by_key is not None:
            return (self._ids(codes) >= 0).astype(np.int64)
        return super().counts(codes)

    def total_matches(self, codes: np.ndarray) -> int:
        if self.by_key is not None:
            return int(np.count_nonzero(self._ids(codes) >= 0))
        return super().total_matches(codes)

    def most_per_key(self) -> int:
        if self.by_key is not None:
            return min(1, self.by_key.n_live)
        return super().most_per_key()

    def lookup(self, codes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray | None]:
        if self.by_key is None:
            return super().lookup(codes)
        ids = self._ids(codes)
        pidx = np.flatnonzero(ids >= 0)
        if not len(pidx):
            return _EMPTY, [], None
        slots = ids[pidx]
        return pidx, [c[slots] for c in self.by_key.store], None

    def insert(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> None:
        if self.by_key is not None:
            self._last = None
            if self.by_key.apply(ts, sign, cols, codes):
                return
            self.unkey()
        super().insert(ts, sign, cols, codes)

    def unkey(self) -> None:
        """Hold the rows in the base class's forms from now on (a release broke the one-row-per-key promise,
        or the join needs what only those forms give)."""
        if self.by_key is None:
            return
        codes, cols = self.by_key.rows()
        self.by_key, self._last = None, None
        if len(codes):
            super().insert(np.zeros(len(codes), dtype=np.int64), np.ones(len(codes), dtype=np.int8), cols, codes)

    # what only the sorted-run forms do: leave the keyed form first (a keyed side's releases are signed rows,
    # so the join does not ask for these while it is keyed)

    def match(self, ts=None, sign=None, cols=None, codes=None):
        if self.by_key is not None:
            return None
        return super().match(ts, sign, cols, codes)

    def match_ordered(self, dels, ins, codes):
        if self.by_key is not None:
            return None
        return super().match_ordered(dels, ins, codes)

    def stage(self, rel):
        self.unkey()
        return super().stage(rel)

    def find(self, codes, lo=None):
        self.unkey()
        return super().find(codes, lo)

    def signed_table(self):
        self.unkey()
        return super().signed_table()

    def key_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The distinct key codes held and how many rows hold each (one each), or None when not keyed."""
        if self.by_key is None:
            return None
        codes, _ = self.by_key.rows()
        return np.sort(codes), np.ones(len(codes))
