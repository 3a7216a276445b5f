"""Wire formats of input and results (SPEC section 6): JSON, NDJSON, msgpack, SSE and streaming XML.

Input decoders turn a request body into one :class:`Decoded` batch: the rows (row-wise dicts or columnar
lists), one timestamp per row, optional signs, the largest heartbeat, and how many punctuations were seen.
Punctuations are accepted and counted but not yet used (SPEC section 6 lists them; the engine has no
punctuation input yet). Every refusal is an :class:`dsms.InputError` whose ``index`` is the position of the
offending item in the body (array index, or the n-th non-blank line / msgpack object), so the HTTP layer can
name it.

Output encoders (:data:`ENCODERS`) turn result batches, heartbeats and gap markers into bytes, one call per
batch so a streaming response can flush per batch.

A body reduces to "rows, then at most one heartbeat": a heartbeat in the middle of a body is implied by the
later rows (their timestamps may not be below it, which is checked), so only the largest one is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsms.errors import InputError
from dsms.types import to_ticks

__all__ = [
    "Decoded", "InputError", "parse_ts", "decode_input", "media_type", "ENCODERS", "Encoder",
    "INPUT_TYPES", "UnsupportedMediaType", "element_json", "jsonable",
]



class UnsupportedMediaType(ValueError):
    """A Content-Type no decoder reads (HTTP 415)."""


@dataclass
class Decoded:
    """One request body's input, ready for ``Runtime.ingest``.

    Exactly one of ``rows`` (list of dicts) and ``cols`` (column -> list or array) is set. ``ts`` has one
    entry per row or is None when no element carried a timestamp (the server then stamps the batch).
    ``sign`` is None when every element is an insert. ``index`` maps a row to its item position in the body
    (None: row k is item k)."""

    rows: list[dict] | None = None
    cols: dict[str, Any] | None = None
    ts: Any = None
    sign: list[int] | None = None
    heartbeat: int | None = None
    punctuations: int = 0
    index: list[int] | None = None
    items: int = 0
    n: int = 0
    iso: bool = False             # a timestamp came as ISO 8601 text: messages about time answer in kind

    def item_of(self, row: int | None) -> int | None:
        """The body position of row ``row`` (to report an engine error against what the client sent)."""
        if row is None or self.index is None:
            return row
        return self.index[row] if 0 <= row < len(self.index) else row


def iso_text(ts: int) -> str:
    """Milliseconds since the epoch as ISO 8601 UTC text (the form a user who sends ISO reads back); a
    value no calendar date holds stays a number.

    >>> iso_text(1714564800000), iso_text(1500), iso_text(2**62)
    ('2024-05-01T12:00:00Z', '1970-01-01T00:00:01.500Z', '4611686018427387904')
    """
    import datetime as _dt
    try:
        d = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(milliseconds=int(ts))
    except (OverflowError, ValueError):
        return str(ts)
    return d.isoformat(timespec="milliseconds" if ts % 1000 else "seconds").replace("+00:00", "Z")


def parse_ts(value: Any, index: int | None = None) -> int:
    """A timestamp from the wire (``dsms.types.to_ticks``: an integer, a whole float, an ISO 8601 string or a
    msgpack Timestamp, as milliseconds); InputError naming the element otherwise.

    >>> parse_ts(7), parse_ts("1970-01-01T00:00:01.5Z")
    (7, 1500)
    """
    try:
        return to_ticks(value)
    except (TypeError, ValueError) as e:
        raise InputError(str(e), index=index) from None


def _ts_column(values: Any) -> np.ndarray:
    """A column of wire timestamps as int64, fast when they are already integers."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu" and values.ndim == 1:
        return values.astype(np.int64, copy=False)
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence):
        raise InputError("'ts' of a columnar batch must be a list of timestamps")
    if values and all(type(v) is int for v in values):
        try:
            return np.asarray(values, dtype=np.int64)
        except OverflowError:
            pass
    return np.asarray([parse_ts(v, k) for k, v in enumerate(values)], dtype=np.int64)


