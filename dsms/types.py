"""Column types, value coercion and timestamp parsing: the one place for the rules every entry point shares
(the engine's push and update, HTTP bodies in every format, MQTT payloads, CQL literals and the archive's
query parameters), so a value gets the same verdict wherever it comes in.

- Types: INT and TIMESTAMP are int64, FLOAT float64, BOOLEAN bool, STRING a numpy object array of ``str``.
- A value for a column (``coerce_value``): a bool is only a BOOLEAN; an INT is an integer or a whole float
  (JSON has one number type: 2.0 is 2) within 64 bits; a FLOAT any number; a TIMESTAMP value as below.
- A timestamp (``to_ticks``): an integer, a whole float, an ISO 8601 date-time (no zone means UTC, below a
  millisecond is cut toward the past) or a msgpack Timestamp, as milliseconds, with |ts| <= 2**62 (so that a
  window's end cannot overflow int64); a bool, a fraction, nan or anything else is refused.
- Rows become one typed numpy column per schema column (``typed_columns``): whole columns are checked at C
  speed when their Python types are uniform; on any doubt each value goes through ``coerce_value``, so the
  rules and messages are the same everywhere. Errors are ``InputError`` with the index of the first bad
  element.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from dsms.errors import InputError, SchemaError

INT, FLOAT, STRING, BOOLEAN, TIMESTAMP = "INT", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP"
TYPES = (INT, FLOAT, STRING, BOOLEAN, TIMESTAMP)
DTYPES = {
    INT: np.dtype(np.int64), TIMESTAMP: np.dtype(np.int64), FLOAT: np.dtype(np.float64),
    BOOLEAN: np.dtype(np.bool_), STRING: np.dtype(object),
}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TS_LIMIT = 2**62


_INT64 = np.dtype(np.int64)
_dtype_of, _shape_of = attrgetter("dtype"), attrgetter("shape")


def _extremes(v: np.ndarray) -> tuple[int, int]:
    """The smallest and largest value of a non-empty int64 array, by ``argmin``/``argmax``: a ufunc reduction
    (``v.min()``, ``np.minimum.reduce``) costs 0.6-0.8 us a call whatever the length, the arg-functions 0.1-0.2
    us up to a few thousand values (issue 15: a push checks every TIMESTAMP column, four a NEXMark push)."""
    return int(v[v.argmin()]), int(v[v.argmax()])


def _descends(ts: np.ndarray) -> bool:
    """Whether some timestamp is below the one before it (``argmax`` finds the first such place, 0 when there
    is none; cheaper than ``any`` for the same reason as ``_extremes``)."""
    back = ts[1:] < ts[:-1]
    return bool(back[back.argmax()]) if len(back) else False


def numpy_dtype(type_: str) -> np.dtype:
    """The numpy dtype that holds a column of CQL type ``type_``.

    >>> numpy_dtype("TIMESTAMP"), numpy_dtype("STRING")
    (dtype('int64'), dtype('O'))
    """
    try:
        return DTYPES[type_.upper()]
    except KeyError:
        raise SchemaError(f"unknown type {type_!r} (expected one of {', '.join(DTYPES)})") from None


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def iso_ticks(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date-time (no zone means UTC; below a millisecond is cut
    toward the past); ValueError when ``text`` is not one. SPEC section 6 lets input give timestamps this way.

    >>> iso_ticks("1970-01-01T00:00:01.5Z"), iso_ticks("1970-01-01 01:00:00+01:00")
    (1500, 0)
    """
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    d = _dt.datetime.fromisoformat(s)
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.UTC)
    delta = d - _EPOCH
    return (delta.days * 86_400_000) + delta.seconds * 1000 + delta.microseconds // 1000


