"""Damaged frames inside an archive segment: finding the next valid frame after them (resynchronising), what
was lost, and the quarantine file that keeps the damaged bytes (issue 18 item 4).

A flipped bit in the middle of a segment used to be taken for a torn tail, and everything after it cut. Only
a torn tail (an incomplete last write) may be cut. Damage anywhere else is skipped: the scan looks for the
next offset where a whole frame starts, checks its CRC and its payload, and continues from there. The bytes
in between are one damaged *region*: counted, logged, copied to a quarantine file and reported with the
sequence numbers they held and the timestamps around them.

Resynchronising without a frame marker: a frame's payload, as the writer packs it, is a msgpack map whose
first key is ``"k"``, so its bytes 8..10 are a fixmap byte and ``\\xa1k``. Candidates are found with a byte
search for that key, then must pass the length, CRC and decode checks. A candidate is *confirmed* when the
frame after it is valid too (or it ends the segment); the first confirmed candidate wins, and without one the
first valid candidate, so a frame-shaped string inside a damaged payload cannot capture the scan.

A region whose header kept its CRC but lost its length (a flipped length bit) is repaired, not lost: the CRC
of the region's bytes after the header equals the header's CRC exactly when the length was the only damage.

Sequence numbers stay stable: a region counts as one lost frame (a single damage hits one frame), except in a
segment that is not the last one of its input, where the next segment's file name says exactly how many
frames the segment held, and the region gets what is missing.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dsms.archive.frames import HEADER, RawFrame

log = logging.getLogger(__name__)

QUARANTINE_DIRNAME = ".quarantine"
"""Under ``<data_dir>/archive/``; a dot cannot start an input name, so it never collides with an input."""

_KEY = b"\xa1k"                   # msgpack fixstr "k": the first key of every payload the writer packs


@dataclass(frozen=True)
class Damage:
    """One damaged region ``[offset, end)`` of a segment, as the scan found it. ``repaired``: the region is
    one whole frame whose length field alone was wrong (read back as a frame, nothing lost); else
    ``frames_lost`` frames are gone. ``tail``: nothing valid follows (the segment's end)."""

    offset: int
    end: int
    reason: str
    frames_lost: int = 1
    repaired: bool = False
    tail: bool = False


@dataclass(frozen=True)
class LostFrames:
    """What an archive reports for one damaged region: the input and segment, the byte range, the sequence
    numbers of the frames lost (``first_seq`` to ``first_seq + frames - 1``; none when ``frames`` is 0), the
    timestamps around them (the lost elements have ``after_ts <= ts <= before_ts``; None where no frame
    brackets them), why the bytes are not frames, and the quarantine file holding them (None if read-only).
    ``repaired``: a frame whose length field alone was damaged, read back whole (``frames`` is 0)."""

    input: str
    segment: Path
    offset: int
    end: int
    first_seq: int
    frames: int
    after_ts: int | None
    before_ts: int | None
    reason: str
    quarantine: Path | None
    repaired: bool = False

    def as_dict(self) -> dict:
        """A JSON-ready form for ``/system`` and logs."""
        return {"input": self.input, "segment": str(self.segment), "offset": self.offset,
                "bytes": self.end - self.offset,
                "first_seq": self.first_seq, "frames": self.frames,
                "seqs": [self.first_seq, self.first_seq + self.frames - 1] if self.frames else [],
                "after_ts": self.after_ts, "before_ts": self.before_ts, "reason": self.reason,
                "quarantine": None if self.quarantine is None else str(self.quarantine), "repaired": self.repaired}


Check = Callable[[bytes], object]
"""Decodes a payload (raising on failure); only frames it accepts count as valid."""


def frame_at(buf: bytes, pos: int, limit: int, check: Check) -> tuple[RawFrame | None, object, str]:
    """The valid frame starting at ``pos`` (header fits, length > 0, payload fits, CRC matches, ``check``
    accepts it) with what ``check`` returned, or None and why not."""
    if limit - pos < HEADER.size:
        return None, None, f"short header ({limit - pos} of {HEADER.size} bytes)"
    length, crc = HEADER.unpack_from(buf, pos)
    if length == 0:
        return None, None, "zero-length frame (zero-filled tail)"
    if length > limit - pos - HEADER.size:
        return None, None, f"short payload ({limit - pos - HEADER.size} of {length} bytes)"
    payload = bytes(buf[pos + HEADER.size:pos + HEADER.size + length])
    if zlib.crc32(payload) != crc:
        return None, None, "CRC mismatch"
    try:
        value = check(payload)
    except Exception as e:  # noqa: BLE001 - any decode failure makes the frame damaged, whatever its type
        return None, None, f"payload does not decode ({e})"
    return RawFrame(pos, payload), value, ""


def _resync(buf: bytes, start: int, limit: int, check: Check) -> int | None:
    """The offset of the next valid frame at or after ``start`` (confirmed by the frame after it where one
    exists), or None."""
    first: int | None = None
    at = buf.find(_KEY, start + HEADER.size + 1, limit)
    while at >= 0:
        pos = at - HEADER.size - 1
        if 0x81 <= buf[pos + HEADER.size] <= 0x8F:
            frame, _, _ = frame_at(buf, pos, limit, check)
            if frame is not None:
                nxt = pos + frame.size
                if nxt == limit or frame_at(buf, nxt, limit, check)[0] is not None:
                    return pos
                if first is None:
                    first = pos
        at = buf.find(_KEY, at + 1, limit)
    return first


def _repaired(buf: bytes, pos: int, end: int, check: Check) -> tuple[RawFrame, object] | None:
    """The region ``[pos, end)`` as one frame whose length field alone was damaged, if its CRC says so."""
    if end - pos <= HEADER.size:
        return None
    _, crc = HEADER.unpack_from(buf, pos)
    payload = bytes(buf[pos + HEADER.size:end])
    if zlib.crc32(payload) != crc:
        return None
    try:
        value = check(payload)
    except Exception:  # noqa: BLE001
        return None
    return RawFrame(pos, payload), value


def scan(buf: bytes, limit: int, check: Check) -> Iterator[tuple[RawFrame, object] | Damage]:
    """Every valid frame of ``buf[:limit]`` in order, each with what ``check`` returned for it, and a
    :class:`Damage` where bytes are not frames; a repaired frame comes as its Damage (``repaired``) followed
    by the frame."""
    pos = 0
    while pos < limit:
        frame, value, why = frame_at(buf, pos, limit, check)
        if frame is not None:
            yield frame, value
            pos += frame.size
            continue
        nxt = _resync(buf, pos + 1, limit, check)
        end = limit if nxt is None else nxt
        fixed = _repaired(buf, pos, end, check)
        if fixed is not None:
            yield Damage(pos, end, f"{why}; length field repaired", 0, repaired=True)
            yield fixed
        elif nxt is None:
            # only an incomplete last frame is a torn tail; a whole one that is damaged was acknowledged
            whole = limit - pos > HEADER.size and HEADER.unpack_from(buf, pos)[0] == limit - pos - HEADER.size
            yield Damage(pos, limit, why) if whole else Damage(pos, limit, why, 0, tail=True)
            return
        else:
            yield Damage(pos, end, why)
        pos = end


def quarantine(root: Path, input_name: str, segment: Path, offset: int, data: bytes) -> Path:
    """Keep the damaged bytes ``data`` found at ``offset`` of ``segment`` in
    ``<root>/.quarantine/<input>/<segment>.<offset>.bad`` (written once: a later open finds it there)."""
    directory = root / QUARANTINE_DIRNAME / input_name
    path = directory / f"{segment.name}.{offset:012d}.bad"
    if not (path.exists() and path.stat().st_size == len(data)):
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path
