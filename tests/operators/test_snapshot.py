"""Snapshot: a plan built after a relation already holds rows first receives the relation's live rows, each
stamped with its insert time and in time order, then the relation's later changes (contract, "Registration
time"): without it a late query would see the relation empty and then deletes of rows it never saw. Its
frontier is passed on only after the snapshot, whose rows are stamped below it."""

from harness import Harness, batch

from dsms import Engine
from dsms.batch import Heartbeat
from dsms.operators.snapshot import SnapshotOp
from dsms.queues import Queue

TYPES = ["INT", "STRING"]


def test_the_snapshot_comes_first_then_the_relations_changes():
    snap = batch([1, 3], [(1, "a"), (2, "b")], TYPES)
    h = Harness(lambda inp, out: SnapshotOp(snap, inp, out))
    assert h.op.ready()                                    # it has the snapshot to give before any input
    h.push([5, 6], [(1, "a"), (3, "c")], TYPES, sign=[-1, 1])
    assert h.run() == [(1, 1, (1, "a")), (3, 1, (2, "b")), (5, -1, (1, "a")), (6, 1, (3, "c"))]
    assert not h.op.ready() and h.op.explain() == "snapshot: 2 rows"
    h.push([7], [(2, "b")], TYPES, sign=[-1])
    assert h.run() == [(7, -1, (2, "b"))]                  # afterwards it passes the changes on as they come


def test_the_frontier_the_relation_had_passed_follows_the_snapshot_not_precedes_it():
    inp, out = Queue(), Queue()
    inp.put(Heartbeat(4))                                  # the relation had passed 4 before the plan was built
    reader = out.reader()
    op = SnapshotOp(batch([1, 2], [(1, "a"), (2, "b")], TYPES), inp, out)
    op.announce_frontier()
    assert reader.get() is None                            # nothing yet: the rows at 1 and 2 are still to come
    assert op.run() == 1
    first, second = reader.get(), reader.get()
    assert first.ts.tolist() == [1, 2] and isinstance(second, Heartbeat) and second.ts == 4


def test_a_query_registered_after_the_relation_changed_sees_its_live_rows_at_their_insert_times():
    eng = Engine()
    eng.execute("REGISTER RELATION R (a INT, e STRING)")
    eng.update("R", insert=[{"a": 1, "e": "x"}, {"a": 2, "e": "y"}], ts=1)
    eng.update("R", insert=[{"a": 3, "e": "z"}], ts=2)
    eng.update("R", delete=[{"a": 2, "e": "y"}], ts=4)
    eng.heartbeat(5)
    eng.run()
    q = eng.execute("SELECT a, e FROM R WHERE a <> 3")
    assert "snapshot: 2 rows" in eng.explain(q.id)
    eng.update("R", delete=[{"a": 1, "e": "x"}], insert=[{"a": 4, "e": "w"}], ts=6)
    eng.heartbeat(8)
    eng.run()
    got = [(e.ts, e.sign, e.row["a"]) for e in q.drain()]
    # (2, y) left at 4 before the query existed: not seen at all; (3, z) is filtered out
    assert got == [(1, 1, 1), (6, -1, 1), (6, 1, 4)]
