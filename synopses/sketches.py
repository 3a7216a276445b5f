"""Per-group sketches behind CQL's approximate aggregates: HyperLogLog for APPROX_COUNT_DISTINCT, KLL for
APPROX_QUANTILE and the frequent-items sketch for APPROX_TOP_K, all from Apache DataSketches (issue 14 item 4).

Source: Flajolet et al., "HyperLogLog" (2007) and Karnin, Lang, Liberty, "Optimal quantile approximation in
streams" (FOCS 2016), as DataSketches implements them; Metwally et al. / Misra-Gries for frequent items.

Deletions. These sketches take inserts only, and a sliding window retracts values. A sketch therefore works in
one of two modes, chosen by the plan (``keep_values``):

* insert-only input (a stream read without a window, or ``[RANGE UNBOUNDED]``): the group keeps the sketch
  alone, so its memory is the sketch's (a few KB) whatever the number of distinct values;
* input that can delete (any other window, a relation): the group also keeps its values as a multiset
  (value -> count). Inserts update the sketch at once; a delete updates the multiset and marks the sketch
  stale, and the sketch is rebuilt from the multiset the next time its value is read (at most once per
  instant that deleted from the group). A group that empties is dropped with its sketch, so a tumbling window
  (``SLIDE`` equal to ``RANGE``) starts each period from an empty sketch.

The answer is always the sketch's, so the stated error bound holds in both modes (an exact answer would be
possible in the second mode, but then the error reported would depend on the window kind).
"""

from __future__ import annotations

import math
import sys
from collections import Counter

import datasketches as ds
import numpy as np

#: HyperLogLog precision: 2**12 registers, relative standard error 1.04 / sqrt(4096) = 1.6%.
HLL_LG_K = 12
#: KLL accuracy parameter: normalized rank error 1.33% at 99% confidence (DataSketches' default).
KLL_K = 200
#: frequent-items sketch map size (log2): 2**10 counters.
TOPK_LG_MAX = 10
#: standard deviations of the HLL bound reported (2 = 95.4% confidence).
HLL_STD_DEVS = 2


