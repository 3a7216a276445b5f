"""Promising-tuples shedding for selection-only queries: under overload a selection query evaluates its
predicate on the regions of the stream most likely to match it, until its CPU share is spent, instead of on a
random sample of the input (docs/approximation.md, "Shedding selections").

Source: digest-004 section 2.L (P3, Nile): R-PT-02 (find promising regions from summaries, rank them, run
the query on them in that order), R-PT-03 (summaries are per stream and shared by every query; what is
promising depends on the query), R-PT-17 (summary-guided multi-query selection; the baseline,
SIMPLE-Selection, loses tuples at random) and experiment X8 (100 selection queries of selectivity 5-10%).

What is kept of P3 and what is not:

- A region is a block of ``BLOCK`` consecutive rows of one input batch (P3's time zones, fixed length instead
  of self-adjusting). Its summary is an equi-width histogram of ``BUCKETS`` buckets per numeric column,
  spanning the batch's range of that column (P3's default summary is a Count-Sketch of hashed values; a
  range predicate needs ordered buckets). Summaries are computed once per batch with numpy and shared by
  every query reading the same input queue (``RegionIndex``).
- A query's promise for a region is its estimated matches there: the conjunction of the predicate's
  comparisons of a column with a constant is read as one interval per column, each column's share of the
  region's rows inside its interval is estimated from the histogram (uniform within a bucket), and the
  columns are taken as independent. Other parts of the predicate (OR, functions, column against column)
  are not estimated; a predicate with no usable part falls back to a random drop.
- Regions are taken by descending estimate until the query's budget (its sampling rate times the batch's
  rows) is spent; a region no bucket of which meets the interval holds no match and is never evaluated
  (that costs nothing and loses nothing). The predicate itself is then evaluated by the query's own select
  operator on the rows kept, so every result row is a row of the exact answer; rows of regions not chosen
  are lost. The decision is per batch, so the kept rows stay in time order (P3's answers come out of order;
  these do not).

On data without locality (values independent of their position in the stream) every region looks like
every other and the estimates only pick the noise: promising regions give about what a random drop gives.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dsms.batch import Batch
from dsms.cql import ast

BLOCK = 256          # rows per region
BUCKETS = 16         # histogram buckets per column and region
_CMP = {"<", "<=", ">", ">=", "="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}

Interval = tuple[float, float]       # closed [lo, hi]; strictness is ignored (an estimate only)


def column_intervals(pred: Any) -> dict[int, Interval]:
    """Per input column position, the interval the predicate's top-level conjunction confines it to (from
    comparisons of a column with a numeric constant and BETWEEN); columns it does not confine are absent.

    >>> p = ast.BinaryOp("AND", ast.BinaryOp(">=", ast.ColumnRef("$2"), ast.Literal(0.1, "FLOAT")),
    ...                  ast.BinaryOp(">", ast.Literal(0.3, "FLOAT"), ast.ColumnRef("$2")))
    >>> column_intervals(p)
    {2: (0.1, 0.3)}
    """
    out: dict[int, Interval] = {}
    todo = [pred]
    while todo:
        e = todo.pop()
        if isinstance(e, ast.BinaryOp) and e.op.upper() == "AND":
            todo += [e.left, e.right]
            continue
        got = _bounds(e)
        if got is None:
            continue
        col, lo, hi = got
        old = out.get(col, (-math.inf, math.inf))
        out[col] = (max(old[0], lo), min(old[1], hi))
    return out


def _number(e: Any) -> float | None:
    if isinstance(e, ast.UnaryOp) and e.op == "-":
        v = _number(e.operand)
        return None if v is None else -v
    if isinstance(e, ast.Literal) and isinstance(e.value, int | float) and not isinstance(e.value, bool):
        return float(e.value)
    return None


def _column(e: Any) -> int | None:
    if isinstance(e, ast.ColumnRef) and str(e.name).startswith("$") and e.name[1:].isdigit():
        return int(e.name[1:])
    return None


def _bounds(e: Any) -> tuple[int, float, float] | None:
    """(column, lo, hi) of one comparison of a column with a constant, else None."""
    if isinstance(e, ast.Between) and not e.negated:
        col, lo, hi = _column(e.expr), _number(e.low), _number(e.high)
        return None if col is None or lo is None or hi is None else (col, lo, hi)
    if not isinstance(e, ast.BinaryOp) or e.op not in _CMP:
        return None
    op, col, val = e.op, _column(e.left), _number(e.right)
    if col is None:
        op, col, val = _FLIP[e.op], _column(e.right), _number(e.left)
    if col is None or val is None:
        return None
    if op in ("<", "<="):
        return col, -math.inf, val
    if op in (">", ">="):
        return col, val, math.inf
    return col, val, val


class RegionSummary:
    """The regions of one batch and, per numeric column asked for, a histogram per region (computed on first
    use, then kept: every query reading the batch shares it)."""

    def __init__(self, batch: Batch, block: int = BLOCK, buckets: int = BUCKETS) -> None:
        self.batch = batch
        n = len(batch)
        self.block = block
        self.buckets = buckets
        self.regions = max(1, -(-n // block))
        self.sizes = np.full(self.regions, block, dtype=np.int64)
        self.sizes[-1] = n - block * (self.regions - 1)
        self._hist: dict[int, tuple[float, float, np.ndarray] | None] = {}

    def histogram(self, col: int) -> tuple[float, float, np.ndarray] | None:
        """(low edge, bucket width, counts[region, bucket]) of a numeric column (NaN counted nowhere; a
        constant column is one bucket wide); None for a column that is not numeric."""
        if col in self._hist:
            return self._hist[col]
        c = self.batch.cols[col] if col < len(self.batch.cols) else None
        if c is None or c.dtype.kind not in "iuf":
            self._hist[col] = None
            return None
        x = c.astype(np.float64, copy=False)
        ok = ~np.isnan(x) if c.dtype.kind == "f" else None
        xs = x[ok] if ok is not None else x
        k = self.buckets
        if not len(xs):
            h = (0.0, 1.0, np.zeros((self.regions, k), dtype=np.int64))
        else:
            lo, hi = float(xs.min()), float(xs.max())
            width = (hi - lo) / k if hi > lo else 1.0
            b = np.minimum(((x - lo) / width).astype(np.int64) if ok is None
                           else np.where(ok, (np.nan_to_num(x, nan=lo) - lo) / width, 0).astype(np.int64), k - 1)
            cell = (np.arange(len(x), dtype=np.int64) // self.block) * k + b
            if ok is not None:
                cell = cell[ok]
            counts = np.bincount(cell, minlength=self.regions * k).reshape(self.regions, k)
            h = (lo, width, counts)
        self._hist[col] = h
        return h

    def estimate(self, intervals: dict[int, Interval]) -> np.ndarray:
        """Estimated matching rows per region: per column the histogram's rows inside its interval (a bucket
        counted by the share of its width the interval covers, and by at least a millionth when the closed
        interval touches it at all, so that only a region that cannot match gets 0), the columns taken
        as independent."""
        frac = np.ones(self.regions)
        for col, (lo, hi) in intervals.items():
            h = self.histogram(col)
            if h is None:
                continue
            base, width, counts = h
            left = base + width * np.arange(self.buckets)
            right = left + width
            tol = width * 1e-9
            over = np.clip(np.minimum(right, hi) - np.maximum(left, lo), 0.0, None) / width
            touch = (left - tol <= hi) & (right + tol >= lo)
            w = np.where(touch, np.maximum(np.minimum(over, 1.0), 1e-6), 0.0)
            frac *= (counts @ w) / self.sizes
        return frac * self.sizes


class RegionIndex:
    """The region summaries of the last few batches of one input queue, shared by every promising drop on
    that queue (readers of a shared queue get the same batch objects, in the same order)."""

    KEEP = 8

    def __init__(self) -> None:
        self._by_batch: dict[int, RegionSummary] = {}

    def summary(self, batch: Batch) -> RegionSummary:
        s = self._by_batch.get(id(batch))
        if s is not None and s.batch is batch:
            return s
        s = RegionSummary(batch)
        self._by_batch[id(batch)] = s
        while len(self._by_batch) > self.KEEP:
            self._by_batch.pop(next(iter(self._by_batch)))
        return s


class PromisingDrop:
    """Keeps, of each batch, the rows of the regions with the most estimated matches for one predicate, up to
    ``rate`` times the batch's rows (the query's CPU share); rows of regions that cannot match are never
    kept. The same interface as ``RandomDrop`` (``rate``, ``keep``, ``kept``, ``dropped``), so a ``Shedder``
    holds either.

    >>> from dsms.batch import Batch
    >>> f = np.repeat([0.05, 0.5, 0.95, 0.5], 256)               # four regions, one of them matching
    >>> b = Batch(np.arange(1024), np.ones(1024, np.int8), [f])
    >>> d = PromisingDrop(0.25, {0: (0.9, 1.0)}, RegionIndex(), seed=1)
    >>> out = d.keep(b)
    >>> len(out), bool((out.cols[0] == 0.95).all())
    (256, True)
    """

    method = "promising"

    def __init__(self, rate: float, intervals: dict[int, Interval], index: RegionIndex, seed: int) -> None:
        self.rate = rate
        self.intervals = intervals
        self.index = index
        self.rng = np.random.default_rng(seed)
        self.kept = 0
        self.dropped = 0

    def keep(self, batch: Batch) -> Batch:
        """The rows of the chosen regions, in time order (the batch itself at rate 1)."""
        n = len(batch)
        if self.rate >= 1.0 or n == 0:
            self.kept += n
            return batch
        budget = int(math.floor(self.rate * n + self.rng.random()))      # rate * n rows in expectation
        s = self.index.summary(batch)
        est = s.estimate(self.intervals)
        order = np.argsort(-est, kind="stable")                 # most promising first, earlier on ties
        order = order[est[order] > 0]                           # a region that cannot match costs nothing
        used = np.cumsum(s.sizes[order])
        k = int(np.searchsorted(used, budget, side="right"))   # regions taken whole
        chosen = np.zeros(s.regions, dtype=bool)
        chosen[order[:k]] = True
        mask = np.repeat(chosen, s.sizes)
        rest = budget - (int(used[k - 1]) if k else 0)
        if k < len(order) and rest > 0:                         # part of the next region: its first rows
            start = int(order[k]) * s.block
            mask[start:start + rest] = True
        out = batch.take(mask)
        self.kept += len(out)
        self.dropped += n - len(out)
        return out
