"""The input archive (SPEC section 9): round trips, segment roll-over, range reads, retention, name validation,
the writer lock and the fsync modes."""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import numpy as np
import pytest

from dsms.archive import (
    Archive,
    ArchiveError,
    ArchiveLocked,
    ArchiveValueError,
    validate_input_name,
)
from dsms.archive.frames import HEADER, encode_frame


def seg_files(data_dir: Path, name: str) -> list[Path]:
    return sorted((data_dir / "archive" / name).glob("*.seg"))


def test_round_trip_batches_and_heartbeats(tmp_path: Path) -> None:
    ints = np.array([1, -2, 2**62], dtype=np.int64)
    floats = np.array([0.5, -0.0, np.nan])
    strs = ["", "héllo", "x" * 300]
    bools = [True, False, True]
    with Archive(tmp_path) as a:
        s0 = a.append_batch("S", [1, 2, 3], [1, 1, 1], {"i": ints, "f": floats, "s": strs, "b": bools})
        s1 = a.append_heartbeat("S", 10)
        s2 = a.append_batch("R", np.array([4, 4], dtype=np.int32), np.array([1, -1]), {"k": [7, 7]})
        s3 = a.append_batch("S", [11], None, {"i": [5], "f": [1.0], "s": ["z"], "b": [False]})
    assert (s0, s1, s2, s3) == (0, 1, 0, 2)
    with Archive(tmp_path, fsync="never") as a:
        assert a.inputs() == ["R", "S"]
        recs = list(a.read("S"))
        assert [r.kind for r in recs] == ["batch", "hb", "batch"]
        assert [r.seq for r in recs] == [0, 1, 2]
        r = recs[0]
        assert r.ts.dtype == np.int64 and r.ts.tolist() == [1, 2, 3]
        assert r.sign.dtype == np.int8 and r.sign.tolist() == [1, 1, 1]
        assert r.cols["i"].dtype == np.int64 and r.cols["i"].tolist() == ints.tolist()
        assert r.cols["f"].tobytes() == floats.tobytes()  # every bit, -0.0 and NaN included
        assert r.cols["s"].dtype == object and r.cols["s"].tolist() == strs
        assert r.cols["b"].dtype == np.bool_ and r.cols["b"].tolist() == bools
        assert recs[1].ts == 10 and recs[1].sign is None and recs[1].cols == {} and recs[1].is_heartbeat
        assert recs[2].sign.tolist() == [1]  # sign None means inserts
        rel = list(a.read("R"))
        assert rel[0].sign.tolist() == [1, -1] and rel[0].ts.dtype == np.int64
        assert list(rel[0].rows()) == [(4, 1, {"k": 7}), (4, -1, {"k": 7})]
        r.cols["i"][0] = 99  # records are plain writable arrays
        assert list(a.read("nothing_here")) == []


def test_mixed_and_unusual_columns_round_trip(tmp_path: Path) -> None:
    with Archive(tmp_path, fsync="never") as a:
        a.append_batch("S", [1, 2], None, {"mixed": [1, "a"], "none": [None, 3], "u8": np.array([1, 255], np.uint8),
                                          "f32": np.array([1.5, 2.5], np.float32), "big": [2**64 - 1, 0],
                                          "be": np.array([1, 2], dtype=">i4"), "ustr": np.array(["ab", "c"])})
        a.append_batch("S", [], None, {"x": []})
        (r, empty) = list(a.read("S"))
    assert r.cols["mixed"].tolist() == [1, "a"]  # not silently stringified
    assert r.cols["none"].tolist() == [None, 3]
    assert r.cols["u8"].dtype == np.uint8 and r.cols["f32"].dtype == np.float32
    assert r.cols["big"].tolist() == [2**64 - 1, 0]
    assert r.cols["be"].tolist() == [1, 2] and r.cols["be"].dtype == np.dtype("<i4")
    assert r.cols["ustr"].dtype == object and r.cols["ustr"].tolist() == ["ab", "c"]
    assert len(empty) == 0 and empty.cols["x"].tolist() == []


