"""Semi-join (⋉) and anti-join (▷): a left row is in the output, with its own multiplicity, while it has at
least one matching right row (semi) or none (anti) (digest-002a sections 3.3 and 3.6). Right deltas flip the
left rows they match; deltas of both sides are applied in time order, so a left delta waits until the right
input has passed its instant (the binary operators' rule). Hand-worked cases, and the engine's IN / NOT IN
against the reference evaluator."""

import math

import pytest
from harness import NUMPY, Harness, compiled
from oracle.generators import CATALOG, Workload, compare, run_engine, run_reference

from dsms.operators.semi_join import SemiJoinOp

LEFT = ["INT", "STRING"]           # (k, v)
RIGHT = ["INT", "FLOAT"]           # (k, w)
BOTH = [("k", "INT"), ("v", "STRING"), ("rk", "INT"), ("w", "FLOAT")]     # what a predicate sees: left + right


def semi(anti: bool = False, keys: bool = True, predicate: str | None = None) -> Harness:
    """Keyed on k = rk unless ``keys`` is False; ``predicate`` over BOTH."""
    key = (0,) if keys else ()
    pred = compiled(predicate, BOTH) if predicate else None
    return Harness(lambda left, right, out: SemiJoinOp(left, right, out, key, key, pred, anti,
                                                       [NUMPY[t] for t in LEFT], [NUMPY[t] for t in RIGHT]),
                   inputs=2)


def feed(h: Harness) -> list:
    """Left: two copies of (1, x) and one (2, y) at 1. Right: (1, 0.5) arrives at 2 and leaves at 4."""
    h.push([1, 1, 1], [(1, "x"), (1, "x"), (2, "y")], LEFT, side=0)
    h.push([2], [(1, 0.5)], RIGHT, side=1)
    h.push([4], [(1, 0.5)], RIGHT, sign=[-1], side=1)
    h.heartbeat(10)
    return h.run()


def test_semi_join_shows_left_rows_while_they_have_a_match_with_their_multiplicity():
    assert feed(semi()) == [(2, 1, (1, "x")), (2, 1, (1, "x")), (4, -1, (1, "x")), (4, -1, (1, "x"))]


def test_anti_join_shows_left_rows_while_they_have_none():
    assert feed(semi(anti=True)) == [(1, 1, (1, "x")), (1, 1, (1, "x")), (1, 1, (2, "y")),
                                     (2, -1, (1, "x")), (2, -1, (1, "x")), (4, 1, (1, "x")), (4, 1, (1, "x"))]


def test_a_second_match_changes_nothing_and_a_left_delete_retracts_one_copy():
    h = semi()
    h.push([1, 1], [(3, 1.0), (3, 2.0)], RIGHT, side=1)
    h.push([1, 1, 2], [(3, "p"), (3, "p"), (3, "p")], LEFT, sign=[1, 1, -1], side=0)
    h.push([3], [(3, 1.0)], RIGHT, sign=[-1], side=1)         # one match is left: still visible
    h.heartbeat(5)
    assert h.run() == [(1, 1, (3, "p")), (1, 1, (3, "p")), (2, -1, (3, "p"))]


def test_a_left_delta_waits_until_the_right_input_has_passed_its_instant():
    h = semi(anti=True)
    h.push([5], [(1, "x")], LEFT, side=0)
    h.heartbeat(4, side=1)
    assert h.run() == [] and h.op.held_stamps() == [(5, 1)]
    h.push([5], [(1, 9.0)], RIGHT, side=1)                  # a match at the same instant: never visible
    h.heartbeat(6)
    out = h.run()                                            # in and out again at 5: a net change of nothing
    assert sorted(out) == [(5, -1, (1, "x")), (5, 1, (1, "x"))]


def test_a_predicate_beyond_the_keys():
    h = semi(keys=False, predicate="w > 1.0 AND v = 'x'")
    h.push([1, 1], [(1, "x"), (2, "y")], LEFT, side=0)
    h.push([2, 2], [(7, 0.5), (8, 2.0)], RIGHT, side=1)     # (8, 2.0) matches (1, x) alone
    h.heartbeat(3)
    assert h.run() == [(2, 1, (1, "x"))]


@pytest.mark.parametrize("anti", [False, True])
def test_a_nan_key_matches_nothing_not_even_a_nan(anti):
    floats = [NUMPY["FLOAT"]]
    h = Harness(lambda left, right, out: SemiJoinOp(left, right, out, (0,), (0,), None, anti, floats, floats),
                inputs=2)
    h.push([1, 1], [(math.nan,), (2.0,)], ["FLOAT"], side=0)
    h.push([1, 1], [(math.nan,), (2.0,)], ["FLOAT"], side=1)
    h.heartbeat(2)
    out = [(t, s, r[0]) for t, s, r in h.run()]
    if anti:                                   # NaN has no match; 2.0 shows at 1 until its match, also at 1
        assert len(out) == 3 and math.isnan(out[0][2]) and sorted(out[1:]) == [(1, -1, 2.0), (1, 1, 2.0)]
    else:
        assert out == [(1, 1, 2.0)]


QUERIES = {"IN": "SELECT {op}(b) FROM S [RANGE 3] WHERE a IN (SELECT a FROM R)",
           "NOT IN": "SELECT {op}(b) FROM S [RANGE 3] WHERE a NOT IN (SELECT a FROM R)",
           "EXISTS": "SELECT {op}(b) FROM S [ROWS 2] WHERE EXISTS (SELECT * FROM R WHERE R.a = S.a AND R.e <> 'y')"}
ACTIONS = (("update", "R", [{"a": 1, "e": "x"}], [], 0),
           ("push", "S", [{"a": 1, "b": 10, "c": ""}, {"a": 2, "b": 20, "c": ""}, {"a": 1, "b": 10, "c": ""}],
            [1, 1, 2]),
           ("update", "R", [{"a": 2, "e": "y"}], [{"a": 1, "e": "x"}], 3),
           ("push", "S", [{"a": 2, "b": 21, "c": ""}], [4]),
           ("update", "R", [{"a": 1, "e": "z"}], [], 5))


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM"])
@pytest.mark.parametrize("name", QUERIES)
def test_through_the_engine_the_reference_evaluator_agrees(name, op):
    w = Workload(CATALOG, QUERIES[name].format(op=op), ACTIONS, until=9)
    expected = run_reference(w)
    assert expected
    compare(expected, run_engine(w))
