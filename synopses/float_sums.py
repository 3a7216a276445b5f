"""The exact running SUM of a FLOAT column per group, for the vectorised aggregate: double-double sums while
they are provably exact, int64 limbs (``synopses/exact_sums.py``) once they cannot be.

Why two forms: limbs are exact for any data but cost a few passes over a (limbs x rows) matrix per batch and a
careful rounding per output value. Most data is narrower: every value of a column so far is a multiple of
2**q (q, the exponent of the lowest set bit seen), and sums stay far below 2**(q + 53) times the row count.
Then a sum is exactly hi + lo for two doubles, and a batch's running sums come from one float cumulative sum
with the error of each of its additions recovered exactly (TwoSum, vectorised: the cumulative sum gives both
operands of every addition). The errors and every other small term are multiples of 2**q well below
2**(q + 53), so adding them is exact too, and the value is hi + small rounded once by IEEE addition: the
correctly rounded sum, as the limbs give. ``_dd_running`` checks that bound for every batch before it trusts
it; a batch that breaks it moves the column to limbs for good (its state converted exactly).
"""

from __future__ import annotations

import numpy as np

from synopses import exact_sums


class FloatSums:
    """Exact sums of one FLOAT column for groups 0 .. capacity-1, plus counts of +inf, -inf and nan.

    ``step`` computes the running sum after every row of a batch sorted by group (rows of a group in time
    order) and returns its float value at the requested rows; ``commit`` stores each touched group's final
    state. Groups are the last axis of every array."""

    def __init__(self) -> None:
        self.qexp: int | None = None                 # every finite value seen is a multiple of 2**qexp
        self.hi = np.zeros(0, dtype=np.float64)      # double-double form: sum = hi + lo exactly
        self.lo = np.zeros(0, dtype=np.float64)
        self.layout: exact_sums.LimbLayout | None = None   # limb form, once double-double is not exact
        self.limbs = np.zeros((0, 0), dtype=np.int64)
        self.counts: np.ndarray | None = None        # (3, groups): +inf, -inf, nan, once any came
        self._rows: list[np.ndarray] = []            # per-row state of the last step, for commit

    @property
    def exact_form(self) -> str:
        return "limbs" if self.layout is not None else "double-double"

    def nbytes(self) -> int:
        return (self.hi.nbytes + self.lo.nbytes + self.limbs.nbytes
                + (self.counts.nbytes if self.counts is not None else 0))

    def grow(self, size: int) -> None:
        """Room for ``size`` groups (new groups hold 0)."""
        self.hi, self.lo = _grown(self.hi, size), _grown(self.lo, size)
        if self.layout is not None:
            self.limbs = _grown(self.limbs, size)
        if self.counts is not None:
            self.counts = _grown(self.counts, size)

    def step(self, v: np.ndarray, sign: np.ndarray, g_s: np.ndarray, grp_start: np.ndarray,
             starts_idx: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The exact running sum of ``sign * v`` per group (rows sorted by group; ``g_s`` the group of each row,
        ``grp_start`` marks and ``starts_idx`` indexes each group's first row), starting from each group's
        stored sum, as floats at rows ``at``."""
        finite = np.isfinite(v)
        if self.counts is not None or not finite.all():
            if self.counts is None:
                self.counts = np.zeros((3, len(self.hi)), dtype=np.int64)
            c = np.stack([sign * (v == np.inf), sign * (v == -np.inf), sign * np.isnan(v)])
            counts = running(c, grp_start, starts_idx, self.counts[:, g_s])
            v = np.where(finite, v, 0.0)
        else:
            counts = None
        x = v if sign is None else np.where(sign < 0, -v, v)
        q = _lowest_bit_exp(x)
        if q is not None:
            self.qexp = q if self.qexp is None else min(self.qexp, q)
        group_no = np.cumsum(grp_start) - 1
        if self.layout is None:
            dd = _dd_running(x, group_no, starts_idx, self.hi[g_s[starts_idx]], self.lo[g_s[starts_idx]],
                             self.qexp)
            if dd is None:
                self._to_limbs()
        if self.layout is None:
            hi, lo = dd
            self._rows = [hi, lo]
            out = hi[at]
        else:
            limbs, grown = exact_sums.deltas(x, np.ones(len(x), dtype=np.int8), self.layout)
            self.limbs = exact_sums.pad(self.limbs, *grown)
            run = running(limbs, grp_start, starts_idx, self.limbs[:, g_s])
            self._rows = [run]
            out = exact_sums.to_float(run if len(at) == len(x) else run[:, at], self.layout.lo)
        if counts is not None:
            self._rows.append(counts)
            pinf, ninf, nan = counts[:, at]
            out = np.where(pinf > 0, np.inf, np.where(ninf > 0, -np.inf, out))
            out = np.where((nan > 0) | ((pinf > 0) & (ninf > 0)), np.nan, out)
        return out

    def commit(self, groups: np.ndarray, rows: np.ndarray, live: np.ndarray) -> None:
        """Store the state after row ``rows[j]`` of the last step as the sum of ``groups[j]`` (0 where the group
        is empty, ``live`` false: no residue outlives it)."""
        state = self._rows
        if self.layout is None:
            self.hi[groups] = np.where(live, state[0][rows], 0.0)
            self.lo[groups] = np.where(live, state[1][rows], 0.0)
        else:
            self.limbs[:, groups] = np.where(live, exact_sums.normalise(state[0][:, rows]), 0)
        if self.counts is not None:
            self.counts[:, groups] = np.where(live, state[-1][:, rows], 0)
        self._rows = []

    def _to_limbs(self) -> None:
        """Move every stored sum from hi + lo to limbs, exactly (a one-way switch)."""
        self.layout = exact_sums.LimbLayout()
        ones = np.ones(len(self.hi), dtype=np.int8)
        hi, grown = exact_sums.deltas(self.hi, ones, self.layout)
        lo, grown2 = exact_sums.deltas(self.lo, ones, self.layout)
        self.limbs = exact_sums.normalise(exact_sums.pad(hi, *grown2) + lo)
        self.hi[:] = 0.0
        self.lo[:] = 0.0


def running(vals: np.ndarray, grp_start: np.ndarray, starts_idx: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Per-group running integer total after each row (rows sorted by group, the last axis), starting from
    ``base``: one cumulative sum, from which each group's total before its first row is taken away."""
    group_no = np.cumsum(grp_start) - 1
    cs = np.cumsum(vals, axis=-1)
    before = cs[..., starts_idx] - vals[..., starts_idx]
    return cs - before[..., group_no] + base


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(a + b) and the exact error e = a + b - s (Knuth's TwoSum, any magnitudes)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _dd_running(x: np.ndarray, group_no: np.ndarray, starts_idx: np.ndarray, base_hi: np.ndarray,
                base_lo: np.ndarray, qexp: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-group running sums of ``x`` from (base_hi + base_lo) as exact (hi, lo) pairs, hi correctly
    rounded; None when exactness cannot be shown for this batch.

    The cumulative sum s of x across all rows has, at each row, the error e of its addition (TwoSum); the
    exact prefix is s + E, E the cumulative sum of e. A group's sum after row i is then
    base_hi + base_lo + (s_i - s_before) + (E_i - E_before), where "before" is the row before the group's
    first. The large parts are combined by TwoSum (exact); everything else is small: multiples of 2**qexp
    (every value, hence every sum and every error, is) of magnitude at most (rows + 4) ulps of the largest
    magnitude M. When that is below 2**(qexp + 53), each small addition is exact, and hi = fl(h + small) is
    the exact sum rounded once."""
    n = len(x)
    if not n:
        return x.copy(), x.copy()
    s = np.cumsum(x)
    if not np.isfinite(s).all():
        return None
    prev = np.empty(n)
    prev[0] = 0.0
    prev[1:] = s[:-1]
    _, e = _two_sum(prev, x)                         # s_i = fl(s_{i-1} + x_i), exactly s_{i-1} + x_i - e_i
    big = max(float(np.abs(s).max()), float(np.abs(base_hi).max(initial=0.0)))
    if qexp is None or big == 0.0:                   # nothing but zeros so far
        return np.zeros(n), np.zeros(n)
    # small terms stay below (n + 4) * 2**(top - 52), top the exponent of 4 * big; they must be below
    # 2**(qexp + 53) to be exact multiples of 2**qexp
    top = int(np.frexp(big)[1]) + 2
    if top > 1000 or (n + 4).bit_length() + top - 52 > qexp + 53:    # (near the float range: TwoSum may overflow)
        return None
    E = np.cumsum(e)
    first = starts_idx[group_no]
    s0 = prev[first]                                 # s before the group's first row
    e0 = E[first] - e[first]
    d, de = _two_sum(s, -s0)
    h, he = _two_sum(base_hi[group_no], d)
    small = ((he + de) + (E - e0)) + base_lo[group_no]
    return _two_sum(h, small)


def _lowest_bit_exp(x: np.ndarray) -> int | None:
    """The exponent of the lowest set bit over the finite nonzero values of ``x`` (None if there are none)."""
    nz = x[(x != 0) & np.isfinite(x)]
    if not len(nz):
        return None
    m, e = np.frexp(nz)
    mant = np.abs((m * 2.0**53).astype(np.int64))
    low = mant & -mant                               # the lowest set bit of each mantissa
    return int((np.frexp(low.astype(np.float64))[1] - 1 + e - 53).min())


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    """``a`` copied into a zeroed array of ``size`` along its last axis."""
    if a.shape[-1] >= size:
        return a
    out = np.zeros(a.shape[:-1] + (size,), dtype=a.dtype)
    out[..., :a.shape[-1]] = a
    return out