def test_plain_list_payloads_are_readable(tmp_path: Path) -> None:
    """The format allows plain msgpack arrays anywhere (SPEC's `{"k": "batch", "ts": [...]}`), e.g. written by
    another tool; the reader must accept them."""
    d = tmp_path / "archive" / "S"
    d.mkdir(parents=True)
    frames = [msgpack.packb({"k": "batch", "ts": [1, 2], "sign": [1, -1],
                             "cols": {"a": [1, 2], "f": [0.5, 1.0], "s": ["x", "y"], "b": [True, False]}}),
              msgpack.packb({"k": "hb", "ts": 5})]
    (d / f"{0:020d}.seg").write_bytes(b"".join(encode_frame(p) for p in frames))
    with Archive(tmp_path, read_only=True) as a:
        b, hb = list(a.read("S"))
    assert b.ts.dtype == np.int64 and b.sign.dtype == np.int8 and b.sign.tolist() == [1, -1]
    assert b.cols["a"].dtype == np.int64 and b.cols["f"].dtype == np.float64 and b.cols["b"].dtype == np.bool_
    assert b.cols["s"].tolist() == ["x", "y"] and hb.ts == 5


def test_segment_roll_over(tmp_path: Path) -> None:
    with Archive(tmp_path, segment_bytes=1000, fsync="never") as a:
        for i in range(100):
            a.append_batch("S", [i] * 4, None, {"v": np.arange(4) + i})
        frame_size = a.ranges()["S"].bytes // 100
        infos = a.segments("S")
    files = seg_files(tmp_path, "S")
    assert len(files) == len(infos) > 1
    per_seg = 1000 // frame_size
    for i, (f, info) in enumerate(zip(files, infos)):
        assert f.name == f"{info.first_seq:020d}.seg"
        assert f.stat().st_size <= 1000
        assert info.first_seq == i * per_seg
        assert (info.min_ts, info.max_ts) == (info.first_seq, info.first_seq + info.frames - 1)
    with Archive(tmp_path, segment_bytes=1000) as a:
        assert [r.ts[0] for r in a.read("S")] == list(range(100))
        assert a.append_heartbeat("S", 100) == 100  # numbering continues after reopen
        rng = a.ranges()["S"]
        assert (rng.first_ts, rng.last_ts, rng.frames, rng.first_seq, rng.next_seq) == (0, 100, 101, 0, 101)


def test_frame_larger_than_segment_gets_its_own_segment(tmp_path: Path) -> None:
    with Archive(tmp_path, segment_bytes=256, fsync="never") as a:
        a.append_heartbeat("S", 1)
        a.append_batch("S", list(range(100)), None, {"v": list(range(100))})
        a.append_heartbeat("S", 200)
        assert [i.frames for i in a.segments("S")] == [1, 1, 1]
        assert [r.seq for r in a.read("S")] == [0, 1, 2]


def test_range_reads(tmp_path: Path) -> None:
    with Archive(tmp_path, segment_bytes=300, fsync="never") as a:
        for t in range(0, 100, 10):
            a.append_batch("S", [t, t + 5], [1, -1], {"v": [t, t + 5], "s": [str(t), str(t + 5)]})
            a.append_heartbeat("S", t + 9)
        assert len(a.segments("S")) > 3

        def rows(from_ts: int | None, to_ts: int | None) -> list[tuple[int, int, object]]:
            out = []
            for r in a.read("S", from_ts, to_ts):
                if r.is_heartbeat:
                    out.append((r.ts, 0, None))
                else:
                    out.extend((t, s, row["s"]) for t, s, row in r.rows())
            return out

        everything = rows(None, None)
        for lo, hi in [(None, 30), (25, None), (25, 45), (15, 16), (5, 6), (200, 300), (-5, 0), (0, 1), (95, 96)]:
            want = [x for x in everything if (lo is None or x[0] >= lo) and (hi is None or x[0] < hi)]
            assert rows(lo, hi) == want, (lo, hi)
        (r,) = list(a.read("S", 15, 16))
        assert r.ts.tolist() == [15] and r.sign.tolist() == [-1] and r.cols["v"].tolist() == [15]
        # segments outside the range are not even opened: make an early one unreadable and read a late range
        first = a.segments("S")[0]
        os.chmod(first.path, 0)
        try:
            assert rows(80, None) == [x for x in everything if x[0] >= 80]
        finally:
            os.chmod(first.path, 0o644)


