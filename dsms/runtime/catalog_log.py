"""Catalog persistence: the log of every catalog change, kept in ``catalog.json`` (SPEC section 9).

The catalog is a log of changes (CQL statements, drops, knob writes, retention), each stamped with the archive
position (per-input frame sequence numbers) at which it happened, so recovery (``recovery.py``) can re-execute
it interleaved with the archived input exactly as the live run saw it. The file is rewritten atomically after
every change: a catalog change is rare, and a whole-file write keeps the format one readable JSON document.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsms.errors import CQLError
from dsms.runtime.errors import RuntimeFailure

CATALOG_NAME = "catalog.json"
CATALOG_VERSION = 1


class CatalogLog:
    """The entries of ``catalog.json`` in a data directory, in the order they happened."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / CATALOG_NAME
        self.entries: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        """The entries saved by the previous run (none for a new data directory); RuntimeFailure when the
        file is not a dsms catalog."""
        if not self.path.exists():
            return []
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise RuntimeFailure(f"catalog {self.path} cannot be read: {e}") from None
        if not isinstance(doc, dict) or doc.get("version") != CATALOG_VERSION or \
                not isinstance(doc.get("log"), list):
            raise RuntimeFailure(f"catalog {self.path} is not a dsms catalog (version {CATALOG_VERSION})")
        return doc["log"]

    def append(self, entry: dict[str, Any], at: Mapping[str, int]) -> None:
        """Record one change made at archive position ``at`` and save the log."""
        entry["at"] = dict(at)
        self.entries.append(entry)
        self.save()

    def save(self) -> None:
        """Write ``catalog.json`` atomically: a temporary file, fsync, rename, fsync of the directory."""
        tmp = self.path.with_name(f".{CATALOG_NAME}.{os.getpid()}.tmp")
        doc = {"version": CATALOG_VERSION, "saved_at": time.time(), "log": self.entries}
        data = json.dumps(doc, indent=1).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


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
