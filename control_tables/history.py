"""The change history of control-table knobs: one ``Change`` per accepted write, in a bounded ring.

Source: SPEC section 8 ("writes are ... recorded in a change history"); digest-004 section 2.I (STREAM's
Control Table, P1 section 6.1) and section 2.J R-XML-04 (every run-time change to a plan must be reflected
where it persists). ``at`` is the logical position of the change given by the caller, normally the engine's
application time, so that a replay can reapply changes at the same instants; ``wall_time`` is for display
only and never decides anything. The ring keeps the newest ``limit`` changes; ``seq`` keeps counting across
the ones it drops, so a reader polling with ``since`` can see that it missed some.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Change:
    """One accepted knob write: ``old`` -> ``new`` on ``entity_id``'s ``attr``.

    >>> Change(1, "op:7", "priority", 0, 5, at=120, wall_time=0.0).to_dict()["new"]
    5
    """

    seq: int
    entity_id: str
    attr: str
    old: Any
    new: Any
    at: int | None = None
    wall_time: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The change as a JSON-ready map (field name -> value)."""
        return asdict(self)


class History:
    """A bounded ring of ``Change`` records with a sequence number that never restarts.

    >>> h = History(limit=2)
    >>> for v in (1, 2, 3):
    ...     _ = h.record("op:0", "priority", v - 1, v)
    >>> [c.seq for c in h.changes()], h.dropped
    ([2, 3], 1)
    """

    def __init__(self, limit: int = 1000) -> None:
        self._ring: deque[Change] = deque(maxlen=_check_limit(limit))
        self._seq = 0
        self.dropped = 0

    @property
    def limit(self) -> int:
        """How many changes are kept; setting it keeps the newest ones."""
        return self._ring.maxlen or 0

    @limit.setter
    def limit(self, limit: int) -> None:
        limit = _check_limit(limit)
        self.dropped += max(0, len(self._ring) - limit)
        self._ring = deque(self._ring, maxlen=limit)

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the latest change recorded (0 before the first)."""
        return self._seq

    def record(self, entity_id: str, attr: str, old: Any, new: Any, at: int | None = None) -> Change:
        """Append a change and return it; the oldest change falls out when the ring is full."""
        self._seq += 1
        change = Change(self._seq, entity_id, attr, old, new, at, time.time())
        if len(self._ring) == self._ring.maxlen:
            self.dropped += 1
        self._ring.append(change)
        return change

    def changes(self, entity_id: str | None = None, since: int | None = None) -> list[Change]:
        """The changes kept, oldest first; only ``entity_id``'s when given, only ``seq > since`` when given."""
        return [c for c in self._ring
                if (entity_id is None or c.entity_id == entity_id) and (since is None or c.seq > since)]

    def __len__(self) -> int:
        return len(self._ring)

    def __iter__(self) -> Iterator[Change]:
        return iter(list(self._ring))


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"history limit must be an int >= 0, got {limit!r}")
    return limit