def test_range_skips_by_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dsms.archive.archive as mod

    opened: list[str] = []
    real = mod.read_frames

    def spy(info):  # type: ignore[no-untyped-def]
        opened.append(info.path.name)
        return real(info)

    with Archive(tmp_path, segment_bytes=200, fsync="never") as a:
        for t in range(50):
            a.append_batch("S", [t], None, {"v": [t]})
        monkeypatch.setattr(mod, "read_frames", spy)
        got = [int(r.ts[0]) for r in a.read("S", 40, 42)]
        assert got == [40, 41]
        assert len(opened) <= 2 < len(a.segments("S"))


def test_retention(tmp_path: Path) -> None:
    with Archive(tmp_path, segment_bytes=200, fsync="never", retention_ms=20) as a:
        for t in range(100):
            a.append_batch("S", [t], None, {"v": [t]})
        a.append_heartbeat("H", 5)
        before = a.segments("S")
        deleted = a.enforce_retention(100)
        after = a.segments("S")
        assert deleted and all(not p.exists() for p in deleted)
        assert all(i.max_ts >= 80 for i in after)
        assert all(i.max_ts < 80 for i in before if i not in after)
        assert a.segments("H")  # the segment being written is never deleted, however old
        remaining = [int(r.ts[0]) for r in a.read("S")]
        assert remaining == list(range(after[0].first_seq, 100))
        assert a.ranges()["S"].first_seq == after[0].first_seq
        assert a.append_heartbeat("S", 100) == 100  # numbering is not disturbed
        # now_ts=None: application time = the largest timestamp archived; everything but the last segment goes
        a.retention_ms = 0
        a.enforce_retention()
        assert len(a.segments("S")) == 1
    with Archive(tmp_path, retention_ms=None) as a:
        assert a.enforce_retention(10**9) == []
        with pytest.raises(ValueError, match="retention_ms"):
            a.retention_ms = -1


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".", "..", ".hidden", "a b", "a\x00b", "é", "a-b", "x" * 201,
                                 "a\\b", "/abs"])
def test_name_validation(tmp_path: Path, bad: str) -> None:
    with Archive(tmp_path) as a:
        with pytest.raises(ValueError, match="input name"):
            a.append_heartbeat(bad, 1)
        with pytest.raises(ValueError, match="input name"):
            a.append_batch(bad, [1], None, {})
        with pytest.raises(ValueError, match="input name"):
            list(a.read(bad))
    with pytest.raises(ArchiveValueError):
        validate_input_name(bad)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name != ".lock") == ["archive"]


def test_name_validation_messages() -> None:
    with pytest.raises(ValueError, match="empty"):
        validate_input_name("")
    with pytest.raises(ValueError, match="'/'"):
        validate_input_name("a/b")
    with pytest.raises(ValueError, match="must be a str"):
        validate_input_name(3)
    assert validate_input_name("Sensor_01") == "Sensor_01"


