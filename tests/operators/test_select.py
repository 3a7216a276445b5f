"""Select (σ): keeps exactly the elements whose predicate holds, inserts and deletes alike (selection is
snapshot-reducible, digest-002a section 2.10), with their timestamps, signs and order; passes every frontier on,
also when it drops a whole batch; counts what it read and wrote."""

import math

from harness import Harness, compiled

from dsms.operators.select import SelectOp

SCHEMA = [("k", "INT"), ("x", "FLOAT"), ("s", "STRING")]
TYPES = [t for _, t in SCHEMA]


def select(predicate: str) -> Harness:
    return Harness(lambda inp, out: SelectOp(compiled(predicate, SCHEMA), inp, out))


def test_keeps_the_rows_whose_predicate_holds_inserts_and_deletes_alike():
    h = select("k > 1 AND s <> 'b'")
    h.push([1, 1, 2, 3, 3], [(1, 0.5, "a"), (2, 1.5, "a"), (3, 2.5, "b"), (2, 1.5, "a"), (4, 0.0, "c")], TYPES,
           sign=[1, 1, 1, -1, 1])
    assert h.run() == [(1, 1, (2, 1.5, "a")), (3, -1, (2, 1.5, "a")), (3, 1, (4, 0.0, "c"))]
    assert h.frontier == 3


def test_a_batch_that_passes_whole_is_forwarded_unchanged():
    h = select("x >= 0.0")
    h.push([5, 6], [(1, 0.0, "a"), (1, 0.0, "a")], TYPES)          # duplicates stay duplicates
    assert h.run() == [(5, 1, (1, 0.0, "a")), (6, 1, (1, 0.0, "a"))]


def test_a_batch_dropped_whole_still_moves_the_frontier():
    h = select("k = 7")
    h.push([4, 9], [(1, 1.0, "a"), (2, 2.0, "b")], TYPES)
    assert h.run() == []
    assert h.frontier == 9                  # the readers above learn that nothing before 9 will come
    h.heartbeat(12)
    assert h.run() == [] and h.frontier == 12


def test_comparisons_with_nan_are_false_and_inf_compares_as_a_number():
    h = select("x > 1.0")
    h.push([1, 1, 1, 1], [(1, math.nan, "a"), (2, math.inf, "a"), (3, -math.inf, "a"), (4, 1.0, "a")], TYPES)
    assert h.run() == [(1, 1, (2, math.inf, "a"))]


def test_like_and_in_lists():
    h = select("s LIKE 'a%' AND k IN (1, 3)")
    h.push([1, 2, 3, 4], [(1, 0.0, "ab"), (3, 0.0, "ba"), (3, 0.0, "a"), (2, 0.0, "abc")], TYPES)
    assert h.run() == [(1, 1, (1, 0.0, "ab")), (3, 1, (3, 0.0, "a"))]


def test_statistics_count_rows_read_and_written():
    h = select("k < 2")
    h.push([1, 2, 3, 4], [(1, 0.0, "a"), (2, 0.0, "a"), (0, 0.0, "a"), (5, 0.0, "a")], TYPES)
    h.run()
    assert (h.op.tuples_in, h.op.tuples_out, h.op.selectivity) == (4, 2, 0.5)
    assert h.op.explain() == "select: k < 2"


def test_columns_keep_only_those_columns_in_their_order_for_kept_rows_and_whole_batches():
    h = Harness(lambda inp, out: SelectOp(compiled("k > 1", SCHEMA), inp, out, columns=[2, 0]))
    h.push([1, 2, 3], [(1, 0.5, "a"), (2, 1.5, "b"), (3, 2.5, "c")], TYPES, sign=[1, -1, 1])
    assert h.run() == [(2, -1, ("b", 2)), (3, 1, ("c", 3))]
    h.push([4, 5], [(5, 0.0, "d"), (6, 0.0, "e")], TYPES)                    # every row passes
    assert h.run() == [(4, 1, ("d", 5)), (5, 1, ("e", 6))]
    assert h.op.explain() == "select: k > 1 [keeps $2, $0]"      # the harness names the predicate only


def test_no_column_kept_still_passes_the_rows_count():
    h = Harness(lambda inp, out: SelectOp(compiled("k > 1", SCHEMA), inp, out, columns=[]))
    h.push([1, 2], [(1, 0.5, "a"), (2, 1.5, "b")], TYPES)
    assert h.run() == [(2, 1, ())]
