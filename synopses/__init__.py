"""Operator state (SPEC section 2): window stores, hash indexes, relation stores, and the byte accounting that
backs each synopsis's control table. This layer imports only ``control_tables``."""

from synopses.base import Synopsis, array_bytes, deep_bytes
from synopses.hash_index import HashIndexSynopsis
from synopses.relation import RelationSynopsis
from synopses.state import StateSynopsis
from synopses.window import WindowSynopsis

__all__ = ["Synopsis", "array_bytes", "deep_bytes", "HashIndexSynopsis", "RelationSynopsis", "StateSynopsis",
           "WindowSynopsis"]