def test_bad_batches_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    with Archive(tmp_path) as a:
        with pytest.raises(ValueError, match="sign"):
            a.append_batch("S", [1, 2], [1, 0], {})
        with pytest.raises(ValueError, match="sign"):
            a.append_batch("S", [1, 2], [1], {})
        with pytest.raises(ValueError, match="column 'a'"):
            a.append_batch("S", [1, 2], None, {"a": [1]})
        with pytest.raises(ValueError, match="ts"):
            a.append_batch("S", [1.5], None, {})
        with pytest.raises(ValueError, match="column 'a'"):
            a.append_batch("S", [1], None, {"a": "x"})
        with pytest.raises(ValueError, match="heartbeat"):
            a.append_heartbeat("S", 1.0)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="heartbeat"):
            a.append_heartbeat("S", True)
        assert list(a.read("S")) == []
        a.append_heartbeat("S", 1)
        assert [r.seq for r in a.read("S")] == [0]


def test_fsync_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    with Archive(tmp_path / "always", fsync="always") as a:
        a.append_heartbeat("S", 1)
        n = len(calls)
        a.append_heartbeat("S", 2)
        assert len(calls) == n + 1  # one fsync per append
        assert a.stats()["unsynced_appends"] == 0
    with Archive(tmp_path / "group", fsync="group") as a:
        a.append_heartbeat("S", 1)
        n = len(calls)
        for t in range(10):
            a.append_heartbeat("S", t)
        assert len(calls) == n and a.stats()["unsynced_appends"] == 11
        assert a.sync() == 11
        assert len(calls) == n + 1 and a.stats()["unsynced_appends"] == 0
        assert a.sync() == 0 and len(calls) == n + 1  # nothing dirty, nothing to do
        a.append_heartbeat("T", 1)
        a.append_heartbeat("S", 99)
        n = len(calls)
        a.flush()
        assert len(calls) == n + 2  # one per dirty segment
        a.append_heartbeat("S", 100)
        n = len(calls)
        a.fsync = "always"  # tightening the promise syncs what the old mode left
        assert len(calls) == n + 1
    with Archive(tmp_path / "never", fsync="never") as a:
        n = len(calls)
        for t in range(10):
            a.append_heartbeat("S", t)
    assert len(calls) == n  # not even at close
    with pytest.raises(ValueError, match="fsync"):
        Archive(tmp_path / "x", fsync="sometimes")  # type: ignore[arg-type]


def test_sync_from_another_thread_while_appending(tmp_path: Path) -> None:
    import threading

    with Archive(tmp_path, fsync="group", segment_bytes=4096) as a:
        stop = threading.Event()
        synced = [0]

        def committer() -> None:
            while not stop.is_set():
                synced[0] += a.sync()

        t = threading.Thread(target=committer)
        t.start()
        try:
            for i in range(3000):
                a.append_batch("S", [i], None, {"v": [i]})
        finally:
            stop.set()
            t.join()
        synced[0] += a.sync()
        assert synced[0] == 3000
        assert [int(r.ts[0]) for r in a.read("S")] == list(range(3000))


def test_writer_lock(tmp_path: Path) -> None:
    with Archive(tmp_path) as a:
        a.append_heartbeat("S", 1)
        with pytest.raises(ArchiveLocked, match="already open for writing"):
            Archive(tmp_path)
        with Archive(tmp_path, read_only=True) as r:  # readers need no lock
            assert [x.ts for x in r.read("S")] == [1]
            with pytest.raises(ArchiveError, match="read-only"):
                r.append_heartbeat("S", 2)
    with Archive(tmp_path) as a:  # released on close
        a.append_heartbeat("S", 2)


def test_closed_archive(tmp_path: Path) -> None:
    a = Archive(tmp_path)
    a.append_heartbeat("S", 1)
    a.close()
    a.close()
    assert a.closed
    with pytest.raises(ArchiveError, match="closed"):
        a.append_heartbeat("S", 2)
    assert [r.ts for r in a.read("S")] == [1]


def test_read_only_of_missing_dir_is_empty(tmp_path: Path) -> None:
    with Archive(tmp_path / "nope", read_only=True) as a:
        assert a.inputs() == [] and a.ranges() == {}
    assert not (tmp_path / "nope").exists()


