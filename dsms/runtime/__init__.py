"""The server runtime: one Engine driven from asyncio, the input archive, catalog persistence and result
fan-out (SPEC sections 7, 9 and 10). ``Runtime`` (``runtime.py``) is the door; the other modules each hold
one of its concerns (see ``runtime.py``'s docstring and docs/architecture.md)."""

from dsms.runtime.catalog_log import CATALOG_NAME
from dsms.runtime.errors import Conflict, LimitExceeded, NotFound, Overloaded, RuntimeFailure
from dsms.runtime.results import (
    Closed,
    Gap,
    HeartbeatMark,
    QueryResults,
    ResultChunk,
    SnapshotMark,
    Subscriber,
    iter_results,
)
from dsms.runtime.runtime import Runtime

__all__ = ["Runtime", "Subscriber", "ResultChunk", "Gap", "HeartbeatMark", "SnapshotMark", "Closed", "QueryResults",
           "Overloaded", "LimitExceeded", "NotFound", "Conflict", "RuntimeFailure", "CATALOG_NAME",
           "iter_results"]
