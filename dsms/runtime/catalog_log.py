"""Catalog persistence: the log of every catalog change, kept as an append-only log with periodic compaction
(SPEC section 9; issue 18 items 5 and 6).

The catalog is a log of changes (CQL statements, drops, knob writes, retention), each stamped with the archive
positions (per input, the next frame sequence number) at which it happened, so recovery (``recovery.py``) can
re-execute it interleaved with the archived input exactly as the live run saw it. Each entry also records the
id counters of the engine after it (``ids``), so an entry that fails to re-apply does not shift the ids of the
ones after it.

On disk (``<data_dir>``):

- ``catalog.log``: one line per entry, appended, ``<crc32 hex> <json>``; entries carry only the archive positions
  that changed since the entry before (the positions of inputs nobody wrote to since are implied), so an entry
  stays small however many inputs there are.
- ``catalog.snapshot``: the same format, every entry up to some point, written by compaction (a temporary file,
  fsync, rename) when the log passes ``COMPACT_EVERY`` lines and at a clean stop; the log then starts again.
  Entries are numbered (``n``), so a log line already in the snapshot (a crash between the two steps) is skipped.
  The previous snapshot is kept as ``catalog.snapshot.prev``: the last good state if the newest is damaged.
- ``catalog.json``: the format before (version 1, one JSON document); read when there is no snapshot, and
  replaced by one at the first compaction.

Writes leave the event loop: ``append`` queues the line and returns; ``CatalogWriter`` writes and fsyncs in a
thread, many lines per fsync, and ``durable()`` is what a request waits for before it is answered (so a change
that was answered is on disk). A line with a bad checksum and lines after it is damage, not a torn tail: the
server refuses to start and says how to start from the last good state (``catalog_recovery = "last-good"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsms.errors import CQLError
from dsms.runtime.errors import RuntimeFailure

log = logging.getLogger("dsms.runtime")

CATALOG_NAME = "catalog.log"
SNAPSHOT_NAME = "catalog.snapshot"
LEGACY_NAME = "catalog.json"
CATALOG_VERSION = 2
COMPACT_EVERY = 2000
_HEADER = {"format": "dsms-catalog", "version": CATALOG_VERSION}


class CatalogDamaged(RuntimeFailure):
    """The catalog cannot be read as it is; the message says where and how to start from the last good state."""


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """One log line: the CRC-32 of the JSON text, a space, the JSON text.

    >>> encode_line({"n": 1})
    b'd44b3b7e {"n":1}\\n'
    """
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=True)
    return f"{zlib.crc32(text.encode()):08x} {text}\n".encode()


def decode_line(line: bytes) -> dict[str, Any] | None:
    """The entry of one line, or None when the line is damaged (bad checksum, not JSON, not an object)."""
    crc, _, text = line.rstrip(b"\n").partition(b" ")
    try:
        if int(crc, 16) != zlib.crc32(text):
            return None
        obj = json.loads(text)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


@dataclass
class LoadReport:
    """What reading the catalog found: entries, and anything cut, damaged or missing (for ``/system``)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    source: str = "none"                       # snapshot+log, legacy, none
    torn_bytes: int = 0
    set_aside: list[str] = field(default_factory=list)   # damaged files moved away by last-good recovery
    notes: list[str] = field(default_factory=list)


