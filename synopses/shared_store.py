"""A shared window store: the tuples of one stream held once for every window over it (STREAM's synopsis
sharing, digest-004 R-SHR-05/06 and E8: windows of different sizes over one stream are views of one store).

Window operators over the same input keep their tuples as views of the input's column arrays, never copies;
this entity groups those windows and counts the bytes of the distinct arrays they hold, once. Its ``bytes``
is what the stream's window state really costs, and each member window's ``bytes`` is what it would cost
alone.
"""

from __future__ import annotations

from control_tables import Stat
from synopses.base import Synopsis, array_bytes


class SharedWindowStore(Synopsis):
    kind = "shared_store"
    windows = Stat(int, compute="_windows", doc="window synopses sharing this store")

    def __init__(self) -> None:
        self.members: list = []       # WindowSynopsis objects

    def _windows(self) -> int:
        return len(self.members)

    def rows(self) -> int:
        return max((m.rows() for m in self.members), default=0)

    def nbytes(self) -> int:
        seen: set[int] = set()
        total = 0
        for m in self.members:
            for b in [*m.batches, *m.pending]:
                for a in (b.ts, b.sign, *b.cols):
                    base = a.base if a.base is not None else a
                    if id(base) not in seen:
                        seen.add(id(base))
                        total += array_bytes(base)
        return total
