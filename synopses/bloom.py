"""A Bloom filter over whole rows, sized for a target false-positive rate, and the row hash it shares with the
counting Bloom filter (issue 14 item 3; digest-004 R-APX-04: Bloom filters for duplicate elimination, set
difference and intersection).

Source: Bloom, "Space/time trade-offs in hash coding with allowable errors" (CACM 1970): with m bits, k hash
functions and n distinct rows, a row never added is reported present with probability (1 - e^(-kn/m))^k;
m = -n ln p / (ln 2)^2 and k = (m / n) ln 2 minimise m for a target p. Kirsch and Mitzenmacher, "Less hashing,
same performance" (2006): the k positions g_i = h1 + i * h2 (mod m) from two 64-bit hashes lose nothing
asymptotically.

The hash. Columns arrive as numpy arrays, so fixed-width columns (INT, FLOAT, BOOLEAN, TIMESTAMP) are hashed
vectorised: their 64-bit patterns are folded into the row's two hashes with the splitmix64 finaliser, one numpy
pass per column (a few ns a row; mmh3 would cost a Python call per value). Strings have no fixed width, so
they go through mmh3 (MurmurHash3 x64 128, a C call per distinct string), whose two halves are folded in the
same way. FLOAT values are normalised first as SQL equality wants them: -0.0 as 0.0, every NaN as one NaN.
"""

from __future__ import annotations

import math

