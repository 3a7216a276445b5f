"""The partitioned window ``[PARTITION BY k ROWS N]``: the N latest elements of each partition, unioned
(SPEC section 3; not a GROUP BY, digest-004 P-2). An element enters at its timestamp and pushes out the
oldest element of its own partition only, at the same instant, so expiry is not first in, first out across
partitions (digest-003 section 3.10). Checked on hand-worked cases, and through the engine against the
reference evaluator."""

import pytest
from harness import Harness
from oracle.generators import CATALOG, Workload, compare, run_engine, run_reference

from dsms.operators.partition_window import PartitionWindowOp

TYPES = ["STRING", "INT"]


def window(rows: int, *partition: int) -> Harness:
    return Harness(lambda inp, out: PartitionWindowOp(rows, partition, inp, out))


def test_each_partition_keeps_its_n_latest_and_evicts_its_own_oldest():
    h = window(2, 0)
    h.push([1, 2, 3, 4, 5], [("a", 1), ("b", 2), ("a", 3), ("a", 4), ("b", 5)], TYPES)
    assert h.run() == [(1, 1, ("a", 1)), (2, 1, ("b", 2)), (3, 1, ("a", 3)),
                       (4, 1, ("a", 4)), (4, -1, ("a", 1)),        # a's third element pushes out a's first
                       (5, 1, ("b", 5))]                          # b has two: nothing leaves
    assert h.op.size == 4 and h.frontier == 5


def test_several_elements_of_one_instant_count_in_arrival_order():
    h = window(1, 0)
    h.push([1, 6, 6], [("b", 1), ("b", 2), ("b", 3)], TYPES)
    assert h.run() == [(1, 1, ("b", 1)), (6, 1, ("b", 2)), (6, -1, ("b", 1)), (6, 1, ("b", 3)),
                       (6, -1, ("b", 2))]
    assert h.op.size == 1


def test_a_partition_of_two_columns():
    h = window(1, 0, 1)
    h.push([1, 2, 3], [("a", 1), ("a", 2), ("a", 1)], TYPES)
    assert h.run() == [(1, 1, ("a", 1)), (2, 1, ("a", 2)), (3, 1, ("a", 1)), (3, -1, ("a", 1))]


def test_a_heartbeat_expires_nothing():
    h = window(1, 0)
    h.push([1], [("a", 1)], TYPES)
    h.run()
    h.heartbeat(100)
    assert h.run() == [] and h.frontier == 100 and h.op.size == 1


ACTIONS = (("push", "S", [{"a": 1, "b": 1, "c": "x"}, {"a": 2, "b": 2, "c": "y"}], [1, 1]),
           ("push", "S", [{"a": 1, "b": 3, "c": "x"}], [2]),
           ("heartbeat", 3),
           ("push", "S", [{"a": 1, "b": 4, "c": "z"}, {"a": 1, "b": 5, "c": "z"}, {"a": 2, "b": 6, "c": "y"}],
            [4, 4, 7]))


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_through_the_engine_the_reference_evaluator_agrees(op):
    w = Workload(CATALOG, f"SELECT {op}(a, b) FROM S [PARTITION BY a ROWS 2]", ACTIONS, until=10)
    expected = run_reference(w)
    assert expected                          # every form has something to say on this input
    compare(expected, run_engine(w))
