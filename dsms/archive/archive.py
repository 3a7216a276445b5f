"""The Archive: crash-safe, per-input segment logs of every accepted input element (SPEC section 9).

Layout under the data directory::

    <data_dir>/archive/.lock                              held (flock) by the one writing process
    <data_dir>/archive/<input>/<first_seq:020d>.seg       segments of one input, frames in append order

Every frame of an input has a sequence number: its position since the input was first archived (retention
deletes old segments but never renumbers). A segment is rolled, i.e. a new file started, before a frame would
push it past ``segment_bytes``; a frame larger than that gets a segment of its own.

Durability (``fsync``):

* ``"always"``: ``append_*`` fsyncs before returning. Acknowledge the request right after.
* ``"group"``: ``append_*`` only writes (into the kernel: a process crash loses nothing); the caller runs
  :meth:`Archive.sync` within a bounded delay and acknowledges every request appended before that ``sync``
  began once it returns. One fsync then covers many requests. ``sync`` may run in a worker thread while the
  event loop keeps appending: it fsyncs duplicated descriptors outside the archive's lock.
* ``"never"``: no fsync unless :meth:`Archive.sync` is called (tests, benchmarks, throwaway data).

Directory entries (a new input directory, a new segment file) are fsynced at once in ``always`` and ``group``
modes, so an fsynced frame can never sit in a file the directory forgot.

On open (write mode) every segment is scanned, checking each CRC, to rebuild the small in-memory index
(segment, smallest and largest timestamp, frames, bytes); the last segment of each input, the only one a crash
can tear, is truncated to its last whole frame, and :attr:`Archive.recovery` says what was cut. A damaged frame
with valid frames after it is skipped, never cut: :attr:`Archive.damage` lists each damaged region with the
sequence numbers and timestamps it lost, and its bytes are kept under ``archive/.quarantine/``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy as np

from dsms.archive.damage import LostFrames, quarantine
from dsms.archive.frames import (
    KIND_HEARTBEAT,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveLocked,
    ArchiveValueError,
    Record,
    decode_record,
    encode_batch,
    encode_frame,
    encode_heartbeat,
    unpack_payload,
)
from dsms.archive.segment import (
    Segment,
    SegmentInfo,
    fsync_dir,
    parse_segment_name,
    read_frames,
    segment_name,
)

log = logging.getLogger(__name__)

FsyncMode = Literal["always", "group", "never"]
FSYNC_MODES: tuple[str, ...] = ("always", "group", "never")
DEFAULT_SEGMENT_BYTES = 64 << 20
MIN_SEGMENT_BYTES = 64  # small enough for tests to roll every frame, large enough to hold a header
ARCHIVE_DIRNAME = "archive"
LOCK_NAME = ".lock"  # a dot cannot occur in an input name, so the lock never collides with an input
DAMAGE_SHOWN = 100  # damaged regions listed in stats(); damage_report() has them all
MAX_NAME_LENGTH = 200  # well inside the 255-byte file name limit of common filesystems

_NAME_RE = re.compile(r"[A-Za-z0-9_]+")


def validate_input_name(name: object) -> str:
    """Return ``name`` if it is a safe input name, else raise :class:`ArchiveValueError` (a ValueError) saying
    why. Only ASCII letters, digits and underscore are allowed: the name becomes a directory under the data
    directory, so ``..``, separators, NUL or a leading dot must never get through."""
    if not isinstance(name, str):
        raise ArchiveValueError(f"input name must be a str, got {type(name).__name__}")
    if not name:
        raise ArchiveValueError("input name is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ArchiveValueError(f"input name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not _NAME_RE.fullmatch(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c == "_"))})
        raise ArchiveValueError(f"input name {name!r} contains {''.join(bad)!r}: only ASCII letters, digits and "
                                "underscore are allowed (the name becomes a directory under the data directory)")
    return name


@dataclass(frozen=True)
class InputRange:
    """What the archive holds for one input: smallest and largest timestamp (None when it holds none), number of
    frames and bytes on disk, and the sequence numbers of the first frame kept and of the next one to come."""

    first_ts: int | None
    last_ts: int | None
    frames: int
    bytes: int
    first_seq: int
    next_seq: int
    segments: int


@dataclass(frozen=True)
class Recovery:
    """One torn segment found on open: where its last whole frame ends, how many bytes follow it, whether they
    were cut (only the segment being written is cut; an earlier one is left for inspection and read up to
    ``offset``) and why the bytes are not a frame."""

    input: str
    segment: Path
    offset: int
    torn_bytes: int
    truncated: bool
    reason: str


class _Input:
    """The segments of one input, oldest first; the last is open for writing in a writable archive."""

    __slots__ = ("name", "directory", "segments")

    def __init__(self, name: str, directory: Path, segments: list[Segment]) -> None:
        self.name = name
        self.directory = directory
        self.segments = segments

    @property
    def next_seq(self) -> int:
        return self.segments[-1].next_seq if self.segments else 0


class Archive:
    """The input archive under ``data_dir``. Thread-safe: appends, ``sync``, reads and retention may come from
    different threads (the server appends on its event loop and group-commits in a worker).

    ``read_only=True`` opens without the writer lock and modifies nothing (``dsms replay`` beside a running
    server); its index is the state at open time."""

    def __init__(self, data_dir: str | os.PathLike[str], segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 fsync: FsyncMode = "always", retention_ms: int | None = None, *,
                 read_only: bool = False) -> None:
        if isinstance(segment_bytes, bool) or not isinstance(segment_bytes, int) or \
                segment_bytes < MIN_SEGMENT_BYTES:
            raise ArchiveValueError(f"segment_bytes must be an int >= {MIN_SEGMENT_BYTES}, got {segment_bytes!r}")
        self.segment_bytes = segment_bytes
        self._fsync: str = _check_fsync(fsync)
        self._retention_ms: int | None = _check_retention(retention_ms)
        self.read_only = read_only
        self.data_dir = Path(data_dir)
        self.root = self.data_dir / ARCHIVE_DIRNAME
        self.recovery: list[Recovery] = []
        self.damage: list[LostFrames] = []
        """Every damaged region found (on open, or by a read that met a frame it could not decode)."""
        self._lock = threading.RLock()
        self._sync_lock = threading.Lock()
        self._inputs: dict[str, _Input] = {}
        self._closed = False
        self._lock_fd: int | None = None
        self._appends = 0
        self._appended_bytes = 0
        self._unsynced = 0
        self._syncs = 0
        self._deleted_segments = 0
        if not read_only:
            existed = self.root.is_dir()
            self.root.mkdir(parents=True, exist_ok=True)
            if not existed and self._fsync != "never":
                fsync_dir(self.data_dir)  # the archive directory itself must survive a machine crash
            self._take_writer_lock()
        try:
            self._load()
        except BaseException:
            self._release_writer_lock()
            raise

    # -- knobs ---------------------------------------------------------------------------------------------------

    @property
    def fsync(self) -> str:
        return self._fsync

    @fsync.setter
    def fsync(self, mode: FsyncMode) -> None:
        """Switching to a stricter mode first syncs what the looser one left dirty, so the new promise holds for
        everything already appended too."""
        mode = _check_fsync(mode)
        if mode != self._fsync and not self._closed and not self.read_only:
            self.sync()
        self._fsync = mode

    @property
    def retention_ms(self) -> int | None:
        return self._retention_ms

    @retention_ms.setter
    def retention_ms(self, value: int | None) -> None:
        self._retention_ms = _check_retention(value)

    # -- opening ---------------------------------------------------------------------------------------------

    def _take_writer_lock(self) -> None:
        fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise ArchiveLocked(f"archive {self.root} is already open for writing (pid {holder}); "
                                "one writer per data directory") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _release_writer_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _load(self) -> None:
        if not self.root.is_dir():
            return
        for entry in sorted(self.root.iterdir()):
            if not entry.is_dir() or not _NAME_RE.fullmatch(entry.name):
                continue
            self._inputs[entry.name] = self._load_input(entry.name, entry)

    def _load_input(self, name: str, directory: Path) -> _Input:
        found = sorted((seq, p) for p in directory.iterdir()
                       if p.is_file() and (seq := parse_segment_name(p.name)) is not None)
        segments: list[Segment] = []
        kept: dict[tuple[Path, int], Path] = {}
        for i, (_, path) in enumerate(found):
            last = i == len(found) - 1

            def keep(offset: int, data: bytes, path: Path = path) -> None:
                kept[(path, offset)] = quarantine(self.root, name, path, offset, data)
            seg = Segment.open(path, write=last and not self.read_only, fsync=self._fsync != "never",
                               keep=None if self.read_only else keep)
            if seg.torn_reason is not None:
                torn = seg.truncated_bytes if seg.writable else path.stat().st_size - seg.size
                self.recovery.append(Recovery(name, path, seg.size, torn, seg.writable, seg.torn_reason))
            if segments and segments[-1].next_seq != seg.first_seq:
                prev = segments[-1]
                _settle_lost(prev, seg.first_seq)
                if prev.next_seq < seg.first_seq:          # retention only deletes at the front: a lost file
                    gap = seg.first_seq - prev.next_seq
                    self.damage.append(LostFrames(name, directory / segment_name(prev.next_seq), 0, 0,
                                                  prev.next_seq, gap, prev.max_ts, seg.min_ts,
                                                  "segment file missing", None))
                    log.warning("archive input %s: frames #%d to #%d are missing before %s (a segment file "
                                "was deleted?)", name, prev.next_seq, seg.first_seq - 1, path.name)
                elif prev.next_seq != seg.first_seq:
                    log.warning("archive input %s: %s starts at frame #%d, inside the previous segment",
                                name, path.name, seg.first_seq)
            segments.append(seg)
        for seg in segments:
            for f in seg.found:
                d = f.damage
                lost = LostFrames(name, seg.path, d.offset, d.end, f.seq, d.frames_lost, f.after_ts, f.before_ts,
                                  d.reason, kept.get((seg.path, d.offset)), d.repaired)
                self.damage.append(lost)
                if d.repaired:
                    log.warning("archive %s, offset %d: frame #%d had a damaged length field (%s); repaired",
                                seg.path, d.offset, f.seq, d.reason)
                elif not d.tail or d.frames_lost:
                    log.warning("archive %s, offset %d: %d damaged byte(s) (%s) skipped: %d frame(s) lost, #%d "
                                "to #%d, timestamps %s to %s; bytes kept in %s", seg.path, d.offset,
                                d.end - d.offset, d.reason, d.frames_lost, f.seq, f.seq + d.frames_lost - 1,
                                f.after_ts, f.before_ts, lost.quarantine)
        return _Input(name, directory, segments)

    @property
    def truncated_bytes(self) -> int:
        """Bytes cut off torn tails when this archive was opened."""
        return sum(r.torn_bytes for r in self.recovery if r.truncated)

    def damage_report(self) -> list[dict[str, Any]]:
        """:attr:`damage` as JSON-ready dicts (for ``/system`` and tools): every damaged region, what it lost
        (``frames``, ``seqs``, the timestamps ``after_ts``..``before_ts`` the lost elements lie between) and
        where its bytes were kept."""
        with self._lock:
            return [d.as_dict() for d in self.damage]

    # -- writing ---------------------------------------------------------------------------------------------

    def append_batch(self, input: str, ts: Any, sign: Any = None, cols: Mapping[str, Any] | None = None) -> int:
        """Archive one columnar batch of ``input`` and return its frame's sequence number.

        ``ts``: int timestamps (array or sequence); ``sign``: +1/-1 per row (None: all inserts); ``cols``: one
        array or sequence per column, each as long as ``ts``. Refuses malformed batches with
        :class:`ArchiveValueError`. Encoding happens before the lock is taken, so concurrent appenders only
        serialise on the write itself."""
        self._writable_input(input)  # fail fast on a bad name before encoding
        payload, lo, hi = encode_batch(ts, sign, cols or {})
        return self._append(input, encode_frame(payload), lo, hi)

    def append_heartbeat(self, input: str, ts: int) -> int:
        """Archive a heartbeat of ``input`` (nothing below ``ts`` will arrive on it); returns its sequence
        number. Heartbeats are archived because replay must release results at the same instants as the live
        run did."""
        self._writable_input(input)
        return self._append(input, encode_frame(encode_heartbeat(ts)), int(ts), int(ts))

    def _writable_input(self, name: str) -> None:
        if name not in self._inputs:
            validate_input_name(name)
        if self._closed:
            raise ArchiveError("archive is closed")
        if self.read_only:
            raise ArchiveError("archive was opened read-only")

    def _append(self, name: str, frame: bytes, lo: int | None, hi: int | None) -> int:
        with self._lock:
            if self._closed:
                raise ArchiveError("archive is closed")
            seg = self._segment_for(name, len(frame))
            always = self._fsync == "always"
            seq = seg.append(frame, lo, hi, fsync=always)
            self._appends += 1
            self._appended_bytes += len(frame)
            if not always:
                self._unsynced += 1
            return seq

    def _segment_for(self, name: str, frame_len: int) -> Segment:
        """The segment the next frame of ``name`` goes to: creating the input's directory on its first frame,
        rolling to a new segment when this frame would push the current one past ``segment_bytes``."""
        durable = self._fsync != "never"
        inp = self._inputs.get(name)
        if inp is None:
            directory = self.root / name
            directory.mkdir(exist_ok=True)
            if durable:
                fsync_dir(self.root)
            inp = _Input(name, directory, [])
            self._inputs[name] = inp
        segs = inp.segments
        if segs and segs[-1].writable and not (segs[-1].size and segs[-1].size + frame_len > self.segment_bytes):
            return segs[-1]
        first_seq = inp.next_seq
        if segs:
            # a durable roll: the old segment's frames reach the disk before any frame of the new one can.
            segs[-1].close(fsync=durable)
        seg = Segment.create(inp.directory, first_seq, fsync=durable)
        segs.append(seg)
        return seg

    def sync(self) -> int:
        """fsync every segment with unsynced frames; returns how many appends this made durable.

        Every append that returned before ``sync`` was called is durable once it returns (the group-commit
        contract). The fsyncs run on duplicated descriptors outside the archive's lock, so appends from other
        threads are not held up by the disk; concurrent ``sync`` calls queue on their own lock, because a second
        one must not return (having found nothing dirty) while the first one's fsync is still under way."""
        with self._sync_lock:
            with self._lock:
                if self._closed:
                    return 0
                dirty = [s for inp in self._inputs.values() for s in inp.segments if s.writable and s.dirty]
                fds = [s.dup_fd() for s in dirty]
                for s in dirty:
                    s.dirty = False
                pending, self._unsynced = self._unsynced, 0
            try:
                for fd in fds:
                    os.fsync(fd)
            except BaseException:
                with self._lock:
                    for s in dirty:
                        s.dirty = s.writable or s.dirty
                    self._unsynced += pending
                raise
            finally:
                for fd in fds:
                    os.close(fd)
            with self._lock:
                self._syncs += 1
            return pending

    flush = sync
    """``flush()`` is ``sync()`` under the name file-like code reaches for."""

    # -- retention -------------------------------------------------------------------------------------------

    def enforce_retention(self, now_ts: int | None = None) -> list[Path]:
        """Delete whole segments whose largest timestamp is below ``now_ts - retention_ms``; returns the files
        deleted. ``now_ts`` is application time (SPEC section 2: no wall clock in semantics); None means the
        largest timestamp in the archive. The segment being written is never deleted, so an input keeps its
        sequence numbering and its newest data."""
        if self._retention_ms is None or self.read_only:
            return []
        with self._lock:
            if now_ts is None:
                highs = [s.max_ts for inp in self._inputs.values() for s in inp.segments if s.max_ts is not None]
                if not highs:
                    return []
                now_ts = max(highs)
            cutoff = int(now_ts) - self._retention_ms
            deleted: list[Path] = []
            for inp in self._inputs.values():
                keep: list[Segment] = []
                for i, seg in enumerate(inp.segments):
                    if i < len(inp.segments) - 1 and (seg.max_ts is None or seg.max_ts < cutoff):
                        seg.close(fsync=False)
                        try:
                            seg.path.unlink()
                        except FileNotFoundError:
                            pass
                        deleted.append(seg.path)
                    else:
                        keep.append(seg)
                if len(keep) != len(inp.segments):
                    inp.segments = keep
                    if self._fsync != "never":
                        fsync_dir(inp.directory)
            self._deleted_segments += len(deleted)
            return deleted

    # -- reading ---------------------------------------------------------------------------------------------

    def read(self, input: str, from_ts: int | None = None, to_ts: int | None = None) -> Iterator[Record]:
        """The records of ``input`` in append order, restricted to timestamps in ``[from_ts, to_ts)`` (either
        bound may be None). Segments entirely outside the range are skipped by the index; batches that straddle
        a bound are cut to their rows inside it, and a batch with no row inside is skipped (without a range,
        every frame comes back, empty batches included). Heartbeats are kept when their ``ts`` is in range.

        The set of frames is fixed when ``read`` is called (later appends are not seen), and an unknown input
        yields nothing."""
        validate_input_name(input)
        with self._lock:
            inp = self._inputs.get(input)
            infos = [s.info() for s in inp.segments] if inp else []
        return self._read(input, infos, from_ts, to_ts)

    def _read(self, input: str, infos: list[SegmentInfo], from_ts: int | None,
              to_ts: int | None) -> Iterator[Record]:
        ranged = from_ts is not None or to_ts is not None
        for info in infos:
            if not info.overlaps(from_ts, to_ts):
                continue
            for seq, frame in read_frames(info):
                try:
                    rec = decode_record(unpack_payload(frame.payload), input, seq)
                except ArchiveCorrupt as e:
                    self._undecodable(input, info, seq, frame, e)
                    continue
                if not ranged:
                    yield rec
                elif rec.kind == KIND_HEARTBEAT:
                    if (from_ts is None or rec.ts >= from_ts) and (to_ts is None or rec.ts < to_ts):
                        yield rec
                else:
                    mask = np.ones(len(rec.ts), dtype=bool)
                    if from_ts is not None:
                        mask &= rec.ts >= from_ts
                    if to_ts is not None:
                        mask &= rec.ts < to_ts
                    if mask.all() and len(mask):
                        yield rec
                    elif mask.any():
                        yield rec.select(mask)

    def _undecodable(self, input: str, info: SegmentInfo, seq: int, frame: Any, e: ArchiveCorrupt) -> None:
        """A checksummed frame whose columns do not decode (the open checks only its timestamps): skipped
        like any damaged frame, recorded in :attr:`damage` once, logged and quarantined."""
        with self._lock:
            if any(d.segment == info.path and d.offset == frame.offset for d in self.damage):
                return
            kept = None if self.read_only else quarantine(self.root, input, info.path, frame.offset,
                                                         encode_frame(frame.payload))
            self.damage.append(LostFrames(input, info.path, frame.offset, frame.offset + frame.size, seq, 1,
                                          None, None, f"payload does not decode ({e})", kept))
        log.warning("archive %s, offset %d: frame #%d does not decode (%s); skipped, bytes kept in %s",
                    info.path, frame.offset, seq, e, kept)

    def inputs(self) -> list[str]:
        """Names of the archived inputs, sorted."""
        with self._lock:
            return sorted(self._inputs)

    def ranges(self) -> dict[str, InputRange]:
        """Per input: smallest and largest timestamp archived, frames, bytes on disk, sequence numbers."""
        out: dict[str, InputRange] = {}
        with self._lock:
            for name, inp in sorted(self._inputs.items()):
                segs = inp.segments
                lows = [s.min_ts for s in segs if s.min_ts is not None]
                highs = [s.max_ts for s in segs if s.max_ts is not None]
                out[name] = InputRange(min(lows) if lows else None, max(highs) if highs else None,
                                       sum(s.frames for s in segs), sum(s.size for s in segs),
                                       segs[0].first_seq if segs else 0, inp.next_seq, len(segs))
        return out

    def segments(self, input: str) -> list[SegmentInfo]:
        """The index entries of one input's segments, oldest first (for tools, tests and the replay planner)."""
        validate_input_name(input)
        with self._lock:
            inp = self._inputs.get(input)
            return [s.info() for s in inp.segments] if inp else []

    def stats(self) -> dict[str, Any]:
        """Counters for the archive's control table: what this process appended and synced, what is still
        waiting for a group commit, what opening and reading found damaged; and ``damage``, the first
        :data:`DAMAGE_SHOWN` damaged regions as :meth:`damage_report` gives them (so ``GET /system`` says which
        elements were lost)."""
        with self._lock:
            return {
                "inputs": len(self._inputs),
                "segments": sum(len(i.segments) for i in self._inputs.values()),
                "frames": sum(s.frames for i in self._inputs.values() for s in i.segments),
                "bytes": sum(s.size for i in self._inputs.values() for s in i.segments),
                "appends": self._appends,
                "appended_bytes": self._appended_bytes,
                "unsynced_appends": self._unsynced,
                "syncs": self._syncs,
                "deleted_segments": self._deleted_segments,
                "truncated_bytes": self.truncated_bytes,
                "damaged_regions": sum(1 for d in self.damage if not d.repaired),
                "lost_frames": sum(d.frames for d in self.damage),
                "repaired_frames": sum(1 for d in self.damage if d.repaired),
                "quarantined_bytes": sum(d.end - d.offset for d in self.damage if d.quarantine is not None),
                "damage": [d.as_dict() for d in self.damage[:DAMAGE_SHOWN]],
            }

    # -- closing ---------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close every segment (fsyncing unsynced frames unless the mode is ``never``) and release the writer
        lock. Idempotent; the index stays readable afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                errors: list[BaseException] = []
                for inp in self._inputs.values():
                    for seg in inp.segments:
                        try:
                            seg.close(fsync=self._fsync != "never")
                        except OSError as e:
                            errors.append(e)
                if errors:
                    raise errors[0]
            finally:
                self._release_writer_lock()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self.read_only else f"fsync={self._fsync}")
        return f"Archive({str(self.data_dir)!r}, {state}, inputs={len(self._inputs)})"


def _settle_lost(seg: Segment, next_first_seq: int) -> None:
    """The frames a damaged segment lost, made exact from the next segment's first sequence number: the last
    damaged region that lost frames (or the torn tail) takes what is missing."""
    missing = next_first_seq - seg.next_seq
    for i in range(len(seg.found) - 1, -1, -1):
        f = seg.found[i]
        if f.damage.repaired or f.damage.frames_lost + missing < 0:
            continue
        d = replace(f.damage, frames_lost=f.damage.frames_lost + missing)
        seg.found[i] = replace(f, damage=d)
        seg.damage[seg.damage.index(f.damage)] = d
        seg.lost += missing
        return


def _check_fsync(mode: object) -> str:
    if mode not in FSYNC_MODES:
        raise ArchiveValueError(f"fsync must be one of {', '.join(FSYNC_MODES)}; got {mode!r}")
    return str(mode)


def _check_retention(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ArchiveValueError(f"retention_ms must be None (keep everything) or an int >= 0, got {value!r}")
    return int(value)
