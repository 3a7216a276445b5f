"""The ingest bench's raw NDJSON reader (``bench/http_ingest.py``: ``Chunks`` decodes HTTP/1.1 chunked transfer
coding, ``Reader`` counts result lines in place): its counts are the bench's end-to-end figure, so they must be
exact however the bytes are cut, by the server's chunks and by the socket's reads. A stream of element lines,
heartbeats and gaps (with their ``missed`` counts) is chunk-encoded in random pieces, cut again at random, and
counted; the reference parses it line by line."""

from __future__ import annotations

import json
import random

import pytest

from bench.http_ingest import Chunks, Reader


def _stream(rng: random.Random, n: int) -> tuple[bytes, int, int]:
    lines = []
    for i in range(n):
        x = rng.random()
        if x < 0.05:
            lines.append(b'{"heartbeat":%d}' % i)
        elif x < 0.08:
            lines.append(json.dumps({"gap": {"missed": rng.randrange(1, 9), "from_ts": 1, "to_ts": 2}}).encode())
        else:
            lines.append(json.dumps({"ts": i, "sign": 1, "row": {"s": "x\n{\"gap\"" * rng.randrange(3)}}).encode())
    elements = missed = 0
    for line in lines:                                   # the reference, one parsed line at a time
        item = json.loads(line)
        elements += "ts" in item
        missed += item.get("gap", {}).get("missed", 0)
    return b"\n".join(lines) + b"\n", elements, missed


@pytest.mark.parametrize("seed", range(5))
def test_reader_counts_every_line_however_the_bytes_are_cut(seed: int) -> None:
    rng = random.Random(seed)
    payload, elements, missed = _stream(rng, 2000)
    pieces, pos = [], 0
    while pos < len(payload):
        k = rng.randrange(1, 600)
        pieces.append(payload[pos:pos + k])
        pos += k
    wire = b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    reader, chunks, tail, pos = Reader(), Chunks(), b"", 0
    while pos < len(wire):
        k = rng.randrange(1, 900)
        data, ranges = chunks.feed(wire[pos:pos + k])
        pos += k
        for lo, hi in ranges:
            tail = reader._arrived(data, tail, lo, hi)
    assert chunks.done and tail == b""
    assert (reader.lines, reader.missed) == (elements, missed)
