"""The small-batch paths of issue 15 checked end to end against the reference evaluator (tests/oracle): the
predicates and projections compiled to lean kernels (``x % d = 0`` as a multiplication, string ``OR``/``IN``
chains as set lookups, INT ``/ %`` by constants, FLOAT arithmetic of an INT and a constant), selections that
read only their predicate's columns, operators that skip their no-op hooks, heartbeats forwarded as the object
read, and windows that skip releases with nothing due; on many small pushes with heartbeats between them. The
control-table counters of every operator are checked to keep counting on such runs."""

from __future__ import annotations

import random

import pytest
from oracle.generators import check_query

from dsms.batch import Heartbeat
from dsms.operators.base import Operator

CATALOG = ("REGISTER STREAM S (a INT, b INT, s STRING, x FLOAT)",)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INTS = [0, 1, -1, 7, -7, 9, 123, -123, 246, 861, 2**40 * 3, -(2**40) * 7, INT64_MIN, INT64_MAX, 55, -56, 3**39]
STATES = ["OR", "ID", "CA", "WA", "or", ""]


def actions(seed: int, pushes: int = 40) -> tuple[list, int]:
    """Pushes of 0-6 rows (an empty one is skipped), each at a later instant, some followed by a heartbeat."""
    rng = random.Random(seed)
    out, ts = [], 0
    for _ in range(pushes):
        ts += rng.randint(1, 4)
        k = rng.randint(1, 6)
        rows = [{"a": rng.choice(INTS) if rng.random() < 0.5 else rng.randint(-2000, 2000), "b": rng.randint(-50, 50),
                 "s": rng.choice(STATES), "x": rng.choice([0.5, -2.25, 1e10])} for _ in range(k)]
        out.append(("push", "S", rows, [ts] * k))
        if rng.random() < 0.5:
            out.append(("heartbeat", ts + rng.randint(0, 3)))
            ts += 3
    return out, ts + 25


QUERIES = [
    "SELECT a, b FROM S WHERE a % 123 = 0",
    "SELECT a, s FROM S WHERE a % -9 <> 0 AND b % 7 = 0",
    "SELECT b, s FROM S WHERE s = 'OR' OR s = 'ID' OR 'CA' = s",
    "SELECT a FROM S WHERE s NOT IN ('OR', 'WA') AND s IN ('ID', 'OR', 'CA', 'or')",
    "SELECT a * 0.908 AS p, a / 7 AS q, a % -1 AS r, b - 3 AS d, 2 * b AS m, a / -1 AS n, a % 0 AS z FROM S",
    "SELECT ISTREAM(a, b) FROM S [RANGE 10 SLIDE 10] WHERE b % 3 = 0",
    "SELECT RSTREAM(COUNT(*) AS n, SUM(b) AS t) FROM S [RANGE 8 SLIDE 4]",
    "SELECT ISTREAM(s, b) FROM S [RANGE 5] WHERE s = 'ID' OR s = 'CA'",
    "SELECT DSTREAM(a) FROM S [ROWS 3]",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_pushes_equal_the_reference(query: str, seed: int) -> None:
    acts, until = actions(seed)
    eng = check_query(CATALOG, query, acts, until)
    for op in eng.ops:                      # every operator ran and counted its runs
        assert op.batches_in > 0
        if op.kind == "select":
            assert 0 < op.tuples_in and op.tuples_out <= op.tuples_in


def test_counters_keep_counting_on_small_runs_and_heartbeat_only_runs() -> None:
    """tuples_in / tuples_out / batches_in / last_ts of a select and the projection above it, after runs that
    read a few rows, runs that drop them all, and runs that only forward a heartbeat (which count as runs)."""
    from dsms import Engine

    eng = Engine()
    eng.execute(CATALOG[0])
    q = eng.execute("SELECT a, b + 1 AS b FROM S WHERE a % 123 = 0")
    sel, ist = eng.ops
    assert (sel.kind, ist.kind) == ("select", "project")
    kept = read = 0
    for t in range(1, 30):
        rows = [{"a": 123 * t if k % 2 else t * 10 + 1, "b": k, "s": "", "x": 0.0} for k in range(t % 4)]
        if rows:
            eng.push("S", rows, ts=[t] * len(rows))
            read += len(rows)
            kept += sum(r["a"] % 123 == 0 for r in rows)
        eng.heartbeat(t)
        eng.run()
        assert (sel.tuples_in, sel.tuples_out, ist.tuples_in, ist.tuples_out) == (read, kept, kept, kept)
        assert sel.batches_in == t and ist.batches_in == t      # one run each per push or heartbeat
        assert sel.frontier_ts == t and ist.frontier_ts == t
    assert sel.last_ts == max(t for t in range(1, 30) if t % 4)
    assert 0.0 < sel.selectivity < 1.0 and sel.cost_ns_per_tuple > 0.0
    assert len(q.drain()) == kept


def test_a_heartbeat_is_forwarded_as_the_object_read_and_built_when_the_frontier_differs() -> None:
    from dsms import Engine

    eng = Engine()
    eng.execute(CATALOG[0])
    eng.execute("SELECT a FROM S WHERE b > 0")
    sel = eng.ops[0]
    out = sel.output
    r = out.reader()
    eng.heartbeat(5)
    src_beat = eng.source_queue("S")._items[-1]
    eng.run()
    beat = r.get()
    assert type(beat) is Heartbeat and beat.ts == 5 and beat is src_beat
    eng.push("S", [{"a": 1, "b": 1, "s": "", "x": 0.0}], ts=[9])      # a batch sets the frontier: a new one
    eng.run()
    got = list(iter(r.get, None))          # (the query reads this queue too: it holds what the query has not read)
    assert [type(x).__name__ for x in got] == ["Batch"]           # the batch says 9; no heartbeat is needed
    assert sel.frontier() == 9


def test_no_op_hooks_are_skipped_only_where_the_class_keeps_them() -> None:
    from dsms.operators.netting import ToStreamOp
    from dsms.operators.range_window import RangeWindowOp
    from dsms.operators.select import SelectOp

    assert SelectOp._frontier_noop and SelectOp._hb_noop and SelectOp._forward_plain
    assert not ToStreamOp._frontier_noop and ToStreamOp._forward_plain
    assert not RangeWindowOp._frontier_noop and not RangeWindowOp._forward_plain
    assert Operator._frontier_noop


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_queue_counts_what_its_slowest_reader_has_not_read(readers: int) -> None:
    """``tuples`` and ``bytes`` of a queue with one, two or three readers reading at different paces: the rows
    and bytes of the items some reader has not read yet, down to zero once all have read everything."""
    import numpy as np

    from dsms.batch import Batch
    from dsms.queues import Queue

    q = Queue()
    rs = [q.reader() for _ in range(readers)]
    items = []
    for t in range(1, 9):
        b = Batch(np.arange(t, dtype=np.int64) + 10 * t, np.ones(t, dtype=np.int8),
                  [np.array(["x" * t] * t, dtype=object)])
        items += [b, Heartbeat(10 * t + 9)]
    for it in items:
        q.put(it)
    rng = random.Random(readers)
    pos = [0] * readers
    while min(pos) < len(items):
        j = rng.randrange(readers)
        if pos[j] < len(items):
            assert rs[j].get() is items[pos[j]]
            pos[j] += 1
        held = items[min(pos):]
        assert q.tuples == sum(len(it) for it in held)
        assert q.bytes == sum(it.nbytes for it in held)
    assert (q.tuples, q.bytes, len(q)) == (0, 0, 0)
