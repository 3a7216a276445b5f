"""A synopsis over state an operator keeps in its own structure (an aggregate's group table): the control
table reads its size and bytes through callbacks, so the numbers are the operator's real ones."""

from __future__ import annotations

from collections.abc import Callable

from synopses.base import Synopsis


class StateSynopsis(Synopsis):
    kind = "state"

    def __init__(self, what: str, rows: Callable[[], int], nbytes: Callable[[], int]) -> None:
        self.what = what
        self._rows = rows
        self._nbytes = nbytes

    def rows(self) -> int:
        return self._rows()

    def nbytes(self) -> int:
        return self._nbytes()
