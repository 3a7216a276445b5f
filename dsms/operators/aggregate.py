"""Grouped aggregation (γ) with COUNT, SUM, AVG, MIN, MAX, COUNT(DISTINCT) and the approximate aggregates
(APPROX_COUNT_DISTINCT, APPROX_QUANTILE, APPROX_TOP_K over ``synopses/sketches.py``), maintained incrementally.

Source: digest-004 R-PLAN-06 (MIN/MAX must keep their window: when the extreme expires, rescan, E8.1);
digest-003 section 3.8-3.9 (vanishing groups); digest-002a section 3.11 (a PNA aggregate must not publish
intermediate values inside one instant). Within a batch, the changes of each instant are gathered and each
touched group emits its old row as a delete and its new row as an insert once per instant; a group whose
count reaches zero disappears (an aggregate over an empty relation yields no row, SPEC section 3).

FLOAT sums are kept exactly (as an integer multiple of 2**-1074, with +inf, -inf and nan counted apart, as
``VectorAggregateOp`` keeps them) so that inserting and later deleting a value leaves no rounding residue: SUM
is the correctly rounded sum of the values in the group (IEEE 754 where an infinity or nan is among them), and
AVG that sum divided by the count.
"""

from __future__ import annotations

from collections import Counter

from control_tables import Stat
from dsms.agg_spec import agg_func, agg_label
from dsms.approx import Approx
from dsms.batch import Batch, from_rows
from dsms.operators.base import FinalInstantsOperator
from dsms.operators.int_sums import fits, report
from dsms.queues import Queue
from synopses.base import deep_bytes
from synopses.extreme import ExtremeBag
from synopses.sketches import (
    QUANTILE_CONFIDENCE,
    DistinctSketch,
    QuantileSketch,
    TopKSketch,
    distinct_confidence,
    distinct_rel_error,
    quantile_rank_error,
    topk_error_fraction,
)
from synopses.state import StateSynopsis

SCALE = 2**1074


