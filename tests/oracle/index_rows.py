"""Rows an index lookup finds, compared bit for bit: the join index tests (keyed, hashed) step an index and a
multiset model of its rows side by side and compare what each finds per probe."""

from __future__ import annotations

from collections import Counter

import numpy as np

_NEG_ZERO = np.float64(-0.0).view(np.int64).item()


def row_bits(row: tuple) -> tuple:
    """A row with its floats by their bits (NaN equal to NaN, -0.0 apart from 0.0)."""
    return tuple(np.float64(x).view(np.int64).item() if isinstance(x, float) else x for x in row)


def found_pairs(pidx: np.ndarray, cols: list[np.ndarray], sign: np.ndarray | None) -> Counter:
    """(probe index, row by its bits) pairs of a lookup's answer, signed copies netted."""
    out: Counter = Counter()
    for j, i in enumerate(pidx.tolist()):
        out[(i, row_bits(tuple(c[j].item() for c in cols)))] += 1 if sign is None else int(sign[j])
    return Counter({k: v for k, v in out.items() if v})


def loose_zero(found: Counter, column: int = 2) -> Counter:
    """``found_pairs``' pairs with -0.0 in ``column`` read as 0.0 (the sorted-run index nets deletes as SQL
    compares)."""
    out: Counter = Counter()
    for (i, row), n in found.items():
        out[(i, tuple(0 if x == _NEG_ZERO and j == column else x for j, x in enumerate(row)))] += n
    return out
