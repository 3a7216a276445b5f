"""Reading the archive for a replay: which segments a task reads, decoding them with the archive's own frame
reader, and the merged, time-ordered feed an engine gets (SPEC section 9; format in docs/archive.md).

Spark tasks read the segment files directly (no export step): a task is handed plain
:class:`~dsms.archive.SegmentInfo` snapshots taken on the driver, opens the files itself and decodes them with
``dsms.archive.frames``, so the executors need the data directory at the same path (a shared filesystem on a
cluster). docs/replay.md says why direct reading beat an export to Parquet.

A torn tail is reported: the driver opens the archive read-only, which scans every segment and lists each torn
one in ``Archive.recovery``. A torn tail of an input's last segment is a write in progress or a crash the server
will cut on restart (its bytes were never acknowledged): reported as a warning. A torn *earlier* segment hides
acknowledged frames behind the damage: the replay refuses to run. So does a damaged frame the archive skipped
when it opened (``Archive.damage``: a corrupt frame with valid frames after it, or one whose checksum holds but
that does not decode), named by file and offset; a frame that fails to decode while a task reads it raises
``ArchiveCorrupt`` naming file and offset.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dsms.archive import Archive, ArchiveCorrupt, ArchiveError, Record, SegmentInfo
from dsms.archive.frames import KIND_HEARTBEAT, decode_record, unpack_payload
from dsms.archive.segment import read_frames
from dsms.spark.spec import ReplayError, ReplaySpec


@dataclass(frozen=True)
class ArchiveIndex:
    """The driver's view of the archive: per input, its segments (oldest first), and what opening found torn."""

    segments: dict[str, list[SegmentInfo]]
    warnings: tuple[str, ...]
    first_ts: int | None
    last_ts: int | None
    bytes: int


def open_index(spec: ReplaySpec) -> ArchiveIndex:
    """Snapshot the segments of the inputs the query reads; raise :class:`ReplayError` on a torn earlier
    segment or when no input of the query has anything archived in the requested range."""
    root = Path(spec.data_dir) / "archive"
    if not root.is_dir():
        raise ReplayError(f"no archive under '{spec.data_dir}' (expected {root})")
    try:
        arch = Archive(spec.data_dir, read_only=True)
    except (ArchiveError, OSError) as e:
        raise ReplayError(f"archive under '{spec.data_dir}' cannot be opened: {e}") from None
    try:
        segments = {name: arch.segments(name) for name in spec.inputs}
        warnings = []
        for r in arch.recovery:
            if r.input not in spec.inputs:
                continue
            segs = segments.get(r.input) or []
            where = f"{r.segment}, offset {r.offset}: {r.torn_bytes} byte(s) after the last whole frame ({r.reason})"
            if segs and Path(segs[-1].path) != Path(r.segment):
                raise ReplayError(f"archive input '{r.input}' is damaged inside: {where}; frames after it "
                                  "cannot be read")
            warnings.append(f"torn tail ignored (never acknowledged): {where}")
        for d in getattr(arch, "damage", ()):      # damaged frames the archive skipped (docs/archive.md)
            if d.input in spec.inputs and d.frames:     # a torn tail loses no frame: it is a warning above
                raise ReplayError(f"archive input '{d.input}' is damaged: {d.segment}, frame at offset {d.offset}: "
                                  f"{d.reason} ({d.frames} frame(s) lost); the replay would not equal the live run")
        ranges = arch.ranges()
    finally:
        arch.close()
    lows = [ranges[n].first_ts for n in spec.inputs if n in ranges and ranges[n].first_ts is not None]
    highs = [ranges[n].last_ts for n in spec.inputs if n in ranges and ranges[n].last_ts is not None]
    first, last = (min(lows) if lows else None), (max(highs) if highs else None)
    lo, hi = spec.from_ts, spec.to_ts
    if first is None or (lo is not None and last < lo) or (hi is not None and first >= hi):
        have = "nothing" if first is None else f"timestamps {first}..{last}"
        want = f"[{'-inf' if lo is None else lo}, {'+inf' if hi is None else hi})"
        raise ReplayError(f"no archived input in the range {want}: the archive under '{spec.data_dir}' holds "
                          f"{have} for {', '.join(sorted(spec.inputs)) or 'the query (it reads no input)'}")
    total = sum(s.size for segs in segments.values() for s in segs)
    return ArchiveIndex(segments, tuple(warnings), first, last, total)


def read_segment(info: SegmentInfo, input_name: str, from_ts: int | None = None, to_ts: int | None = None,
                 min_seq: int = 0) -> Iterator[Record]:
    """The records of one segment in file order, cut to ``[from_ts, to_ts)`` as ``Archive.read`` cuts them,
    skipping frames before ``min_seq``."""
    if not info.overlaps(from_ts, to_ts) or info.next_seq <= min_seq:
        return
    ranged = from_ts is not None or to_ts is not None
    for seq, frame in read_frames(info):
        if seq < min_seq:
            continue
        try:
            rec = decode_record(unpack_payload(frame.payload), input_name, seq)
        except ArchiveCorrupt as e:
            raise ArchiveCorrupt(f"{info.path}, frame at offset {frame.offset}: {e}") from e
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


def read_input(segments: Iterable[SegmentInfo], input_name: str, from_ts: int | None = None,
               to_ts: int | None = None, min_seq: int = 0) -> Iterator[Record]:
    """Every record of one input over its segments, in append order."""
    for info in segments:
        yield from read_segment(info, input_name, from_ts, to_ts, min_seq)


def record_ts(rec: Record) -> int:
    """The timestamp a record is merged by: a heartbeat's, or a batch's first (the runtime's recovery order)."""
    if rec.is_heartbeat:
        return int(rec.ts)
    return int(rec.ts[0]) if len(rec.ts) else -(2**63)


def merged(per_input: dict[str, Iterable[Record]]) -> Iterator[Record]:
    """One feed over several inputs: each input's records in append order (so ties at one timestamp keep
    their arrival order, which ROWS windows see), inputs interleaved by timestamp as the server's recovery
    interleaves them. Any interleaving that keeps each input's order gives the same results (the engine's
    binary operators apply both sides in timestamp order); this one keeps the engine's queues short."""
    heap: list[tuple[int, str, int, Record, Iterator[Record]]] = []
    for name, recs in per_input.items():
        it = iter(recs)
        rec = next(it, None)
        if rec is not None:
            heap.append((record_ts(rec), name, rec.seq, rec, it))
    heapq.heapify(heap)
    while heap:
        _, name, _, rec, it = heap[0]
        yield rec
        nxt = next(it, None)
        if nxt is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (record_ts(nxt), name, nxt.seq, nxt, it))
