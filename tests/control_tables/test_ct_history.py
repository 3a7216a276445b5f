"""History: Change records in a bounded ring with a sequence that never restarts (SPEC section 8)."""

from __future__ import annotations

import dataclasses

import pytest

from control_tables import Change, History


def test_change_fields_and_dict():
    c = Change(4, "syn:3", "memory", None, 4096, at=77, wall_time=1.5)
    assert c.to_dict() == {"seq": 4, "entity_id": "syn:3", "attr": "memory", "old": None, "new": 4096,
                           "at": 77, "wall_time": 1.5}
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.new = 1  # type: ignore[misc]


def test_record_and_filter():
    h = History()
    a = h.record("op:1", "priority", 0, 3, at=10)
    b = h.record("op:2", "priority", 0, 4)
    c = h.record("op:1", "priority", 3, 5, at=30)
    assert (a.seq, b.seq, c.seq) == (1, 2, 3)
    assert b.at is None
    assert h.changes() == [a, b, c]
    assert h.changes("op:1") == [a, c]
    assert h.changes(since=2) == [c]
    assert h.changes("op:2", since=2) == []
    assert h.last_seq == 3 and len(h) == 3 and list(h) == [a, b, c]


def test_ring_keeps_the_newest_and_counts_the_dropped():
    h = History(limit=2)
    for v in range(5):
        h.record("q:0", "capacity", v, v + 1)
    assert [c.seq for c in h.changes()] == [4, 5]
    assert h.dropped == 3
    h.limit = 4
    h.record("q:0", "capacity", 5, 6)
    assert [c.seq for c in h.changes()] == [4, 5, 6]
    h.limit = 1
    assert [c.seq for c in h.changes()] == [6] and h.dropped == 5


def test_zero_limit_keeps_nothing_but_counts():
    h = History(limit=0)
    assert h.record("op:0", "x", 0, 1).seq == 1
    assert h.changes() == [] and h.dropped == 1


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_bad_limit(bad):
    with pytest.raises(ValueError, match="history limit must be an int >= 0"):
        History(limit=bad)
