"""Torn tails (SPEC section 9): a last frame cut anywhere is detected on open and truncated in write mode;
everything before it survives and appending afterwards works. A whole last frame that is damaged is not a
torn tail: it is skipped or repaired, never cut (issue 18; tests/faults/test_archive_bitflips.py flips
every byte)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from dsms.archive import Archive, Record

N = 6


def write_frame(a: Archive, i: int) -> None:
    if i % 3 == 2:
        a.append_heartbeat("S", 10 * i + 9)
    else:
        a.append_batch("S", [10 * i, 10 * i + 1], [1, -1],
                       {"a": [i, -i], "f": [i / 3, 0.25], "s": [f"row{i}", "é" * i], "b": [True, i % 2 == 0]})


def as_plain(rec: Record) -> tuple:
    if rec.is_heartbeat:
        return ("hb", rec.seq, rec.ts)
    return ("batch", rec.seq, tuple(rec.rows()))


def fresh_records(n: int) -> list[Record]:
    """The first n frames as a clean archive holds them: what recovery must leave behind."""
    import tempfile

    with tempfile.TemporaryDirectory() as d, Archive(d, fsync="never") as a:
        for i in range(n):
            write_frame(a, i)
        return list(a.read("S"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """An archive of N frames in one segment (last one a batch); returns (data dir, start of the last frame,
    file size)."""
    d = tmp_path_factory.mktemp("pristine")
    with Archive(d, fsync="never") as a:
        for i in range(N - 1):
            write_frame(a, i)
        last_start = a.ranges()["S"].bytes
        write_frame(a, N - 1 if (N - 1) % 3 != 2 else N)  # make sure the last frame is a batch
        end = a.ranges()["S"].bytes
    assert end - last_start > 40
    return d, last_start, end


def segment(d: Path) -> Path:
    (seg,) = sorted((d / "archive" / "S").glob("*.seg"))
    return seg


def check_recovers(d: Path, last_start: int, torn: int) -> None:
    before = [as_plain(r) for r in fresh_records(N - 1)]
    with Archive(d, fsync="never") as a:
        assert len(a.recovery) == 1
        rec = a.recovery[0]
        assert rec.input == "S" and rec.offset == last_start and rec.torn_bytes == torn and rec.truncated
        assert a.truncated_bytes == torn
        assert segment(d).stat().st_size == last_start
        assert [as_plain(r) for r in a.read("S")] == before
        assert a.ranges()["S"].frames == N - 1
        assert a.append_heartbeat("S", 1000) == N - 1  # appending afterwards works, numbering continues
    with Archive(d, fsync="never") as a:
        assert a.recovery == []
        got = [as_plain(r) for r in a.read("S")]
        assert got == before + [("hb", N - 1, 1000)]


def test_cut_at_every_byte_inside_the_last_frame(pristine: tuple[Path, int, int], tmp_path: Path) -> None:
    src, last_start, end = pristine
    data = segment(src).read_bytes()
    assert len(data) == end
    for cut in range(last_start + 1, end):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(src, d)
        segment(d).write_bytes(data[:cut])
        check_recovers(d, last_start, cut - last_start)


@pytest.mark.parametrize("where", ["crc0", "crc1", "crc2", "crc3", "payload_first", "payload_last", "len_small",
                                   "len_huge"])
def test_damaged_whole_last_frame_is_skipped_or_repaired_never_cut(pristine: tuple[Path, int, int], tmp_path: Path,
                                                                   where: str) -> None:
    """A whole last frame with a bad checksum or length is not a torn tail (issue 18): its bytes were all
    written, so it was acknowledged. A damaged length is repaired (the CRC proves it was the only damage);
    any other damage loses that frame, which keeps its sequence number, its bytes and a quarantine copy."""
    src, last_start, end = pristine
    with Archive(src, read_only=True) as a:
        everything = [as_plain(r) for r in a.read("S")]
    d = tmp_path / "d"
    shutil.copytree(src, d)
    data = bytearray(segment(d).read_bytes())
    pos = {"crc0": last_start + 4, "crc1": last_start + 5, "crc2": last_start + 6, "crc3": last_start + 7,
           "payload_first": last_start + 8, "payload_last": end - 1,
           "len_small": last_start, "len_huge": last_start + 3}[where]
    if where == "len_small":
        data[pos] = (data[pos] - 1) % 256 or 1
    elif where == "len_huge":
        data[pos] = 0x7F
    else:
        data[pos] ^= 0x40
    segment(d).write_bytes(bytes(data))
    repaired = where.startswith("len")
    expected = everything if repaired else everything[:-1]
    for _ in range(2):
        with Archive(d, fsync="never") as a:
            assert a.recovery == [] and segment(d).stat().st_size >= end
            assert [as_plain(r) for r in a.read("S")][:len(expected)] == expected
            (lost,) = a.damage
            assert (lost.offset, lost.first_seq, lost.repaired) == (last_start, N - 1, repaired)
            assert lost.frames == (0 if repaired else 1)
            if not repaired:
                assert lost.quarantine.read_bytes() == bytes(data[last_start:end])
            if segment(d).stat().st_size == end:
                assert a.append_heartbeat("S", 1000) == N      # numbering continues after the damaged frame
    with Archive(d, fsync="never") as a:
        assert [as_plain(r) for r in a.read("S")] == expected + [("hb", N, 1000)]


def test_zero_filled_tail(pristine: tuple[Path, int, int], tmp_path: Path) -> None:
    """After a machine crash some filesystems leave the file extended with zeros; crc32(b"") == 0, so a zero
    header must not pass as an empty frame."""
    src, last_start, end = pristine
    d = tmp_path / "d"
    shutil.copytree(src, d)
    data = segment(d).read_bytes()
    segment(d).write_bytes(data[:last_start] + bytes(end - last_start))
    check_recovers(d, last_start, end - last_start)
    d2 = tmp_path / "d2"
    shutil.copytree(src, d2)
    segment(d2).write_bytes(data + bytes(3))  # a few zeros after whole frames: short header
    with Archive(d2) as a:
        assert a.recovery[0].torn_bytes == 3 and a.ranges()["S"].frames == N


def test_read_only_reports_but_does_not_cut(pristine: tuple[Path, int, int], tmp_path: Path) -> None:
    src, last_start, end = pristine
    d = tmp_path / "d"
    shutil.copytree(src, d)
    segment(d).write_bytes(segment(d).read_bytes()[: end - 5])
    with Archive(d, read_only=True) as a:
        assert [(r.torn_bytes, r.truncated) for r in a.recovery] == [(end - 5 - last_start, False)]
        assert len(list(a.read("S"))) == N - 1
    assert segment(d).stat().st_size == end - 5


def test_torn_tail_in_the_last_of_several_segments(tmp_path: Path) -> None:
    with Archive(tmp_path, segment_bytes=200, fsync="never") as a:
        for i in range(30):
            a.append_batch("S", [i], None, {"v": np.array([i])})
        segs = a.segments("S")
    assert len(segs) > 2
    last = segs[-1].path
    last.write_bytes(last.read_bytes()[:-3])
    with Archive(tmp_path, segment_bytes=200, fsync="never") as a:
        assert [(r.segment, r.truncated) for r in a.recovery] == [(last, True)]
        assert [int(r.ts[0]) for r in a.read("S")] == list(range(29))
        assert a.append_batch("S", [29], None, {"v": [29]}) == 29
        assert [int(r.ts[0]) for r in a.read("S")] == list(range(30))


def test_torn_earlier_segment_is_left_alone(tmp_path: Path) -> None:
    """Only the segment being written can be torn by a process crash; a torn earlier one (a machine crash with
    fsync never) is reported and read up to the damage, and its bytes are kept for inspection."""
    with Archive(tmp_path, segment_bytes=200, fsync="never") as a:
        for i in range(30):
            a.append_batch("S", [i], None, {"v": [i]})
        segs = a.segments("S")
    first = segs[0].path
    first.write_bytes(first.read_bytes()[:-1])
    with Archive(tmp_path, segment_bytes=200, fsync="never") as a:
        frame = segs[0].size // segs[0].frames  # all frames here have the same size
        assert [(r.segment, r.torn_bytes, r.truncated) for r in a.recovery] == [(first, frame - 1, False)]
        got = [int(r.ts[0]) for r in a.read("S")]
        assert got == [i for i in range(30) if i != segs[0].frames - 1]
        assert [r.seq for r in a.read("S")][segs[0].frames - 1] == segs[1].first_seq  # numbering from the names
        a.append_heartbeat("S", 99)
    assert first.stat().st_size == segs[0].size - 1
