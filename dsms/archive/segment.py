"""One segment file of the input archive (SPEC section 9): a run of frames, recovered to its last whole frame.

A segment is ``<data_dir>/archive/<input>/<first_seq:020d>.seg``: frames as :mod:`dsms.archive.frames`
describes, nothing else (no file header, so a crash can never leave a half-written header behind). The name
records the sequence number of its first frame; frame *i* of the file has sequence number ``first_seq + i``.

Opening a segment scans it once, checking every CRC, to count its frames and learn the smallest and largest
timestamp it holds (the archive's in-memory index). Opened for writing, a segment whose tail is torn is
truncated to its last whole frame, and :attr:`Segment.truncated_bytes` says how many bytes were cut.

Appends go straight to the file descriptor with ``os.write`` (no user-space buffer): once ``append`` returns the
bytes are in the kernel, so a process crash (``kill -9``) loses nothing that was acknowledged; only a machine
crash needs the fsync that the archive's fsync mode decides.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dsms.archive.frames import ArchiveCorrupt, RawFrame, ScanEnd, iter_frames, payload_ts_range, unpack_payload

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

    @property
    def next_seq(self) -> int:
        return self.first_seq + self.frames

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
    """``(seq, frame)`` for every whole frame of a segment snapshot, in file order, stopping at a torn tail (which
    only a concurrent writer in another process, or a corrupt file, can leave inside ``info.size``). A segment
    deleted by retention after the snapshot was taken reads as empty."""
    try:
        f = open(info.path, "rb", buffering=_READ_BUFFER)  # closed in the finally below
    except FileNotFoundError:
        return
    try:
        end = ScanEnd()
        for i, frame in enumerate(iter_frames(f, info.size, end)):
            yield info.first_seq + i, frame
        if end.reason is not None:
            log.warning("archive segment %s: stopped reading at offset %d: %s", info.path, end.valid_end,
                        end.reason)
    finally:
        f.close()


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
        self.dirty = False
        self._fd: int | None = None

    # -- opening ---------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str, *, write: bool = False, fsync: bool = True) -> Segment:
        """Scan an existing segment. With ``write``, cut a torn tail off (recording how many bytes in
        :attr:`truncated_bytes`) and keep a descriptor open for appends; with ``fsync``, make the cut durable
        before any new frame goes after it, or a crash could resurrect the torn bytes between old and new data.
        Without ``write`` nothing is modified: a torn tail is only reported in :attr:`torn_reason`."""
        path = Path(path)
        first_seq = parse_segment_name(path.name)
        if first_seq is None:
            raise ValueError(f"{path.name!r} is not a segment file name (<first_seq:020d>{SEGMENT_SUFFIX})")
        seg = cls(path, first_seq)
        file_size = path.stat().st_size
        end = ScanEnd()
        with open(path, "rb", buffering=_READ_BUFFER) as f:
            for frame in iter_frames(f, file_size, end):
                try:
                    lo, hi = payload_ts_range(unpack_payload(frame.payload))
                except (ArchiveCorrupt, TypeError, ValueError) as e:
                    raise ArchiveCorrupt(f"{path}, frame at offset {frame.offset}: {e}") from e
                seg._note(frame.size, lo, hi)
        seg.torn_reason = end.reason
        if end.reason is not None and write:
            seg.truncated_bytes = file_size - end.valid_end
            log.warning("archive segment %s: torn tail (%s) at offset %d; truncating %d bytes", path,
                        end.reason, end.valid_end, seg.truncated_bytes)
            os.truncate(path, end.valid_end)
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
        return self.first_seq + self.frames

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
        return SegmentInfo(self.path, self.first_seq, self.frames, self.size, self.min_ts, self.max_ts)

    def __repr__(self) -> str:
        return (f"Segment({self.path.name}, frames={self.frames}, bytes={self.size}, "
                f"ts=[{self.min_ts}, {self.max_ts}], writable={self.writable})")
