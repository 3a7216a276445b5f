"""A hash index over a join input: the input relation's rows kept sorted by the integer code of their join key,
so that a batch of probes is answered with two binary searches, or with two array lookups when the codes
span a small range (digest-004 R-PLAN-06, one synopsis per join input).

A delete names a row by its values only. Most join inputs are windows over streams, whose deletes retract
rows in the order they were inserted (first in, first out; digest-002a section 2.15). So the deletes of a batch
are first matched with the oldest live rows, checked value for value, and those rows are removed outright:
no stored delete, no netting. A batch whose deletes do not match that way (a window whose size just changed,
a relation updated at random) is stored signed instead: a stored delete joins with the opposite sign and
cancels its insert, and once such rows make up a quarter of the table it is compacted (each distinct row's
signs netted), after which the first-in-first-out path is open again. Either way the table holds exactly the input's multiset of rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from synopses.base import Synopsis, rows_bytes
from synopses.rowcodes import row_codes, segments

_EMPTY = np.empty(0, dtype=np.int64)
OLD = np.iinfo(np.int64).min        # entered before the batch at hand
LIVE = np.iinfo(np.int64).max       # has not left (as far as the released input tells)


class Lifetimes(NamedTuple):
    """A join input's rows (sorted by key code) with the instant each entered and left the input relation."""

    codes: np.ndarray
    cols: list[np.ndarray]
    seq: np.ndarray
    entered: np.ndarray
    left: np.ndarray


