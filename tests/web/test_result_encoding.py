"""The column-wise NDJSON/SSE encoding of result chunks (``dsms/formats/json_codec.py``) against the plain one: one
``json.dumps`` of each element's dict, as SPEC section 6 defines the element. Every shortcut the fast encoder
takes (strings written as they are between constant quotes, small integers from a table, whole floats through
the integer path, runs of equal timestamps written once) must give the same bytes, on the values where the
shortcuts end: quotes, backslashes, control characters, DEL, non-ASCII and lone surrogates in strings; NaN and
infinities (the strings "NaN", "Infinity", "-Infinity"), -0.0, 1e16 and full-precision floats; int64/uint64
extremes; None, booleans and mixed object columns; ISO timestamps (``?ts=iso``) and the ``approx`` field of an
approximate result."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from dsms.approx import Approx
from dsms.formats import ENCODERS, iso_text
from dsms.formats.json_codec import _plain_strings, rows_text
from dsms.runtime import ResultChunk

SAFE = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\']
SPOILERS = ['"', "\\", "\x00", "\x1f", "\n", "\t", "\x7f", "é", "\u2028", "日本", "\ud800", "\U0001f600"]


def plain_json(v: object) -> object:
    """The value as SPEC section 6 writes it: non-finite floats as strings, numpy scalars as Python ones."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def plain_lines(names, ts, sign, cols, approx=None, iso=False, lead="", end="\n") -> bytes:
    """The reference: every element built as a dict and written by ``json.dumps`` on its own."""
    out = []
    lists = [list(c.tolist() if isinstance(c, np.ndarray) else c) for c in cols]
    for i, t in enumerate(ts.tolist() if isinstance(ts, np.ndarray) else ts):
        el = {"ts": iso_text(t) if iso else t, "sign": int(sign[i]),
              "row": {n: plain_json(c[i]) for n, c in zip(names, lists)}}
        if approx is not None:
            el["approx"] = approx.as_json()
        out.append(lead + json.dumps(el, separators=(",", ":"), ensure_ascii=True, allow_nan=False) + end)
    return "".join(out).encode("ascii")


def _strings(rng: random.Random, n: int, spoil: bool) -> np.ndarray:
    col = np.empty(n, dtype=object)
    col[:] = ["".join(rng.choice(SAFE) for _ in range(rng.randint(0, 12))) for _ in range(n)]
    if spoil:
        i = rng.randrange(n)
        col[i] = col[i] + rng.choice(SPOILERS) + col[i]
    return col


def _column(rng: random.Random, kind: str, n: int) -> np.ndarray:
    if kind == "plain_str":
        return _strings(rng, n, False)
    if kind == "spoilt_str":
        return _strings(rng, n, True)
    if kind == "small_int":
        return np.array([rng.randint(0, 4095) for _ in range(n)], dtype=np.int64)
    if kind == "big_int":
        return np.array([rng.choice([2**63 - 1, -2**63, -1, 0, 4096, 10**15]) for _ in range(n)], dtype=np.int64)
    if kind == "u64":
        return np.array([rng.choice([2**64 - 1, 2**63, 0, 7]) for _ in range(n)], dtype=np.uint64)
    if kind == "whole_float":
        return np.array([float(rng.randint(-999, 999)) for _ in range(n)])
    if kind == "float":
        return np.array([rng.choice([0.1, 1 / 3, 1e16, 9999999999999998.0, 1e-7, 5e-324, 1.7976931348623157e308,
                                     -0.0, 0.0, 2.5, rng.random()]) for _ in range(n)])
    if kind == "nonfinite":
        return np.array([rng.choice([math.nan, math.inf, -math.inf, 1.5, -0.0]) for _ in range(n)])
    if kind == "bool":
        return np.array([rng.random() < 0.5 for _ in range(n)])
    col = np.empty(n, dtype=object)
    col[:] = [rng.choice([None, "s", 'q"', 3, 2**70, 2.5, True, False]) for _ in range(n)]
    return col


