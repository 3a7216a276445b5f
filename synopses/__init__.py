"""Operator state (SPEC section 2): window stores, join indexes (sorted key runs), relation stores, and the byte
accounting that backs each synopsis's control table. This layer imports only ``control_tables``."""

from synopses.base import Synopsis, array_bytes, deep_bytes
from synopses.relation import RelationSynopsis
from synopses.sorted_run_index import SortedRunIndexSynopsis
from synopses.state import StateSynopsis
from synopses.window import WindowSynopsis

__all__ = ["Synopsis", "array_bytes", "deep_bytes", "SortedRunIndexSynopsis", "RelationSynopsis",
           "StateSynopsis", "WindowSynopsis"]
