"""Validation and conversion of input rows: one place for the rules every entry point shares (the engine's
push and update, the server's HTTP and MQTT ingest).

Rows become one typed numpy column per schema column. Whole columns are checked at C speed when their Python
types are uniform; on any doubt each value goes through ``coerce_value``, so the rules and messages are the
same everywhere. Errors are ``InputError`` with the index of the first bad element.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dsms.errors import InputError
from dsms.expr.compile import coerce_value, iso_ticks, numpy_dtype


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


def typed_column(name: str, type_: str, vals: Any) -> np.ndarray:
    t = type_.upper()
    dt = numpy_dtype(t)
    if isinstance(vals, np.ndarray):
        if vals.ndim == 1 and (vals.dtype == dt or (t == "FLOAT" and vals.dtype.kind in "if") or
                               (t in ("INT", "TIMESTAMP") and vals.dtype.kind == "i")):
            return vals.astype(dt, copy=False)
        vals = vals.tolist()
    elif not isinstance(vals, list):
        vals = list(vals)
    if not vals:
        return np.empty(0, dtype=dt)
    kinds = set(map(type, vals))
    try:
        if t in ("INT", "TIMESTAMP") and kinds == {int}:
            return np.asarray(vals, dtype=np.int64)
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


TS_LIMIT = 2**62


def timestamp(ts: Any, index: int | None = None) -> Any:
    """An ISO 8601 string as milliseconds since the epoch (SPEC section 6), a whole float (JSON has one number
    type: 7.0 is the instant 7) as an int; anything else unchanged."""
    if isinstance(ts, float | np.floating) and np.isfinite(ts) and float(ts).is_integer() and abs(ts) < 2**63:
        return int(ts)
    if isinstance(ts, str):
        try:
            return iso_ticks(ts)
        except ValueError:
            raise InputError(f"timestamp {ts!r} is neither an integer nor an ISO 8601 date-time",
                             index=index) from None
    return ts


def _in_range(v: int, index: int | None) -> None:
    if not -TS_LIMIT <= v <= TS_LIMIT:
        raise InputError(f"timestamp {v} is out of range (|ts| <= 2**62 ticks, so that a window's end cannot "
                         "overflow)", index=index)


def check_timestamps(name: str, ts: Any, n: int, frontier: int | None) -> np.ndarray:
    """Per-row int64 timestamps, checked: integers (or ISO 8601 strings), never decreasing, not below what the
    input has passed."""
    if type(ts) is np.ndarray and ts.dtype == np.int64 and ts.ndim == 1 and len(ts) == n and n:
        # the common columnar case, checked in two passes: order, then the ends (the extremes once ordered)
        back = np.flatnonzero(ts[1:] < ts[:-1])
        if not len(back):
            lo, hi = int(ts[0]), int(ts[-1])
            if -TS_LIMIT <= lo and hi <= TS_LIMIT and (frontier is None or lo >= frontier):
                return ts
    ts = timestamp(ts)
    if isinstance(ts, bool):
        raise InputError(f"a timestamp must be an integer, not {ts!r}")
    if isinstance(ts, int | np.integer):
        _in_range(int(ts), None)
        arr = np.full(n, int(ts), dtype=np.int64)
    else:
        arr = ts if isinstance(ts, np.ndarray) else None
        if arr is None:
            try:
                values = list(ts)
                arr = np.asarray(values)
                if arr.dtype.kind in "USO":         # ISO strings, or ints beyond int64: checked one by one below
                    arr = np.asarray([timestamp(v, k) for k, v in enumerate(values)], dtype=object)
            except (TypeError, ValueError):
                raise InputError(f"ts must be an integer or a list of integers, not {ts!r:.80}") from None
        if arr.ndim != 1 or len(arr) != n:
            raise InputError(f"{n} rows but {len(arr) if arr.ndim == 1 else 'a non-list of'} timestamps")
        if arr.dtype.kind == "f":
            arr = np.asarray([timestamp(v, k) for k, v in enumerate(arr.tolist())], dtype=object)
        if arr.dtype.kind not in "iu":
            for k, v in enumerate(arr.tolist()):
                if isinstance(v, float) and v.is_integer():     # a whole float beyond int64
                    raise InputError(f"timestamp {v!r} is out of range (|ts| <= 2**62 ticks)", index=k)
                if isinstance(v, bool) or not isinstance(v, int):
                    raise InputError(f"timestamp {v!r} is not an integer", index=k)
                _in_range(v, k)
        if arr.dtype.kind == "u" and n and int(arr.max()) > TS_LIMIT:     # before the cast wraps it
            k = int(np.argmax(arr > TS_LIMIT))
            _in_range(int(arr[k]), k)
        arr = arr.astype(np.int64, copy=False)
        if n > 1:
            back = np.nonzero(np.diff(arr) < 0)[0]
            if len(back):
                k = int(back[0]) + 1
                raise InputError(f"timestamp {int(arr[k])} goes backwards (after {int(arr[k - 1])}) on ordered "
                                 f"input '{name}'", index=k)
    if n and (int(arr.min()) < -TS_LIMIT or int(arr.max()) > TS_LIMIT):
        k = int(np.nonzero((arr < -TS_LIMIT) | (arr > TS_LIMIT))[0][0])
        raise InputError(f"timestamp {int(arr[k])} is out of range (|ts| <= 2**62 ticks, so that a window's end "
                         "cannot overflow)", index=k)
    if n and frontier is not None and int(arr[0]) < frontier:
        raise InputError(f"timestamp {int(arr[0])} is below what '{name}' has already passed ({frontier})",
                         index=0)
    return arr
