"""Control tables: the entity base, typed statistics and knobs, the registry of ids and the change history.

Source: SPEC section 8; digest-004 section 2.I (STREAM's Entity and Control Table, P1 section 6.1, P2 section 4).
This package is the bottom layer of dsms and imports no other package of the project.
"""

from __future__ import annotations

from typing import Any

from .attributes import Attribute, ComputedStat, Knob, Stat, ewma
from .entity import Entity
from .errors import (
    ControlTableError,
    HookError,
    InvalidValueError,
    NoSuchAttributeError,
    NoSuchEntityError,
    ReadOnlyAttributeError,
)
from .history import Change, History
from .registry import Registry, SystemEntity

__all__ = [
    "Attribute", "Change", "ComputedStat", "ControlTableError", "Entity", "History", "HookError",
    "InvalidValueError", "Knob", "NoSuchAttributeError", "NoSuchEntityError", "ReadOnlyAttributeError",
    "Registry", "Stat", "SystemEntity", "attribute_table", "document", "ewma",
]


def __getattr__(name: str) -> Any:
    # docgen is loaded lazily so that `python -m control_tables.docgen` does not find it already imported.
    if name in ("attribute_table", "document"):
        from . import docgen

        return getattr(docgen, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