def _exact(v: float) -> int:
    n, d = float(v).as_integer_ratio()
    return n * (SCALE // d)


class _FloatSum:
    """A running FLOAT sum without rounding residue: the finite values as one exact integer (multiples of
    2**-1074), infinities and nans counted apart, so that a value that leaves the group leaves no trace."""

    __slots__ = ("exact", "pinf", "ninf", "nan")

    def __init__(self) -> None:
        self.exact = self.pinf = self.ninf = self.nan = 0

    def add(self, v: float, s: int) -> None:
        if v != v:
            self.nan += s
        elif v == _INF:
            self.pinf += s
        elif v == -_INF:
            self.ninf += s
        else:
            self.exact += s * _exact(v)

    def value(self) -> float:
        """The correctly rounded sum, or inf, -inf, nan by IEEE 754 rules."""
        if self.nan or (self.pinf and self.ninf):
            return _NAN
        if self.pinf or self.ninf:
            return _INF if self.pinf else -_INF
        try:
            return self.exact / SCALE            # Python rounds an integer quotient correctly
        except OverflowError:                    # beyond the float range, as IEEE addition would give
            return _INF if self.exact > 0 else -_INF


_INF, _NAN = float("inf"), float("nan")


def _same(old: tuple | None, new: tuple | None) -> bool:
    """Rows equal value for value, NaN equal to NaN (a group whose value stays NaN has not changed)."""
    return old is not None and new is not None and all(x == y or (x != x and y != y) for x, y in zip(old, new))


class _DistinctValues(Counter):
    """The DISTINCT argument values present (count nonzero) with their running sum, kept as values come and
    go, so that SUM/AVG(DISTINCT) need no pass over the values on each instant."""

    total: int | _FloatSum = 0


class _Group:
    __slots__ = ("count", "states")

    def __init__(self, n: int) -> None:
        self.count = 0
        self.states: list = [None] * n


class AggregateOp(FinalInstantsOperator):
    kind = "aggregate"
    int_overflows = Stat(int, default=0, unit="rows",
                         doc="result rows left out because an INT SUM was outside int64 (an error, never wrapped)")

    def __init__(self, group: tuple[int, ...], aggs: tuple, arg_types: list[str], inp: Queue, out: Queue,
                 dtypes: list, keep_values: bool = True) -> None:
        label = ", ".join(agg_label(f, a, d) for f, a, d in aggs)
        if group:
            label = f"GROUP BY {', '.join(f'${g}' for g in group)}: " + label
        super().__init__([inp], out, label)
        self.group = group
        self.aggs = aggs
        self.arg_types = arg_types      # type of each aggregate's argument (None for COUNT(*))
        self.overflow_errors: list[str] = []     # for Query.drain to raise (dsms/operators/int_sums.py)
        self._int_sums = [j for j, (f, _, _) in enumerate(aggs) if f == "SUM" and arg_types[j] != "FLOAT"]
        self.dtypes = dtypes
        # an approximate aggregate over input that can delete keeps each group's values beside its sketch
        # (synopses/sketches.py, "Deletions"); over insert-only input the sketch alone
        self.keep_values = keep_values
        self.funcs = [agg_func(f) for f, _, _ in aggs]
        self.groups: dict[tuple, _Group] = {}
        self.synopses = [StateSynopsis("groups", lambda: len(self.groups),
                                       lambda: deep_bytes(self.groups) + sum(b.nbytes for b in self.held))]


    # ---------------------------------------------------------------- state per aggregate

    def approximation(self) -> Approx | None:
        """The error bound of this operator's approximate aggregates (the loosest of them), or None when
        every aggregate is exact. APPROX_COUNT_DISTINCT: HyperLogLog's relative error at 2 standard
        deviations; APPROX_QUANTILE: KLL's normalized rank error at 99% (the value returned for q has a rank
        within (q +- rel_error) * n); APPROX_TOP_K: the frequent-items bound on each count, as a fraction of
        the group's count (deterministic)."""
        bounds = []
        for name, _ in self.funcs:
            if name == "APPROX_COUNT_DISTINCT":
                bounds.append((distinct_rel_error(), distinct_confidence()))
            elif name == "APPROX_QUANTILE":
                bounds.append((quantile_rank_error(), QUANTILE_CONFIDENCE))
            elif name == "APPROX_TOP_K":
                bounds.append((topk_error_fraction(), 1.0))
        if not bounds:
            return None
        return Approx(rel_error=max(e for e, _ in bounds), confidence=min(c for _, c in bounds))

    def _new_state(self, j: int):
        func, arg, distinct = self.aggs[j]
        name = self.funcs[j][0]
        if name == "APPROX_COUNT_DISTINCT":
            return DistinctSketch(self.keep_values)
        if name == "APPROX_QUANTILE":
            return QuantileSketch(self.keep_values)
        if name == "APPROX_TOP_K":
            return TopKSketch(self.keep_values)
        if func in ("MIN", "MAX"):
            return ExtremeBag(want_max=func == "MAX")
        if distinct:
            st = _DistinctValues()
            if self.arg_types[j] == "FLOAT":
                st.total = _FloatSum()
            return st
        if func in ("SUM", "AVG"):
            return _FloatSum() if self.arg_types[j] == "FLOAT" else 0
        return None

    def _update(self, g: _Group, row: tuple, s: int) -> None:
        for j, (func, arg, distinct) in enumerate(self.aggs):
            if arg is None or (func == "COUNT" and not distinct):
                continue
            st = g.states[j]
            if st is None:
                st = g.states[j] = self._new_state(j)
            v = row[arg]
            if v != v:
                v = _NAN                      # one value for every NaN (as GROUP BY and DISTINCT take it)
            if isinstance(st, ExtremeBag | DistinctSketch | QuantileSketch | TopKSketch):
                st.add(v, s)
            elif isinstance(st, Counter):
                old = st[v]
                c = old + s
                if c:
                    st[v] = c
                else:
                    del st[v]
                if func != "COUNT" and (old == 0) != (c == 0):
                    if isinstance(st.total, _FloatSum):
                        st.total.add(v, 1 if c else -1)
                    else:
                        st.total += v if c else -v
            elif isinstance(st, _FloatSum):
                st.add(v, s)
            else:
                g.states[j] = st + s * v

    def _value(self, g: _Group, j: int):
        func, arg, distinct = self.aggs[j]
        st = g.states[j]
        name, param = self.funcs[j]
        if name == "APPROX_COUNT_DISTINCT":
            return st.value()
        if name == "APPROX_QUANTILE":
            v = st.value(param)
            return int(v) if self.arg_types[j] != "FLOAT" else v
        if name == "APPROX_TOP_K":
            return st.value(param)
        if func == "COUNT":
            return len(st) if distinct else g.count
        if func in ("MIN", "MAX"):
            return st.extreme()
        if distinct:
            total = st.total
            n = len(st)
        else:
            total = st if st is not None else 0
            n = g.count
        if isinstance(total, _FloatSum):
            total = total.value()
        return total if func == "SUM" else total / n

    def _fitting(self, row: tuple | None, t: int | None) -> tuple | None:
        """``row``, or None if one of its INT SUMs is outside int64 (reported when ``t``, the instant it would
        be inserted at, is given)."""
        if row is None:
            return None
        k = len(self.group)
        bad = [j for j in self._int_sums if not fits(row[k + j])]
        if t is not None:
            for j in bad:
                report(self, j, row[k + j], t)
        return None if bad else row

    def _row(self, key: tuple, g: _Group) -> tuple:
        return key + tuple(self._value(g, j) for j in range(len(self.aggs)))

    # ---------------------------------------------------------------- processing

    def process(self, batch: Batch) -> None:
        out_ts: list[int] = []
        out_sign: list[int] = []
        out_rows: list[tuple] = []
        before: dict[tuple, tuple | None] = {}     # group key -> its row before this instant
        cur_t = None
        groups, gcols, nagg = self.groups, self.group, len(self.aggs)

        def flush(t):
            for key, old in before.items():
                g = groups.get(key)
                if g is not None and g.count == 0:
                    del groups[key]            # only at the end of the instant: counts may dip inside it
                    g = None
                new = self._row(key, g) if g is not None else None
                if old == new or _same(old, new):
                    continue
                if self._int_sums:           # a row whose INT SUM left int64 is neither inserted nor deleted
                    old, new = self._fitting(old, None), self._fitting(new, t)
                if old is not None:
                    out_ts.append(t)
                    out_sign.append(-1)
                    out_rows.append(old)
                if new is not None:
                    out_ts.append(t)
                    out_sign.append(1)
                    out_rows.append(new)
            before.clear()

        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
            if t != cur_t:
                if before:
                    flush(cur_t)
                cur_t = t
            key = tuple(row[c] for c in gcols)
            g = groups.get(key)
            if key not in before:
                before[key] = self._row(key, g) if g is not None else None
            if g is None:
                g = groups[key] = _Group(nagg)
            g.count += s
            self._update(g, row, s)
        if before:
            flush(cur_t)
        if out_rows:
            self.emit(from_rows(out_ts, out_sign, out_rows, self.dtypes))
