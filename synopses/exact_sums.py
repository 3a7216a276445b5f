"""Exact sums of float64 values, vectorised: each sum is a fixed-point integer held in int64 limbs of 32 bits.

Why: SPEC section 3 defines SUM over the relation at each instant. A float running sum is not that: the window
{1e17, 1.0} minus 1e17 leaves 0.0 instead of 1.0, and last-bit drift reports a value that did not change as a
change. Every finite double is an integer multiple of 2**-1074, so a sum can be kept exactly as an integer;
Python integers do that but cost a Python object per value (the vectorised GROUP BY fell to a third of the
plain loop's speed). Here the integer is split into limbs of 32 bits, each in an int64, so that adding a
batch of values is a few numpy passes: a value spreads over at most three adjacent limbs (its 53-bit mantissa,
shifted by its exponent), cumulative sums of limbs cannot overflow int64 for 2**30 rows, and carries are
propagated only when a sum is stored or read.

The limbs cover the exponents the data has needed so far (``LimbLayout``: the weight of limb 0 and the number
of limbs), widened when a value needs a lower or a higher limb, so whole numbers and ordinary fractions take a
handful of limbs and a value near 2**-1074 takes what it needs.

Reading a sum as a float is correctly rounded (round to nearest, ties to even): the top 63 bits of the
magnitude, with a sticky bit for everything below them, are converted by the CPU's own int64 -> float64
rounding ("round to odd" on the dropped bits, so no double rounding), then scaled by a power of two. Sums in
the subnormal range, where scaling would round a second time, are read through Python integers.
"""

from __future__ import annotations

import numpy as np

BITS = 32
MASK = (1 << BITS) - 1


