"""The hash that sends a row to a Spark partition by its key column, the same in every process.

Python's ``hash`` of a string changes from process to process (PYTHONHASHSEED), and Spark's executors are other
processes, so the bucket is computed here: numbers (INT, FLOAT, BOOLEAN, TIMESTAMP) as their float64 value
(so ``1`` and ``1.0``, which an INT = FLOAT join matches, land together; -0.0 as 0.0, every NaN alike) mixed by
splitmix64, strings by murmur3. Only equality of the key matters: rows that are equal on it always meet.
"""

from __future__ import annotations

import mmh3
import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def buckets(values: np.ndarray, n: int) -> np.ndarray:
    """The partition (0..n-1) of each value.

    >>> buckets(np.array([1, 2, 1]), 7).tolist() == buckets(np.array([1.0, 2.0, 1.0]), 7).tolist()
    True
    """
    if n <= 1:
        return np.zeros(len(values), dtype=np.int64)
    if values.dtype.kind in "biuf":
        v = values.astype(np.float64) + 0.0          # -0.0 + 0.0 == +0.0
        v[np.isnan(v)] = np.nan
        x = v.view(np.uint64) + _GOLDEN
        with np.errstate(over="ignore"):
            x = (x ^ (x >> np.uint64(30))) * _M1
            x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
        return (x % np.uint64(n)).astype(np.int64)
    return np.fromiter((mmh3.hash(str(s), signed=False) % n for s in values), dtype=np.int64, count=len(values))