def test_reader_snapshot_ignores_later_appends(tmp_path: Path) -> None:
    with Archive(tmp_path, fsync="never") as a:
        a.append_heartbeat("S", 1)
        it = a.read("S")
        a.append_heartbeat("S", 2)
        assert [r.ts for r in it] == [1]


def test_checksummed_garbage_is_reported_not_truncated(tmp_path: Path) -> None:
    """A whole frame whose CRC is right but whose payload does not decode was not torn by a crash: it is
    skipped and reported as one lost frame (issue 18), kept in the file and in quarantine, never cut."""
    d = tmp_path / "archive" / "S"
    d.mkdir(parents=True)
    seg = d / f"{0:020d}.seg"
    bad = encode_frame(b"\xc1")
    seg.write_bytes(encode_frame(msgpack.packb({"k": "hb", "ts": 1})) + bad)
    size = seg.stat().st_size
    for read_only in (True, False):
        with Archive(tmp_path, read_only=read_only) as a:
            assert [r.ts for r in a.read("S")] == [1]
            (lost,) = a.damage
            assert (lost.offset, lost.first_seq, lost.frames, lost.after_ts) == (18, 1, 1, 1)
            assert "does not decode" in lost.reason
            assert (lost.quarantine is None) == read_only
            assert a.recovery == [] and a.ranges()["S"].next_seq == 2
        assert seg.stat().st_size == size
    assert lost.quarantine.read_bytes() == bad
    seg.write_bytes(encode_frame(msgpack.packb({"k": "wat", "ts": 1})))
    with Archive(tmp_path) as a:
        assert list(a.read("S")) == [] and "unknown frame kind" in a.damage[0].reason


def test_frame_layout(tmp_path: Path) -> None:
    """The on-disk bytes are what docs/archive.md says: u32le length, u32le crc32, msgpack map."""
    import zlib

    with Archive(tmp_path) as a:
        a.append_heartbeat("S", 42)
    raw = seg_files(tmp_path, "S")[0].read_bytes()
    length, crc = HEADER.unpack(raw[:8])
    payload = raw[8:]
    assert length == len(payload) and crc == zlib.crc32(payload)
    assert msgpack.unpackb(payload) == {"k": "hb", "ts": 42}


def test_failed_fsync_or_write_leaves_no_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append that raises is not in the archive (the request was refused), and the file still ends on a frame
    boundary so later appends are readable."""
    import dsms.archive.segment as segmod

    with Archive(tmp_path, fsync="always") as a:
        a.append_heartbeat("S", 1)
        real_fsync, real_write = os.fsync, os.write

        def failing_fsync(fd: int) -> None:
            raise OSError(5, "EIO")

        monkeypatch.setattr(segmod.os, "fsync", failing_fsync)
        with pytest.raises(OSError, match="EIO"):
            a.append_batch("S", [2], None, {"v": [2]})
        monkeypatch.setattr(segmod.os, "fsync", real_fsync)

        calls = []

        def half_write(fd: int, data: bytes) -> int:  # the disk fills up in the middle of the frame
            calls.append(len(data))
            if len(calls) == 1:
                return real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(28, "ENOSPC")

        monkeypatch.setattr(segmod.os, "write", half_write)
        with pytest.raises(OSError, match="ENOSPC"):
            a.append_batch("S", [3], None, {"v": [3]})
        monkeypatch.setattr(segmod.os, "write", real_write)
        assert len(calls) == 2
        assert a.append_heartbeat("S", 4) == 1
        assert [(r.seq, r.ts) for r in a.read("S")] == [(0, 1), (1, 4)]
    with Archive(tmp_path) as a:
        assert a.recovery == []
        assert [(r.seq, r.ts) for r in a.read("S")] == [(0, 1), (1, 4)]