KINDS = ["plain_str", "spoilt_str", "small_int", "big_int", "u64", "whole_float", "float", "nonfinite", "bool",
         "objects"]


@pytest.mark.parametrize("seed", range(30))
def test_chunk_encoding_matches_plain_json_dumps(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 3, 64, 500, 3000])
    names = rng.sample(["a", "b", 'we"ird', "é", "c d"], rng.randint(1, 4))
    cols = [_column(rng, rng.choice(KINDS), n) for _ in names]
    ts = np.sort(np.array([rng.choice([1714564800000, 1714564800123, 1714564801500]) for _ in range(n)]))
    sign = np.array([rng.choice([1, -1]) for _ in range(n)], dtype=np.int8)
    approx = Approx(0.05, 0.9, 0.5) if seed % 3 == 0 else None
    chunk = ResultChunk(names, ts, sign, cols, approx=approx)
    ndjson, sse = ENCODERS["ndjson"], ENCODERS["sse"]
    assert chunk.encode(ndjson) == plain_lines(names, ts, sign, cols, approx)
    assert chunk.encode(ndjson, iso=True) == plain_lines(names, ts, sign, cols, approx, iso=True)
    assert sse.elements(names, ts, sign, cols) == plain_lines(names, ts, sign, cols, lead="data: ", end="\n\n")
    # plain lists (tests, tools) take the same paths
    assert rows_text(names, ts.tolist(), sign.tolist(), [c.tolist() for c in cols]).encode("ascii") == \
        plain_lines(names, ts, sign, cols)


def test_plain_strings_are_kept_only_when_nothing_needs_escaping() -> None:
    """The shortcut is taken for printable ASCII without quote or backslash, and refused for every character
    the escaping encoder would change (so a wrong check shows here, not only as a rare mismatch above)."""
    plain = ["", "abc", " !#$%&'()*+,-./0123456789:;<=>?@[]^_`{|}~"]
    assert _plain_strings(plain) == ['"', plain, '"']
    for c in SPOILERS:
        assert _plain_strings(["ok", "x" + c]) is None, repr(c)
    assert _plain_strings(["ok", None]) is None and _plain_strings([1, "a"]) is None
    assert rows_text(["s"], [1, 2], [1, 1], [plain[:2]]) == \
        '{"ts":1,"sign":1,"row":{"s":""}}\n{"ts":2,"sign":1,"row":{"s":"abc"}}\n'


def test_table_columns_take_in_the_constant_after_them() -> None:
    """Small integers and booleans come from tables; with 1,024 rows or more the constant after the column
    (``,"next":``, a whole float's ``.0``) is joined into the table once, and the elements are the same."""
    from dsms.formats import json_codec
    n = 2000
    rng = random.Random(5)
    names = ["k", "flag", "v", "last"]
    cols = [np.array([rng.randint(0, 4095) for _ in range(n)]), np.array([rng.random() < 0.3 for _ in range(n)]),
            np.array([float(rng.randint(0, 999)) for _ in range(n)]), np.array([rng.randint(0, 9) for _ in range(n)])]
    ts, sign = np.arange(n, dtype=np.int64) // 7, np.ones(n, dtype=np.int8)
    json_codec._fused_tables.clear()
    for rows in (n, 10):                           # fused, then below the threshold with the tables built
        got = rows_text(names, ts[:rows], sign[:rows], [c[:rows] for c in cols]).encode("ascii")
        assert got == plain_lines(names, ts[:rows], sign[:rows], [c[:rows] for c in cols])
    assert {("int", ',"flag":'), ("bool", ',"v":'), ("int", '.0,"last":')} <= set(json_codec._fused_tables)


def test_a_long_constant_is_not_joined_into_a_table() -> None:
    """A column name of thousands of characters would make a joined table of 4,096 copies of it: such a
    constant keeps its own slot, with the same output."""
    from dsms.formats import json_codec
    n = 2000
    names = ["k", "x" * 5000]
    cols = [np.arange(n) % 4096, np.arange(n) % 3 == 0]
    ts, sign = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int8)
    json_codec._fused_tables.clear()
    assert rows_text(names, ts, sign, cols).encode("ascii") == plain_lines(names, ts, sign, cols)
    assert not json_codec._fused_tables