class HashIndexSynopsis(Synopsis):
    kind = "hash_index"

    def __init__(self) -> None:
        self.sign = np.empty(0, dtype=np.int8)
        self.cols: list[np.ndarray] | None = None
        self.codes = _EMPTY
        self.seq = _EMPTY            # insertion order of each row: the oldest live row has the smallest
        self.next_seq = 0
        self.negatives = 0           # stored deletes (0 in the first-in-first-out regime)

    def __len__(self) -> int:
        return len(self.codes)

    def rows(self) -> int:
        return len(self.codes)

    def nbytes(self) -> int:
        return rows_bytes(self.seq, self.sign, self.cols or []) + self.codes.nbytes

    def signed(self) -> bool:
        """Whether the table holds stored deletes (rows with sign -1) besides plain rows."""
        return self.negatives > 0

    # ---------------------------------------------------------------- probing

    def probe(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each probe code, the positions of the equal keys: (probe index, table index) pairs."""
        return expand(*locate(self.codes, codes))

    # ---------------------------------------------------------------- lifetimes (first in, first out)

    def lifetimes(self, ts: np.ndarray | None = None, sign: np.ndarray | None = None,
                  cols: list[np.ndarray] | None = None, codes: np.ndarray | None = None) -> Lifetimes | None:
        """The table with a batch of signed rows merged in, each row with the instant it entered (``OLD`` for
        rows already held) and the instant it left (``LIVE`` if it did not), deletes matched first in, first
        out and checked value for value. Nothing changes until ``adopt``. None when the deletes do not match
        so, or the table holds stored deletes: the caller then applies the batch as signed rows."""
        if self.negatives:
            return None
        n_old = len(self.codes)
        if ts is None or not len(ts):
            return Lifetimes(self.codes, self.cols or [], self.seq, np.full(n_old, OLD), np.full(n_old, LIVE))
        if self.cols is None:
            self.cols = [c[:0] for c in cols]
        pos = sign > 0
        ins, dels = np.flatnonzero(pos), np.flatnonzero(~pos)
        n_del = len(dels)
        if n_del > n_old + len(ins):
            return None
        old_left = np.full(n_old, LIVE)
        new_left = np.full(len(ins), LIVE)
        if n_del:
            if n_del < n_old:
                victims = np.argpartition(self.seq, n_del - 1)[:n_del]
            else:
                victims = np.arange(n_old)
            victims = victims[np.argsort(self.seq[victims])]
            k_new = n_del - len(victims)
            for c_state, c_new in zip(self.cols, cols):
                gone = c_state[victims]
                if k_new:
                    gone = np.concatenate([gone, c_new[ins[:k_new]]])
                if not _same(gone, c_new[dels]):
                    return None
            old_left[victims] = ts[dels[:len(victims)]]
            if k_new:
                new_left[:k_new] = ts[dels[len(victims):]]
                if np.any(new_left[:k_new] < ts[ins[:k_new]]):       # a delete before its insert
                    return None
        k = np.argsort(codes[ins], kind="stable")        # the inserts (by ordinal) in key order
        o = ins[k]                                        # ... and by position in the batch
        m = _Merge(self.codes, codes[o])
        return Lifetimes(m(self.codes, codes[o]), [m(a, c[o]) for a, c in zip(self.cols, cols)],
                         m(self.seq, self.next_seq + k), m(np.full(n_old, OLD), ts[o]),
                         m(old_left, new_left[k]))

    def adopt(self, life: Lifetimes) -> None:
        """Make the rows of ``life`` that did not leave the table's contents."""
        stay = life.left == LIVE
        self.codes, self.seq = life.codes[stay], life.seq[stay]
        if self.cols is not None:           # still None: no row was ever seen, so no column is known
            self.cols = [c[stay] for c in life.cols]
        self.sign = np.ones(len(self.codes), dtype=np.int8)
        self.next_seq = max(self.next_seq, int(life.seq.max()) + 1) if len(life.seq) else self.next_seq

    # ---------------------------------------------------------------- maintenance

    def insert(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> None:
        """Apply signed rows (inserts and deletes, in time order) with their key codes: deletes matched first
        in, first out remove their rows (``lifetimes``); otherwise they are stored signed."""
        if not len(codes):
            return
        if self.cols is None:
            self.cols = [c[:0] for c in cols]
        if (sign < 0).any() and (life := self.lifetimes(ts, sign, cols, codes)) is not None:
            self.adopt(life)
            return
        n_del = int((sign < 0).sum())
        seq = self.next_seq + np.arange(len(codes), dtype=np.int64)
        self.next_seq += len(codes)
        self._merge(sign, cols, codes, seq)
        if n_del:
            self.negatives += n_del
            if self.negatives > 64 and self.negatives * 4 > len(self.codes):
                self.compact()      # after which batches can take the first-in-first-out path again

    def _merge(self, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray, seq: np.ndarray) -> None:
        """Merge rows into key order (after the equal keys already there)."""
        if not len(codes):
            return
        order = np.argsort(codes, kind="stable")
        sign, codes, seq = sign[order], codes[order], seq[order]
        cols = [c[order] for c in cols]
        if not len(self.codes):
            self.sign, self.cols, self.codes, self.seq = sign, cols, codes, seq
            return
        m = _Merge(self.codes, codes)
        self.sign, self.codes, self.seq = m(self.sign, sign), m(self.codes, codes), m(self.seq, seq)
        self.cols = [m(a, b) for a, b in zip(self.cols, cols)]

    def compact(self) -> None:
        """Net each distinct row's inserts and deletes, keeping rows with a positive count."""
        if self.cols is None or not self.negatives:
            return
        code = row_codes(self.cols)
        if code is None:
            return
        _, starts, _ = segments(np.zeros(len(code), dtype=np.int64), code)
        order = np.lexsort((np.arange(len(code)), code))
        net = np.add.reduceat(self.sign[order].astype(np.int64), starts) if len(starts) else starts
        first = order[starts]
        keep = net > 0
        idx = np.repeat(first[keep], net[keep])
        o = np.argsort(self.codes[idx], kind="stable")
        idx = idx[o]
        self.codes = self.codes[idx]
        self.seq = self.seq[idx]
        self.sign = np.ones(len(idx), dtype=np.int8)
        self.cols = [c[idx] for c in self.cols]
        self.negatives = 0


def locate(table: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each probe code, the first position of an equal code in the sorted ``table`` and how many there
    are: by bincount and lookup when the table's codes span a small range, else by binary search."""
    if not len(table) or not len(codes):
        return np.zeros(len(codes), dtype=np.int64), np.zeros(len(codes), dtype=np.int64)
    lo_code, hi_code = int(table[0]), int(table[-1])
    span = hi_code - lo_code + 1
    if span <= 4 * (len(table) + len(codes)) + 256:
        counts = np.bincount(table - lo_code, minlength=span)
        starts = np.cumsum(counts) - counts
        inside = (codes >= lo_code) & (codes <= hi_code)
        rel = np.where(inside, codes - lo_code, 0)
        return starts[rel], np.where(inside, counts[rel], 0)
    lo = np.searchsorted(table, codes, side="left")
    return lo, np.searchsorted(table, codes, side="right") - lo


def expand(lo: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probe index, table index) of every match, given each probe's first match and match count."""
    total = int(cnt.sum())
    if not total:
        return _EMPTY, _EMPTY
    pidx = np.repeat(np.arange(len(lo)), cnt)
    tidx = np.arange(total) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
    return pidx, tidx


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal value for value; floats by their bits, so that NaN matches NaN and -0.0 does not match 0.0 (a
    delete carries the very value its insert did)."""
    if a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        bits = np.dtype(f"i{a.dtype.itemsize}")
        return bool(np.array_equal(a.view(bits), b.view(bits)))
    return bool(np.array_equal(a, b))


class _Merge:
    """Merges a sorted run of new rows into a sorted table, after the equal keys already there: the
    positions are computed once and then every column is filled with two gathers (np.insert would redo the
    work per column, and would unpack sequences held in object arrays)."""

    def __init__(self, table: np.ndarray, new: np.ndarray) -> None:
        n_old, n_new = len(table), len(new)
        self.n = n_old + n_new
        self.new_pos = np.searchsorted(table, new, side="right") + np.arange(n_new)
        mask = np.ones(self.n, dtype=bool)
        mask[self.new_pos] = False
        self.old_pos = np.flatnonzero(mask)

    def __call__(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        out = np.empty(self.n, dtype=old.dtype)
        out[self.old_pos] = old
        out[self.new_pos] = new
        return out