class _Builder:
    """Collects the items of a body in order and checks what can be checked without the schema."""

    def __init__(self, allow_signs: bool) -> None:
        self.allow_signs = allow_signs
        self.rows: list[dict] = []
        self.ts: list[int | None] = []
        self.sign: list[int] = []
        self.index: list[int] = []
        self.heartbeat: int | None = None
        self.punctuations = 0
        self.items = 0
        self.columnar: list[tuple[int, dict, np.ndarray | None, Any]] = []
        self.any_sign = False
        self.iso = False

    def show(self, ts: int) -> str:
        """A timestamp in a message: ISO 8601 once the body gave one as ISO text."""
        return iso_text(ts) if self.iso else str(ts)

    def add(self, obj: Any) -> None:
        k = self.items
        self.items += 1
        if not isinstance(obj, Mapping):
            raise InputError(f"expected an element object, got {type(obj).__name__}", index=k)
        if "heartbeat" in obj:
            if len(obj) != 1:
                raise InputError("a heartbeat item holds only 'heartbeat'", index=k)
            self.iso |= isinstance(obj["heartbeat"], str)
            h = parse_ts(obj["heartbeat"], k)
            if self.heartbeat is None or h > self.heartbeat:
                self.heartbeat = h
            return
        if "punctuation" in obj:
            if not isinstance(obj["punctuation"], Mapping):
                raise InputError("'punctuation' must be an object of column patterns", index=k)
            self.punctuations += 1
            return
        if "cols" in obj:
            self._add_columnar(obj, k)
            return
        if "insert" in obj or "delete" in obj:
            self._add_update(obj, k)
            return
        row = obj.get("row")
        if not isinstance(row, Mapping):
            raise InputError("an element needs 'row' (an object of column values)"
                             if row is None else "'row' must be an object of column values", index=k)
        extra = set(obj) - {"ts", "sign", "row", "approx"}
        if extra:
            raise InputError(f"unknown field '{sorted(map(str, extra))[0]}' in an element "
                             "(fields: ts, sign, row)", index=k)
        sign = self._sign(obj.get("sign", 1), k)
        self._row(row, obj.get("ts"), sign, k)

    def _sign(self, s: Any, k: int) -> int:
        if s in ("+", "+1"):
            s = 1
        elif s in ("-", "-1"):
            s = -1
        if isinstance(s, bool) or s not in (1, -1):
            raise InputError(f"sign must be 1 or -1, not {s!r}", index=k)
        if s == -1:
            if not self.allow_signs:
                raise InputError("a stream element is always an insert (sign 1); deletes are for relations",
                                 index=k)
            self.any_sign = True
        return int(s)

    def _row(self, row: Mapping, ts: Any, sign: int, k: int) -> None:
        self.iso |= isinstance(ts, str)
        t = None if ts is None else parse_ts(ts, k)
        if t is not None and self.heartbeat is not None and t < self.heartbeat:
            raise InputError(f"ts {self.show(t)} is below the heartbeat {self.show(self.heartbeat)} sent before it",
                             index=k)
        self.rows.append(row if isinstance(row, dict) else dict(row))
        self.ts.append(t)
        self.sign.append(sign)
        self.index.append(k)

    def _add_update(self, obj: Mapping, k: int) -> None:
        if not self.allow_signs:
            raise InputError("'insert'/'delete' items are relation updates, not stream elements", index=k)
        extra = set(obj) - {"ts", "insert", "delete"}
        if extra:
            raise InputError(f"unknown field '{sorted(map(str, extra))[0]}' in an update "
                             "(fields: ts, insert, delete)", index=k)
        for key, sign in (("insert", 1), ("delete", -1)):
            rows = obj.get(key, [])
            if not isinstance(rows, list):
                raise InputError(f"'{key}' must be a list of row objects", index=k)
            for r in rows:
                if not isinstance(r, Mapping):
                    raise InputError(f"'{key}' must be a list of row objects", index=k)
                if sign == -1:
                    self.any_sign = True
                self._row(r, obj.get("ts"), sign, k)

    def _add_columnar(self, obj: Mapping, k: int) -> None:
        extra = set(obj) - {"ts", "cols", "sign"}
        if extra:
            raise InputError(f"unknown field '{sorted(map(str, extra))[0]}' in a columnar batch "
                             "(fields: ts, cols, sign)", index=k)
        cols = obj["cols"]
        if not isinstance(cols, Mapping) or not cols:
            raise InputError("'cols' must be a non-empty object of column lists", index=k)
        n = None
        seen: dict[str, Any] = {}
        for c, v in cols.items():
            if seen.setdefault(str(c).lower(), c) is not c:   # case-insensitive names, as row elements have
                raise InputError(f"column '{c}' given twice (as '{seen[str(c).lower()]}' and '{c}'; column names "
                                 "are case-insensitive)", index=k)
            if isinstance(v, str | bytes | Mapping) or not isinstance(v, Sequence | np.ndarray):
                raise InputError(f"column '{c}' of a columnar batch must be a list", index=k)
            if n is not None and len(v) != n:
                raise InputError(f"column '{c}' has {len(v)} values, others have {n}", index=k)
            n = len(v)
        ts = obj.get("ts")
        self.iso |= isinstance(ts, str) or (isinstance(ts, list) and any(isinstance(t, str) for t in ts))
        try:
            ts_arr = None if ts is None else (_ts_column(ts) if not isinstance(ts, int | str) else
                                              np.full(n or 0, parse_ts(ts, k), dtype=np.int64))
        except InputError as e:
            raise InputError(str(e).split(": ", 1)[-1] if e.index is not None else str(e), index=k) from None
        if ts_arr is not None and len(ts_arr) != n:
            raise InputError(f"{n} rows but {len(ts_arr)} timestamps", index=k)
        if ts_arr is not None and self.heartbeat is not None and n and int(ts_arr.min()) < self.heartbeat:
            raise InputError(f"a timestamp is below the heartbeat {self.show(self.heartbeat)} sent before it",
                             index=k)
        sign = obj.get("sign")
        if sign is not None:
            if not isinstance(sign, Sequence) or isinstance(sign, str | bytes) or len(sign) != n:
                raise InputError("'sign' of a columnar batch must be a list as long as the columns", index=k)
            sign = [self._sign(s, k) for s in sign]
        self.columnar.append((k, dict(cols), ts_arr, sign))

    def result(self) -> Decoded:
        if self.columnar and not self.rows and len(self.columnar) == 1:
            k, cols, ts_arr, sign = self.columnar[0]
            n = len(next(iter(cols.values())))
            return Decoded(cols=cols, ts=ts_arr, sign=sign if self.any_sign else None,
                           heartbeat=self.heartbeat, punctuations=self.punctuations,
                           index=None if k == 0 else [k] * n, items=self.items, n=n, iso=self.iso)
        if self.columnar:
            return self._merge_columnar()
        return self._finish(self.rows, self.ts, self.sign, self.index)

    def _finish(self, rows: list, ts: list, sign: list, index: list) -> Decoded:
        given = [t is not None for t in ts]
        if any(given) and not all(given):
            k = index[given.index(False) if not given[0] else given.index(False)]
            raise InputError("this element has no ts while others in the request do", index=k)
        ts_out = np.asarray(ts, dtype=np.int64) if rows and given[0] else None
        identity = index == list(range(len(index)))
        return Decoded(rows=rows, ts=ts_out, sign=sign if self.any_sign else None, heartbeat=self.heartbeat,
                       punctuations=self.punctuations, index=None if identity else index, items=self.items,
                       n=len(rows), iso=self.iso)

    def _merge_columnar(self) -> Decoded:
        """Several columnar batches, or columnar mixed with row elements: fall back to rows, in body order."""
        parts: list[tuple[int, list, list, list, list]] = []
        for k, cols, ts_arr, sign in self.columnar:
            names = list(cols)
            n = len(cols[names[0]])
            lists = [list(cols[c]) for c in names]
            rows = [dict(zip(names, vals)) for vals in zip(*lists)] if n else []
            ts = ts_arr.tolist() if ts_arr is not None else [None] * n
            parts.append((k, rows, ts, sign or [1] * n, [k] * n))
        rows_all: list = []
        ts_all: list = []
        sign_all: list = []
        index_all: list = []
        j = 0
        for k, rows, ts, sign, idx in sorted(parts, key=lambda p: p[0]):
            while j < len(self.index) and self.index[j] < k:
                rows_all.append(self.rows[j])
                ts_all.append(self.ts[j])
                sign_all.append(self.sign[j])
                index_all.append(self.index[j])
                j += 1
            rows_all += rows
            ts_all += ts
            sign_all += sign
            index_all += idx
        rows_all += self.rows[j:]
        ts_all += self.ts[j:]
        sign_all += self.sign[j:]
        index_all += self.index[j:]
        return self._finish(rows_all, ts_all, sign_all, index_all)


