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
from synopses.sorted_run_index import FastFormIndex

_EMPTY = np.empty(0, dtype=np.int64)
REBUILD_SLACK = 1024        # dead key slots tolerated beyond three times the live rows before a rebuild


class GroupSlots:
    """Dense ids for int64 group values that persist: a lookup table indexed by value while the values span
    little (auction ids, NEXMark q9: one subtraction and one gather per probe, no hashing), a hash table
    (``IntIds``) once they spread out, for good. Ids are handed out in order, so either way they number the
    rows of ``KeyedRows``.

    >>> s = GroupSlots()
    >>> s.add(np.array([7, 3])).tolist(), s.find(np.array([3, 5, 7, -2**63])).tolist()
    ([0, 1], [1, -1, 0, -1])
    """

    def __init__(self) -> None:
        self.n = 0
        self.keys = np.zeros(64, dtype=np.int64)           # the value of each id
        self.base = 0
        self.table = np.full(1, -1, dtype=np.int64)        # value - base -> id, -1: none; then a -1 sentinel
        self.hash: IntIds | None = None

    def nbytes(self) -> int:
        return self.keys.nbytes + (self.hash.nbytes() if self.hash is not None else self.table.nbytes)

    def find(self, g: np.ndarray) -> np.ndarray:
        """The id of each value, -1 where it has none."""
        if self.hash is not None:
            return self.hash.find(g)
        # offsets read unsigned (a value at least ``base`` is that far above it, even where int64 wraps); a
        # value below ``base`` or past the table lands on the sentinel
        end = len(self.table) - 1
        rel = np.minimum((g - self.base).view(np.uint64), end)
        rel[g < self.base] = end
        return self.table[rel]

    def add(self, g: np.ndarray) -> np.ndarray:
        """Ids for distinct values that have none: the next ones, in order."""
        n, m = self.n, len(g)
        if n + m > len(self.keys):
            keys = np.zeros(max(n + m, 2 * len(self.keys)), dtype=np.int64)
            keys[:n] = self.keys[:n]
            self.keys = keys
        self.keys[n:n + m] = g
        self.n = n + m
        ids = np.arange(n, n + m, dtype=np.int64)
        if self.hash is not None:
            self.hash.append(g)
            return ids
        width = len(self.table) - 1
        lo, hi = int(g.min()), int(g.max())
        if width:
            lo, hi = min(lo, self.base), max(hi, self.base + width - 1)
        span = hi - lo + 1
        if span > 4 * self.n + 65536:                     # spread out: hashed from now on
            self.hash = IntIds()
            self.hash.append(self.keys[:self.n])
            self.table = np.full(1, -1, dtype=np.int64)
            return ids
        if not width or lo < self.base or hi >= self.base + width:
            table = np.full(span + span // 2 + 65, -1, dtype=np.int64)      # room above, and the sentinel
            if width:
                table[self.base - lo:self.base - lo + width] = self.table[:width]
            self.table, self.base = table, lo
        self.table[g - self.base] = ids
        return ids


class KeyedRows:
    """Rows by group value, at most one live row per value: ``slots`` numbers the values seen, ``live`` says
    which numbers hold a row, and the columns and the join key code hold each number's row (grown by
    doubling). The group value is the input's unique key (an INT column of it), or, for keys of other shapes,
    the join key code itself; a probe gives both, and finds the row of its group value if its code is the
    row's.

    >>> k = KeyedRows()
    >>> cols = [np.array([1, 2]), np.array([9.5, 7.0])]
    >>> k.apply(np.array([1, 1]), np.array([1, 1], np.int8), cols, np.array([10, 20]), cols[0])
    True
    >>> k.apply(np.array([2, 2]), np.array([-1, 1], np.int8), [np.array([1, 1]), np.array([9.5, 8.0])],
    ...         np.array([10, 11]), np.array([1, 1]))
    True
    >>> ids = k.find(np.array([11, 20, 10]), np.array([1, 2, 1]))
    >>> ids >= 0, [c[ids[:2]].tolist() for c in k.store]
    (array([ True,  True, False]), [[1, 2], [8.0, 7.0]])
    >>> k.apply(np.array([3]), np.array([1], np.int8), [np.array([2]), np.array([1.0])], np.array([21]),
    ...         np.array([2]))
    False
    """

    def __init__(self) -> None:
        self.slots = GroupSlots()
        self.live = np.zeros(64, dtype=bool)       # per id: holds a row
        self.codes = np.zeros(64, dtype=np.int64)  # per id: the join key code of its row
        self.store: list[np.ndarray] | None = None  # per column, the row of each id (None until a row is seen)
        self.n_live = 0

    def nbytes(self) -> int:
        n = self.slots.n
        held = sum(array_bytes(c[:n]) for c in self.store) if self.store is not None else 0
        return self.slots.nbytes() + self.live.nbytes + self.codes.nbytes + held

    def find(self, codes: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The id of the live row of each probe (join key code, group value), -1 where none."""
        if not self.n_live or not len(codes):
            return np.full(len(codes), -1, dtype=np.int64)
        ids = self.slots.find(g)
        found = ids >= 0
        at = ids[found]
        found[found] = self.live[at] & (self.codes[at] == codes[found])
        return np.where(found, ids, -1)

    def rows(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The live rows: their join key codes and columns."""
        ids = np.flatnonzero(self.live[:self.slots.n])
        return self.codes[ids], ([c[ids] for c in self.store] if self.store is not None else [])

    def apply(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray,
              g: np.ndarray) -> bool:
        """Apply signed rows in time order with their join key codes and group values; False, with nothing
        changed, when they do not keep at most one row per group value (or delete a row that is not held)."""
        if not len(codes):
            return True
        if self.store is None:
            self.store = [np.empty(len(self.live), dtype=c.dtype) for c in cols]
        groups = _groups(ts, sign, cols, g, codes)
        if groups is None:
            return False
        gc, d_pos, i_pos = groups
        if not len(gc):
            return True
        has_d, has_i = d_pos >= 0, i_pos >= 0
        first = np.ones(len(gc), dtype=bool)             # a value's first group in the release
        first[1:] = gc[1:] != gc[:-1]
        last = np.ones(len(gc), dtype=bool)
        last[:-1] = first[1:]
        f = np.flatnonzero(first)
        pre_id = self.slots.find(gc[f]) if self.slots.n else np.full(len(f), -1, dtype=np.int64)
        pre_live = pre_id >= 0
        pre_live[pre_live] = self.live[pre_id[pre_live]]
        prev_live = np.empty(len(gc), dtype=bool)        # the value holds a row just before the group
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
        # commit: each value ends as its last group leaves it
        fin = has_i[last]
        self.live[pre_id[pre_live & ~fin]] = False
        now = np.flatnonzero(fin)
        if len(now):
            ids = pre_id[now]
            new = ids < 0
            if new.any():
                ids[new] = self.slots.add(gc[f[now[new]]])
                self._grow(self.slots.n)
            rows = i_pos[np.flatnonzero(last)[now]]
            for held, c in zip(self.store, cols):
                held[ids] = c[rows]
            self.codes[ids] = codes[rows]
            self.live[ids] = True
        self.n_live += len(now) - int(pre_live.sum())
        if self.slots.n > 4 * self.n_live + REBUILD_SLACK:
            self._rebuild()
        return True

    def _grow(self, n: int) -> None:
        """Room for ids below ``n``: the arrays double."""
        cap = len(self.live)
        if n <= cap:
            return
        cap = max(n, 2 * cap)
        self.live, self.codes = _widened(self.live, cap), _widened(self.codes, cap)
        self.store = [_widened(c, cap) for c in self.store]

    def _rebuild(self) -> None:
        """Number the live values alone again (ids of values that left are dropped)."""
        ids = np.flatnonzero(self.live[:self.slots.n])
        values = self.slots.keys[ids]
        self.slots = GroupSlots()
        if len(ids):
            self.slots.add(values)
        cap = max(64, 2 * len(ids))
        self.live = np.zeros(cap, dtype=bool)
        self.live[:len(ids)] = True
        self.codes = _widened(self.codes[ids], cap)
        self.store = [_widened(c[ids], cap) for c in self.store]


def _widened(a: np.ndarray, cap: int) -> np.ndarray:
    """``a`` at the front of an array of ``cap`` elements (the rest uninitialised, or False)."""
    out = np.zeros(cap, dtype=a.dtype) if a.dtype == bool else np.empty(cap, dtype=a.dtype)
    out[:len(a)] = a
    return out


def _groups(ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], values: np.ndarray,
            codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The release as groups of one group value at one instant, ordered by value and then time: each
    group's value, and the position of its delete and of its insert (-1: none). A row inserted and deleted
    at one instant cancels (and a group left empty goes). None when a group keeps two deletes or two
    inserts. ``codes`` (the rows' join key codes) tell most rows apart before their columns are compared."""
    o = stable_argsort(values)                          # by value; in time order within a value (input order)
    c, t = values[o], ts[o]
    brk = np.ones(len(c), dtype=bool)
    brk[1:] = (c[1:] != c[:-1]) | (t[1:] != t[:-1])
    gid = np.cumsum(brk) - 1
    n_groups = int(gid[-1]) + 1
    neg = sign[o] < 0
    nd = np.bincount(gid[neg], minlength=n_groups)
    ni = np.bincount(gid[~neg], minlength=n_groups)
    if (nd > 1).any() or (ni > 1).any():
        return _netted_groups(ts, sign, cols, values)
    d_pos = np.full(n_groups, -1, dtype=np.int64)
    d_pos[gid[neg]] = o[neg]
    i_pos = np.full(n_groups, -1, dtype=np.int64)
    i_pos[gid[~neg]] = o[~neg]
    gc = c[np.flatnonzero(brk)]
    both = np.flatnonzero((nd == 1) & (ni == 1))
    both = both[codes[d_pos[both]] == codes[i_pos[both]]]    # equal rows have equal codes
    if len(both):
        same = _equal_rows([c[d_pos[both]] for c in cols], [c[i_pos[both]] for c in cols])
        if same.any():
            keep = np.ones(n_groups, dtype=bool)
            keep[both[same]] = False
            gc, d_pos, i_pos = gc[keep], d_pos[keep], i_pos[keep]
    return gc, d_pos, i_pos


def _netted_groups(ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray],
                   codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``_groups`` for a release where some value (``codes``) has several deletes or inserts at one instant: equal rows
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


class KeyedIndexSynopsis(FastFormIndex):
    """A join input the planner knows to hold at most one row per join key: held as ``KeyedRows`` while its
    releases keep that promise, in the sorted-run forms of the base class after one that does not (see the
    module). ``group`` says what numbers the rows: ``()`` for an input of one row at most (an aggregate
    without GROUP BY), ``(own, probe)`` for a unique key that is one integer column (``own`` in this input,
    ``probe`` the other input's column it is equated with), None for any other key (the join key code).

    The join applies a keyed input's releases through ``lookup_keyed`` and ``insert_keyed``
    (``dsms/operators/keyed_join.py``), which take the batches the codes come from; anything else it asks
    (the general release, or a release too large for one run) turns the index into the base class's forms
    first, for good."""

    def __init__(self, group: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.group = group
        self.by_key: KeyedRows | None = KeyedRows()

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

    def values(self, batch, codes: np.ndarray, probing: bool) -> np.ndarray:
        """The group values of a batch's rows: of this input's (``probing`` False) or of the other input's."""
        g = self.group
        if g is None:
            return codes
        if not g:
            return np.zeros(len(codes), dtype=np.int64)
        return batch.column(g[1] if probing else g[0]).astype(np.int64, copy=False)

    def lookup_keyed(self, codes: np.ndarray, batch) -> tuple[np.ndarray, list[np.ndarray], None]:
        """``lookup`` for probes with these codes from rows of the other input (``batch``), held by key:
        (probe index, the rows' columns, None: every row is an insert)."""
        ids = self.by_key.find(codes, self.values(batch, codes, True))
        pidx = np.flatnonzero(ids >= 0)
        if not len(pidx):
            return _EMPTY, [], None
        slots = ids[pidx]
        return pidx, [c[slots] for c in self.by_key.store], None

    def insert_keyed(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray,
                     batch) -> None:
        """``insert`` for this input's rows (``batch``) held by key; a release that breaks the promise turns
        the index into the base class's forms and is applied there."""
        if self.by_key is not None and self.by_key.apply(ts, sign, cols, codes, self.values(batch, codes, False)):
            return
        self.unkey()
        super().insert(ts, sign, cols, codes)

    def unkey(self) -> None:
        """Hold the rows in the base class's forms from now on (a release broke the one-row-per-key promise,
        or the join asks what only those forms answer)."""
        if self.by_key is None:
            return
        codes, cols = self.by_key.rows()
        self.by_key = None
        self.hold_in_runs(codes, cols)

    leave_form = unkey

    def lookup(self, codes):
        self.unkey()
        return super().lookup(codes)

    def insert(self, ts, sign, cols, codes):
        self.unkey()
        super().insert(ts, sign, cols, codes)

    def key_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The distinct key codes held and how many rows hold each (one each), or None when not keyed."""
        if self.by_key is None:
            return None
        codes, _ = self.by_key.rows()
        return np.sort(codes), np.ones(len(codes))