def _read_lines(path: Path, what: str, *, allow_torn: bool) -> tuple[list[dict[str, Any]], int, int | None]:
    """Entries of a catalog file, the bytes of a torn last line (to cut), and the 1-based number of the first
    damaged line when the damage is not a torn tail (else None)."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()                          # after the last newline: '' or a torn line
    torn = len(tail)
    out: list[dict[str, Any]] = []
    for k, line in enumerate(lines):
        obj = decode_line(line)
        if obj is None:
            if allow_torn and k == len(lines) - 1 and not tail:
                return out, len(line) + 1, None       # the last line, complete but damaged: a torn write
            return out, torn, k + 1
        out.append(obj)
    if out and out[0].get("format") == "dsms-catalog":
        out.pop(0)
    elif out or data:
        return [], torn, 1
    return out, torn, None


def read_catalog_entries(data_dir: Path | str) -> list[dict[str, Any]]:
    """The catalog's entries in order, each with its full archive positions ``at`` (every input's position as
    of it, not only what changed), for tools that read a data directory without being its server (``dsms
    replay``, dsms/spark). Reads ``catalog.snapshot`` (or ``.prev`` when it is damaged) and ``catalog.log``,
    else the old ``catalog.json``; changes no file (a torn last log line is left out, not cut), so a server may
    be running on the directory. CatalogDamaged when a file is damaged past a torn tail."""
    d = Path(data_dir)
    snap, path, legacy = d / SNAPSHOT_NAME, d / CATALOG_NAME, d / LEGACY_NAME
    entries: list[dict[str, Any]] = []
    if snap.exists() or path.exists():
        if snap.exists():
            try:
                entries, _torn, bad = _read_lines(snap, snap.name, allow_torn=False)
            except OSError as e:
                raise CatalogDamaged(f"the catalog {snap} cannot be read: {e}") from None
            prev = snap.with_name(SNAPSHOT_NAME + ".prev")
            if bad is not None and prev.exists():
                entries, _torn, bad = _read_lines(prev, prev.name, allow_torn=False)
            if bad is not None:
                raise CatalogDamaged(f"the catalog {snap} is damaged at line {bad}")
        last = entries[-1].get("n", 0) if entries else 0
        if path.exists():
            try:
                more, _torn, bad = _read_lines(path, path.name, allow_torn=True)
            except OSError as e:
                raise CatalogDamaged(f"the catalog {path} cannot be read: {e}") from None
            if bad is not None:
                raise CatalogDamaged(f"the catalog {path} is damaged at line {bad}")
            entries += [e for e in more if e.get("n", 0) > last]
    elif legacy.exists():
        try:
            doc = json.loads(legacy.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CatalogDamaged(f"the catalog {legacy} cannot be read: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("log"), list):
            raise CatalogDamaged(f"the catalog {legacy} is not a dsms catalog (no 'log' list)")
        entries = [dict(e) for e in doc["log"] if isinstance(e, dict)]
    at: dict[str, int] = {}
    out = []
    for e in entries:
        at.update(e.get("at") or {})              # an entry stores only the positions that changed
        out.append({**e, "at": dict(at)})
    return out


class CatalogLog:
    """The catalog's entries, in the order they happened, and the files that hold them."""

    def __init__(self, data_dir: Path, recovery: str = "refuse") -> None:
        self.data_dir = data_dir
        self.path = data_dir / CATALOG_NAME
        self.snapshot = data_dir / SNAPSHOT_NAME
        self.legacy = data_dir / LEGACY_NAME
        self.recovery = recovery
        self.entries: list[dict[str, Any]] = []
        self.last_at: dict[str, int] = {}       # every input's position, as of the last entry
        self.report = LoadReport()
        self._unwritten: list[bytes] = []
        self._log_lines = 0
        self._waiters: list[asyncio.Future] = []
        self._event: asyncio.Event | None = None
        self.writes = 0
        self.compactions = 0
        self.write_errors = 0
        self.inflight: asyncio.Future | None = None
        self.compact_every = COMPACT_EVERY
        self._migrate = False

    # ------------------------------------------------------------ reading (start)

    def read(self) -> list[dict[str, Any]]:
        """The entries saved by previous runs (none for a new data directory), positions as stored (only what
        changed since the entry before). CatalogDamaged (the server does not start) when a file is damaged and
        ``recovery`` is not ``last-good``."""
        rep = self.report = LoadReport()
        if self.snapshot.exists() or self.path.exists():
            rep.source = "snapshot+log"
            entries = self._read_file(self.snapshot, allow_torn=False) if self.snapshot.exists() else []
            last = entries[-1]["n"] if entries else 0
            if self.path.exists():
                more = self._read_file(self.path, allow_torn=True)
                entries += [e for e in more if e.get("n", 0) > last]
                self._log_lines = len(more)
        elif self.legacy.exists():
            rep.source = "legacy"
            entries = self._read_legacy()
            self._migrate = True
        else:
            entries = []
        for k, e in enumerate(entries):
            e.setdefault("n", k + 1)
        gap = next((k for k, e in enumerate(entries) if e["n"] != k + 1), None)
        if gap is not None:
            where = self.path if self.path.exists() else self.snapshot
            self._damaged(where, f"lacks entries: entry #{entries[gap]['n']} follows #{gap} (the snapshot "
                                 f"holding the ones between is gone)")
            entries = entries[:gap]
        rep.entries = entries
        return entries

    def _damaged(self, path: Path, why: str) -> None:
        if self.recovery != "last-good":
            raise CatalogDamaged(
                f"the catalog is damaged: {path} {why}. Nothing was changed. To start from the last good state "
                f"(the entries before the damage), start once with --catalog-recovery last-good (config "
                f"catalog_recovery = \"last-good\"): the damaged file is kept as {path.name}.damaged-<time>")
        kept = path.with_name(f"{path.name}.damaged-{int(time.time())}")
        os.replace(path, kept)
        self.report.set_aside.append(str(kept))
        log.error("catalog: %s %s; started from the last good state, the damaged file is kept as %s",
                  path, why, kept)

    def _read_file(self, path: Path, *, allow_torn: bool) -> list[dict[str, Any]]:
        try:
            entries, torn, bad = _read_lines(path, path.name, allow_torn=allow_torn)
        except OSError as e:
            raise CatalogDamaged(f"the catalog {path} cannot be read: {e}") from None
        if bad is not None:
            self._damaged(path, f"line {bad} fails its checksum or is not a catalog entry"
                          + (f" ({len(entries)} good entries before it)" if entries else ""))
            if path == self.snapshot:
                prev = path.with_name(SNAPSHOT_NAME + ".prev")
                if prev.exists():
                    self.report.notes.append(f"started from {prev.name}, the snapshot before the damaged one")
                    return self._read_file(prev, allow_torn=False)
            else:
                self._rewrite(path, entries)
            return entries
        if torn:
            size = path.stat().st_size
            with open(path, "r+b") as fh:
                fh.truncate(size - torn)
                os.fsync(fh.fileno())
            self.report.torn_bytes += torn
            log.warning("catalog: cut a torn last line (%d bytes) from %s", torn, path)
        return entries

    def _rewrite(self, path: Path, entries: list[dict[str, Any]]) -> None:
        _atomic_write(path, [encode_line(_HEADER), *(encode_line(e) for e in entries)], self.data_dir)

    def _read_legacy(self) -> list[dict[str, Any]]:
        try:
            doc = json.loads(self.legacy.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("log"), list):
                raise ValueError("not a dsms catalog (version 1)")
        except (OSError, ValueError) as e:
            self._damaged(self.legacy, f"cannot be read: {e}")
            return []
        return [dict(e) for e in doc["log"] if isinstance(e, dict)]

    def restored(self, entry: dict[str, Any], at: Mapping[str, int]) -> None:
        """Recovery re-applied (or tried) ``entry``; ``at``: every input's position as of it."""
        self.entries.append(entry)
        self.last_at = dict(at)

    def after_recovery(self) -> None:
        """A catalog read from the old format (or repaired) is written in the new one now, before any change."""
        if self._migrate or self.report.set_aside:
            self.compact_now()
            if self._migrate and self.legacy.exists():
                os.replace(self.legacy, self.legacy.with_name(LEGACY_NAME + ".migrated"))
            self._migrate = False

    # ------------------------------------------------------------ writing (live)

    def append(self, entry: dict[str, Any], at: Mapping[str, int], ids: Mapping[str, Any]) -> None:
        """Record one change made at archive positions ``at`` with the id counters ``ids`` after it. The line
        is written by the writer task; ``durable()`` waits for it."""
        entry["n"] = (self.entries[-1]["n"] if self.entries else 0) + 1
        entry["at"] = {k: v for k, v in at.items() if self.last_at.get(k) != v}
        entry["ids"] = dict(ids)
        self.last_at = dict(at)
        self.entries.append(entry)
        self._unwritten.append(encode_line(entry))
        if self._event is not None:
            self._event.set()
        else:
            self.flush_now()

    def durable(self) -> asyncio.Future | None:
        """A future done when every change appended so far is on disk (None when it already is)."""
        if not self._unwritten or self._event is None:
            return None
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._event.set()
        return fut

    async def run(self) -> None:
        """The writer: append the queued lines and fsync, in a thread, then answer the waiters; compact the
        log into a new snapshot when it has grown past ``COMPACT_EVERY`` lines."""
        self._event = asyncio.Event()
        while True:
            await self._event.wait()
            self._event.clear()
            lines, self._unwritten = self._unwritten, []
            waiters, self._waiters = self._waiters, []
            try:
                # Shielded, and kept in ``inflight``: a stop that cancels this task waits for the thread
                # instead of writing the same files beside it.
                loop = asyncio.get_running_loop()
                if lines:
                    self.inflight = loop.run_in_executor(None, self._append_lines, lines)
                    await asyncio.shield(self.inflight)
                if self._log_lines >= self.compact_every:
                    # a copy of the list (entries are never changed once logged); encoded in the thread
                    self.inflight = loop.run_in_executor(None, self._compact, list(self.entries))
                    await asyncio.shield(self.inflight)
            except OSError as e:
                self.write_errors += 1
                self._unwritten = lines + self._unwritten       # tried again with the next change
                log.error("catalog write failed: %s", e)
                for w in waiters:
                    if not w.done():
                        w.set_exception(RuntimeFailure(f"the catalog could not be written: {e}"))
                continue
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def flush_now(self) -> None:
        """Write what is queued, on this thread (stop, or a runtime that is not started)."""
        lines, self._unwritten = self._unwritten, []
        if lines:
            self._append_lines(lines)

    def compact_now(self) -> None:
        self.flush_now()
        self._compact(self.entries)

    def stop(self) -> None:
        """A clean stop: everything written, and the log compacted into the snapshot when it has lines."""
        self.flush_now()
        if self._log_lines:
            self.compact_now()
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
        self._waiters = []

    def _append_lines(self, lines: list[bytes]) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        with open(self.path, "ab") as fh:
            if new:
                fh.write(encode_line(_HEADER))
            fh.write(b"".join(lines))
            fh.flush()
            os.fsync(fh.fileno())
        if new:
            _fsync_dir(self.data_dir)
        self._log_lines += len(lines)
        self.writes += 1

    def _compact(self, entries: list[dict[str, Any]]) -> None:
        """The snapshot replaced atomically (the old one kept as ``.prev``), then the log emptied. There is a
        snapshot at every moment: the old one is linked as ``.prev`` before the new one replaces it."""
        if self.snapshot.exists():
            prev_tmp = self.snapshot.with_name(f".{SNAPSHOT_NAME}.prev.{os.getpid()}.tmp")
            with contextlib.suppress(FileNotFoundError):
                prev_tmp.unlink()
            os.link(self.snapshot, prev_tmp)
            os.replace(prev_tmp, self.snapshot.with_name(SNAPSHOT_NAME + ".prev"))
        _atomic_write(self.snapshot, [encode_line(_HEADER), *(encode_line(e) for e in entries)], self.data_dir)
        with open(self.path, "wb") as fh:
            fh.write(encode_line(_HEADER))
            fh.flush()
            os.fsync(fh.fileno())
        self._log_lines = 0
        self.compactions += 1

    def stats(self) -> dict[str, Any]:
        return {"entries": len(self.entries), "log_lines": self._log_lines, "writes": self.writes,
                "compactions": self.compactions, "write_errors": self.write_errors,
                "unwritten": len(self._unwritten)}


