"""A synopsis over state an operator keeps in its own structure (an aggregate's group table): the control
table reads its size and bytes through callbacks, so the numbers are the operator's real ones."""

from __future__ import annotations

from collections.abc import Callable

from control_tables import Knob, Stat
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


class RowStateSynopsis(StateSynopsis):
    """The row multiplicities of DISTINCT and the set operations, exact or held in a Bloom filter (issue 14
    item 3). The ``kind`` knob asks for a kind; the operator applies it at a future instant (``in_effect``
    says which kind holds the state now). ``fp_rate`` and ``bloom_rows`` size the filter at the switch."""

    kind = "row_state"
    state_kind = Knob(str, name="kind", default="exact", choices=("exact", "bloom"),
                      doc="exact: every distinct row and its count; bloom: a Bloom filter (a counting one when "
                          "the input deletes) of fp_rate; takes effect at a future instant (in_effect)")
    fp_rate = Knob(float, default=0.01, gt=0.0, lt=1.0, doc="target false-positive rate of the Bloom filter")
    bloom_rows = Knob(int | None, default=None, ge=1, unit="rows",
                      doc="distinct rows the filter is sized for; None: twice the rows held at the switch, "
                          "at least 1024")
    in_effect = Stat(str, default="exact", doc="the kind holding the state now (a requested switch waits for "
                     "its instant, and a switch back to exact for the filter to empty)")

    def __init__(self, what: str, rows: Callable[[], int], nbytes: Callable[[], int],
                 on_kind: Callable[[str], None]) -> None:
        super().__init__(what, rows, nbytes)
        self._on_kind = on_kind

    def on_set_state_kind(self, old: str, new: str) -> None:
        self._on_kind(new)
