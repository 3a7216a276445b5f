"""Fault injection against a real server: one corrupted archive frame in the middle of a segment (issue 18
item 4, the way the review reproduced it: a flipped payload bit in frame k of n).

What is injected: the server archives 9 requests of 50 elements, is stopped, and one byte in the payload of
the 5th frame is flipped; the server is started again on the same data directory. What must hold: the server
starts, replays every other frame (8 x 50 elements, not the 4 x 50 the old torn-tail cut kept), reports the
damage in ``GET /system`` (``runtime.archive``: one damaged region, one lost frame, its sequence number and
the timestamps the lost elements lie between, the quarantined bytes)
and keeps the damaged bytes in the quarantine directory; new input is accepted after it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import Server  # noqa: E402

REQUESTS, ROWS = 9, 50


def frames(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos < len(data):
        end = pos + 8 + int.from_bytes(data[pos:pos + 4], "little")
        out.append((pos, end))
        pos = end
    return out


def test_a_corrupt_middle_frame_loses_that_frame_alone(tmp_path: Path) -> None:
    srv = Server(tmp_path / "data").start()
    try:
        assert srv.post("/cql", body="REGISTER STREAM S (a INT)").status == 200
        for i in range(REQUESTS):
            r = srv.ndjson("S", [{"ts": i * ROWS + k, "row": {"a": i}} for k in range(ROWS)])
            assert r.status in (200, 202), r
    finally:
        assert srv.stop() == 0
    (seg,) = sorted((srv.data_dir / "archive" / "s").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    spans = frames(bytes(data))
    assert len(spans) == REQUESTS
    start, end = spans[4]
    data[(start + 8 + end) // 2] ^= 0x10                    # a flipped bit in the middle of frame 5's payload
    seg.write_bytes(bytes(data))

    srv = Server(tmp_path / "data").start()
    try:
        rt = srv.get("/system").json()["runtime"]
        arch, rec = rt["archive"], rt["recovery"]
        assert (arch["damaged_regions"], arch["lost_frames"], arch["quarantined_bytes"]) == (1, 1, end - start)
        assert rec["elements"] == (REQUESTS - 1) * ROWS and rec["truncated_bytes"] == 0
        (lost,) = arch["damage"]                             # which elements: frame #4, ts 150..200
        assert (lost["input"], lost["seqs"], lost["frames"]) == ("s", [4, 4], 1)
        assert (lost["after_ts"], lost["before_ts"]) == (4 * ROWS - 1, 5 * ROWS)
        (kept,) = (srv.data_dir / "archive" / ".quarantine" / "s").iterdir()
        assert kept.read_bytes() == bytes(data[start:end])
        assert seg.stat().st_size == len(data)               # nothing cut
        r = srv.ndjson("S", [{"ts": REQUESTS * ROWS, "row": {"a": 99}}])
        assert r.status in (200, 202), r
    finally:
        srv.stop()