def _fsync_dir(d: Path) -> None:
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _atomic_write(path: Path, chunks: Sequence[bytes], data_dir: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(b"".join(chunks))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(data_dir)


def split_statements(text: str, stmts: Sequence[Any]) -> list[str]:
    """The source text of each statement, cut at the start positions the parser reports, so each logged
    statement keeps its own text (the text a query shows is what the client wrote for it)."""
    if len(stmts) == 1:
        return [text]
    starts = []
    line_offsets = [0]
    for line in text.split("\n"):
        line_offsets.append(line_offsets[-1] + len(line) + 1)
    for s in stmts:
        pos = getattr(s, "pos", None)
        if pos is None:
            raise CQLError("cannot split the statements of this request; send them one at a time")
        starts.append(line_offsets[pos[0] - 1] + pos[1] - 1)
    pieces = []
    for i, a in enumerate(starts):
        b = starts[i + 1] if i + 1 < len(starts) else len(text)
        piece = text[a:b]
        for i in range(len(piece) - 1, -1, -1):       # cut at the ';' after which only comments follow
            if piece[i] == ";" and _BLANK.fullmatch(piece, i + 1):
                piece = piece[:i]
                break
        pieces.append(piece.rstrip())
    return pieces


_BLANK = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.S)


def check_writable(d: Path) -> None:
    """RuntimeFailure naming the directory when nothing can be written there (before the archive opens)."""
    probe = d / f".write-probe.{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise RuntimeFailure(f"data directory {str(d)!r} is not writable: {e.strerror}") from None
