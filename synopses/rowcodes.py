"""Integer codes for whole rows, so that operators can group and compare rows with numpy instead of hashing
Python tuples one by one."""

from __future__ import annotations

import numpy as np

from synopses.sort_order import stable_lexsort2


def row_codes(cols: list[np.ndarray]) -> np.ndarray | None:
    """One int64 per row, equal exactly when the rows are equal (within this call). None when the combined
    code space would overflow int64 (the caller then falls back to Python tuples).

    Each column contributes a digit: an integer column whose values span at most about four times the rows
    its offset from its smallest value (no sort: ids, categories, instants close together), any other column
    its rank among its distinct values (``np.unique``, a sort). The codes stay below the product of the
    digits' ranges, re-numbered densely when that would pass 2**62.

    >>> row_codes([np.array([5, 7, 5]), np.array(["a", "b", "a"], dtype=object)]).tolist()
    [0, 5, 0]
    """
    n = len(cols[0]) if cols else 0
    if not cols:
        return np.zeros(n, dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    space = 1
    for c in cols:
        if c.dtype.kind == "f":
            # -0.0 == 0.0 and NaN never equals itself in SQL terms; normalise -0.0 so equal values group
            c = c + 0.0
        inv = None
        if n and (c.dtype.kind == "i" or (c.dtype.kind == "u" and c.dtype.itemsize < 8)):
            lo = int(c.min())
            k = int(c.max()) - lo + 1
            if k <= 4 * n + 256:
                inv = c.astype(np.int64) - lo
        if inv is None:
            uniq, inv = np.unique(c, return_inverse=True)
            k = max(len(uniq), 1)
        if space * k >= 2**62:
            # re-densify what we have so far: at most n distinct codes
            u, code = np.unique(code, return_inverse=True)
            code = code.astype(np.int64).reshape(-1)
            space = max(len(u), 1)
            if space * k >= 2**62:
                return None
        code = code * k + inv.astype(np.int64).reshape(-1)
        space *= k
    return code


def pack_bits(cols: list[np.ndarray]) -> list[int] | None:
    """Bit fields for packing keys of these integer columns into an int64: per column the bits of its
    largest value, the spare bits of 63 shared out evenly. None when a value is negative or they do not fit.

    >>> pack_bits([np.array([1000, 1500]), np.array([2**40, 5])])
    [16, 46]
    """
    if not len(cols[0]) or any(int(c.min()) < 0 for c in cols):
        return None
    need = [max(1, int(c.max()).bit_length()) for c in cols]
    spare = 63 - sum(need)
    if spare < 0:
        return None
    return [b + spare // len(cols) for b in need]


def packed(cols: list[np.ndarray], bits: list[int]) -> np.ndarray:
    """The keys packed into one int64 each, the first column's value in the high bits (so that packed keys
    sort as the keys do, column by column); ``unpacked`` undoes it.

    >>> packed([np.array([1, 2]), np.array([5, 0])], [3, 4]).tolist()
    [21, 32]
    """
    out = cols[0].astype(np.int64)
    for c, w in zip(cols[1:], bits[1:]):
        out <<= w
        out |= c.astype(np.int64, copy=False)
    return out


def unpacked(keys: np.ndarray, bits: list[int]) -> list[np.ndarray]:
    """The columns of packed keys (``packed``).

    >>> [c.tolist() for c in unpacked(np.array([21, 32]), [3, 4])]
    [[1, 2], [5, 0]]
    """
    out = []
    shift = sum(bits)
    for w in bits:
        shift -= w
        out.append((keys >> shift) & ((1 << w) - 1))
    return out


def segments(ts: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort rows by (ts, code, position); returns (order, starts, ends) of the runs of equal (ts, code)."""
    n = len(ts)
    order = stable_lexsort2(code, ts)
    t, c = ts[order], code[order]
    if n == 0:
        e = np.empty(0, dtype=np.int64)
        return order, e, e
    change = np.nonzero((t[1:] != t[:-1]) | (c[1:] != c[:-1]))[0] + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])
    return order, starts, ends


_FIB = np.uint64(0x9E3779B97F4A7C15)     # 2**64 / golden ratio: multiplicative (Fibonacci) hashing
_TAIL = 24                                # keys still probing after the vector rounds: finished one by one


class IntIds:
    """Dense ids for int64 keys that persist across calls, with no Python per key: an open-addressing hash
    table (slot -> id; the keys themselves are kept by id) probed for a whole batch at once. Linear probing,
    each round handling the keys not yet resolved; the table is kept at most a quarter full, so that nearly
    every key resolves in the first round and the longest probe stays a few slots.

    >>> t = IntIds()
    >>> t.ids(np.array([7, 3, 7])).tolist(), t.ids(np.array([5, 3])).tolist()
    ([0, 1, 0], [2, 1])
    """

    def __init__(self) -> None:
        self.n = 0                                      # ids handed out: 0 .. n-1
        self.keys = np.zeros(64, dtype=np.int64)        # the key of each id (capacity grows by doubling)
        self.all_new = False                            # the last ``ids`` call's keys were all new (``ids``)
        self._rebuild()

    def nbytes(self) -> int:
        return self.keys.nbytes + self.slots.nbytes

    def _hash(self, k: np.ndarray) -> np.ndarray:
        return ((k.astype(np.int64, copy=False).view(np.uint64) * _FIB) >> self.shift).astype(np.int64)

    def _rebuild(self, room: int = 0) -> None:
        """A fresh table for the keys of ids 0 .. n-1, an eighth full at most (with ``room`` keys more)."""
        bits = max(6, (8 * max(self.n, room)).bit_length())
        self.shift = np.uint64(64 - bits)
        self.slots = np.full(1 << bits, -1, dtype=np.int32)    # id at each slot, -1: empty
        if self.n:
            self._place(self.keys[:self.n], np.arange(self.n, dtype=np.int32))

    def _place(self, k: np.ndarray, ids: np.ndarray) -> None:
        """Put distinct keys known to be absent into the table."""
        slots, mask = self.slots, len(self.slots) - 1
        h = self._hash(k)
        todo = np.arange(len(k))
        while len(todo):
            empty = np.flatnonzero(slots[h] < 0)
            he, ie = h[empty], ids[todo[empty]]
            slots[he] = ie                              # keys racing for one slot: one of them gets it
            rest = np.ones(len(todo), dtype=bool)
            rest[empty[slots[he] == ie]] = False
            todo, h = todo[rest], (h[rest] + 1) & mask

    def _find(self, k: np.ndarray) -> np.ndarray:
        """The id of each key, -1 where absent."""
        slots, keys, mask = self.slots, self.keys, len(self.slots) - 1
        h = self._hash(k)
        out = slots[h].astype(np.int64)
        more = (out >= 0) & (keys[out] != k)            # an occupied slot holding another key: probe on
        if more.any():
            out[more] = -1
            todo = np.flatnonzero(more)
            h = (h[todo] + 1) & mask
            while len(todo) > _TAIL:
                sid = slots[h].astype(np.int64)
                hit = (sid >= 0) & (keys[sid] == k[todo])
                out[todo[hit]] = sid[hit]
                more = (sid >= 0) & ~hit
                todo, h = todo[more], (h[more] + 1) & mask
            for i, j in zip(todo.tolist(), h.tolist()):     # the few long probes: one by one
                key = int(k[i])
                while (sid := int(slots[j])) >= 0 and int(keys[sid]) != key:
                    j = (j + 1) & mask
                out[i] = sid
        return out

    def ids(self, k: np.ndarray) -> np.ndarray:
        """The id of every key; new keys get the next ids. After a call whose keys were all new (each batch of
        a key that only grows, as NEXMark q8's new persons under its DISTINCT) the keys go to ``_add`` straight,
        which finds the present ones as well (linear probing with no deletions reaches a present key's slot
        before any empty one): the probe of ``_find`` would find none of them (issue 15)."""
        if self.all_new:
            before = self.n
            out = self._add(k)
            self.all_new = self.n - before == len(k)
            return out
        out = self._find(k)
        miss = np.flatnonzero(out < 0)
        if len(miss):
            out[miss] = self._add(k[miss])
        self.all_new = len(miss) == len(k) > 0
        return out

    def find(self, k: np.ndarray) -> np.ndarray:
        """The id of each key, -1 where absent; adds nothing."""
        return self._find(k.astype(np.int64, copy=False))

    def append(self, k: np.ndarray) -> None:
        """Give distinct keys known to be absent the next ids, in their order (``ids`` numbers new keys in
        the order its probes settle them; a caller whose ids must follow key order uses this)."""
        n, m = self.n, len(k)
        if n + m >= len(self.keys):
            keys = np.zeros(max(n + m + 1, 2 * len(self.keys)), dtype=np.int64)
            keys[:n] = self.keys[:n]
            self.keys = keys
        self.keys[n:n + m] = k
        self.n = n + m
        if 4 * self.n > len(self.slots):
            self._rebuild()                             # places every key, the new ones included
        else:
            self._place(self.keys[n:n + m], np.arange(n, n + m, dtype=np.int32))

    def _add(self, k: np.ndarray) -> np.ndarray:
        """Ids for keys that were absent (repeats allowed): find-or-insert, probing all of them at once. Keys
        racing for one empty slot: one wins it and gets the next id; the others look at the slot again."""
        n, m = self.n, len(k)
        if n + m >= len(self.keys):
            keys = np.zeros(max(n + m + 1, 2 * len(self.keys)), dtype=np.int64)
            keys[:n] = self.keys[:n]
            self.keys = keys
        if 4 * (n + m) > len(self.slots):
            self._rebuild(n + m)
        slots, keys, mask = self.slots, self.keys, len(self.slots) - 1
        out = np.empty(m, dtype=np.int64)
        todo = np.arange(m)
        h = self._hash(k)
        while len(todo) > _TAIL:
            sid = slots[h].astype(np.int64)
            free = sid < 0
            if free.any():
                fe = np.flatnonzero(free)
                slots[h[fe[::-1]]] = -2 - fe[::-1]      # claim with a mark of the candidate (the first wins)
                won = fe[slots[h[fe]] == -2 - fe]
                new = np.arange(self.n, self.n + len(won), dtype=np.int64)
                keys[new] = k[todo[won]]
                slots[h[won]] = new
                self.n += len(won)
                sid[fe] = slots[h[fe]]
            hit = keys[sid] == k[todo]                  # every slot looked at is taken now
            out[todo[hit]] = sid[hit]
            h, todo = (h[~hit] + 1) & mask, todo[~hit]  # another key's slot: probe on
        for i, j in zip(todo.tolist(), h.tolist()):         # the few long probes: one by one
            key = int(k[i])
            while (sid := int(slots[j])) >= 0 and int(keys[sid]) != key:
                j = (j + 1) & mask
            if sid < 0:                                 # an empty slot: the key is new
                sid = self.n
                slots[j], keys[sid] = sid, key
                self.n += 1
            out[i] = sid
        return out

    def key_of(self) -> np.ndarray:
        """The key of every id (a view)."""
        return self.keys[:self.n]

    def rekey(self, keys: np.ndarray) -> None:
        """Replace the key of every id (they must stay distinct)."""
        self.keys = np.concatenate([keys.astype(np.int64), np.zeros(1, dtype=np.int64)])   # never empty
        self._rebuild()

    def compact(self, keep: np.ndarray) -> np.ndarray:
        """Forget the ids not in the mask ``keep`` and renumber the others densely, in the same order.
        Returns the new id of every old id (-1 for forgotten ones)."""
        new = _renumber(keep)
        self.keys = np.concatenate([self.keys[:self.n][keep], np.zeros(1, dtype=np.int64)])   # never empty
        self.n = int(keep.sum())
        self._rebuild()
        return new


class ObjectIds:
    """Dense ids for hashable Python values (strings) that persist across calls: a dict, one lookup per row
    with no Python loop of our own (``map`` over the dict's ``__getitem__``)."""

    def __init__(self) -> None:
        self.n = 0
        self.id_of: dict = {}

    def nbytes(self) -> int:
        from synopses.base import deep_bytes
        return deep_bytes(self.id_of)

    def ids(self, c: np.ndarray) -> np.ndarray:
        vals = c.tolist()
        try:
            return np.fromiter(map(self.id_of.__getitem__, vals), dtype=np.int64, count=len(vals))
        except KeyError:
            pass
        id_of = self.id_of
        for v in dict.fromkeys(vals):
            if v not in id_of:
                id_of[v] = self.n
                self.n += 1
        return np.fromiter(map(id_of.__getitem__, vals), dtype=np.int64, count=len(vals))

    def compact(self, keep: np.ndarray) -> np.ndarray:
        new = _renumber(keep)
        nl = new.tolist()
        self.id_of = {v: nl[i] for v, i in self.id_of.items() if nl[i] >= 0}
        self.n = len(self.id_of)
        return new


def _renumber(keep: np.ndarray) -> np.ndarray:
    new = np.full(len(keep), -1, dtype=np.int64)
    new[keep] = np.arange(int(keep.sum()), dtype=np.int64)
    return new


def value_keys(c: np.ndarray) -> np.ndarray:
    """int64 keys equal exactly when the values are equal in SQL: integers and booleans as themselves, floats
    by their bits once -0.0 is made 0.0 and every NaN one NaN (NaN equals NaN, as in GROUP BY)."""
    if c.dtype.kind == "f":
        x = c.astype(np.float64) + 0.0
        nan = np.isnan(x)
        if nan.any():
            x[nan] = np.nan
        return x.view(np.int64)
    return c.astype(np.int64, copy=False)


def row_hashes(cols: list[np.ndarray]) -> np.ndarray:
    """A uint64 per row, equal whenever the rows are equal in SQL (as ``value_keys``); unequal rows may
    collide, so a match is only a candidate. Cheaper than ``row_codes``: no sort, one pass per column."""
    n = len(cols[0]) if cols else 0
    h = np.zeros(n, dtype=np.uint64)
    for c in cols:
        if c.dtype.kind == "O":
            bits = np.fromiter(map(hash, c.tolist()), dtype=np.int64, count=n).view(np.uint64)
        else:
            bits = value_keys(c).view(np.uint64)
        h = (h * _FIB) ^ bits
        h ^= h >> np.uint64(29)
    return h


def hash_runs(cols: list[np.ndarray], h: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(order, start): the rows (at least one) sorted by their hashes (``h``, by default ``row_hashes``), and
    where each run of equal hashes starts in that order, every run checked to hold rows equal in SQL (as
    ``value_keys``); None when two unequal rows share a hash, which is rare. Rows grouped by one sort of a
    hash instead of one per column (``row_codes``): wide columns, prices or timestamps, cost a sort each
    there."""
    if h is None:
        h = row_hashes(cols)
    order = np.argsort(h)
    hs = h[order]
    start = np.ones(len(h), dtype=bool)
    start[1:] = hs[1:] != hs[:-1]
    pair = np.flatnonzero(~start[1:])                  # sorted rows pair, pair + 1 share a hash
    if len(pair):
        a, b = order[pair], order[pair + 1]
        eq = np.ones(len(pair), dtype=bool)
        for c in cols:
            k = c if c.dtype.kind == "O" else value_keys(c)
            eq &= k[a] == k[b]
        if not eq.all():
            return None
    return order, start


def hashed_codes(cols: list[np.ndarray]) -> np.ndarray | None:
    """Dense int64 codes equal exactly when the rows are equal in SQL (as ``value_keys``), like ``row_codes``
    but from one sort of the rows' hashes (``hash_runs``); if two unequal rows share a hash, the codes come
    from ``row_codes``. The codes are numbered in hash order, not in the rows' order: they say which rows are
    equal, nothing more.

    >>> hashed_codes([np.array([5, 7, 5]), np.array(["a", "b", "a"], dtype=object)]).tolist() in ([0, 1, 0], [1, 0, 1])
    True
    """
    n = len(cols[0]) if cols else 0
    if not n:
        return np.zeros(n, dtype=np.int64)
    runs = hash_runs(cols)
    if runs is None:
        return row_codes(cols)
    order, start = runs
    code = np.empty(n, dtype=np.int64)
    code[order] = np.cumsum(start) - 1
    return code


class RowIds:
    """Dense ids for whole rows that persist across batches: equal rows (SQL equality: -0.0 equals 0.0, NaN
    equals NaN) get the same id, whichever batch they arrive in.

    Each column's values get persistent dense codes (``IntIds`` over ``value_keys``, or ``ObjectIds`` for
    strings); the rows' ids are then built column by column, each step an ``IntIds`` over
    ``(id of the row's prefix) << shift | code of the next column``, where ``shift`` is just wide enough for
    that column's codes (it grows, and the step's keys are rewritten, when the column gets more values). So a
    batch costs a few hash-table probes per column and, for a string column, one dict lookup per row, with no
    Python tuple per row: a batch whose rows are nearly all distinct costs no more Python than one with few
    (a dict of row tuples, looked up once per distinct row, would cost a tuple and a lookup per row then; and
    per-batch ``row_codes`` mean nothing outside their call). Ids and codes stay far below 2**31, beyond what
    fits in memory, so the combined keys fit in int64.

    >>> r = RowIds([np.dtype(object), np.dtype(np.float64)])
    >>> r.ids([np.array(["b", "a", "b"], dtype=object), np.array([0.0, 1.0, -0.0])]).tolist()
    [0, 1, 0]
    >>> r.ids([np.array(["a", "c"], dtype=object), np.array([1.0, 1.0])]).tolist()
    [1, 2]
    """

    def __init__(self, dtypes: list) -> None:
        self.columns = [ObjectIds() if np.dtype(d).kind == "O" else IntIds() for d in dtypes]
        self.links = [IntIds() for _ in dtypes[1:]]
        self.shifts = [0 for _ in dtypes[1:]]        # link j-1 keys: prefix << shifts[j-1] | code of column j
        self._empty = not dtypes                      # rows of no columns: all one row, id 0

    @property
    def n(self) -> int:
        """Ids handed out: 0 .. n-1."""
        if self._empty:
            return 1
        return (self.links[-1] if self.links else self.columns[0]).n

    def nbytes(self) -> int:
        return sum(t.nbytes() for t in self.columns) + sum(t.nbytes() for t in self.links)

    def _codes(self, j: int, c: np.ndarray) -> np.ndarray:
        t = self.columns[j]
        return t.ids(c) if isinstance(t, ObjectIds) else t.ids(value_keys(c))

    def ids(self, cols: list[np.ndarray]) -> np.ndarray:
        """The id of every row of the columns ``cols``; rows never seen before get new ids."""
        if self._empty:
            return np.zeros(len(cols[0]) if cols else 0, dtype=np.int64)
        code = self._codes(0, cols[0])
        for j, link in enumerate(self.links, 1):
            col = self._codes(j, cols[j])
            shift = self.shifts[j - 1]
            need = (self.columns[j].n - 1).bit_length()
            if need > shift:                          # the column outgrew its bits: rewrite the keys
                keys = link.key_of()
                link.rekey(((keys >> shift) << need) | (keys & ((1 << shift) - 1)))
                self.shifts[j - 1] = shift = need
            code = link.ids((code << shift) | col)
        return code

    def rows(self, ids: np.ndarray, dtypes: list) -> list[np.ndarray]:
        """The column values of the rows ``ids`` (the inverse of ``ids``, SQL-equal values as their canonical
        form: 0.0 for -0.0, one NaN): what a switch of a synopsis's kind reads the exact state back with.

        >>> r = RowIds([np.dtype(np.int64), np.dtype(object), np.dtype(np.float64)])
        >>> got = r.rows(r.ids([np.array([5, 7]), np.array(["a", "b"], dtype=object), np.array([1.5, -0.0])]),
        ...              [np.int64, object, np.float64])
        >>> [c.tolist() for c in got]
        [[5, 7], ['a', 'b'], [1.5, 0.0]]
        """
        if self._empty:
            return []
        codes: list = [None] * len(self.columns)
        code = np.asarray(ids, dtype=np.int64)
        for j in range(len(self.links), 0, -1):
            keys = self.links[j - 1].key_of()[code]
            shift = self.shifts[j - 1]
            codes[j] = keys & ((1 << shift) - 1)
            code = keys >> shift
        codes[0] = code
        out = []
        for t, c, dt in zip(self.columns, codes, dtypes):
            dt = np.dtype(dt)
            if isinstance(t, ObjectIds):
                inv = np.empty(t.n, dtype=object)
                for v, i in t.id_of.items():
                    inv[i] = v
                out.append(inv[c])
                continue
            keys = t.key_of()[c]
            out.append(keys.view(np.float64) if dt.kind == "f" else keys.astype(dt))
        return out

    def compact(self, keep: np.ndarray) -> np.ndarray:
        """Forget the rows whose ids are not in the boolean mask ``keep`` (length ``n``), with the column values
        only they used, and renumber the others densely in the same order. Returns the new id of every old id
        (-1 for forgotten ones)."""
        if self._empty:
            return _renumber(keep)
        return self._compact(len(self.links), keep)

    def _compact(self, level: int, keep: np.ndarray) -> np.ndarray:
        if level == 0:
            return self.columns[0].compact(keep)
        t, shift = self.links[level - 1], self.shifts[level - 1]
        new = t.compact(keep)
        prefix, code = t.key_of() >> shift, t.key_of() & ((1 << shift) - 1)
        keep_prefix = np.zeros(self.links[level - 2].n if level > 1 else self.columns[0].n, dtype=bool)
        keep_prefix[prefix] = True
        keep_code = np.zeros(self.columns[level].n, dtype=bool)
        keep_code[code] = True
        new_prefix = self._compact(level - 1, keep_prefix)
        new_code = self.columns[level].compact(keep_code)
        shift = self.shifts[level - 1] = (self.columns[level].n - 1).bit_length()
        t.rekey((new_prefix[prefix] << shift) | new_code[code])
        return new