def _canonical(v):
    """The value as the sketch hashes it: booleans and numpy scalars as Python ints and floats."""
    if isinstance(v, bool | np.bool_):
        return int(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


class _GroupSketch:
    """A sketch of one group's values, with the multiset it is rebuilt from when deletes can happen."""

    __slots__ = ("sk", "values", "stale")

    def __init__(self, keep_values: bool) -> None:
        self.sk = self._new()
        self.values: Counter | None = Counter() if keep_values else None
        self.stale = False

    def _new(self):
        raise NotImplementedError

    def _feed(self, sk, v, count: int = 1) -> None:
        raise NotImplementedError

    def add(self, v, s: int) -> None:
        """Insert (s > 0) or delete (s < 0) ``|s|`` copies of value ``v``."""
        v = _canonical(v)
        if self.values is None:
            if s < 0:
                raise ValueError("a delete reached an insert-only sketch: the plan must keep values for an "
                                 "input that can delete")
            self._feed(self.sk, v, s)
            return
        c = self.values[v] + s
        if c:
            self.values[v] = c
        else:
            del self.values[v]
        if s > 0 and not self.stale:
            self._feed(self.sk, v, s)
        elif s < 0:
            self.stale = True

    def sketch(self):
        """The sketch, rebuilt from the multiset if a delete made it stale."""
        if self.stale:
            sk = self._new()
            for v, c in self.values.items():
                if c > 0:
                    self._feed(sk, v, c)
            self.sk = sk
            self.stale = False
        return self.sk

    def nbytes(self) -> int:
        total = self.sketch_bytes()
        if self.values is not None:
            total += sys.getsizeof(self.values) + sum(sys.getsizeof(v) for v in self.values)
        return total

    def sketch_bytes(self) -> int:
        raise NotImplementedError


class DistinctSketch(_GroupSketch):
    """HyperLogLog (HLL_8) of a group's values: APPROX_COUNT_DISTINCT.

    >>> d = DistinctSketch(keep_values=False)
    >>> for i in range(1000): d.add(i % 100, 1)
    >>> abs(d.value() - 100) <= 100 * distinct_rel_error()
    True
    """

    __slots__ = ()

    def _new(self):
        return ds.hll_sketch(HLL_LG_K, ds.HLL_8)

    def _feed(self, sk, v, count: int = 1) -> None:
        sk.update(v)                    # a distinct count needs each value once, whatever its multiplicity

    def value(self) -> int:
        return int(round(self.sketch().get_estimate()))

    def sketch_bytes(self) -> int:
        return self.sk.get_updatable_serialization_bytes()


def distinct_rel_error() -> float:
    """Relative error of APPROX_COUNT_DISTINCT at HLL_STD_DEVS standard deviations (DataSketches' bound for
    HLL with 2**HLL_LG_K registers, the estimation mode's; small counts are exact or better)."""
    return abs(ds.hll_sketch.get_rel_err(True, False, HLL_LG_K, HLL_STD_DEVS))


def distinct_confidence() -> float:
    """Two-sided normal confidence of HLL_STD_DEVS standard deviations (0.954 for 2)."""
    return math.erf(HLL_STD_DEVS / math.sqrt(2))


class QuantileSketch(_GroupSketch):
    """KLL sketch (doubles) of a group's values: APPROX_QUANTILE.

    >>> q = QuantileSketch(keep_values=False)
    >>> for i in range(1, 1001): q.add(float(i), 1)
    >>> abs(q.value(0.5) - 500) <= 1000 * quantile_rank_error()
    True
    """

    __slots__ = ()

    def _new(self):
        return ds.kll_doubles_sketch(KLL_K)

    def _feed(self, sk, v, count: int = 1) -> None:
        if count == 1:
            sk.update(float(v))
        else:
            sk.update(np.full(count, float(v)))

    def value(self, q: float) -> float:
        """The q-quantile (an item that was inserted, of rank about q*n: the inclusive rank, so q = 0 gives
        the minimum and q = 1 the maximum)."""
        return self.sketch().get_quantile(q, True)

    def sketch_bytes(self) -> int:
        return len(self.sk.serialize())


def quantile_rank_error() -> float:
    """Normalized rank error of APPROX_QUANTILE at 99% confidence (KLL with k = KLL_K): the value returned
    for q has a rank within q*n +- eps*n."""
    return ds.kll_doubles_sketch.get_normalized_rank_error(KLL_K, False)


QUANTILE_CONFIDENCE = 0.99


class TopKSketch(_GroupSketch):
    """Frequent-items sketch of a group's values: APPROX_TOP_K (values as strings, counts as weights).

    >>> t = TopKSketch(keep_values=False)
    >>> for i in range(100): t.add(i % 3 if i < 90 else i, 1)
    >>> t.value(2)
    '0, 1'
    """

    __slots__ = ()

    def _new(self):
        return ds.frequent_strings_sketch(TOPK_LG_MAX)

    def _feed(self, sk, v, count: int = 1) -> None:
        sk.update(str(v), count)

    def value(self, k: int) -> str:
        """The k most frequent values (estimated), most frequent first, ties by value, joined by ', '."""
        items = self.sketch().get_frequent_items(ds.frequent_items_error_type.NO_FALSE_NEGATIVES)
        items.sort(key=lambda it: (-it[1], it[0]))
        return ", ".join(it[0] for it in items[:k])

    def sketch_bytes(self) -> int:
        return self.sk.get_serialized_size_bytes()



def topk_error_fraction() -> float:
    """The bound on an APPROX_TOP_K count's error, as a fraction of the group's total count (deterministic
    for the frequent-items sketch: a value whose true count exceeds this fraction is never missed)."""
    return ds.frequent_strings_sketch.get_epsilon_for_lg_size(TOPK_LG_MAX)
