"""Batches and heartbeats: what moves through the inter-operator queues (SPEC section 2).

A batch is columnar: int64 timestamps, int8 signs (+1 insert, -1 delete, STREAM's positive/negative elements,
digest-002a section 2.15) and one numpy array per column, positionally matching the producing node's schema.
Within a queue timestamps never decrease, so the last timestamp of a batch is also a promise about the future:
nothing earlier will follow. A heartbeat carries that promise alone, when there is no data to carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import numpy.ma  # noqa: F401  numpy 2.x's np.unique imports it on first call (~7-19 ms); pay that at import time


class Element(NamedTuple):
    """One result element as users see it (SPEC section 5). ``approx`` is None: exact (an approximate one is
    an ``ApproxElement``)."""

    ts: int
    sign: int
    row: dict

    approx = None


class ApproxElement(Element):
    """A result element produced while the query was approximate: ``approx`` (a ``dsms.approx.Approx``)
    says how much. It compares equal to the exact element with the same fields."""

    def __new__(cls, ts: int, sign: int, row: dict, approx) -> ApproxElement:
        self = super().__new__(cls, ts, sign, row)
        self.approx = approx
        return self

    def __repr__(self) -> str:
        return f"ApproxElement(ts={self.ts}, sign={self.sign}, row={self.row}, approx={self.approx})"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``Heartbeat(h)``: no element with a timestamp below h will follow in this queue."""

    ts: int
    nbytes: ClassVar[int] = 8          # a class constant, not a property: read at every put and trim

    def __len__(self) -> int:
        return 0


class Batch:
    """A run of elements in timestamp order. Columns are positional; ``len(batch)`` is the row count."""

    __slots__ = ("ts", "sign", "cols", "_nbytes", "col_bytes", "approx")

    def __init__(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray]) -> None:
        self.ts = ts
        self.sign = sign
        self.cols = cols
        self._nbytes: int | None = None
        #: per column, its ``column_bytes`` once known (None: not yet); an operator that passes a column on
        #: unchanged passes its count with it, so a string column is not sampled again at every queue
        self.col_bytes: list[int | None] | None = None
        self.approx = None              # set on a query's result batch produced while it was approximate

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def nbytes(self) -> int:
        """Bytes held: the numpy buffers exactly, and a string column as its pointers plus, per string, its
        length and the 49-byte header a Python ``str`` costs (``sys.getsizeof`` of an ASCII string), estimated
        from at most ``STR_SAMPLE`` strings spread evenly over the column (exact up to that many rows). A queue
        asks on every put, for every column, read or not: a pass over every string there made a push of a
        few thousand rows 10-20x slower (issue 15). Computed once per batch."""
        if self._nbytes is not None:
            return self._nbytes
        known = self.col_bytes
        sizes = []
        total = self.ts.nbytes + self.sign.nbytes
        for j, c in enumerate(self.cols):        # column_bytes inlined: asked at every put of every batch
            b = None if known is None else known[j]
            if b is None:
                b = c.nbytes
                if c.dtype.hasobject and len(c):
                    b += _string_bytes(c)
            sizes.append(b)
            total += b
        self.col_bytes = sizes
        self._nbytes = total
        return total

    def column(self, j: int) -> np.ndarray:
        """Column ``j`` (a ``ConcatBatch`` makes only that one)."""
        return self.cols[j]

    @property
    def last_ts(self) -> int:
        return int(self.ts[-1])

    def take(self, idx: np.ndarray) -> Batch:
        """The rows at ``idx`` (an index array or a boolean mask), in that order."""
        if idx.dtype == np.bool_:           # one pass to positions, then cheap gathers for every column
            idx = np.flatnonzero(idx)
        return Batch(self.ts[idx], self.sign[idx], [c[idx] for c in self.cols])

    def slice(self, start: int, stop: int) -> Batch:
        return Batch(self.ts[start:stop], self.sign[start:stop], [c[start:stop] for c in self.cols])

    def rows(self) -> list[tuple]:
        """Rows as Python tuples (for the operators that keep hashed state). Every NaN becomes the one object
        ``NAN``, so that rows holding NaN are equal as dict keys (docs/contract-engine-api.md: as a value, every
        NaN is the same one), as numpy's unique already takes them."""
        if not self.cols:
            return [()] * len(self.ts)
        return list(zip(*[_values(c) for c in self.cols]))

    def __repr__(self) -> str:
        return f"Batch({len(self)} rows, ts {self.ts[:3].tolist()}..)"


def insert_signs(n: int) -> np.ndarray:
    """``n`` insert signs (+1, int8), a new array that owns its buffer: a copy of a slice of a constant
    buffer, about 0.4 us for a push of 1,000 rows where ``np.ones`` takes 1-1.5 us (issue 15: one per push).
    Not a view of the constant: a window store counts the base buffer of what it holds.

    >>> s = insert_signs(3)
    >>> s.tolist(), s.dtype, s.base is None, s.flags.writeable
    ([1, 1, 1], dtype('int8'), True, True)
    """
    if n <= len(_ONES):
        return _ONES[:n].copy()
    return np.ones(n, dtype=np.int8)


_ONES = np.ones(1 << 16, dtype=np.int8)
_ONES.flags.writeable = False