import mmh3
import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 whose output bits each depend on every input bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _column_bits(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two uint64 words per value of one column, equal for values SQL calls equal."""
    if col.dtype.kind == "O":
        pairs = {}
        for v in col.tolist():
            if v not in pairs:
                pairs[v] = mmh3.hash64(str(v), seed=0x5EED, signed=False)
        a = np.fromiter((pairs[v][0] for v in col.tolist()), dtype=np.uint64, count=len(col))
        b = np.fromiter((pairs[v][1] for v in col.tolist()), dtype=np.uint64, count=len(col))
        return a, b
    if col.dtype.kind == "f":
        c = col.astype(np.float64) + 0.0                      # -0.0 -> 0.0
        c[np.isnan(c)] = np.nan                                # one NaN
        bits = c.view(np.uint64)
    elif col.dtype.kind == "b":
        bits = col.astype(np.uint64)
    else:
        bits = col.astype(np.int64, copy=False).view(np.uint64)
    return bits, bits ^ _GOLD


def row_hashes(cols: list[np.ndarray], n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Two independent-looking uint64 hashes per row of ``cols`` (h2 odd, so h1 + i * h2 visits distinct
    positions for any power-of-two m, and nearly always for other m).

    >>> a = row_hashes([np.array([1, 2, 1]), np.array(["x", "y", "x"], dtype=object)])
    >>> bool(a[0][0] == a[0][2] and a[1][0] == a[1][2] and a[0][0] != a[0][1])
    True
    """
    if n is None:
        n = len(cols[0]) if cols else 0
    h1 = np.full(n, 0x243F6A8885A308D3, dtype=np.uint64)
    h2 = np.full(n, 0x13198A2E03707344, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in cols:
            a, b = _column_bits(col)
            h1 = _mix(h1 ^ a) + _GOLD
            h2 = _mix(h2 ^ b ^ _mix(a))
    return _mix(h1), _mix(h2) | np.uint64(1)


def positions(h1: np.ndarray, h2: np.ndarray, k: int, m: int) -> np.ndarray:
    """The k filter positions of each row, shape (rows, k): (h1 + i * h2) mod m."""
    i = np.arange(k, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return ((h1[:, None] + i[None, :] * h2[:, None]) % np.uint64(m)).astype(np.int64)


def bloom_size(n: int, p: float) -> tuple[int, int]:
    """(m, k) for n distinct rows at false-positive rate p.

    >>> bloom_size(10_000, 0.01)
    (95851, 7)
    """
    if not 0 < p < 1:
        raise ValueError(f"false-positive rate {p} is not between 0 and 1")
    n = max(int(n), 1)
    m = max(64, math.ceil(-n * math.log(p) / math.log(2) ** 2))
    k = max(1, round(m / n * math.log(2)))
    return m, k


def false_positive_rate(m: int, k: int, n: int) -> float:
    """The expected false-positive rate of a filter of m bits and k hashes holding n distinct rows."""
    return (1 - math.exp(-k * n / m)) ** k


class BloomFilter:
    """A Bloom filter of rows for insert-only state (DISTINCT or a set operation over a stream that never
    deletes): ``add`` rows, ask whether rows ``might_contain``; no false negatives.

    >>> f = BloomFilter(1000, 0.01)
    >>> f.add([np.arange(1000)])
    >>> bool(f.might_contain([np.arange(1000)]).all()), float(f.might_contain([np.arange(1000, 11000)]).mean()) < 0.02
    (True, True)
    """

    def __init__(self, capacity: int, fp_rate: float) -> None:
        self.capacity, self.fp_rate = capacity, fp_rate
        self.m, self.k = bloom_size(capacity, fp_rate)
        self.bits = np.zeros((self.m + 7) // 8, dtype=np.uint8)
        self.added = 0                   # rows added that were not reported present before (an estimate of n)

    def _pos(self, cols: list[np.ndarray], n: int | None = None) -> np.ndarray:
        return positions(*row_hashes(cols, n), self.k, self.m)

    def contains_positions(self, pos: np.ndarray) -> np.ndarray:
        hit = (self.bits[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1
        return hit.all(axis=1)

    def add_positions(self, pos: np.ndarray) -> None:
        flat = pos.ravel()
        np.bitwise_or.at(self.bits, flat >> 3, (np.uint8(1) << (flat & 7).astype(np.uint8)))

    def might_contain(self, cols: list[np.ndarray], n: int | None = None) -> np.ndarray:
        return self.contains_positions(self._pos(cols, n))

    def add(self, cols: list[np.ndarray], n: int | None = None) -> None:
        pos = self._pos(cols, n)
        self.added += int((~self.contains_positions(pos)).sum())
        self.add_positions(pos)

    def nbytes(self) -> int:
        return self.bits.nbytes

    def expected_fp_rate(self) -> float:
        """The false-positive rate now, from the rows added so far (the formula, not a measurement)."""
        return false_positive_rate(self.m, self.k, self.added)


def running(uid: np.ndarray, deltas: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per delta, the count of its row before and after it, in arrival order: ``base[uid]`` (the count at the
    start of the batch) plus the row's own earlier deltas of the batch. ``uid`` numbers the batch's distinct
    rows 0..u-1."""
    o = np.argsort(uid, kind="stable")
    g, v = uid[o], deltas[o]
    cs = np.cumsum(v)
    start = np.ones(len(g), dtype=bool)
    start[1:] = g[1:] != g[:-1]
    first = np.flatnonzero(start)
    offset = (cs[first] - v[first])[np.cumsum(start) - 1]
    after = np.empty(len(g), dtype=np.int64)
    after[o] = base[g] + cs - offset
    return after - deltas, after


def batch_rows(cols: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hashes of a batch's rows, and each row's number among the batch's distinct rows (equal when the
    filter cannot tell them apart: same h1 and h2), with the first row of each."""
    h1, h2 = row_hashes(cols, n)
    key = np.stack([h1, h2], axis=1)
    _, first, uid = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return h1, h2, (uid.reshape(-1), first)


class BloomRowSet:
    """Per input side, a Bloom filter of the rows seen, for DISTINCT and the set forms of EXCEPT/INTERSECT over
    inputs that never delete: the same ``changes`` interface as the exact ``RowCounts``, with each side's count
    read as 1 (present) or 0. A row reported present that never was (a false positive) is an output row
    missed (DISTINCT, INTERSECT's left side) or an output row wrongly held back (EXCEPT's right side)."""

    counting = False

    def __init__(self, sides: int, capacity: int, fp_rate: float) -> None:
        self.filters = [BloomFilter(capacity, fp_rate) for _ in range(sides)]
        self.live = 0

    def nbytes(self) -> int:
        return sum(f.nbytes() for f in self.filters)

    def expected_fp_rate(self) -> float:
        return max(f.expected_fp_rate() for f in self.filters)

    def changes(self, cols: list[np.ndarray], deltas: list[np.ndarray], f) -> np.ndarray:
        n = len(deltas[0])
        h1, h2, (uid, first) = batch_rows(cols, n)
        befores, afters = [], []
        for flt, dv in zip(self.filters, deltas):
            if (dv < 0).any():
                raise ValueError("a delete reached an insert-only Bloom filter; a counting one is needed")
            pos = positions(h1[first], h2[first], flt.k, flt.m)
            base = flt.contains_positions(pos).astype(np.int64)
            b, a = running(uid, dv, base)
            befores.append(np.minimum(b, 1))
            afters.append(np.minimum(a, 1))
            ins = np.zeros(len(first), dtype=bool)
            ins[uid[dv > 0]] = True
            flt.added += int((ins & (base == 0)).sum())
            flt.add_positions(pos[ins])
        self.live = max(f.added for f in self.filters)
        return f(*afters) - f(*befores)