def to_ticks(value: Any) -> int:
    """A timestamp as milliseconds: an integer, a whole float, an ISO 8601 string or a msgpack Timestamp,
    within |ts| <= 2**62. TypeError for a value of the wrong kind, ValueError for one out of range or a
    string that is no date-time.

    >>> to_ticks(7), to_ticks(7.0), to_ticks("1970-01-01T00:00:01.5Z"), to_ticks(2.0**60) == 2**60
    (7, 7, 1500, True)
    >>> to_ticks(1.5)
    Traceback (most recent call last):
    ...
    TypeError: timestamp 1.5 is not a whole number of milliseconds
    """
    if type(value) is int and -TS_LIMIT <= value <= TS_LIMIT:
        return value                  # the common case first (every heartbeat): a plain int in range
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"timestamp {value!r} is a boolean, not a time")
    if isinstance(value, int | np.integer):
        v = int(value)
    elif isinstance(value, float | np.floating):
        if not np.isfinite(value) or not float(value).is_integer():
            raise TypeError(f"timestamp {value!r} is not a whole number of milliseconds")
        v = int(value)
    elif isinstance(value, str):
        try:
            v = iso_ticks(value)
        except (ValueError, OverflowError):
            raise ValueError(f"timestamp {value!r} is not an ISO 8601 date-time (nor an integer)") from None
    elif callable(getattr(value, "to_unix_nano", None)):      # msgpack.Timestamp
        v = int(value.to_unix_nano()) // 1_000_000
    else:
        raise TypeError(f"timestamp {value!r:.80} is {type(value).__name__}, not an integer or an ISO 8601 "
                        "date-time")
    if not -TS_LIMIT <= v <= TS_LIMIT:
        raise ValueError(f"timestamp {v} is out of range (|ts| <= 2**62 ticks, so that a window's end cannot "
                         "overflow)")
    return v


def coerce_value(value: object, type_: str) -> object:
    """Check one input value against a column type and return it as the Python value stored for it.

    ``bool`` is not accepted as an INT (nor as a FLOAT), an ``int`` is accepted for a FLOAT, a whole ``float``
    for an INT. A TIMESTAMP value follows ``to_ticks``. A wrong kind of value raises TypeError, an INT outside
    64 bits or a string that is no date-time raises ValueError.

    >>> coerce_value(3, "FLOAT"), coerce_value(-2, "TIMESTAMP"), coerce_value("x", "STRING")
    (3.0, -2, 'x')
    >>> coerce_value("1970-01-01T00:00:02Z", "TIMESTAMP")
    2000
    >>> coerce_value(2.0, "INT")                # JSON has one number type; 1.5 is refused
    2
    >>> coerce_value(True, "INT")
    Traceback (most recent call last):
    ...
    TypeError: expected INT, got bool True
    """
    t = type_.upper()
    if t not in DTYPES:
        raise ValueError(f"unknown type {type_!r} (expected one of {', '.join(DTYPES)})")
    if t == BOOLEAN:
        if isinstance(value, bool | np.bool_):
            return bool(value)
    elif isinstance(value, bool | np.bool_):
        pass                                            # a bool is neither a number nor a string here
    elif t == TIMESTAMP:
        try:
            return to_ticks(value)
        except TypeError:
            raise TypeError(f"expected TIMESTAMP, got {type(value).__name__} {value!r:.80}") from None
    elif t == INT:
        if isinstance(value, float | np.floating) and np.isfinite(value) and float(value).is_integer():
            value = int(value)                          # JSON has one number type: 2.0 is the number 2
        if isinstance(value, int | np.integer):
            v = int(value)
            if not INT64_MIN <= v <= INT64_MAX:
                raise ValueError(f"INT value {v} does not fit in 64 bits")
            return v
    elif t == FLOAT:
        if isinstance(value, float | np.floating):
            return float(value)
        if isinstance(value, int | np.integer):
            try:
                return float(value)
            except OverflowError:
                raise ValueError(f"FLOAT value {value} is too large") from None
    elif isinstance(value, str):                        # STRING
        return str(value)
    raise TypeError(f"expected {t}, got {type(value).__name__} {value!r:.80}")


