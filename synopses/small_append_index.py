"""An insert-only join input (``AppendIndexSynopsis``) whose key index is a Python dict while the join's
releases stay small (issue 15: NEXMark q3 releases a dozen auctions and a dozen people per push of 1,000 events).

The array index finds and adds a release's rows with a fixed number of numpy calls (about a hundred per release
of q3's join with the pairs' merge: slot lookups, a sort of the new rows' slots, block moves), each costing about
a microsecond whatever the number of rows: q3's join took 115 us a run for about twenty rows. A dict from key code to row number (or to a list of row
numbers, for a key held more than once) finds and adds each row with one or two dict operations, about a tenth
of a microsecond each, so below a few hundred rows per release it is the cheaper index by far. The columns are
held as before (``ColumnSegments``, shared by both forms), so rows are numbered the same way in both.

The dict form lasts while the join's releases are small and its rows few (the limits are in
``dsms/operators/append_small.py``, which applies those releases); the first release over them, or any caller
that needs the array form (``find``, ``counts``, ``cover``, ``append``, ``defer``: the join's general release,
its exact pair count against a low budget, a band's lazy input) moves the keys into the arrays (``to_arrays``,
one append of every row held) for good. Either form answers the same.

In the array form, rows may also be **counted but not placed** (``add_counted``, for ``dsms/operators/
append_dense.py``): their keys' counts (``count``, ``most``) are up to date, so a probe learns from one gather
whether any held row has its key, but their row numbers are not in ``head`` or the pool yet. NEXMark q3's
auctions are only ever probed by new people, whose ids no auction names yet: placing the auctions by seller (a
sort and block moves per release) bought nothing. The first caller that needs the rows themselves (``find``,
``append``, ``defer``, and every other entry point through ``flush``) places every counted row at once, in
arrival order (``_place``), the same ``_index`` a plain ``append`` would have run.
"""

from __future__ import annotations

import sys

import numpy as np

from synopses.append_index import AppendIndexSynopsis
from synopses.key_slots import KeySlots


