"""The fast paths of the HTTP ingest pipeline give exactly what the plain paths give.

* msgpack columnar batches read into numpy (``columnar_fast``): the same Decoded, the same validation results
  and the same refusals (message and index) as msgpack's own decoding;
* column-wise NDJSON/SSE encoding of numpy result batches (``rows_text``): byte for byte the JSON a per-element
  ``dumps`` writes, for every column type, constant and varying columns, non-finite floats, -0.0, big ints;
* result chunks keep the engine's arrays (``ResultChunk``): ``since``, ``cut`` and the retention ring.
"""

from __future__ import annotations

import asyncio
import json
import math
import random

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.archive import Archive
from dsms.errors import InputError
from dsms.formats import ENCODERS, decode_input
from dsms.formats import msgpack_codec as mc
from dsms.formats.json_codec import dumps, rows_text
from dsms.runtime import QueryResults, ResultChunk, Runtime
from dsms.types import typed_columns

# ---------------------------------------------------------------- msgpack columnar fast path

_number = st.one_of(
    st.integers(-40, 130), st.integers(-2**63, 2**63 - 1), st.integers(0, 2**64 - 1), st.floats(allow_nan=True),
    st.booleans(), st.none(), st.text(max_size=3), st.integers(2**31, 2**33),
)


def _column(draw) -> list:
    """Mostly uniform columns (those the fast path takes), sometimes mixed."""
    n = draw(st.integers(0, 40))
    kind = draw(st.sampled_from(["small", "neg", "u8", "u16", "u32", "u64", "i64", "f64", "f32", "bool", "str",
                                 "mixed"]))
    gen = {
        "small": st.integers(0, 127), "neg": st.integers(-32, 127), "u8": st.integers(128, 255),
        "u16": st.integers(256, 65535), "u32": st.integers(65536, 2**32 - 1), "u64": st.integers(2**32, 2**64 - 1),
        "i64": st.integers(-2**63, -2**31 - 1), "f64": st.floats(allow_nan=True), "f32": st.floats(width=32),
        "bool": st.booleans(), "str": st.text(max_size=4), "mixed": _number,
    }[kind]
    vals = draw(st.lists(gen, min_size=n, max_size=n))
    return vals, kind == "f32"


@st.composite
def columnar_bodies(draw) -> bytes:
    n_cols = draw(st.integers(1, 5))
    names = draw(st.lists(st.sampled_from(["k", "v", "tag", "b", "t", "K", "zz"]), min_size=n_cols,
                          max_size=n_cols))
    cols = {}
    single = False
    for nm in names:
        vals, f32 = _column(draw)
        cols[nm] = vals
        single = single or f32
    if draw(st.booleans()) and cols:                  # same lengths most of the time
        n = min(len(v) for v in cols.values())
        cols = {k: v[:n] for k, v in cols.items()}
    item: dict = {"cols": cols}
    extra = draw(st.sampled_from(["", "ts", "ts_int", "ts_float", "sign", "junk", "ts_big"]))
    n0 = len(next(iter(cols.values())))
    if extra == "ts":
        item["ts"] = sorted(draw(st.lists(st.integers(0, 2**45), min_size=n0, max_size=n0)))
    elif extra == "ts_int":
        item["ts"] = 7
    elif extra == "ts_float":
        item["ts"] = [float(i) for i in range(n0)]
    elif extra == "ts_big":
        item["ts"] = [2**63 + i for i in range(n0)]
    elif extra == "sign":
        item["sign"] = [1] * n0
    elif extra == "junk":
        item["what"] = 1
    wrap = draw(st.sampled_from(["one", "array", "two", "trailing"]))
    obj = [item] if wrap == "array" else [item, item] if wrap == "two" else item
    try:
        body = msgpack.packb(obj, use_single_float=single)
    except OverflowError:             # a float64 column beside the float32 one: pack every float as float64
        body = msgpack.packb(obj)
    if wrap == "trailing":
        body += b"\xc1" if draw(st.booleans()) else body[: draw(st.integers(0, len(body)))]
    return body


def _slow(body: bytes):
    orig = mc.columnar_fast
    mc.columnar_fast = lambda body: None
    try:
        return _outcome(body)
    finally:
        mc.columnar_fast = orig


def _outcome(body: bytes):
    """Everything the runtime sees of a body: the decoded batch and its validation, or the refusal."""
    try:
        d = decode_input(body, "application/msgpack")
    except InputError as e:
        return ("decode refused", str(e), e.index)
    ts = None if d.ts is None else (d.ts.dtype.str, d.ts.tolist()) if isinstance(d.ts, np.ndarray) else d.ts
    head = (d.n, d.items, d.index, d.sign, d.heartbeat, ts, sorted(d.cols) if d.cols else None)
    try:
        cols, n = typed_columns([(c, _type_of(c)) for c in (d.cols or {})], d.rows, d.cols)
    except InputError as e:
        return head + ("invalid", str(e), e.index)
    return head + (n, [(c.dtype.str, [repr(x) for x in c.tolist()]) for c in cols])