def typed_columns(schema: Sequence[tuple[str, str]], rows: Sequence[Mapping] | None = None,
                  cols: Mapping[str, Any] | None = None) -> tuple[list[np.ndarray], int]:
    """Validate rows (a list of objects) or columns (a map of column -> values) against ``schema``; returns
    one typed numpy column per schema column and the row count."""
    names = [c for c, _ in schema]
    lower = {c.lower(): j for j, c in enumerate(names)}
    if cols is not None:
        given: dict[int, Any] = {}
        for c in cols:
            j = lower.get(str(c).lower())
            if j is None:
                raise InputError(f"unknown column '{c}' (columns: {', '.join(names)})", index=0)
            if j in given:                      # names are case-insensitive: 'a' and 'A' are one column
                raise InputError(f"column '{names[j]}' given twice", index=0)
            given[j] = cols[c]
        for j, c in enumerate(names):
            if j not in given:
                raise InputError(f"missing column '{c}'", index=0)
        raw = [given[j] for j in range(len(names))]
        for j, col in enumerate(raw):
            if isinstance(col, str | bytes | Mapping) or not hasattr(col, "__len__") \
                    or (isinstance(col, np.ndarray) and col.ndim != 1):
                raise InputError(f"column '{names[j]}' must be a list of values, not {col!r:.80}")
        n = len(raw[0]) if raw else 0
        for j, col in enumerate(raw):
            if len(col) != n:
                raise InputError(f"column '{names[j]}' has {len(col)} values, others have {n}")
    else:
        rows = rows or []
        n = len(rows)
        raw = [[None] * n for _ in names]
        name_set = set(names)
        for k, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise InputError(f"expected an object with columns {', '.join(names)}, got {row!r:.80}",
                                 index=k)
            if row.keys() == name_set:
                for j, c in enumerate(names):
                    raw[j][k] = row[c]
                continue
            seen = set()
            for c, v in row.items():
                j = lower.get(str(c).lower())
                if j is None:
                    raise InputError(f"unknown column '{c}' (columns: {', '.join(names)})", index=k)
                if j in seen:
                    raise InputError(f"column '{names[j]}' given twice", index=k)
                seen.add(j)
                raw[j][k] = v
            if len(seen) != len(names):
                missing = next(names[j] for j in range(len(names)) if j not in seen)
                raise InputError(f"missing column '{missing}'", index=k)
    out = [typed_column(names[j], t, raw[j]) for j, (_, t) in enumerate(schema)]
    return out, n


