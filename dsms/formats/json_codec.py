"""JSON, NDJSON and server-sent-event framing of input and results (SPEC section 6).

Input: a JSON array of items, one item object, or NDJSON (one item a line). An item is an element
``{"ts": 7, "sign": 1, "row": {...}}`` (``sign`` optional, ``ts`` an integer or ISO 8601 string), a heartbeat
``{"heartbeat": 20}``, a punctuation ``{"punctuation": {...}}``, a columnar batch ``{"ts": [...], "cols":
{...}}`` or, for relations, ``{"ts": 9, "insert": [...], "delete": [...]}``.

Output: NDJSON lines ``{"ts":7,"sign":1,"row":{...}}`` and SSE events ``data: {...}`` with the same JSON, plus
``{"heartbeat": h}`` and ``{"gap": {"missed": n, "from_ts": a, "to_ts": b}}`` items; a relation's current
contents come as ``{"snapshot": {"ts": t, "rows": n}}`` and n elements with ``"snapshot":true``. SSE events
carry ``id:`` (the element's position in the query's results). Non-finite floats are written as the strings
"NaN", "Infinity", "-Infinity" because JSON has no literal for them.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson

from dsms.errors import InputError
from dsms.formats import Encoder, jsonable

__all__ = ["decode_auto", "decode_json", "decode_ndjson", "NDJSON_ENCODER", "SSE_ENCODER", "dumps"]

_strict = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=True)


def dumps(obj: Any) -> str:
    """Compact, strict JSON (ASCII-escaped, so a lone surrogate in a string can never break the UTF-8 output).

    >>> dumps({"a": float("nan")})
    '{"a":"NaN"}'
    """
    try:
        return _strict.encode(obj)
    except ValueError:
        return _strict.encode(_clean(obj))


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return jsonable(obj)


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"body is not UTF-8 (byte {e.start})") from None


def _loads(text: str, index: int | None, where: str = "") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
                         index=index) from None
    except (RecursionError, ValueError) as e:  # absurd nesting, or an integer of thousands of digits
        raise InputError(f"{where}not acceptable JSON: {type(e).__name__}: {str(e)[:200]}", index=index) from None


def parse_json(body: bytes, what: str = "body") -> Any:
    """One JSON document from UTF-8 bytes (the HTTP body, an MQTT payload); InputError saying why not."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{what} is not UTF-8 (byte {e.start})") from None
    if not text.strip():
        raise InputError(f"the {what} is empty")
    return _loads(text, None, f"{what} is ")


def decode_json(body: bytes, b: Any) -> None:
    """One JSON document: an array of items, or a single item."""
    doc = parse_json(body)
    if isinstance(doc, list):
        for item in doc:
            b.add(item)
    elif isinstance(doc, dict):
        b.add(doc)
    else:
        raise InputError(f"expected an array of elements or one element object, got {type(doc).__name__}")


def decode_auto(body: bytes, b: Any) -> None:
    """A body without a usable Content-Type: one JSON document if it parses as one, else NDJSON."""
    text = _text(body)
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        if "\n" in text.strip():
            decode_ndjson(body, b)
            return
    decode_json(body, b)


def decode_ndjson(body: bytes, b: Any) -> None:
    """One item a line; blank lines are skipped and do not count as items."""
    text = _text(body)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        item = _loads(line, b.items, f"line {lineno} is ")
        b.add(item)


# ---------------------------------------------------------------- output