# Content types each decoder reads; the first of each list is the canonical name.
INPUT_TYPES: dict[str, tuple[str, ...]] = {
    "json": ("application/json", "text/json"),
    "ndjson": ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines",
               "application/jsonlines"),
    "msgpack": ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack"),
    "xml": ("application/xml", "text/xml"),
}


def media_type(content_type: str | None) -> str:
    """The decoder name for a Content-Type header (parameters ignored). No type, text/plain, octet-stream
    and form-urlencoded (curl's default) give "auto": one JSON document, or else NDJSON.

    >>> media_type("application/x-ndjson; charset=utf-8")
    'ndjson'
    """
    base = (content_type or "application/json").split(";", 1)[0].strip().lower()
    if base in ("", "application/octet-stream", "text/plain", "application/x-www-form-urlencoded"):
        return "auto"          # what `curl -d` sends: JSON if the body is one document, else NDJSON
    for name, types in INPUT_TYPES.items():
        if base in types:
            return name
    accepted = ", ".join(t[0] for t in INPUT_TYPES.values())
    raise UnsupportedMediaType(f"Content-Type {base!r} is not an input format (use one of {accepted})")


def decode_input(body: bytes, content_type: str | None, schema: Sequence[tuple[str, str]] | None = None, *,
                 allow_signs: bool = False) -> Decoded:
    """Decode a request body by its Content-Type. ``schema`` (column, TYPE) is needed only by XML, whose
    values are text. ``allow_signs`` admits deletes (relation updates)."""
    kind = media_type(content_type)
    b = _Builder(allow_signs)
    if kind == "auto":
        from dsms.formats.json_codec import decode_auto
        decode_auto(body, b)
    elif kind == "json":
        from dsms.formats.json_codec import decode_json
        decode_json(body, b)
    elif kind == "ndjson":
        from dsms.formats.json_codec import decode_ndjson
        decode_ndjson(body, b)
    elif kind == "msgpack":
        from dsms.formats.msgpack_codec import decode_msgpack
        decode_msgpack(body, b)
    else:
        from dsms.formats.xml_codec import decode_xml
        decode_xml(body, b, schema or [])
    return b.result()


