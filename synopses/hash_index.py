"""A hash index over a join input: signed rows kept sorted by the integer code of their join key, so that a
batch of probes is answered with two binary searches (digest-004 R-PLAN-06, one synopsis per join input).

A delete is stored as a row with sign -1 and cancels its insert when joined; once such pairs make up half the
table it is compacted: each distinct row's signs are netted and only positive counts stay.
"""

from __future__ import annotations

import numpy as np

from synopses.base import Synopsis, rows_bytes
from synopses.rowcodes import row_codes, segments


class HashIndexSynopsis(Synopsis):
    kind = "hash_index"

    def __init__(self) -> None:
        self.ts = np.empty(0, dtype=np.int64)
        self.sign = np.empty(0, dtype=np.int8)
        self.cols: list[np.ndarray] | None = None
        self.codes = np.empty(0, dtype=np.int64)
        self.negatives = 0

    def __len__(self) -> int:
        return len(self.codes)

    def rows(self) -> int:
        return len(self.codes)

    def nbytes(self) -> int:
        return rows_bytes(self.ts, self.sign, self.cols or []) + self.codes.nbytes

    def insert(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> None:
        """Add signed rows (inserts and deletes) with their key codes, merged into key order."""
        self.negatives += int((sign < 0).sum())
        order = np.argsort(codes, kind="stable")
        ts, sign, codes = ts[order], sign[order], codes[order]
        cols = [c[order] for c in cols]
        if self.cols is None or not len(self.codes):
            self.ts, self.sign, self.cols, self.codes = ts, sign, cols, codes
        else:
            # merge two sorted runs: where each new row goes among the old ones (after equal keys)
            at = np.searchsorted(self.codes, codes, side="right")
            self.ts = np.insert(self.ts, at, ts)
            self.sign = np.insert(self.sign, at, sign)
            self.codes = np.insert(self.codes, at, codes)
            self.cols = [_insert(a, at, b) for a, b in zip(self.cols, cols)]
        if self.negatives > 64 and self.negatives * 4 > len(self.codes):
            self.compact()

    def probe(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each probe code, the positions of the equal keys: (probe index, table index) pairs."""
        lo = np.searchsorted(self.codes, codes, side="left")
        hi = np.searchsorted(self.codes, codes, side="right")
        cnt = hi - lo
        total = int(cnt.sum())
        pidx = np.repeat(np.arange(len(codes)), cnt)
        tidx = np.arange(total) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        return pidx, tidx

    def compact(self) -> None:
        """Net each distinct row's inserts and deletes, keeping rows with a positive count."""
        if self.cols is None:
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
        self.ts, self.codes = self.ts[idx], self.codes[idx]
        self.sign = np.ones(len(idx), dtype=np.int8)
        self.cols = [c[idx] for c in self.cols]
        self.negatives = 0


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