class SmallAppendIndexSynopsis(AppendIndexSynopsis):
    """An ``AppendIndexSynopsis`` whose keys sit in ``keys`` (code -> row number, or list of row numbers in
    arrival order) until ``to_arrays``; ``keys`` is None from then on.

    >>> ix = SmallAppendIndexSynopsis(KeySlots())
    >>> ix.add_small([np.array([7, 8, 7])], [10, 20, 10]); ix.keys, ix.most, ix.key_count()
    ({10: [0, 2], 20: 1}, 2, 2)
    >>> ix.to_arrays(); p, rows = ix.find(ix.slots.of(np.array([10, 30])))
    >>> sorted(rows.tolist()), ix.gather(rows)[0].tolist(), ix.keys
    ([0, 2], [7, 7], None)
    """

    def __init__(self, slots: KeySlots) -> None:
        super().__init__(slots)
        self.keys: dict[int, int | list[int]] | None = {}
        self.listed = 0              # keys held more than once (their rows in a list)
        # array form: rows counted (``count``, ``most``) but not placed in ``head`` or the pool yet, the slots
        # of each batch, from row ``counted_from`` on (``add_counted``)
        self.counted: list[np.ndarray] = []
        self.counted_from = 0

    def nbytes(self) -> int:
        """The arrays and columns, plus the dict's table, its int objects (a key code and a row number per
        row, about 32 bytes each) and its lists (about 64 bytes each plus a pointer per row)."""
        total = super().nbytes()
        d = self.keys
        if d is not None:
            total += sys.getsizeof(d) + 32 * (len(d) + self.n) + 64 * self.listed + 8 * (self.n - len(d))
        return total + sum(s.nbytes for s in self.counted)

    def add_counted(self, cols: list[np.ndarray], slots: np.ndarray) -> None:
        """Add a batch (its columns, its rows' key slots) to the array form, its keys counted (``count``,
        ``most``) but its rows not placed under them: a later ``flush`` places them. Only in the array form,
        and with no rows deferred (a band's, ``defer``)."""
        m = len(slots)
        if not m:
            return
        if self.keys is not None or self.pending:
            raise AssertionError("rows counted but not placed need the array form and no rows deferred")
        if self.slots.n > len(self.count):
            self.cover(self.slots.n)
        if not self.counted:
            self.counted_from = self.n
        self.counted.append(slots)
        count = self.count
        np.add.at(count, slots, 1)
        top = int(count[slots].max())
        if top > self.most:
            self.most = top
        self.cols.append(cols, m)
        self.n += m

    def add_unique(self, cols: list[np.ndarray], slots: np.ndarray) -> None:
        """Add a batch to the array form whose key slots the caller knows to be distinct and not held yet
        (each key's first row: its ``head``), the per-slot arrays covering them (``cover``), with no rows
        counted but not placed or deferred (``dsms/operators/append_dense.py`` checks all of it)."""
        m = len(slots)
        if not m:
            return
        r0 = self.n
        self.count[slots] = 1
        self.head[slots] = np.arange(r0, r0 + m)
        self.keys_held += m
        if not self.most:
            self.most = 1
        self.cols.append(cols, m)
        self.n = r0 + m

    def flush(self) -> None:
        """Place the rows counted but not placed (``add_counted``), then index the rows deferred (a band's)."""
        if self.counted:
            self._place()
        super().flush()

    def _place(self) -> None:
        """Place every row counted but not placed under its key (their counts are taken out first, and
        ``_index`` adds them back while it places them)."""
        slots = self.counted[0] if len(self.counted) == 1 else np.concatenate(self.counted)
        self.counted = []
        np.subtract.at(self.count, slots, 1)
        self._index(slots, self.counted_from)

    def add_small(self, cols: list[np.ndarray], codes: list[int]) -> None:
        """Add a release's rows (their columns, their key codes as Python ints) to the dict form. Keys all new
        and distinct (people by their new ids) go in with one ``dict.update``, checked by one ``isdisjoint``
        (which stops at the first key held: auctions by their sellers) and the size of the new keys' dict,
        with no Python per row."""
        d = self.keys
        r0 = self.n
        m = len(codes)
        fresh = dict(zip(codes, range(r0, r0 + m))) if d.keys().isdisjoint(codes) else None
        if fresh is not None and len(fresh) == m:
            d.update(fresh)
            self.add_fresh(cols, m)
            return
        self._add_each(d, codes, r0)
        self.cols.append(cols, m)
        self.n = r0 + m

    def add_fresh(self, cols: list[np.ndarray], m: int) -> None:
        """Add a release's ``m`` rows whose keys, distinct and not held before, the caller has put in ``keys``
        already (each mapped to its row number, from ``n`` on): their columns and counts."""
        self.keys_held += m
        if m and not self.most:
            self.most = 1
        self.cols.append(cols, m)
        self.n += m

    def _add_each(self, d: dict, codes: list[int], r0: int) -> None:
        """``add_small``'s row-at-a-time form: a key held already, or held twice in the release."""
        get = d.get
        most = self.most
        new = listed = 0
        for r, k in enumerate(codes, r0):
            v = get(k)
            if v is None:
                d[k] = r
                new += 1
            elif type(v) is int:
                d[k] = [v, r]
                listed += 1
            else:
                v.append(r)
                if len(v) > most:
                    most = len(v)
        if most < 2 and listed:
            most = 2
        if not most and new:
            most = 1
        self.most = most
        self.listed += listed
        self.keys_held += new

    def to_arrays(self) -> None:
        """Move the keys from the dict into the arrays (for good): every row held appended at once, its columns
        kept where they are."""
        d = self.keys
        if d is None:
            return
        ks: list[int] = []
        rs: list[int] = []
        for k, v in d.items():
            if type(v) is int:
                ks.append(k)
                rs.append(v)
            else:
                ks.extend([k] * len(v))
                rs.extend(v)
        codes = np.empty(self.n, dtype=np.int64)
        codes[np.array(rs, dtype=np.int64)] = np.array(ks, dtype=np.int64)
        slots = self.slots.of(codes)
        cols = self.cols
        AppendIndexSynopsis.__init__(self, self.slots)      # the array form, empty (entity state is kept)
        self.keys, self.listed = None, 0
        AppendIndexSynopsis.append(self, [], slots)         # keys only: the columns are those held
        self.cols = cols

    # the array form's entry points: the keys move there first

    def append(self, cols: list[np.ndarray], slots: np.ndarray) -> int:
        if self.keys is not None:
            self.to_arrays()
        return super().append(cols, slots)

    def defer(self, cols: list[np.ndarray], slots: np.ndarray, band: np.ndarray) -> None:
        """Hold rows without indexing them (a band's lazy input, ``AppendJoin._add``): only in the array form.
        Rows deferred while the keys sat in the dict were in neither (``to_arrays`` rebuilds the arrays from the
        dict alone), so a later probe missed them: one input could be in the array form and the other still in
        the dict when a release's exact pair count (``AppendJoin.fits``) moved only the input it counted."""
        if self.keys is not None:
            self.to_arrays()
        if self.counted:
            self._place()
        super().defer(cols, slots, band)

    def cover(self, slots: int) -> None:
        if self.keys is not None:
            self.to_arrays()
        super().cover(slots)

    def find(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.keys is not None:
            self.to_arrays()
        return super().find(slots)

    def counts(self, codes: np.ndarray) -> np.ndarray:
        if self.keys is not None:
            self.to_arrays()
        return super().counts(codes)