# ---------------------------------------------------------------- output


def jsonable(v: Any) -> Any:
    """A value JSON can carry: non-finite floats become the strings "NaN", "Infinity", "-Infinity" (the
    protobuf JSON mapping's choice), numpy scalars become Python ones."""
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, np.generic):
        return jsonable(v.item())
    return v


def element_json(ts: int, sign: int, row: Mapping[str, Any], approx: Mapping | None = None) -> dict[str, Any]:
    """The JSON element of SPEC section 6 as a dict."""
    out = {"ts": ts, "sign": sign, "row": {k: jsonable(v) for k, v in row.items()}}
    if approx:
        out["approx"] = dict(approx)
    return out


def mark_approx(fmt: str, data: bytes, approx: Any) -> bytes:
    """Encoded elements of an approximate result with their approximation added (SPEC section 6): a JSON
    element (NDJSON, SSE) gets ``"approx": {...}`` after its row, an XML ``<element>`` the attributes
    ``rel_error``, ``confidence``, ``sampling_rate`` (and ``subset="true"`` for a shed selection). Exact results are never passed here, so their bytes
    stay as they were. The encoders escape every newline and ``<`` inside values, so an element's end
    (``}`` then a newline) and start (``<element ``) are found by plain search.

    >>> from dsms.approx import Approx
    >>> mark_approx("ndjson", b'{"ts":1,"sign":1,"row":{"a":1}}\\n', Approx(0.1, 0.9, 0.5))
    b'{"ts":1,"sign":1,"row":{"a":1},"approx":{"rel_error":0.1,"confidence":0.9,"sampling_rate":0.5}}\\n'
    """
    d = approx.as_json()
    if fmt == "xml":
        attrs = " ".join(f'{k}="{str(v).lower() if isinstance(v, bool) else v}"' for k, v in d.items())
        return data.replace(b"<element ", f"<element {attrs} ".encode("ascii"))
    from dsms.formats.json_codec import dumps
    return data.replace(b"}\n", f',"approx":{dumps(d)}}}\n'.encode("ascii"))


@dataclass
class Encoder:
    """How one output format frames a result stream. Each method returns the bytes to write."""

    name: str
    content_type: str
    head: Any
    elements: Any          # (names, ts, sign, columns) -> bytes; each a list or a 1-d numpy array
    heartbeat: Any         # ts -> bytes
    gap: Any               # (missed, from_ts, to_ts) -> bytes
    tail: Any
    extra_headers: dict[str, str] = field(default_factory=dict)
    # (ts, rows) -> bytes: a relation's contents follow, ``rows`` elements at ``ts`` (docs/http-api.md)
    snapshot: Any = None
    # (encoded elements, id of the first or None, snapshot?) -> bytes: per-element ids (SSE) and the snapshot
    # flag, added to the bytes ``elements`` made (cached per result batch, so done once per format)
    frame: Any = None


# The codecs import the definitions above, so they are imported last (no cycle at import time).
from dsms.formats import json_codec as _json_codec  # noqa: E402
from dsms.formats import xml_codec as _xml_codec  # noqa: E402

ENCODERS: dict[str, Encoder] = {
    "ndjson": _json_codec.NDJSON_ENCODER,
    "sse": _json_codec.SSE_ENCODER,
    "xml": _xml_codec.XML_ENCODER,
}
"""Output formats by name: ``ndjson``, ``sse``, ``xml``."""