def _doubles(rng: np.random.Generator, n: int) -> np.ndarray:
    """Doubles from every part of the range: random bit patterns (every exponent, subnormals, NaNs with
    payloads, infinities), values around 1 and 1000, whole numbers beyond 2**53, and the neighbours of the
    edges where ``float.__repr__`` changes form (1e-4 and 1e16) and of 0."""
    edges = []
    for x in (1e-4, 1e16, 1e-3, 1e15, 2.0**53, 5e-324, 0.1):
        for direction in (0.0, math.inf):
            y = x
            for _ in range(40):
                edges.append(y)
                y = float(np.nextafter(y, direction))
    vals = np.concatenate([
        rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64).view(np.float64),
        rng.random(n) * 1000, np.round(rng.random(n) * 1e6) / 1000, rng.random(n) * 1e-4,
        rng.integers(2**53, 2**62, n).astype(np.float64), 10.0 ** rng.integers(-20, 25, n),
        np.array(edges), -np.array(edges), np.array([0.0, -0.0, math.nan, math.inf, -math.inf])])
    with np.errstate(all="ignore"):                          # NaN times -1, as intended
        return vals * np.where(rng.random(len(vals)) < 0.5, -1.0, 1.0)


def test_floats_and_integers_beyond_the_tables_are_written_as_repr_writes_them() -> None:
    """Floats that are not whole numbers and integers beyond the small-integer table are written by orjson
    (``_number_texts``), except where its text differs from ``float.__repr__``: exponents (``1e+16`` against
    ``1e16``, ``1e-05`` against ``1e-5``), NaN and infinities. Checked on doubles from the whole range (and
    the neighbours of both edges), on integers of every width, and on arrays orjson cannot read as they are
    (big-endian, strided, float32)."""
    rng = np.random.default_rng(11)
    floats = _doubles(rng, 3000)
    rng.shuffle(floats)
    ints = np.concatenate([rng.integers(-2**63, 2**63 - 1, 3000, dtype=np.int64, endpoint=True),
                           np.array([2**63 - 1, -2**63, -1, 0, 4096, -4097])])
    with np.errstate(all="ignore"):                          # float32 overflows to infinity, as intended
        narrow = floats.astype(np.float32)
    columns = [floats, floats.astype(">f8"), floats[::3], narrow, ints, ints.astype(">i8"), ints[::2],
               rng.integers(0, 2**64 - 1, 999, dtype=np.uint64, endpoint=True)]
    for dt in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32):
        info = np.iinfo(dt)
        columns.append(rng.integers(info.min, info.max, 999, endpoint=True).astype(dt))
    for col in columns:
        n = len(col)
        ts = np.cumsum(rng.integers(0, 3, n)) + 1714564800000     # timestamps through the same path
        sign = np.ones(n, dtype=np.int8)
        got = rows_text(["x"], ts, sign, [col]).encode("ascii")
        assert got == plain_lines(["x"], ts, sign, [col]), col.dtype
        for line, value in zip(got.splitlines(), col.tolist()):
            parsed = json.loads(line)["row"]["x"]                # valid JSON, and the same value read back
            assert parsed == plain_json(value) or (isinstance(value, float) and math.isnan(value))
    with pytest.raises(ValueError, match="2 values for 3 timestamps"):
        rows_text(["x"], [1, 2, 3], [1, 1, 1], [np.array([10**12, 1.5])])


def test_number_texts_agree_with_repr_near_the_edges() -> None:
    """``_float_texts`` alone, value by value, on the neighbours of the edges of orjson's interval: the test
    that fails first if the interval is drawn one ulp too wide."""
    from dsms.formats.json_codec import _float_texts
    rng = np.random.default_rng(3)
    vals = _doubles(rng, 200)
    expected = [plain_json(float(v)) for v in vals.tolist()]
    expected = [json.dumps(v) for v in expected]
    assert _float_texts(vals) == expected
