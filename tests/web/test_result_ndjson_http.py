"""The NDJSON a real server writes for results, byte for byte, against the form docs/http-api.md documents:
``{"ts":7,"sign":1,"row":{...}}`` a line, compact, ASCII-escaped, floats at full precision (what Python's
``repr`` writes: the shortest text that reads back as the same double), non-finite floats as the strings
"NaN", "Infinity", "-Infinity", and with ``?ts=iso`` the element's timestamp as ISO 8601 text.

The batches go in as columnar msgpack (the ingest fast path) and are large enough that every shortcut of the
column-wise encoder (``dsms/formats/json_codec.py``) is taken on the way out: small integers and booleans
from tables with the next constant joined in, whole floats through the integer path, other numbers by
orjson's writer split at the commas, strings that need no escaping written as they are, runs of equal
timestamps written once per run. The reference is one ``json.dumps`` per element, built here from the values
sent. (The data model has no NULL, docs/cql.md; ``None`` in result columns is covered in-process by
tests/web/test_result_encoding.py.)"""

from __future__ import annotations

import datetime as dt
import json
import math
import random

import msgpack
from httpkit import wait_for

N = 3000
SPOIL = ['"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "日本", "\U0001f600", "</x>"]


def _documented(ts: int, row: dict, iso: bool) -> str:
    def value(v: object) -> object:
        if isinstance(v, float) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return v

    if iso:
        d = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts)
        t: object = d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ts % 1000:03d}" if ts % 1000 else "") + "Z"
    else:
        t = ts
    el = {"ts": t, "sign": 1, "row": {k: value(v) for k, v in row.items()}}
    return json.dumps(el, separators=(",", ":"), ensure_ascii=True, allow_nan=False) + "\n"


def _batch(rng: random.Random, t0: int, n: int) -> tuple[list[int], dict[str, list]]:
    ts = [t0 + i // 10 for i in range(n)]            # runs of 10 equal timestamps
    cols = {
        "small": [rng.randrange(100) for _ in range(n)],
        "big": [rng.choice([-1, 1]) * rng.randrange(2**63) for _ in range(n)],
        "whole": [float(rng.randrange(1000)) for _ in range(n)],
        "full": [rng.random() * 10 ** rng.randint(-8, 20) * rng.choice([-1, 1]) for _ in range(n)],
        "flag": [rng.random() < 0.5 for _ in range(n)],
        "plain": ["abcdefgh"[i % 8] * 4 for i in range(n)],
        "text": [f"v{i}" + (rng.choice(SPOIL) if i % 7 == 0 else "") for i in range(n)],
        "at": [1_700_000_000_000 + rng.randrange(10**9) for _ in range(n)],
    }
    for i, v in ((5, math.nan), (6, math.inf), (7, -math.inf), (8, -0.0), (9, 1e16), (10, 1e-5), (11, 5e-324)):
        cols["full"][i] = v
    return ts, cols


def _post_columnar(server, stream: str, ts: list[int], cols: dict) -> None:
    r = server.post(f"/streams/{stream}/elements", body=msgpack.packb({"ts": ts, "cols": cols}),
                    headers={"Content-Type": "application/msgpack"})
    assert r.status == 200, r


def test_results_ndjson_is_the_documented_form_byte_for_byte(server, uniq: str) -> None:
    rng = random.Random(15)
    s = f"{uniq}_s"
    server.cql(f"REGISTER STREAM {s} (small INT, big INT, whole FLOAT, full FLOAT, flag BOOLEAN, plain STRING, "
               f"text STRING, at TIMESTAMP)")
    server.cql(f"REGISTER QUERY {uniq}_all AS SELECT * FROM {s}")
    server.cql(f"REGISTER QUERY {uniq}_some AS SELECT text, full, small FROM {s} WHERE small >= 10")
    sent: list[tuple[int, dict]] = []
    t0 = 1_714_564_800_000
    for n in (N, 40, N):                              # a short batch between two long ones
        ts, cols = _batch(rng, t0, n)
        _post_columnar(server, s, ts, cols)
        sent += [(t, {k: cols[k][i] for k in cols}) for i, t in enumerate(ts)]
        t0 = ts[-1] + 1
    wait_for(lambda: len(server.get(f"/queries/{uniq}_all/results?follow=false").body.splitlines()) >= len(sent),
             what="every result retained")
    for iso in (False, True):
        q = "&ts=iso" if iso else ""
        got = server.get(f"/queries/{uniq}_all/results?follow=false{q}").body
        want = "".join(_documented(t, row, iso) for t, row in sent).encode("ascii")
        assert got == want, _first_difference(got, want)
        got = server.get(f"/queries/{uniq}_some/results?follow=false{q}").body
        want = "".join(_documented(t, {k: row[k] for k in ("text", "full", "small")}, iso)
                       for t, row in sent if row["small"] >= 10).encode("ascii")
        assert got == want, _first_difference(got, want)


def _first_difference(got: bytes, want: bytes) -> str:
    for i, (a, b) in enumerate(zip(got.splitlines(), want.splitlines())):
        if a != b:
            return f"line {i}: got {a!r}, documented {b!r}"
    return f"{len(got.splitlines())} lines, documented {len(want.splitlines())}"