_NONFINITE = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def column_json(values: list) -> list[str]:
    """The JSON text of every value of one column, by type at C speed where the column is uniform (ints,
    floats, strings, bools), value by value otherwise.

    >>> column_json([1.5, float("nan")]), column_json(["a"]), column_json([True, 2])
    (['1.5', '"NaN"'], ['"a"'], ['true', '2'])
    """
    kinds = set(map(type, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds == {float}:
        out = list(map(float.__repr__, values))
        if any(map(_NONFINITE.__contains__, out)):
            out = [_NONFINITE.get(x, x) for x in out]
        return out
    if kinds == {str}:
        return list(map(_encode_str, values))
    if kinds == {bool}:
        return ["true" if v else "false" for v in values]
    return [dumps(v) for v in values]


_encode_str = json.encoder.encode_basestring_ascii   # type: ignore[attr-defined]


# Result elements are encoded column by column, never row by row: each column becomes either one constant text
# (the same on every row: a batch's timestamp, sign 1, a whole-number float's ".0" suffix) or a list of one text
# per row, produced by one C-level pass (a lookup table for small integers, orjson's number writer for other
# integers and floats, ``encode_basestring_ascii``; strings that need no escaping are used as they are,
# between constant quotes). The lines are then assembled by interleaving those lists with the constant pieces
# of a per-schema template through list slice assignment, and joined once: no Python code runs per row. A
# column read from a table (small integers, booleans) has the constant that follows it joined into a copy of
# its table, kept per constant, so an element has fewer pieces to interleave and join.

_SMALL_INTS = 4096
_small_int_text: Any = None
_BOOL_TEXT = np.array(["false", "true"], dtype=object)
_min, _max = np.minimum.reduce, np.maximum.reduce      # without ndarray.min's Python wrapper (per column)


def _small_ints() -> Any:
    global _small_int_text
    if _small_int_text is None:
        _small_int_text = np.array([repr(i) for i in range(_SMALL_INTS)], dtype=object)
    return _small_int_text


_FUSED_MAX = 32
_FUSED_SUFFIX_MAX = 64
_fused_tables: dict[tuple[str, str], Any] = {}
"""Tables with a constant joined to every entry, by (table, constant): at most ``_FUSED_MAX`` of them, for
constants of at most ``_FUSED_SUFFIX_MAX`` characters (a long column name is not copied 4,096 times), so
they hold at most a few MB."""


class _Coded:
    """A column whose per-row texts come from a table (small integers, booleans): kept as the table and the
    rows' codes until ``rows_text`` knows what follows the column in an element, so that constant can be
    joined to every entry of the table once (``texts(suffix)``) instead of taking a slot of its own in every
    element."""

    __slots__ = ("name", "table", "codes")

    def __init__(self, name: str, table: Any, codes: np.ndarray) -> None:
        self.name = name
        self.table = table
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes)

    def texts(self, suffix: str = "") -> list[str] | None:
        """One text per row, each followed by ``suffix``; None when ``suffix`` cannot be joined cheaply (its
        table is not built yet and the column is too short to be worth building it)."""
        table = self.table
        if suffix:
            key = (self.name, suffix)
            table = _fused_tables.get(key)
            if table is None:
                if len(self.codes) < 1024 or len(suffix) > _FUSED_SUFFIX_MAX:
                    return None
                if len(_fused_tables) >= _FUSED_MAX:
                    _fused_tables.clear()
                table = _fused_tables[key] = self.table + suffix     # object arrays: one str + per entry
        return table.take(self.codes).tolist()


_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def _number_texts(arr: np.ndarray) -> list[str]:
    """The text of every value of an integer or float array, by orjson's writer (Rust): one document
    ``[a,b,...]`` split at its commas, 2-3x faster than ``int.__repr__`` per value and 8x faster than
    ``float.__repr__`` (docs/benchmarks.md; orjson 3.11.7 and later write floats 1.5x faster than 3.8, hence
    the floor in pyproject.toml). For integers of any width the text is ``int.__repr__``'s; for floats only
    where ``_float_texts`` has checked it. orjson reads the array's buffer as it is, so the array is made
    contiguous and of native byte order first (orjson 3.8 writes a big-endian array's values as if they were
    native)."""
    if len(arr) == 0:
        return []
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return orjson.dumps(np.ascontiguousarray(arr), option=_NUMPY)[1:-1].decode("ascii").split(",")


def _float_texts(arr: np.ndarray) -> list[str]:
    """``float.__repr__`` of every value of a float64 array, non-finite values as the strings "NaN",
    "Infinity", "-Infinity". For 0, -0.0 and magnitudes in [1e-4, 1e16) orjson writes the same text as repr
    (both write the shortest digits that read back as the same double, the closest such when there are
    several, in positional form there: 0 differences in 11.4 million doubles with orjson 3.11.7 and 3.13.0);
    below 1e-4 repr writes an exponent of at least two digits (``1e-05``, ``1.5e-07``) where orjson writes
    positional digits or a one-digit exponent (``0.00001``, ``1.5e-7``), from 1e16 on orjson before 3.11.7
    wrote ``1e16`` for repr's ``1e+16`` (later releases agree there on the values tried, which the encoder
    does not rely on), and orjson writes NaN and the infinities as null, so those values are written by repr
    one by one. tests/web/test_result_encoding.py checks it across the whole range of doubles and at both
    edges of the interval."""
    out = _number_texts(arr)
    mag = np.abs(arr)
    odd = ((mag < 1e-4) & (mag != 0)) | ~(mag < 1e16)        # NaN compares false: odd
    if odd.any():
        idx = np.flatnonzero(odd)
        for i, v in zip(idx.tolist(), arr[idx].tolist()):
            r = float.__repr__(v)
            out[i] = _NONFINITE.get(r, r)
    return out


def _int_segments(arr: np.ndarray, lo: int | None = None, hi: int | None = None) -> list:
    """The text of an integer array: [constant] when every value is the same, else [one text per row] (or
    a table and codes); ``lo`` and ``hi`` are its minimum and maximum when the caller knows them."""
    if lo is None or hi is None:
        lo, hi = int(_min(arr)), int(_max(arr))
    if lo == hi:
        return [repr(lo)]
    if lo >= 0 and hi < _SMALL_INTS:
        return [_Coded("int", _small_ints(), arr.astype(np.intp, copy=False))]
    n = len(arr)
    if n >= 32:
        starts = np.flatnonzero(arr[1:] != arr[:-1]) + 1
        if len(starts) * 8 < n:                      # long runs of equal values (timestamps): one text per run
            starts = np.concatenate(([0], starts))
            runs = np.empty(len(starts), dtype=object)
            runs[:] = _number_texts(arr[starts])
            return [np.repeat(runs, np.diff(np.append(starts, n))).tolist()]
    return [_number_texts(arr)]


_NEG_ZERO = np.int64(-2**63)          # the bits of -0.0 read as an int64


def _float_segments(arr: np.ndarray) -> list:
    """The text of a float array, as ``float.__repr__`` writes it; whole numbers below 1e16 (where repr is
    the integer's digits and ".0") go through the integer path, non-finite values become strings. The
    minimum and maximum decide the path (a NaN makes both NaN, an infinity shows in one of them)."""
    if arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    lo, hi = float(_min(arr)), float(_max(arr))
    if -1e16 < lo and hi < 1e16:                 # every value finite and below 1e16 in magnitude
        whole = arr.astype(np.int64)
        if (whole == arr).all() and not (arr.view(np.int64) == _NEG_ZERO).any():
            return [*_int_segments(whole, int(lo), int(hi)), ".0"]
    return [_float_texts(arr)]


def _column_segments(values: Any) -> list:
    """One column (numpy array or list) as segments: str (constant) or list of str (one per row)."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        kind = values.dtype.kind
        if kind in "iu":
            return _int_segments(values)
        if kind == "f":
            return _float_segments(values)
        if kind == "b":
            return [_Coded("bool", _BOOL_TEXT, values.astype(np.intp))]
        values = values.tolist()
        if kind == "O":
            plain = _plain_strings(values)
            if plain is not None:
                return plain
            try:
                return [list(map(_encode_str, values))]      # strings: the common case
            except TypeError:
                pass
    elif not isinstance(values, list):
        values = list(values)
    return [column_json(values)]


def _plain_strings(values: list) -> list | None:
    """A column of strings that need no escaping (printable ASCII without ``"`` or ``\\``, which is what
    ``encode_basestring_ascii`` leaves as it is) as the strings themselves between constant quotes: no new
    string per value. None when a value is not a string or needs escaping (checked on all of them joined, in
    C: one join, a search for each of the two characters, and the smallest and largest byte)."""
    try:
        joined = "".join(values)
    except TypeError:
        return None
    if not joined.isascii():
        return None
    raw = joined.encode("ascii")
    if b'"' in raw or b"\\" in raw:
        return None
    if raw:
        codes = np.frombuffer(raw, dtype=np.uint8)
        if _min(codes) < 0x20 or _max(codes) > 0x7E:
            return None
    return ['"', values, '"']


_prefix_cache: dict[tuple[str, ...], list[str]] = {}


def _col_prefixes(names: list[str]) -> list[str]:
    """``,"row":{"a":`` then ``,"b":`` ...: what precedes each column's value in an element."""
    key = tuple(names)
    out = _prefix_cache.get(key)
    if out is None:
        out = [("," if j else ',"row":{') + _encode_str(nm) + ":" for j, nm in enumerate(names)]
        if len(_prefix_cache) < 4096:
            _prefix_cache[key] = out
    return out


def rows_text(names: list[str], ts: Any, sign: Any, cols: list[Any], lead: str = "", end: str = "\n") -> str:
    """Every element as one compact JSON object, each preceded by ``lead`` and followed by ``end``.

    >>> rows_text(["a", "b"], [5, 6], [1, -1], [[1, 2], ["x", None]])
    '{"ts":5,"sign":1,"row":{"a":1,"b":"x"}}\\n{"ts":6,"sign":-1,"row":{"a":2,"b":null}}\\n'
    """
    n = len(ts)
    if n == 0:
        return ""
    # An element is consts[0] rows[0] consts[1] rows[1] ... rows[-1] consts[-1]: the per-row segments with
    # the constant text before each (adjacent constants merged, possibly empty) and the element's end.
    consts: list[str] = []
    rows: list = []
    cur = lead + '{"ts":'
    for before, col in ((None, ts), (',"sign":', sign), *zip(_col_prefixes(names), cols)):
        if before is not None:
            cur += before
        for seg in _column_segments(col):
            if seg.__class__ is str:
                cur += seg
            else:
                if len(seg) != n:
                    raise ValueError(f"a result column has {len(seg)} values for {n} timestamps")
                consts.append(cur)
                rows.append(seg)
                cur = ""
    consts.append(cur + ("}}" if cols else ',"row":{}}') + end)
    if not rows:                       # every column the same on every row: the element is one constant
        return consts[0] * n
    first, last = consts[0], consts[-1]
    body: list = []                    # the slots of one element after its first constant
    k = len(rows)
    for i, seg in enumerate(rows):
        follow = consts[i + 1] if i + 1 < k else ""
        if seg.__class__ is _Coded:    # a table takes in the constant after it (not the element's end)
            texts = seg.texts(follow) if follow else None
            if texts is None:
                texts = seg.texts()
            else:
                follow = ""
            seg = texts
        body.append(seg)
        if follow:
            body.append(follow)
    # each element is the slots of ``body``; one slot holds the end of an element and the start of the next
    step = len(body) + 1
    out: list[str] = [last + first] * (step * n)
    out[0] = first
    for j, p in enumerate(body, 1):
        out[j::step] = p if p.__class__ is list else [p] * n
    out.append(last)
    return "".join(out)


def _ndjson_elements(names: list[str], ts: Any, sign: Any, cols: list[Any]) -> bytes:
    return rows_text(names, ts, sign, cols).encode("ascii")


def _sse_elements(names: list[str], ts: Any, sign: Any, cols: list[Any]) -> bytes:
    return rows_text(names, ts, sign, cols, "data: ", "\n\n").encode("ascii")


def _gap(missed: int, from_ts: int | None, to_ts: int | None) -> str:
    return dumps({"gap": {"missed": missed, "from_ts": from_ts, "to_ts": to_ts}})


def _flag_snapshot(lines: list[bytes]) -> list[bytes]:
    """Each element object (one a line, ending in ``}``) with ``"snapshot":true`` added."""
    return [line[:-1] + b',"snapshot":true}' for line in lines]


def _ndjson_frame(data: bytes, first_id: int | None, snapshot: bool) -> bytes:
    if not snapshot:
        return data
    return b"".join(line + b"\n" for line in _flag_snapshot(data.splitlines()))


def _sse_frame(data: bytes, first_id: int | None, snapshot: bool) -> bytes:
    """Events with ``id:`` lines, so that a reconnecting EventSource resumes after the last one it saw
    (``Last-Event-ID``). Snapshot events carry no id but the last, which is the id of the last result element
    the snapshot includes: a reader cut off inside the snapshot reconnects without an id and gets a new one."""
    if first_id is None and not snapshot:
        return data
    lines = [e[len(b"data: "):] for e in data.split(b"\n\n") if e]
    if snapshot:
        lines = _flag_snapshot(lines)
        ids = [None] * (len(lines) - 1) + [first_id]
    else:
        ids = range(first_id, first_id + len(lines))
    return b"".join((b"id: %d\n" % i if i is not None else b"") + b"data: " + line + b"\n\n"
                    for i, line in zip(ids, lines))


def _snapshot_item(ts: int, rows: int) -> str:
    return dumps({"snapshot": {"ts": ts, "rows": rows}})


NDJSON_ENCODER = Encoder(
    name="ndjson",
    content_type="application/x-ndjson",
    head=lambda query: b"",
    elements=_ndjson_elements,
    heartbeat=lambda ts: (f'{{"heartbeat":{ts}}}' if isinstance(ts, int) else dumps({"heartbeat": ts})).encode()
    + b"\n",
    gap=lambda missed, a, b: (_gap(missed, a, b) + "\n").encode("ascii"),
    tail=lambda: b"",
    snapshot=lambda ts, rows: (_snapshot_item(ts, rows) + "\n").encode("ascii"),
    frame=_ndjson_frame,
)

SSE_ENCODER = Encoder(
    name="sse",
    content_type="text/event-stream",
    head=lambda query: f": dsms results of {query}\nretry: 2000\n\n".encode("ascii", "replace"),
    elements=_sse_elements,
    heartbeat=lambda ts: b"data: " + (f'{{"heartbeat":{ts}}}' if isinstance(ts, int) else
                                      dumps({"heartbeat": ts})).encode() + b"\n\n",
    gap=lambda missed, a, b: f"data: {_gap(missed, a, b)}\n\n".encode("ascii"),
    tail=lambda: b"",
    extra_headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    snapshot=lambda ts, rows: f"data: {_snapshot_item(ts, rows)}\n\n".encode("ascii"),
    frame=_sse_frame,
)
