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

import numpy as np

from synopses.base import Synopsis, rows_bytes
from synopses.rowcodes import row_codes, segments

_EMPTY = np.empty(0, dtype=np.int64)


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

    def locate(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each probe code, the first table position with an equal key and how many there are."""
        t = self.codes
        if not len(t) or not len(codes):
            return np.zeros(len(codes), dtype=np.int64), np.zeros(len(codes), dtype=np.int64)
        lo_code, hi_code = int(t[0]), int(t[-1])
        span = hi_code - lo_code + 1
        if span <= 4 * (len(t) + len(codes)) + 256:
            # small key range: per-code counts and starts by bincount, probes by lookup
            counts = np.bincount(t - lo_code, minlength=span)
            starts = np.cumsum(counts) - counts
            inside = (codes >= lo_code) & (codes <= hi_code)
            rel = np.where(inside, codes - lo_code, 0)
            cnt = np.where(inside, counts[rel], 0)
            return starts[rel], cnt
        lo = np.searchsorted(t, codes, side="left")
        return lo, np.searchsorted(t, codes, side="right") - lo

    def probe(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each probe code, the positions of the equal keys: (probe index, table index) pairs."""
        lo, cnt = self.locate(codes)
        return expand(lo, cnt)

    # ---------------------------------------------------------------- maintenance

    def insert(self, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> None:
        """Apply signed rows (inserts and deletes, in time order) with their key codes."""
        if not len(codes):
            return
        if self.cols is None:
            self.cols = [c[:0] for c in cols]
        pos = sign > 0
        n_del = len(sign) - int(pos.sum())
        seq = self.next_seq + np.arange(len(codes), dtype=np.int64)
        self.next_seq += len(codes)
        if n_del == 0:
            self._merge(sign, cols, codes, seq)
        elif not self.negatives and self._retract_oldest(pos, cols, codes, seq, n_del):
            pass
        else:
            self.negatives += n_del
            self._merge(sign, cols, codes, seq)
            if self.negatives > 64 and self.negatives * 4 > len(self.codes):
                self.compact()      # after which batches can take the first-in-first-out path again

    def _retract_oldest(self, pos: np.ndarray, cols: list[np.ndarray], codes: np.ndarray, seq: np.ndarray,
                        n_del: int) -> bool:
        """First in, first out: if the deletes equal, in order, the ``n_del`` oldest rows of the table plus the
        batch's inserts, remove those rows and keep the rest; else change nothing and return False."""
        ins = np.flatnonzero(pos)
        dels = np.flatnonzero(~pos)
        n_old = len(self.seq)
        if n_del > n_old + len(ins):
            return False
        if n_old:
            cut = np.partition(self.seq, n_del - 1)[n_del - 1] if n_del <= n_old else self.next_seq
            gone_old = self.seq <= cut if n_del <= n_old else np.ones(n_old, dtype=bool)
            old_idx = np.flatnonzero(gone_old)
            old_idx = old_idx[np.argsort(self.seq[old_idx])]
        else:
            old_idx = _EMPTY
        k_new = n_del - len(old_idx)          # deletes that retract rows inserted in this very batch
        for c_state, c_new in zip(self.cols, cols):
            victims = c_state[old_idx]
            if k_new:
                victims = np.concatenate([victims, c_new[ins[:k_new]]])
            if not _same(victims, c_new[dels]):
                return False
        if len(old_idx):
            keep = ~gone_old
            self.sign, self.codes, self.seq = self.sign[keep], self.codes[keep], self.seq[keep]
            self.cols = [c[keep] for c in self.cols]
        rest = ins[k_new:]
        self._merge(np.ones(len(rest), dtype=np.int8), [c[rest] for c in cols], codes[rest], seq[rest])
        return True

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
        at = np.searchsorted(self.codes, codes, side="right")
        self.sign = np.insert(self.sign, at, sign)
        self.codes = np.insert(self.codes, at, codes)
        self.seq = np.insert(self.seq, at, seq)
        self.cols = [_insert(a, at, b) for a, b in zip(self.cols, cols)]

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


def _insert(a: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "O":            # np.insert would try to unpack sequences held in object arrays
        out = np.empty(len(a) + len(values), dtype=object)
        pos = at + np.arange(len(at))
        mask = np.ones(len(out), dtype=bool)
        mask[pos] = False
        out[pos] = values
        out[mask] = a
        return out
    return np.insert(a, at, values)