class ColumnCheck:
    """A schema compiled once for the columnar fast path of ``typed_columns`` (issue 15: a push of numpy
    columns spent 10-20 us in the general checks, each column's type name upper-cased and looked up again on
    every call). ``exact`` accepts only what ``typed_columns`` would return unchanged, so the two agree."""

    __slots__ = ("index", "dtypes", "ts_cols", "width", "names", "arrays")

    def __init__(self, schema: Sequence[tuple[str, str]]) -> None:
        self.index = {c: j for j, (c, _) in enumerate(schema)}
        self.dtypes = [numpy_dtype(t) for _, t in schema]
        self.ts_cols = [j for j, (_, t) in enumerate(schema) if t.upper() == TIMESTAMP]
        self.width = len(schema)
        self.names = tuple(c for c, _ in schema)
        self.arrays = [np.ndarray] * len(schema)      # what ``map(type, columns)`` gives for exact columns

    def push(self, cols: Any, ts: Any, frontier: int | None) -> tuple[list[np.ndarray], int, np.ndarray] | None:
        """``exact`` and ``check_timestamps``'s fast path in one call, for a columnar push of numpy arrays: the
        columns, the row count and ``ts``, when ``cols`` is exact (as ``exact`` says), and ``ts`` an int64 array
        of one timestamp per row, never decreasing, within range and not below ``frontier``, with at least one
        row; otherwise None, and the caller takes the general path (``exact``, then ``check_timestamps``, with
        their messages). The checks are the same; the per-column ones are passes of ``map`` compared as lists
        (identity first) instead of a Python loop per column (issue 15: a NEXMark push cycle's three pushes
        checked 25 columns and four TIMESTAMP columns, 7-10 us of a cycle of 45)."""
        if type(cols) is not dict or not cols or len(cols) != self.width or tuple(cols) != self.names:
            return None
        out = list(cols.values())
        if list(map(type, out)) != self.arrays or list(map(_dtype_of, out)) != self.dtypes:
            return None
        if type(ts) is not np.ndarray or ts.dtype is not _INT64:
            return None
        shape = ts.shape
        if len(shape) != 1 or not shape[0] or list(map(_shape_of, out)).count(shape) != self.width:
            return None
        for j in self.ts_cols:                  # _extremes, inlined
            v = out[j]
            if v.item(v.argmin()) < -TS_LIMIT or v.item(v.argmax()) > TS_LIMIT:
                return None
        if shape[0] > 1:                        # _descends, inlined
            back = ts[1:] < ts[:-1]
            if back.item(back.argmax()):
                return None
        lo, hi = ts.item(0), ts.item(-1)        # in order: the ends are the extremes
        if lo < -TS_LIMIT or hi > TS_LIMIT or (frontier is not None and lo < frontier):
            return None
        return out, shape[0], ts

    def exact(self, cols: Any) -> tuple[list[np.ndarray], int] | None:
        """``cols`` as the schema's columns and the row count, when it is a dict holding every column under its
        exact name as a one-dimensional numpy array of the column's dtype, all of one length, TIMESTAMP values
        within range; otherwise None (``typed_columns`` decides, with its messages)."""
        if type(cols) is not dict or len(cols) != self.width:
            return None
        if tuple(cols) == self.names:          # the schema's names in its order: no lookup per column
            out: list = list(cols.values())
        else:
            index = self.index
            out = [None] * self.width
            for c, v in cols.items():
                j = index.get(c)
                if j is None:
                    return None
                out[j] = v                     # as many distinct names as columns: every position is filled
        if not out:
            return out, 0
        first = out[0]
        if type(first) is not np.ndarray:
            return None
        shape = first.shape
        if len(shape) != 1:
            return None
        for v, dt in zip(out, self.dtypes):     # one dimension and one length: the same shape as the first
            if type(v) is not np.ndarray or v.shape != shape:
                return None
            d = v.dtype
            if d is not dt and d != dt:
                return None
        n = shape[0]
        if n > 0:
            for j in self.ts_cols:
                lo, hi = _extremes(out[j])
                if lo < -TS_LIMIT or hi > TS_LIMIT:
                    return None
        return out, n


def typed_column(name: str, type_: str, vals: Any) -> np.ndarray:
    """One column of values as its typed numpy array; InputError naming the column and the first bad row."""
    t = type_.upper()
    dt = numpy_dtype(t)
    if isinstance(vals, np.ndarray):
        if vals.ndim == 1 and (vals.dtype == dt or (t == "FLOAT" and vals.dtype.kind in "if") or
                               (t in ("INT", "TIMESTAMP") and vals.dtype.kind == "i")):
            if t != TIMESTAMP or _in_ts_range(vals):
                return vals.astype(dt, copy=False)
        vals = vals.tolist()
    elif not isinstance(vals, list):
        vals = list(vals)
    if not vals:
        return np.empty(0, dtype=dt)
    kinds = set(map(type, vals))
    try:
        if t in ("INT", "TIMESTAMP") and kinds == {int}:
            arr = np.asarray(vals, dtype=np.int64)
            if t != TIMESTAMP or _in_ts_range(arr):
                return arr
        if t == "FLOAT" and kinds <= {float, int}:
            return np.asarray(vals, dtype=np.float64)
        if t == "BOOLEAN" and kinds == {bool}:
            return np.asarray(vals, dtype=bool)
        if t == "STRING" and kinds == {str}:
            "\x00".join(vals).encode("utf-8")       # a lone surrogate cannot be stored or sent on
            col = np.empty(len(vals), dtype=object)
            col[:] = vals
            return col
    except (OverflowError, UnicodeEncodeError, ValueError):
        pass
    out = []
    for k, v in enumerate(vals):
        try:
            x = coerce_value(v, t)
            if isinstance(x, str):
                x.encode("utf-8")
        except (TypeError, ValueError) as e:
            msg = str(e) if not isinstance(e, UnicodeEncodeError) else "string is not valid Unicode"
            raise InputError(f"column '{name}': {msg}", index=k) from None
        out.append(x)
    if dt.kind == "O":
        col = np.empty(len(out), dtype=object)
        col[:] = out
        return col
    return np.asarray(out, dtype=dt)


