"""One segment file of the input archive (SPEC section 9): a run of frames, recovered to its last whole frame.

A segment is ``<data_dir>/archive/<input>/<first_seq:020d>.seg``: frames as :mod:`dsms.archive.frames`
describes, nothing else (no file header, so a crash can never leave a half-written header behind). The name
records the sequence number of its first frame; frame *i* of the file has sequence number ``first_seq + i``.

Opening a segment scans it once, checking every CRC, to count its frames and learn the smallest and largest
timestamp it holds (the archive's in-memory index). Damage inside the segment is skipped by resynchronising on
the next valid frame (:mod:`dsms.archive.damage`) and recorded in :attr:`Segment.damage`, which readers use to
step over the same bytes and to keep sequence numbers stable. Opened for writing, a segment whose tail is torn
(an incomplete last frame, and nothing else) is truncated to its last whole frame, and
:attr:`Segment.truncated_bytes` says how many bytes were cut.

Appends go straight to the file descriptor with ``os.write`` (no user-space buffer): once ``append`` returns the
bytes are in the kernel, so a process crash (``kill -9``) loses nothing that was acknowledged; only a machine
crash needs the fsync that the archive's fsync mode decides.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dsms.archive.damage import Damage, scan
from dsms.archive.frames import HEADER, RawFrame, ScanEnd, iter_frames, payload_ts_range, unpack_payload

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".seg"
SEGMENT_RE = re.compile(r"^(\d{20})\.seg$")
_READ_BUFFER = 1 << 20


def segment_name(first_seq: int) -> str:
    """The file name of the segment whose first frame has sequence number ``first_seq``."""
    return f"{first_seq:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The first sequence number a segment file name records, or None for any other file."""
    m = SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def fsync_dir(path: Path) -> None:
    """fsync a directory, so that a file created or removed in it survives a machine crash (POSIX leaves the
    directory entry volatile until then)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class SegmentInfo:
    """An immutable snapshot of one segment's index entry. Readers work from snapshots so that a concurrent
    append (which only grows the file past ``size``) or roll never changes what they see mid-read."""

    path: Path
    first_seq: int
    frames: int
    size: int
    min_ts: int | None
    max_ts: int | None
    lost: int = 0
    damage: tuple[Damage, ...] = field(default=(), repr=False)

    @property
    def next_seq(self) -> int:
        """Valid frames and lost ones both hold a sequence number."""
        return self.first_seq + self.frames + self.lost

    def overlaps(self, from_ts: int | None, to_ts: int | None) -> bool:
        """Whether any frame of the segment may hold a timestamp in ``[from_ts, to_ts)``. A segment without
        timestamps (only empty batches, or no frames) never does unless the range is unbounded."""
        if from_ts is None and to_ts is None:
            return True
        if self.min_ts is None or self.max_ts is None:
            return False
        if from_ts is not None and self.max_ts < from_ts:
            return False
        return not (to_ts is not None and self.min_ts >= to_ts)


def read_frames(info: SegmentInfo) -> Iterator[tuple[int, RawFrame]]:
    """``(seq, frame)`` for every whole frame of a segment snapshot, in file order, stepping over the damaged
    regions the open found (a lost frame still takes its sequence number; a repaired one is read with its
    true length) and stopping at a torn tail (which only a concurrent writer in another process, or a
    corrupt file, can leave inside ``info.size``). A segment deleted by retention after the snapshot was
    taken reads as empty."""
    try:
        f = open(info.path, "rb", buffering=_READ_BUFFER)  # closed in the finally below
    except FileNotFoundError:
        return
    damage = {d.offset: d for d in info.damage}
    seq, pos = info.first_seq, 0
    try:
        while pos < info.size:
            d = damage.get(pos)
            if d is not None:
                if d.tail:
                    return
                if d.repaired:
                    f.seek(pos + HEADER.size)
                    yield seq, RawFrame(pos, f.read(d.end - pos - HEADER.size))
                    seq += 1
                else:
                    seq += d.frames_lost
                pos = d.end
                continue
            end = ScanEnd()
            stop = None
            for frame in iter_frames(f, info.size, end, pos):
                if frame.offset in damage:             # checksummed but undecodable: damaged all the same
                    stop = frame.offset
                    break
                yield seq, frame
                seq += 1
            if stop is not None:
                pos = stop
            elif end.reason is not None and end.valid_end not in damage:
                log.warning("archive segment %s: stopped reading at offset %d: %s", info.path, end.valid_end,
                            end.reason)
                return
            else:
                pos = end.valid_end
    finally:
        f.close()


@dataclass(frozen=True)
class DamageFound:
    """One damaged region of a segment with its place in the input: the sequence number of its first frame
    and the timestamps of the valid frames on either side (None where there is none in the segment)."""

    damage: Damage
    seq: int
    after_ts: int | None
    before_ts: int | None


class Segment:
    """One segment file and its index entry; holds an open descriptor only while it is the segment being
    written (the last one of its input)."""

    def __init__(self, path: Path, first_seq: int) -> None:
        self.path = Path(path)
        self.first_seq = first_seq
        self.frames = 0
        self.size = 0
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.truncated_bytes = 0
        self.torn_reason: str | None = None
        self.damage: list[Damage] = []
        self.found: list[DamageFound] = []
        self.lost = 0
        self.dirty = False
        self._fd: int | None = None

    # -- opening ---------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str, *, write: bool = False, fsync: bool = True,
             keep: Callable[[int, bytes], object] | None = None) -> Segment:
        """Scan an existing segment, skipping damaged regions (recorded in :attr:`damage`; ``keep(offset,
        bytes)`` is called with each one's bytes before anything is cut, to quarantine them). With ``write``,
        cut a torn tail off (recording how many bytes in :attr:`truncated_bytes`) and keep a descriptor open
        for appends; with ``fsync``, make the cut durable before any new frame goes after it, or a crash could
        resurrect the torn bytes between old and new data. Without ``write`` nothing is modified: a torn tail
        is only reported in :attr:`torn_reason`."""
        path = Path(path)
        first_seq = parse_segment_name(path.name)
        if first_seq is None:
            raise ValueError(f"{path.name!r} is not a segment file name (<first_seq:020d>{SEGMENT_SUFFIX})")
        seg = cls(path, first_seq)
        file_size = path.stat().st_size
        valid_end = file_size
        with open(path, "rb") as f, (mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if file_size
                                     else _Empty()) as buf:
            last_ts: int | None = None
            open_found: list[int] = []                   # regions still waiting for the next frame's ts
            for item in scan(buf, file_size, lambda p: payload_ts_range(unpack_payload(p))):
                if isinstance(item, Damage):
                    if not item.repaired and keep is not None and item.end > item.offset:
                        keep(item.offset, bytes(buf[item.offset:item.end]))
                    if item.tail:
                        seg.torn_reason, valid_end = item.reason, item.offset
                    seg.damage.append(item)
                    seg.found.append(DamageFound(item, seg.next_seq, last_ts, None))
                    open_found.append(len(seg.found) - 1)
                    seg.lost += item.frames_lost
                    continue
                frame, (lo, hi) = item
                for i in open_found:
                    seg.found[i] = DamageFound(seg.found[i].damage, seg.found[i].seq, seg.found[i].after_ts, lo)
                open_found = []
                seg._note(frame.size, lo, hi)
                if hi is not None:
                    last_ts = hi
        seg.size = valid_end                             # damaged bytes stay in the file and count in its size
        if seg.torn_reason is not None and write:
            seg.truncated_bytes = file_size - valid_end
            log.warning("archive segment %s: torn tail (%s) at offset %d; truncating %d bytes", path,
                        seg.torn_reason, valid_end, seg.truncated_bytes)
            os.truncate(path, valid_end)
            seg.damage = [d for d in seg.damage if not d.tail]      # cut: appends may follow at valid_end
        if write:
            seg._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            if seg.truncated_bytes and fsync:
                os.fsync(seg._fd)
        return seg

    @classmethod
    def create(cls, directory: Path, first_seq: int, *, fsync: bool = True) -> Segment:
        """Create a new, empty segment for appending. ``O_EXCL``: a segment name is never reused, so finding the
        file already there means two writers or a bug, and must not silently append to someone else's data.
        With ``fsync`` the directory entry is made durable at once, so that frames fsynced later cannot end up
        in a file a crash forgets."""
        path = Path(directory) / segment_name(first_seq)
        seg = cls(path, first_seq)
        seg._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        if fsync:
            fsync_dir(path.parent)
        return seg

    # -- writing ---------------------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._fd is not None

    @property
    def next_seq(self) -> int:
        """Valid frames and lost ones both hold a sequence number."""
        return self.first_seq + self.frames + self.lost

    def _note(self, nbytes: int, lo: int | None, hi: int | None) -> None:
        self.frames += 1
        self.size += nbytes
        if lo is not None and (self.min_ts is None or lo < self.min_ts):
            self.min_ts = lo
        if hi is not None and (self.max_ts is None or hi > self.max_ts):
            self.max_ts = hi

    def append(self, frame: bytes, min_ts: int | None, max_ts: int | None, *, fsync: bool = False) -> int:
        """Write one encoded frame (and with ``fsync``, make it durable) and return its sequence number.

        The index is updated only once the frame is whole (and synced, if asked). If ``os.write`` fails part-way
        (disk full) or the fsync fails, the bytes are cut off again: the file still ends on a frame boundary, so
        the next append does not land after garbage, and a frame whose append raised is not in the archive."""
        if self._fd is None:
            raise OSError(errno.EBADF, f"segment {self.path} is not open for writing")
        view = memoryview(frame)
        written = 0
        try:
            while written < len(frame):
                written += os.write(self._fd, view[written:])
            if fsync:
                os.fsync(self._fd)
        except BaseException:
            # cut back to the last whole frame even when no write reported bytes: cheap, and only on this path
            try:
                os.ftruncate(self._fd, self.size)
            except OSError:
                log.exception("archive segment %s: could not cut a partial frame after a failed write",
                              self.path)
            raise
        seq = self.next_seq
        self._note(len(frame), min_ts, max_ts)
        self.dirty = not fsync  # an fsync covers every earlier write to the file too
        return seq

    def dup_fd(self) -> int:
        """A duplicate descriptor, so a group commit can fsync outside the archive's lock even if the segment
        is rolled and closed meanwhile."""
        if self._fd is None:
            raise OSError(errno.EBADF, f"segment {self.path} is not open for writing")
        return os.dup(self._fd)

    def sync(self) -> None:
        """fsync the segment if it holds unsynced frames."""
        if self._fd is not None and self.dirty:
            os.fsync(self._fd)
            self.dirty = False

    def close(self, *, fsync: bool = True) -> None:
        """Stop writing (optionally fsyncing what is still dirty); the index entry stays usable."""
        if self._fd is None:
            return
        try:
            if fsync:
                self.sync()
        finally:
            os.close(self._fd)
            self._fd = None

    # -- reading ---------------------------------------------------------------------------------------------

    def info(self) -> SegmentInfo:
        return SegmentInfo(self.path, self.first_seq, self.frames, self.size, self.min_ts, self.max_ts,
                           self.lost, tuple(self.damage))

    def __repr__(self) -> str:
        return (f"Segment({self.path.name}, frames={self.frames}, bytes={self.size}, "
                f"ts=[{self.min_ts}, {self.max_ts}], writable={self.writable})")


class _Empty(bytes):
    """An empty segment's buffer (mmap refuses a zero-length file), usable in a ``with``."""

    def __enter__(self) -> _Empty:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
