"""A window store: the tuples of a sliding window, in the order they will leave it (digest-004 R-PLAN-09).

It holds batches (objects with ``ts``, ``sign``, ``cols``, ``take``/``slice``) and only counts them; the window
operator decides when tuples enter and leave. When the store is over its ``memory`` budget the operator evicts
the oldest tuples early, as STREAM shrinks a window to w = floor(M / tuple size) (digest-004 P-18), and the
results become approximate: ``evicted`` counts what left early.
"""

from __future__ import annotations

from control_tables import Stat
from synopses.base import Synopsis, rows_bytes


class WindowSynopsis(Synopsis):
    kind = "window"
    evicted = Stat(int, default=0, unit="tuples", doc="tuples evicted early to stay within the memory budget")
    approximate = Stat(bool, default=False, doc="true once a tuple left the window early: results are "
                       "then computed over a smaller window")

    def __init__(self) -> None:
        self.batches: list = []     # the window's tuples, oldest first (each batch carries its leave times)
        self.pending: list = []     # tuples not yet in the window (SLIDE windows insert at the next slide)

    def rows(self) -> int:
        return sum(len(b) for b in self.batches) + sum(len(b) for b in self.pending)

    def nbytes(self) -> int:
        return sum(rows_bytes(b.ts, b.sign, b.cols) for b in self.batches) + \
            sum(rows_bytes(b.ts, b.sign, b.cols) for b in self.pending)

    def row_bytes(self) -> float:
        """Average bytes per held tuple (what one more or one fewer tuple costs)."""
        n = self.rows()
        return self.nbytes() / n if n else 0.0