def _in_ts_range(arr: np.ndarray) -> bool:
    return not len(arr) or (int(arr.min()) >= -TS_LIMIT and int(arr.max()) <= TS_LIMIT)


def _ticks(v: Any, index: int | None) -> int:
    try:
        return to_ticks(v)
    except (TypeError, ValueError) as e:
        raise InputError(str(e), index=index) from None


def check_timestamps(name: str, ts: Any, n: int, frontier: int | None,
                     show: Callable[[int], str] = str) -> np.ndarray:
    """Per-row int64 timestamps, checked: integers (or ISO 8601 strings), never decreasing, not below what the
    input has passed. ``show`` writes a timestamp in a message (ISO 8601 for a user who sent ISO)."""
    if type(ts) is np.ndarray and ts.dtype == np.int64 and ts.ndim == 1 and len(ts) == n and n:
        # the common columnar case, checked in two passes: order, then the ends (the extremes once ordered)
        if not _descends(ts):
            lo, hi = int(ts[0]), int(ts[-1])
            if -TS_LIMIT <= lo and hi <= TS_LIMIT and (frontier is None or lo >= frontier):
                return ts
    if isinstance(ts, bool | int | float | str | np.integer | np.floating) or callable(
            getattr(ts, "to_unix_nano", None)):
        arr = np.full(n, _ticks(ts, None), dtype=np.int64)
    else:
        arr = ts if isinstance(ts, np.ndarray) else None
        if arr is None:
            try:
                values = list(ts)
                arr = np.asarray(values)
                if arr.dtype.kind not in "iuf":     # ISO strings, ints beyond int64, ...: one by one
                    arr = np.asarray([_ticks(v, k) for k, v in enumerate(values)], dtype=np.int64)
            except (TypeError, ValueError):
                raise InputError(f"ts must be an integer or a list of integers, not {ts!r:.80}") from None
        if arr.ndim != 1 or len(arr) != n:
            raise InputError(f"{n} rows but {len(arr) if arr.ndim == 1 else 'a non-list of'} timestamps")
        if arr.dtype.kind not in "iu":     # floats, booleans, objects: one by one
            arr = np.asarray([_ticks(v, k) for k, v in enumerate(arr.tolist())], dtype=np.int64)
        if arr.dtype.kind == "u" and n and int(arr.max()) > TS_LIMIT:     # before the cast wraps it
            k = int(np.argmax(arr > TS_LIMIT))
            _ticks(int(arr[k]), k)
        arr = arr.astype(np.int64, copy=False)
        if n > 1:
            back = np.nonzero(np.diff(arr) < 0)[0]
            if len(back):
                k = int(back[0]) + 1
                raise InputError(f"timestamp {show(int(arr[k]))} goes backwards (after {show(int(arr[k - 1]))}) "
                                 f"on ordered input '{name}'", index=k)
    if n and (int(arr.min()) < -TS_LIMIT or int(arr.max()) > TS_LIMIT):
        k = int(np.nonzero((arr < -TS_LIMIT) | (arr > TS_LIMIT))[0][0])
        raise InputError(f"timestamp {int(arr[k])} is out of range (|ts| <= 2**62 ticks, so that a window's end "
                         "cannot overflow)", index=k)
    if n and frontier is not None and int(arr[0]) < frontier:
        raise InputError(f"timestamp {show(int(arr[0]))} is below what '{name}' has already passed "
                         f"({show(frontier)})", index=0)
    return arr