def filler(dtype: np.dtype, n: int) -> np.ndarray:
    """``n`` zeros (None for an object dtype) of ``dtype``, read-only, holding no memory of their own: a
    view of one constant buffer (0.1-0.2 us), or a zero-stride broadcast beyond its length. What an input
    batch carries in place of a column no reader of its queue reads (``Engine.push``), so that the column
    is neither counted nor kept; its byte count is 0.

    >>> f = filler(np.dtype(object), 3)
    >>> f.tolist(), f.flags.writeable, filler(np.dtype(np.int64), 70_000).strides
    ([None, None, None], False, (0,))
    """
    base = filler_buffer(dtype)
    if n <= len(base):
        return base[:n]
    return np.broadcast_to(base[:1], (n,))


def filler_buffer(dtype: np.dtype) -> np.ndarray:
    """The constant buffer (65,536 values) whose views ``filler`` gives for ``dtype``."""
    base = _FILLERS.get(dtype)
    if base is None:
        base = np.zeros(1 << 16, dtype=dtype) if dtype.kind != "O" else np.full(1 << 16, None, dtype=object)
        base.flags.writeable = False
        _FILLERS[dtype] = base
    return base


_FILLERS: dict[np.dtype, np.ndarray] = {}


NAN = float("nan")
STR_SAMPLE = 16      # strings looked at to estimate a string column's bytes (Batch.nbytes)


def column_bytes(c: np.ndarray) -> int:
    """The bytes one column holds: its buffer, plus the string objects of a STRING column (``Batch.nbytes``)."""
    return int(c.nbytes) + (_string_bytes(c) if c.dtype.hasobject and len(c) else 0)


def _string_bytes(c: np.ndarray) -> int:
    """The bytes of a string column's objects, exact up to ``STR_SAMPLE`` rows, else estimated from an evenly
    spread sample of that many: len(c) * mean(len + 49)."""
    n = len(c)
    sample = c.tolist() if n <= STR_SAMPLE else c[:: n // STR_SAMPLE][:STR_SAMPLE].tolist()
    try:
        chars = sum(map(len, sample))
    except TypeError:       # not a str: an object array pushed on trust (docs/contract-engine-api.md)
        chars = 8 * len(sample)
    return n * (chars + 49 * len(sample)) // len(sample)


def _values(c: np.ndarray) -> list:
    out = c.tolist()
    if c.dtype.kind == "f" and np.isnan(c).any():
        out = [NAN if v != v else v for v in out]
    return out


def from_rows(ts: list[int], sign: list[int], rows: list[tuple], dtypes: list[np.dtype]) -> Batch:
    """Build a batch from Python rows; the inverse of ``Batch.rows``."""
    n = len(ts)
    cols = []
    for j, dt in enumerate(dtypes):
        if dt.kind == "O":
            col = np.empty(n, dtype=object)
            col[:] = [r[j] for r in rows] if n else []
        else:
            col = np.fromiter((r[j] for r in rows), dtype=dt, count=n)
        cols.append(col)
    return Batch(np.asarray(ts, dtype=np.int64), np.asarray(sign, dtype=np.int8), cols)


def take_until(batches: list[Batch], f: int) -> list[Batch]:
    """Remove from ``batches`` (a queue of batches in time order) the rows with timestamps up to ``f`` and return
    them, in order; a batch that straddles ``f`` is cut in two."""
    out = []
    while batches:
        b = batches[0]
        if b.ts[-1] <= f:
            out.append(batches.pop(0))
            continue
        cut = int(b.ts.searchsorted(f, side="right"))
        if cut:
            out.append(b.slice(0, cut))
            batches[0] = b.slice(cut, len(b))
        break
    return out


class ConcatBatch(Batch):
    """The rows of several batches as one whose columns are concatenated only when first read (``cols``), or
    one at a time (``column``): a join applying a window's deletes in order reads their timestamps and key
    alone, and copying every column of a window's turnover (NEXMark q7: 92,000 bids) only to drop it cost
    more than the rest of the join.

    >>> a = Batch(np.array([1, 2]), np.ones(2, dtype=np.int8), [np.array([5, 6]), np.array(["x", "y"])])
    >>> b = ConcatBatch([a, a])
    >>> b.column(0).tolist(), len(b._some), b.cols[1].tolist()
    ([5, 6, 5, 6], 1, ['x', 'y', 'x', 'y'])
    """

    __slots__ = ("_parts", "_some")

    def __init__(self, parts: list[Batch]) -> None:
        self._parts: list[Batch] | None = parts
        self._some: dict[int, np.ndarray] = {}
        super().__init__(np.concatenate([b.ts for b in parts]), np.concatenate([b.sign for b in parts]), None)

    @property
    def cols(self) -> list[np.ndarray]:
        got = Batch.cols.__get__(self)
        if got is None:
            got = [self.column(j) for j in range(len(self._parts[0].cols))]
            Batch.cols.__set__(self, got)
            self._parts, self._some = None, {}
        return got

    @cols.setter
    def cols(self, value: list[np.ndarray] | None) -> None:
        Batch.cols.__set__(self, value)

    def column(self, j: int) -> np.ndarray:
        got = Batch.cols.__get__(self)
        if got is not None:
            return got[j]
        c = self._some.get(j)
        if c is None:
            c = self._some[j] = np.concatenate([b.cols[j] for b in self._parts])
        return c


def concat(batches: list[Batch]) -> Batch:
    """One batch holding the rows of all, in order (they must share a schema)."""
    if len(batches) == 1:
        return batches[0]
    ncols = len(batches[0].cols)
    return Batch(
        np.concatenate([b.ts for b in batches]),
        np.concatenate([b.sign for b in batches]),
        [np.concatenate([b.cols[j] for b in batches]) for j in range(ncols)],
    )
