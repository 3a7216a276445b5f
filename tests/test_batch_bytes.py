"""``Batch.nbytes``: exact for numeric columns and short string columns, a sampled estimate for long string
columns that stays close to the exact count (memory budgets and queue bytes read it on every put)."""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dsms.batch import STR_SAMPLE, Batch


def _exact(b: Batch) -> int:
    total = b.ts.nbytes + b.sign.nbytes
    for c in b.cols:
        total += c.nbytes
        if c.dtype == object:
            total += sum(sys.getsizeof(s) for s in c.tolist())
    return total


def _batch(cols: list[np.ndarray]) -> Batch:
    n = len(cols[0])
    return Batch(np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int8), cols)


@given(st.lists(st.text(alphabet="abcxyz ", max_size=40), max_size=STR_SAMPLE))
def test_short_string_columns_are_counted_exactly(strings):
    b = _batch([np.arange(len(strings), dtype=np.int64), np.array(strings + [""], dtype=object)[:-1]])
    assert b.nbytes == _exact(b)


@given(st.integers(STR_SAMPLE + 1, 5000), st.integers(0, 200), st.integers(0, 2**32))
def test_long_string_columns_are_estimated_within_a_tenth(n, spread, seed):
    """Strings of lengths drawn around a mean, as NEXMark's ``extra`` (mean 68, +-20%)."""
    rng = np.random.default_rng(seed)
    lengths = 68 + rng.integers(-spread // 10 - 1, spread // 10 + 1, n)
    col = np.array(["x" * int(k) for k in lengths], dtype=object)
    b = _batch([col, rng.random(n)])
    assert abs(b.nbytes - _exact(b)) <= 0.1 * _exact(b)


def test_a_result_chunk_counts_what_its_batch_counts() -> None:
    """``ResultChunk.from_batch`` takes the batch's byte count (already computed when it was queued) rather
    than counting again; the count a chunk makes itself from the same arrays is the same."""
    from dsms.runtime import ResultChunk
    tags = np.empty(5000, dtype=object)
    tags[:] = [("x" * (i % 50)) for i in range(5000)]
    b = _batch([np.arange(5000, dtype=np.int64), tags, np.linspace(0, 1, 5000)])
    chunk = ResultChunk.from_batch(["a", "t", "f"], b)
    assert chunk.nbytes == b.nbytes == ResultChunk(["a", "t", "f"], b.ts, b.sign, list(b.cols)).nbytes