def _type_of(col: str) -> str:
    """The column type each test column name stands for (unknown names are INT)."""
    return {"k": "INT", "v": "FLOAT", "tag": "STRING", "b": "BOOLEAN", "t": "TIMESTAMP"}.get(col.lower(), "INT")


@settings(max_examples=400, deadline=None)
@given(columnar_bodies())
def test_msgpack_fast_path_matches_plain_decoding(body: bytes) -> None:
    assert _outcome(body) == _slow(body)


def test_fast_path_is_taken_for_uniform_numeric_columns() -> None:
    n = 1000
    body = msgpack.packb({"ts": list(range(2**40, 2**40 + n)), "cols": {
        "k": [i % 100 for i in range(n)], "v": [i / 3 for i in range(n)], "f": [i % 2 == 0 for i in range(n)],
        "tag": ["x"] * n}})
    item = mc.columnar_fast(body)
    assert item is not None
    assert item["ts"].dtype == np.int64 and item["cols"]["k"].dtype == np.int64
    assert item["cols"]["v"].dtype == np.float64 and item["cols"]["f"].dtype == bool
    assert item["cols"]["tag"] == ["x"] * n
    assert item["cols"]["v"].tolist() == [i / 3 for i in range(n)]


@pytest.mark.parametrize("body", [b"", b"\x80", b"\x81\xa4cols\x80", b"\x91\xc1", b"\x92\x80\x80",
                                  msgpack.packb({"cols": {"k": [1, 2]}})[:-1], b"\xdd\xff\xff\xff\xff"])
def test_fast_path_declines_what_it_is_not_sure_of(body: bytes) -> None:
    assert _outcome(body) == _slow(body)


# ---------------------------------------------------------------- column-wise JSON encoding


def _reference(names, ts, sign, cols, lead="", end="\n") -> str:
    lists = [c.tolist() if isinstance(c, np.ndarray) else list(c) for c in cols]
    ts = ts.tolist() if isinstance(ts, np.ndarray) else ts
    sign = sign.tolist() if isinstance(sign, np.ndarray) else sign
    return "".join(lead + dumps({"ts": t, "sign": s, "row": dict(zip(names, vals))}) + end
                   for t, s, *vals in zip(ts, sign, *lists))


