"""The crash-safe input archive (SPEC section 9): every accepted input element, appended before it is
acknowledged, in per-input segment files of CRC-checked msgpack frames; the truth the server rebuilds from after
a crash and the input ``dsms replay`` reads. Format and guarantees: ``docs/archive.md``."""

from dsms.archive.archive import (
    DEFAULT_SEGMENT_BYTES,
    FSYNC_MODES,
    Archive,
    FsyncMode,
    InputRange,
    Recovery,
    validate_input_name,
)
from dsms.archive.frames import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveLocked,
    ArchiveValueError,
    Record,
)
from dsms.archive.segment import Segment, SegmentInfo

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "FSYNC_MODES",
    "Archive",
    "ArchiveCorrupt",
    "ArchiveError",
    "ArchiveLocked",
    "ArchiveValueError",
    "FsyncMode",
    "InputRange",
    "Record",
    "Recovery",
    "Segment",
    "SegmentInfo",
    "validate_input_name",
]
