"""Integer codes for whole rows, so that operators can group and compare rows with numpy instead of hashing
Python tuples one by one."""

from __future__ import annotations

import numpy as np


def row_codes(cols: list[np.ndarray]) -> np.ndarray | None:
    """One int64 per row, equal exactly when the rows are equal (within this call). None when the combined
    code space would overflow int64 (the caller then falls back to Python tuples)."""
    n = len(cols[0]) if cols else 0
    if not cols:
        return np.zeros(n, dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    space = 1
    for c in cols:
        if c.dtype.kind == "f":
            # -0.0 == 0.0 and NaN never equals itself in SQL terms; normalise -0.0 so equal values group
            c = c + 0.0
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


def segments(ts: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort rows by (ts, code, position); returns (order, starts, ends) of the runs of equal (ts, code)."""
    n = len(ts)
    order = np.lexsort((np.arange(n), code, ts))
    t, c = ts[order], code[order]
    if n == 0:
        e = np.empty(0, dtype=np.int64)
        return order, e, e
    change = np.nonzero((t[1:] != t[:-1]) | (c[1:] != c[:-1]))[0] + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])
    return order, starts, ends
