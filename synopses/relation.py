"""A relation store: each distinct row with its multiplicity (duplicate elimination, set operations,
semi-joins, RSTREAM and views keep one; digest-004 R-PLAN-06)."""

from __future__ import annotations

import sys

from synopses.base import Synopsis


class RelationSynopsis(Synopsis):
    kind = "relation"

    def __init__(self, what: str = "") -> None:
        self.what = what
        self.counts: dict = {}

    def add(self, row: tuple, delta: int) -> tuple[int, int]:
        """Change a row's multiplicity by ``delta``; returns (old, new). A row at zero is forgotten."""
        old = self.counts.get(row, 0)
        new = old + delta
        if new:
            self.counts[row] = new
        else:
            self.counts.pop(row, None)
        return old, new

    def rows(self) -> int:
        return len(self.counts)

    def nbytes(self) -> int:
        total = sys.getsizeof(self.counts)
        for row, c in self.counts.items():
            total += sys.getsizeof(row) + sys.getsizeof(c) + sum(sys.getsizeof(v) for v in row)
        return total
