"""NDJSON result lines written by polars' NDJSON writer (Rust), column-wise, for the result batches whose every
value it writes exactly as ``json.dumps`` does (SPEC section 6, docs/http-api.md): no Python object per value.

Why: in CPython the column-wise encoder (``json_codec.rows_text``) has to make one string per number and join
five or six pieces per element, and that is most of what a reader costs the server (issue 15, item 5:
0.14 us a tuple of the 0.41 end to end with full-precision values; docs/benchmarks.md, HTTP ingest, fourth
pass). polars writes the same lines in 11 ns a row once its frame is built (14 ns a row more to take in a
string column), the whole batch in 54 against 101 ns a row.

When: a batch of at least ``MIN_ROWS`` elements with integer timestamps and signs, column names that need no
escaping and are all different, and columns that are numpy arrays of integers, booleans, floats whose every
value is 0, -0.0 or of magnitude in [1e-4, 1e16) (there polars writes what ``repr`` writes: 0 differences in
7.4 million doubles; below 1e-4 it writes ``0.00001`` and ``2.5e-7`` where repr writes ``1e-05`` and
``2.5e-07``, and NaN and the infinities as null), or strings that need no escaping (printable ASCII without
``"`` or ``\\``: polars writes other characters as UTF-8 or escapes them differently from ``ensure_ascii``).
Anything else returns None and ``json_codec`` writes the batch as before; so does a machine without polars.
tests/web/test_result_encoding.py checks both, byte for byte, against one ``json.dumps`` per element.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

import numpy as np

__all__ = ["MIN_ROWS", "ndjson_lines", "preload", "writer"]

_SMALL_INTS = 4096      # json_codec's table of small integers: such columns cost the joins no split
_min, _max = np.minimum.reduce, np.maximum.reduce

MIN_ROWS = 2000
"""Below this many rows the frames' fixed cost (about 85 us a batch) outweighs what the writer saves."""

_FIXED_NS = 85_000      # the frames' fixed cost a batch (in-process, thread CPU time; docs/benchmarks.md)
_SPLIT_NS = 35          # what a number column written through orjson's split costs the joins a row, more
_STRING_NS = 15         # what a string column costs polars a row more than the joins (14 ns to take it in)

_polars: Any = None            # the module once imported; False where it cannot be
_importer: threading.Thread | None = None


def _module() -> Any:
    """polars (False if absent), with one thread, so that writing a batch never takes a second core from the
    server's other work."""
    global _polars
    if _polars is None:
        os.environ.setdefault("POLARS_MAX_THREADS", "1")
        try:
            import polars
        except ImportError:
            _polars = False
        else:
            _polars = polars
    return _polars


def preload(wait: bool = False) -> None:
    """Import polars in a background thread (``dsms serve`` does it at start): the import takes 0.3 s of CPU
    and a large library that the CLI and most tools never need, and a server should not pay it inside its
    first result batch. Until it is done, batches go to the joins (``ndjson_lines`` returns None)."""
    global _importer
    if _importer is None:
        _importer = threading.Thread(target=_module, name="dsms-polars-import", daemon=True)
        _importer.start()
    if wait:
        _importer.join()


def writer() -> str:
    """Which writer large batches of full-precision numbers get (``GET /system``'s ``results_writer``):
    "polars", "loading" while it is imported, or "joins" (polars not imported, or not installed)."""
    if _polars:
        return "polars"
    return "loading" if _polars is None and _importer is not None else "joins"


def _plain(values: list) -> bool:
    """Every value a string of printable ASCII without ``"`` or ``\\`` (written as it is by both writers)."""
    try:
        joined = "".join(values)
    except TypeError:
        return False
    if not joined.isascii():
        return False
    raw = joined.encode("ascii")
    if b'"' in raw or b"\\" in raw:
        return False
    if raw:
        codes = np.frombuffer(raw, dtype=np.uint8)
        return bool(np.minimum.reduce(codes) >= 0x20 and np.maximum.reduce(codes) <= 0x7E)
    return True


def _exact_floats(col: np.ndarray) -> bool:
    """Every value 0, -0.0 or of magnitude in [1e-4, 1e16) (NaN compares false: not exact)."""
    mag = np.abs(col)
    lo, hi = float(np.minimum.reduce(mag)), float(np.maximum.reduce(mag))
    if not hi < 1e16:
        return False
    return lo >= 1e-4 or bool(((mag >= 1e-4) | (mag == 0)).all())


def _native(arr: np.ndarray) -> np.ndarray:
    """The array in the machine's byte order (polars reads the buffer as it is)."""
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _split_columns(cols: list[Any], n: int) -> tuple[int, int] | None:
    """(number columns the joins would write through orjson's split, string columns), from each number
    column's minimum and maximum and a sample of a float column's values: a guess, which decides only which
    writer is used; None when a column is not one polars takes."""
    split = strings = 0
    for col in cols:
        if not isinstance(col, np.ndarray) or col.ndim != 1 or len(col) != n:
            return None
        kind = col.dtype.kind
        if kind in "iuf":
            lo, hi = _min(col), _max(col)
            if lo != hi and not (0 <= lo and hi < _SMALL_INTS):
                split += 1                       # NaN lands here too, and is refused later
            elif lo != hi and kind == "f":       # small whole floats take the joins' table
                head = col[:64]
                split += not bool((np.floor(head) == head).all())
        elif kind == "O":
            strings += 1
        elif kind != "b":
            return None
    return split, strings


def ndjson_lines(names: list[str], ts: Any, sign: Any, cols: list[Any]) -> bytes | None:
    """The elements as NDJSON lines ``{"ts":..,"sign":..,"row":{..}}``, byte for byte what one ``json.dumps``
    per element writes; None when the batch is not one polars writes exactly (see the module's docstring), or
    when the joins would be cheaper (a batch of small whole numbers and short strings, as the ingest bench's
    own: the joins' tables write it faster)."""
    n = len(ts)
    if n < MIN_ROWS or not cols or len(cols) != len(names):
        return None
    counts = _split_columns(cols, n)
    if counts is None or counts[0] * _SPLIT_NS * n <= _FIXED_NS + counts[1] * _STRING_NS * n:
        return None
    if len(set(names)) != len(names) or not all(names) or not _plain(names):
        return None
    if not (isinstance(ts, np.ndarray) and ts.dtype.kind in "iu" and isinstance(sign, np.ndarray)
            and sign.dtype.kind in "iu" and ts.ndim == 1 and len(sign) == n):
        return None
    row: dict[str, Any] = {}
    for name, col in zip(names, cols):
        kind = col.dtype.kind
        if kind == "f":
            if col.dtype != np.float64:            # float32, or another byte order: repr of the double
                col = col.astype(np.float64)
            if not _exact_floats(col):
                return None
        elif kind == "O":
            col = col.tolist()
            if not _plain(col):
                return None
        row[name] = _native(col) if kind != "O" else col
    pl = _polars
    if not pl:
        if pl is None:
            preload()                  # this batch by the joins; polars from when it is imported
        return None
    series = pl.Series
    fields = pl.DataFrame([series(k, v, dtype=pl.String) if v.__class__ is list else series(k, v)
                           for k, v in row.items()])
    frame = pl.DataFrame([series("ts", _native(ts)), series("sign", _native(sign)), fields.to_struct("row")])
    out = io.BytesIO()
    frame.write_ndjson(out)
    return out.getvalue()
