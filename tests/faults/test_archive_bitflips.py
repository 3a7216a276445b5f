"""Fault injection: one flipped bit at every byte position of an archive segment (issue 18 item 4).

What is injected: a single-bit flip (the bit varies with the position) at each byte of a small segment, in
the last segment of the input (the one being written) and in an earlier one, then the archive is opened for
writing, read, appended to and opened again. What must hold: every frame other than the damaged one comes
back with its sequence number and content; the damaged frame is either repaired (a flipped length bit: the
CRC proves it) or reported as exactly one lost frame with its sequence number, its timestamps' bounds and a
quarantine copy of its bytes; nothing is truncated; numbering continues after it. A whole frame overwritten
with zeros in the middle of a segment loses that frame alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from dsms.archive import Archive, Record

FRAMES = 12
SEGMENT_BYTES = 700


def write_frame(a: Archive, i: int) -> None:
    if i % 4 == 3:
        a.append_heartbeat("S", 10 * i + 9)
    else:
        a.append_batch("S", [10 * i, 10 * i + 1], [1, -1], {"a": [i, -i], "s": [f"k{i}", "é" * i]})


def plain(rec: Record) -> tuple:
    return ("hb", rec.seq, rec.ts) if rec.is_heartbeat else ("batch", rec.seq, tuple(rec.rows()))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple], list]:
    """An archive of FRAMES frames in two segments; returns (data dir, its records, segment infos)."""
    d = tmp_path_factory.mktemp("pristine")
    with Archive(d, segment_bytes=SEGMENT_BYTES, fsync="never") as a:
        for i in range(FRAMES):
            write_frame(a, i)
        records = [plain(r) for r in a.read("S")]
        segments = a.segments("S")
    assert len(segments) == 2 and all(s.frames >= 4 for s in segments)
    return d, records, segments


def frame_spans(data: bytes) -> list[tuple[int, int]]:
    spans, pos = [], 0
    while pos < len(data):
        end = pos + 8 + int.from_bytes(data[pos:pos + 4], "little")
        spans.append((pos, end))
        pos = end
    return spans


@pytest.mark.parametrize("which", ["earlier", "last"])
def test_a_bit_flipped_anywhere_loses_at_most_its_own_frame(pristine, tmp_path: Path, which: str) -> None:
    src, records, segments = pristine
    info = segments[0 if which == "earlier" else 1]
    rel = info.path.relative_to(src)
    data = info.path.read_bytes()
    spans = frame_spans(data)
    counts = {"repaired": 0, "lost": 0}
    d = _fast_dir(tmp_path) / which
    shutil.copytree(src, d)
    originals = {s.path.relative_to(src): s.path.read_bytes() for s in segments}
    for pos in range(len(data)):
        j = next(k for k, (s, e) in enumerate(spans) if s <= pos < e)
        seq = info.first_seq + j
        start, end = spans[j]
        for r, content in originals.items():          # one directory, restored each round: fast on any disk
            (d / r).write_bytes(content)
        damaged = bytearray(data)
        damaged[pos] ^= 1 << (pos % 8)
        (d / rel).write_bytes(bytes(damaged))
        with Archive(d, segment_bytes=SEGMENT_BYTES, fsync="never") as a:
            got = [plain(r) for r in a.read("S")]
            assert a.recovery == [], pos
            (dmg,) = a.damage
            assert (dmg.input, dmg.segment, dmg.offset, dmg.first_seq) == ("S", d / rel, start, seq), pos
            if dmg.repaired:
                counts["repaired"] += 1
                assert got == records, pos
                assert dmg.frames == 0 and a.stats()["lost_frames"] == 0
            else:
                counts["lost"] += 1
                assert got == records[:seq] + records[seq + 1:], pos
                assert (dmg.end, dmg.frames, a.stats()["lost_frames"]) == (end, 1, 1), pos
                assert dmg.quarantine.read_bytes() == bytes(damaged[start:end]), pos
                dmg.quarantine.unlink()
                before = [t for r in records[:seq] if (t := _ts(r, max)) is not None and r[1] >= info.first_seq]
                after = [t for r in records[seq + 1:] if (t := _ts(r, min)) is not None and r[1] < info.next_seq]
                assert dmg.after_ts == (max(before) if before else None), pos    # the lost elements lie between
                assert dmg.before_ts == (min(after) if after else None), pos
            assert (d / rel).stat().st_size == len(data), pos
            assert a.append_heartbeat("S", 10_000) == FRAMES, pos
        with Archive(d, segment_bytes=SEGMENT_BYTES, fsync="never", read_only=True) as a:
            again = [plain(r) for r in a.read("S")]
            assert again == got + [("hb", FRAMES, 10_000)], pos
    assert counts["lost"] > 0 and counts["repaired"] > 0


def _fast_dir(tmp_path: Path) -> Path:
    """A directory on tmpfs where the machine has one (about 1,400 rounds of open, write and rename each run:
    seconds on a slow disk, a fraction of that in memory); ``tmp_path`` otherwise."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        d = Path(tempfile.mkdtemp(prefix="dsms-bitflips-", dir=shm))
        _CLEANUP.append(d)
        return d
    return tmp_path


