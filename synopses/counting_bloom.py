"""A counting Bloom filter of rows: a Bloom filter whose cells are counters, so that rows can leave as well as
enter (a sliding window's deletes), and that estimates a row's multiplicity as the smallest of its k counters
(issue 14 item 3).

Source: Fan, Cao, Almeida, Broder, "Summary cache" (IEEE/ACM ToN 2000): counting Bloom filters; the estimate
min_i C[g_i(x)] never undercounts (as in count-min sketches), and a row never added is reported present with the
Bloom filter's probability (1 - e^(-kn/m))^k, n the distinct rows held. Counters are uint16: a counter that
reaches 65535 stays there (it can no longer be decremented exactly), which only keeps a row present too long.
Hashing as in ``synopses/bloom.py``.
"""

from __future__ import annotations

import numpy as np

from synopses.bloom import batch_rows, bloom_size, false_positive_rate, positions, row_hashes, running

_MAX = np.iinfo(np.uint16).max


class CountingBloomFilter:
    """Counters for rows, sized for ``capacity`` distinct rows at ``fp_rate``.

    >>> f = CountingBloomFilter(1000, 0.01)
    >>> f.add([np.array([1, 2, 2])], np.array([1, 1, 1]))
    >>> f.estimate([np.array([1, 2, 3])]).tolist()
    [1, 2, 0]
    >>> f.add([np.array([2])], np.array([-2])); f.estimate([np.array([2])]).tolist()
    [0]
    """

    def __init__(self, capacity: int, fp_rate: float) -> None:
        self.capacity, self.fp_rate = capacity, fp_rate
        self.m, self.k = bloom_size(capacity, fp_rate)
        self.counters = np.zeros(self.m, dtype=np.uint16)
        self.total = 0                     # net count of rows held (inserts minus deletes)
        self.distinct = 0                  # rows whose estimate went from 0 to positive, minus the reverse

    def estimate_positions(self, pos: np.ndarray) -> np.ndarray:
        return self.counters[pos].min(axis=1).astype(np.int64)

    def add_positions(self, pos: np.ndarray, deltas: np.ndarray) -> None:
        """Add ``deltas[r]`` to each of row r's k counters; saturated counters stay saturated."""
        flat = pos.ravel()
        d = np.repeat(deltas.astype(np.int64), pos.shape[1])
        acc = np.zeros(self.m, dtype=np.int64)
        np.add.at(acc, flat, d)
        touched = np.flatnonzero(acc)
        cur = self.counters[touched].astype(np.int64)
        new = np.where(cur == _MAX, _MAX, np.clip(cur + acc[touched], 0, _MAX))
        self.counters[touched] = new.astype(np.uint16)
        self.total += int(deltas.sum())

    def estimate(self, cols: list[np.ndarray]) -> np.ndarray:
        return self.estimate_positions(positions(*row_hashes(cols), self.k, self.m))

    def add(self, cols: list[np.ndarray], deltas: np.ndarray) -> None:
        self.add_positions(positions(*row_hashes(cols), self.k, self.m), np.asarray(deltas))

    def nbytes(self) -> int:
        return self.counters.nbytes

    def expected_fp_rate(self) -> float:
        return false_positive_rate(self.m, self.k, max(self.distinct, 0))


class CountingBloomRowCounts:
    """Per input side, a counting Bloom filter: DISTINCT, EXCEPT and INTERSECT (set and bag forms) over inputs
    that delete, with the ``changes`` interface of the exact ``RowCounts``. Within a batch each distinct row's
    count is its estimate at the start of the batch plus its own deltas, in arrival order; the filter is
    updated at the end of the batch."""

    counting = True

    def __init__(self, sides: int, capacity: int, fp_rate: float) -> None:
        self.filters = [CountingBloomFilter(capacity, fp_rate) for _ in range(sides)]

    @property
    def live(self) -> int:
        """Distinct rows held (an estimate: rows whose counter estimate is positive, as counted on the way)."""
        return max(f.distinct for f in self.filters)

    @property
    def total(self) -> int:
        return sum(f.total for f in self.filters)

    def nbytes(self) -> int:
        return sum(f.nbytes() for f in self.filters)

    def expected_fp_rate(self) -> float:
        return max(f.expected_fp_rate() for f in self.filters)

    def seed(self, side: int, cols: list[np.ndarray], counts: np.ndarray) -> None:
        """Add rows with their multiplicities (the exact state a switch of kind hands over)."""
        flt = self.filters[side]
        flt.add(cols, counts)
        flt.distinct += int((counts > 0).sum())

    def changes(self, cols: list[np.ndarray], deltas: list[np.ndarray], f) -> np.ndarray:
        n = len(deltas[0])
        h1, h2, (uid, first) = batch_rows(cols, n)
        befores, afters = [], []
        for flt, dv in zip(self.filters, deltas):
            pos = positions(h1[first], h2[first], flt.k, flt.m)
            base = flt.estimate_positions(pos)
            b, a = running(uid, dv, base)
            befores.append(np.maximum(b, 0))
            afters.append(np.maximum(a, 0))
            net = np.zeros(len(first), dtype=np.int64)
            np.add.at(net, uid, dv)
            end = base + net
            flt.distinct += int(((base <= 0) & (end > 0)).sum()) - int(((base > 0) & (end <= 0)).sum())
            nz = net != 0
            flt.add_positions(pos[nz], net[nz])
        return f(*afters) - f(*befores)