class LimbLayout:
    """Where the limbs of every sum of one operator stand: limb i weighs 2**(lo + 32 i), i < width.

    The layout only grows; ``fit`` says how many limbs to add below and above for a batch of values, and the
    owner pads its stored sums with zero limbs (``pad``)."""

    __slots__ = ("lo", "width")

    def __init__(self) -> None:
        self.lo = 0          # exponent of bit 0 of limb 0, a multiple of 32
        self.width = 2

    def fit(self, exps: np.ndarray) -> tuple[int, int]:
        """Limbs to add (below, above) so that values whose mantissa's lowest bit weighs 2**e, e in ``exps``,
        spread over limbs that exist, with one limb spare on top for carries."""
        if not len(exps):
            return 0, 0
        below = max(0, -((int(exps.min()) - self.lo) // BITS))
        lo = self.lo - BITS * below
        # a mantissa whose lowest bit is in limb q writes limbs q, q+1 and q+2; one more limb takes carries
        # (sums of up to 2**32 values of the largest magnitude before it could overflow into a missing limb)
        need = (int(exps.max()) - lo) // BITS + 4
        above = max(0, need - (self.width + below))
        self.lo, self.width = lo, self.width + below + above
        return below, above


def pad(limbs: np.ndarray, below: int, above: int) -> np.ndarray:
    """``limbs`` (width, rows) with zero limbs added at the low and high ends."""
    if not (below or above):
        return limbs
    return np.pad(limbs, ((below, above), (0, 0)))


def deltas(values: np.ndarray, sign: np.ndarray, layout: LimbLayout) -> tuple[np.ndarray, tuple[int, int]]:
    """Each finite value times its sign as limbs: a (width, rows) int64 matrix, each entry below 2**33 in
    magnitude. Non-finite values (counted apart by the caller) and zeros contribute nothing. Widens ``layout``
    first if needed; returns the matrix and the (below, above) limbs added, for the caller's stored sums."""
    n = len(values)
    finite = np.isfinite(values) & (values != 0)
    m, e = np.frexp(np.where(finite, values, 0.0))
    mant = (m * 2.0**53).astype(np.int64)                 # exact: |mant| < 2**53, value = mant * 2**(e - 53)
    low_exp = e.astype(np.int64) - 53
    every = bool(finite.all())
    grown = layout.fit(low_exp if every else low_exp[finite])
    out = np.zeros((layout.width, n), dtype=np.int64)
    if every:                                               # the usual case: no subsetting
        rows = np.arange(n)
    else:
        rows = np.nonzero(finite)[0]
        if not len(rows):
            return out, grown
        mant, low_exp, sign = mant[rows], low_exp[rows], sign[rows]
    s = sign.astype(np.int64)
    np.negative(s, out=s, where=mant < 0)
    mag = np.abs(mant)
    p = low_exp - layout.lo                                 # bit position of the mantissa's lowest bit
    q, off = p >> 5, p & (BITS - 1)
    t0 = (mag & MASK) << off                                # below 2**63
    t1 = (mag >> BITS) << off                               # below 2**52
    flat = out.reshape(-1)
    at = q * n + rows
    flat[at] = s * (t0 & MASK)
    flat[at + n] = s * ((t0 >> BITS) + (t1 & MASK))
    flat[at + 2 * n] = s * (t1 >> BITS)
    return out, grown


def normalise(limbs: np.ndarray) -> np.ndarray:
    """The same integers (columns of limbs) with every limb but the top one in [0, 2**32) (carries moved up);
    the top limb keeps the sign. In place; returns ``limbs``."""
    for i in range(limbs.shape[0] - 1):
        carry = limbs[i] >> BITS                            # floor division: negative limbs borrow
        limbs[i] -= carry << BITS
        limbs[i + 1] += carry
    return limbs


def to_float(limbs: np.ndarray, lo: int) -> np.ndarray:
    """The correctly rounded float64 of each column's integer times 2**lo."""
    width, k = limbs.shape
    r = np.zeros((width + 1, k), dtype=np.int64)           # one limb more: after carrying, all below 2**32
    r[:width] = limbs
    normalise(r)
    neg = r[-1] < 0
    any_neg = bool(neg.any())
    if any_neg:
        r[:, neg] = normalise(-r[:, neg])
    # from the top down, the highest nonzero limb of each column (hi, at t) and the two below it; the top
    # limbs are mostly the same for a whole batch, so the scan usually stops after one or two limbs
    hi, mid, low = (np.zeros(k, dtype=np.int64) for _ in range(3))
    t = np.full(k, -1, dtype=np.int64)
    todo = np.ones(k, dtype=bool)
    for i in range(width, -1, -1):
        here = todo & (r[i] != 0)
        if here.any():
            np.copyto(hi, r[i], where=here)
            if i >= 1:
                np.copyto(mid, r[i - 1], where=here)
            if i >= 2:
                np.copyto(low, r[i - 2], where=here)
            np.copyto(t, i, where=here)
            todo &= ~here
            if not todo.any():
                break
    # whether any limb below t - 2 is nonzero: the bits that only the sticky bit stands for
    sticky = np.zeros(k, dtype=bool)
    for i in range(max(width - 2, 0)):
        sticky |= (r[i] != 0) & (i < t - 2)
    out = np.zeros(k, dtype=np.float64)
    live = t >= 0
    if not live.all():
        hi, mid, low, t, sticky = hi[live], mid[live], low[live], t[live], sticky[live]
    # the 63 bits from hi's top bit down (hi has b bits, 1 <= b <= 32), and whether any bit below them is set:
    # of mid * 2**32 + low (64 bits, unsigned) the lowest b + 1 are dropped
    b = np.frexp(hi.astype(np.float64))[1].astype(np.int64)
    word = (hi << (63 - b)) | ((mid << 31) >> b) | ((low << 31) >> (b + 32))
    below = (mid.astype(np.uint64) << np.uint64(BITS)) | low.astype(np.uint64)
    sticky |= (below << (63 - b).astype(np.uint64)) != 0     # the dropped bits, shifted out at the top
    rounded = (word | sticky).astype(np.float64)            # round to odd below bit 10: one rounding, here
    with np.errstate(over="ignore"):                        # beyond the float range: inf, as rounding gives
        val = np.ldexp(rounded, (b + 1 + BITS * (t - 2) + lo).astype(np.int32))
    tiny = np.abs(val) < 2.0**-1021                         # subnormal range: ldexp would round again
    if tiny.any():
        cols = np.nonzero(live)[0][tiny]
        val[tiny] = [_exact_float(r[:, c].tolist(), lo) for c in cols]
    if any_neg:
        val = np.where(neg[live] if len(val) < k else neg, -val, val)
    if len(val) == k:
        return val
    out[live] = val
    return out


def _exact_float(limbs: list[int], lo: int) -> float:
    """One integer (its limbs) times 2**lo as a float, through Python's correctly rounded integer division."""
    total = sum(v << (BITS * i) for i, v in enumerate(limbs))
    return total * 2.0**lo if lo >= 0 else total / (1 << -lo)