_CLEANUP: list[Path] = []


@pytest.fixture(autouse=True)
def _cleanup():
    yield
    while _CLEANUP:
        shutil.rmtree(_CLEANUP.pop(), ignore_errors=True)


def _ts(rec: tuple, pick) -> int | None:
    if rec[0] == "hb":
        return rec[2]
    return pick(t for t, _, _ in rec[2]) if rec[2] else None


def test_a_zeroed_frame_in_the_middle_loses_that_frame_alone(pristine, tmp_path: Path) -> None:
    src, records, segments = pristine
    d = tmp_path / "d"
    shutil.copytree(src, d)
    path = d / segments[1].path.relative_to(src)
    data = path.read_bytes()
    spans = frame_spans(data)
    start, end = spans[2]
    path.write_bytes(data[:start] + bytes(end - start) + data[end:])
    seq = segments[1].first_seq + 2
    with Archive(d, segment_bytes=SEGMENT_BYTES) as a:
        assert [plain(r) for r in a.read("S")] == records[:seq] + records[seq + 1:]
        (dmg,) = a.damage
        assert (dmg.first_seq, dmg.frames, dmg.offset, dmg.end) == (seq, 1, start, end)
        report = a.damage_report()
        assert report[0]["seqs"] == [seq, seq] and report[0]["bytes"] == end - start
        assert a.stats()["damaged_regions"] == 1 and a.stats()["quarantined_bytes"] == end - start


def test_a_deleted_middle_segment_is_reported_with_its_frames(tmp_path: Path) -> None:
    """Retention deletes only at the front, so a segment missing between two others was lost: it is reported
    with the sequence numbers it held and the timestamps around them; the others read as before."""
    with Archive(tmp_path, segment_bytes=SEGMENT_BYTES // 2, fsync="never") as a:
        for i in range(FRAMES):
            write_frame(a, i)
        records = [plain(r) for r in a.read("S")]
        segments = a.segments("S")
    assert len(segments) >= 3
    gone = segments[1]
    gone.path.unlink()
    with Archive(tmp_path, segment_bytes=SEGMENT_BYTES // 2) as a:
        assert [plain(r) for r in a.read("S")] == [r for r in records
                                                   if not gone.first_seq <= r[1] < gone.next_seq]
        (lost,) = a.damage
        assert (lost.first_seq, lost.frames, lost.reason) == (gone.first_seq, gone.frames, "segment file missing")
        assert (lost.after_ts, lost.before_ts) == (segments[0].max_ts, segments[2].min_ts)
        assert a.stats()["lost_frames"] == gone.frames
