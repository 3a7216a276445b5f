"""Relation changes validated without being applied (``Engine.prepare_update``) and applied later
(``apply_update``): the one set of rules the server uses between validating a request and archiving it."""

import pytest

from dsms import Engine, InputError


def engine() -> Engine:
    eng = Engine()
    eng.execute("REGISTER RELATION R (k INT, s STRING)")
    return eng


def test_inserts_of_an_instant_come_before_its_deletes_and_errors_name_the_row_as_given():
    eng = engine()
    change = eng.prepare_update("R", [{"k": 1, "s": "a"}, {"k": 1, "s": "a"}], [5, 5], [-1, 1])
    assert [b.sign.tolist() for b in change.batches] == [[1, -1]]     # the insert was moved first
    assert eng.apply_update("R", change) == 2 and eng.relation_snapshot("R") is None
    with pytest.raises(InputError) as e:
        eng.prepare_update("R", [{"k": 2, "s": "b"}, {"k": 3, "s": "c"}], [6, 6], [-1, 1])
    assert e.value.index == 0 and "not in 'R'" in str(e.value)
    with pytest.raises(InputError) as e:
        eng.prepare_update("R", [{"k": 2, "s": "b"}], [7], [0])
    assert e.value.index == 0 and "sign" in str(e.value)


def test_prepare_changes_nothing_and_one_batch_per_instant():
    eng = engine()
    change = eng.prepare_update("R", [{"k": 1, "s": "a"}, {"k": 2, "s": "b"}, {"k": 1, "s": "a"}], [1, 2, 2],
                                [1, 1, -1])
    assert eng.relation_snapshot("R") is None and eng.frontier("R") is None
    assert [b.ts.tolist() for b in change.batches] == [[1], [2, 2]]
    eng.apply_update("R", change)
    snap = eng.relation_snapshot("R")
    assert snap.rows() == [(2, "b")] and eng.frontier("R") == 2


def test_a_change_prepared_before_another_is_checked_again_when_applied():
    eng = engine()
    eng.update("R", insert=[{"k": 1, "s": "a"}], ts=1)
    first = eng.prepare_update("R", [{"k": 1, "s": "a"}], 2, [-1])
    eng.update("R", delete=[{"k": 1, "s": "a"}], ts=2)
    with pytest.raises(InputError) as e:
        eng.apply_update("R", first)
    assert "not in 'R'" in str(e.value)
    assert eng.update("R", insert=[{"k": 4, "s": "d"}], delete=[{"k": 4, "s": "d"}], ts=3) == 2