def _random_column(rng: random.Random, kind: str, n: int) -> np.ndarray:
    if kind == "int":
        return np.array([rng.randint(-10**15, 10**15) for _ in range(n)], dtype=np.int64)
    if kind == "small":
        return np.array([rng.randint(0, 5000) for _ in range(n)], dtype=np.int64)
    if kind == "const":
        return np.full(n, rng.randint(-5, 2**40), dtype=np.int64)
    if kind == "runs":
        return np.repeat(np.arange(n // 40 + 1, dtype=np.int64) * 10**12, 40)[:n]
    if kind == "extreme":
        return np.array([rng.choice([2**63 - 1, -2**63, 0]) for _ in range(n)], dtype=np.int64)
    if kind == "u64":
        return np.array([rng.choice([2**64 - 1, 3]) for _ in range(n)], dtype=np.uint64)
    if kind == "float":
        return np.array([rng.random() * rng.choice([1, 1e-30, 1e30]) for _ in range(n)])
    if kind == "whole":
        return np.array([float(rng.choice([rng.randint(-5000, 5000), rng.randint(-10**17, 10**17)]))
                         for _ in range(n)])
    if kind == "special":
        return np.array([rng.choice([math.nan, math.inf, -math.inf, -0.0, 0.0, 1e16, 9999999999999998.0, 2.5])
                         for _ in range(n)])
    if kind == "f32":
        return np.array([rng.random() for _ in range(n)], dtype=np.float32)
    if kind == "bool":
        return np.array([rng.random() < 0.5 for _ in range(n)])
    col = np.empty(n, dtype=object)
    if kind == "str":
        col[:] = [rng.choice(["a", "é", "\u2028", 'q"\\', "", "\x00", "日本"]) for _ in range(n)]
    else:
        col[:] = [rng.choice([None, "s", 1, 2.5, True]) for _ in range(n)]
    return col


KINDS = ["int", "small", "const", "runs", "extreme", "u64", "float", "whole", "special", "f32", "bool", "str",
         "objects"]


@pytest.mark.parametrize("seed", range(40))
def test_rows_text_matches_per_element_json(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 31, 32, 33, 200, 1000])
    names = rng.sample(["a", "b", "c", 'we"ird', "%s", "d"], rng.randint(0, 4))
    cols = [_random_column(rng, rng.choice(KINDS), n) for _ in names]
    ts = _random_column(rng, rng.choice(["const", "runs", "small"]), n)
    ts.sort()
    sign = np.array([rng.choice([1, -1]) if seed % 2 else 1 for _ in range(n)], dtype=np.int8)
    assert rows_text(names, ts, sign, cols) == _reference(names, ts, sign, cols)
    assert rows_text(names, ts.tolist(), sign.tolist(), [c.tolist() for c in cols]) == \
        _reference(names, ts, sign, cols)
    sse = ENCODERS["sse"].elements(names, ts, sign, cols).decode("ascii")
    assert sse == _reference(names, ts, sign, cols, "data: ", "\n\n")
    for line in rows_text(names, ts, sign, cols).splitlines():
        assert json.loads(line)["ts"] in ts


def test_rows_text_empty_and_xml_accepts_arrays() -> None:
    assert rows_text(["a"], np.empty(0, np.int64), np.empty(0, np.int8), [np.empty(0)]) == ""
    xml = ENCODERS["xml"].elements(["a"], np.array([1, 2]), np.array([1, -1], np.int8), [np.array([0.5, 2.0])])
    assert xml == ENCODERS["xml"].elements(["a"], [1, 2], [1, -1], [[0.5, 2.0]])


# ---------------------------------------------------------------- result chunks and the retention ring


def _chunk(lo: int, hi: int) -> ResultChunk:
    ts = np.arange(lo, hi, dtype=np.int64)
    tag = np.empty(hi - lo, dtype=object)
    tag[:] = [f"x{i}" for i in range(lo, hi)]
    return ResultChunk(["a", "tag"], ts, np.ones(hi - lo, np.int8), [ts * 2, tag])


def test_chunk_since_and_elements() -> None:
    c = _chunk(10, 20)
    assert c.since(5) is c and c.since(20) is None
    part = c.since(15)
    assert (part.first_ts, part.last_ts, len(part)) == (15, 19, 5)
    assert type(part.first_ts) is int
    e = part.elements()[0]
    assert (e.ts, e.sign, e.row) == (15, 1, {"a": 30, "tag": "x15"}) and type(e.ts) is int
    assert ResultChunk(["a"], [1, 2, 2, 3], [1] * 4, [[1, 2, 3, 4]]).since(2).ts == [2, 2, 3]


def test_retention_ring_keeps_batches_and_cuts_exactly() -> None:
    class Q:
        schema = [("a", "INT"), ("tag", "STRING")]
    st_ = QueryResults(Q(), 25)       # type: ignore[arg-type]
    for lo in range(0, 100, 10):
        st_.retain(_chunk(lo, lo + 10))
    assert st_.ring_elements == 25 and len(st_.ring) == 3
    assert st_.ring[0].first_ts == 75 and st_.ring[-1].last_ts == 99
    got = [e.ts for c in st_.ring for e in c.elements()]
    assert got == list(range(75, 100))


# ---------------------------------------------------------------- through the runtime


def test_fast_columnar_body_through_runtime_archive_and_ndjson(tmp_path) -> None:
    """A fast-path body goes through validation, the archive, the engine and the NDJSON encoder like any
    other; a bad value in a fast-path column is refused with the same message and index as the plain path."""
    n = 300
    k = [(i * 7) % 100 for i in range(n)]
    v = [float(i % 50) - 10.0 for i in range(n)]
    tag = [f"t{i % 5}" for i in range(n)]
    body = msgpack.packb({"ts": list(range(10**12, 10**12 + n)), "cols": {"k": k, "v": v, "tag": tag}})
    assert isinstance(mc.columnar_fast(body)["cols"]["k"], np.ndarray)

    async def main():
        rt = Runtime({"data_dir": str(tmp_path / "data"), "archive.fsync": "never"})
        await rt.start()
        try:
            rt.execute("REGISTER STREAM s (k INT, v FLOAT, tag STRING)")
            q = rt.execute("SELECT * FROM s WHERE v >= 0")[0]
            sub = rt.subscribe(q.id)
            assert await rt.ingest_decoded("s", decode_input(body, "application/msgpack"), nbytes=len(body)) == n
            bad = msgpack.packb({"cols": {"k": k[:3], "v": v[:3], "tag": [1, 2, 3]}})
            with pytest.raises(InputError) as e:
                await rt.ingest_decoded("s", decode_input(bad, "application/msgpack"))
            assert "column 'tag'" in str(e.value) and e.value.index == 0
            bad = msgpack.packb({"cols": {"k": [1, 2, 3.5], "v": v[:3], "tag": tag[:3]}})
            with pytest.raises(InputError) as e:
                await rt.ingest_decoded("s", decode_input(bad, "application/msgpack"))
            assert "column 'k'" in str(e.value) and e.value.index == 2
            for _ in range(1000):
                await asyncio.sleep(0)
                if sum(len(c) for c in sub.items if isinstance(c, ResultChunk)) >= sum(x >= 0 for x in v):
                    break
            text = b"".join(c.encode(ENCODERS["ndjson"]) for c in sub.take() if isinstance(c, ResultChunk))
        finally:
            await rt.stop()
        want = [{"ts": 10**12 + i, "sign": 1, "row": {"k": k[i], "v": v[i], "tag": tag[i]}}
                for i in range(n) if v[i] >= 0]
        assert [json.loads(line) for line in text.splitlines()] == want
        with Archive(tmp_path / "data", read_only=True) as ar:
            recs = list(ar.read("s"))
        assert len(recs) == 1 and recs[0].cols["k"].tolist() == k and recs[0].cols["tag"].tolist() == tag
        assert recs[0].cols["v"].tolist() == v and recs[0].ts.tolist() == list(range(10**12, 10**12 + n))

    asyncio.run(main())
