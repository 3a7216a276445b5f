"""The fold of a keyed relation's changelog (dsms/operators/keyed_fold.py: the last change of each key) equals
the general fold (``fold_changelog``, itself checked against the row-by-row fold in test_changelog_fold.py) on
random changelogs of relations with a key, NaN and -0.0 in key columns, keys of one and of several columns and
no key at all (an aggregate without GROUP BY); with colliding hashes it steps aside. Through the engine, a
query registered late on a view over an aggregate starts from the rows the view's changelog says are live."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, compare, run_engine, run_reference

from dsms import Engine
from dsms.batch import Batch
from dsms.operators import keyed_fold
from dsms.operators.netting import ChangelogOp, fold_changelog
from synopses import rowcodes

DT = [np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.int64), np.dtype(object)]
KEYS = {"int": (0,), "float and int": (1, 0), "string": (3,), "none": ()}


def _same(v):
    """A value as SQL equality sees it (-0.0 is 0.0, NaN equals NaN), for a Python dict key."""
    if isinstance(v, float):
        return "nan" if v != v else v + 0.0
    return v


@st.composite
def keyed_changelogs(draw, key: tuple[int, ...]):
    """A relation with at most one row per key: per instant, each touched key's old row deleted (if any),
    then its new row inserted (or not: the key leaves)."""
    live: dict = {}
    ts, sign, out = [], [], []
    t = 0
    keyvals = st.tuples(st.integers(0, 3), st.sampled_from([0.5, float("nan"), -0.0, 0.0]),
                        st.integers(0, 1), st.sampled_from(["a", "b"]))
    for _ in range(draw(st.integers(0, 12))):
        t += draw(st.integers(1, 2))
        touched = draw(st.lists(keyvals, max_size=5))
        seen = set()
        for kv in touched:
            k = tuple(_same(kv[j]) for j in key)
            if k in seen:
                continue
            seen.add(k)
            old = live.pop(k, None)
            if old is not None:
                ts.append(t), sign.append(-1), out.append(old)
            if old is None or draw(st.booleans()):
                row = list(kv)
                row[2] = draw(st.integers(-3, 3))              # the value column
                if old is not None and draw(st.booleans()):
                    row = list(old[:2]) + [row[2]] + [old[3]]  # the key's spelling kept (-0.0 stays -0.0)
                row = tuple(row)
                live[k] = row
                ts.append(t), sign.append(1), out.append(row)
    cols = [np.array([r[j] for r in out], dtype=DT[j]) for j in range(4)]
    return Batch(np.array(ts, dtype=np.int64), np.array(sign, dtype=np.int8), cols)


def _rows(b: Batch):
    return sorted((t, repr(tuple(v + 0.0 if isinstance(v, float) else v for v in r)))
                  for t, r in zip(b.ts.tolist(), b.rows()))


@pytest.mark.parametrize("name", sorted(KEYS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_keyed_fold_equals_the_general_fold(name, data):
    key = KEYS[name]
    b = data.draw(keyed_changelogs(key))
    fast = keyed_fold.fold_keyed(b, key)
    assert fast is not None
    assert (fast.sign == 1).all() and (np.diff(fast.ts) >= 0).all()
    assert _rows(fast) == _rows(fold_changelog(b, DT))


INT_EDGES = st.sampled_from([0, 1, -1, 7, -(2**63), 2**63 - 1])


@pytest.mark.parametrize("key", [(0, 1), (0,)])
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(st.integers(-2, 2), INT_EDGES), st.one_of(st.integers(0, 2), INT_EDGES),
                                   st.integers(-3, 3), st.booleans()), max_size=5), max_size=10))
def test_int_keys_pack_or_hash_and_equal_the_general_fold(key, instants):
    """Two INT key columns (NEXMark q4's view: ``GROUP BY A.id, A.category``) are packed into one int64 while
    their ranges' product fits, else hashed; one INT key is folded by slots over its span while that is small,
    else sorted: either way the live rows are the general fold's."""
    if key == (0,):
        instants = [[(a, 0, v, stays) for a, _, v, stays in touched] for touched in instants]
    live: dict = {}
    ts, sign, rows = [], [], []
    for t, touched in enumerate(instants):
        seen = set()
        for a, b, v, stays in touched:
            if (a, b) in seen:
                continue
            seen.add((a, b))
            old = live.pop((a, b), None)
            if old is not None:
                ts.append(t), sign.append(-1), rows.append(old)
            if old is None or stays:
                live[a, b] = (a, b, v)
                ts.append(t), sign.append(1), rows.append((a, b, v))
    dt = [np.dtype(np.int64)] * 3
    cols = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(3)]
    batch = Batch(np.array(ts, dtype=np.int64), np.array(sign, dtype=np.int8), cols)
    fast = keyed_fold.fold_keyed(batch, key)
    assert fast is not None and (fast.sign == 1).all() and (np.diff(fast.ts) >= 0).all()
    assert _rows(fast) == _rows(fold_changelog(batch, dt))
    assert sorted(r[:2] for r in fast.rows()) == sorted(live)


def test_colliding_hashes_hand_the_fold_to_the_general_one(monkeypatch):
    b = Batch(np.array([1, 1, 2]), np.array([1, 1, -1], dtype=np.int8),
              [np.array([0, 1, 0]), np.array([0.5, 0.5, 0.5]), np.array([3, 4, 3]), np.array(["a", "b", "a"],
                                                                                          dtype=object)])
    monkeypatch.setattr(rowcodes, "row_hashes", lambda cols: np.zeros(len(cols[0]), dtype=np.uint64))
    assert keyed_fold.fold_keyed(b, (1, 0)) is None
    op = ChangelogOp([], None, DT, final_net=True, key=(1, 0))
    op.live, op.log, op.log_deletes = None, [b], True
    op._fold()
    assert _rows(op.live) == [(1, repr((1, 0.5, 4, "b")))]


def test_a_view_over_an_aggregate_folds_by_its_group_columns():
    eng = Engine()
    eng.execute("REGISTER RELATION R (k INT, j INT, v INT)")
    eng.execute("REGISTER VIEW V AS SELECT k, j, MAX(v) AS hi, COUNT(*) AS c FROM R GROUP BY k, j")
    sinks = [op for op in eng.ops if isinstance(op, ChangelogOp)]
    assert [op.key for op in sinks] == [(0, 1)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1), st.integers(-5, 5)), max_size=6),
                min_size=1, max_size=8), st.data())
def test_a_late_query_on_a_view_starts_from_its_live_rows(updates, data):
    """R changes (rows inserted, some deleted later); the view V keeps MAX and COUNT per key. A query on V
    registered after the changes starts from V's live rows stamped with the instants they entered: what the
    changelog of an early query on V says, folded by hand (per key, its last change when an insert)."""
    eng = Engine({"seed": 1})
    eng.execute("REGISTER RELATION R (k INT, j INT, v INT)")
    eng.execute("REGISTER VIEW V AS SELECT k, j, MAX(v) AS hi, COUNT(*) AS c FROM R GROUP BY k, j")
    early = eng.execute("SELECT * FROM V")
    live: list[dict] = []
    t = 0
    for rows in updates:
        t += 1
        dels = [r for r in live if data.draw(st.booleans())]
        for r in dels:
            live.remove(r)
        ins = [{"k": k, "j": j, "v": v} for k, j, v in rows]
        live += ins
        eng.update("R", insert=ins, delete=dels, ts=t)
        eng.run()
    eng.heartbeat(t + 1)
    eng.run()
    expected: dict = {}
    for e in early.drain():
        key = (e.row["k"], e.row["j"])
        if e.sign > 0:
            expected[key] = (e.ts, tuple(e.row.values()))
        else:
            expected.pop(key, None)
    late = eng.execute("SELECT * FROM V")
    eng.heartbeat(t + 2)
    eng.run()
    got = sorted((e.ts, tuple(e.row.values())) for e in late.drain() if e.sign > 0)
    assert got == sorted(expected.values())


@pytest.mark.parametrize("query,cancel", [
    ("SELECT k, SUM(x) AS s, MAX(v) AS hi FROM S [RANGE 3] GROUP BY k", False),
    ("SELECT k AS key, SUM(x) AS s FROM S [RANGE 3] GROUP BY k", False),                # a renaming only
    ("SELECT k FROM (SELECT k, SUM(x) AS s FROM S [RANGE 3] GROUP BY k) X", True),      # s dropped: pairs equal
    ("SELECT k, SUM(x) AS s FROM S [RANGE 3] GROUP BY k HAVING SUM(x) > 0", True),
])
def test_the_sink_cancels_adjacent_pairs_unless_its_input_is_a_bare_aggregate(query, cancel):
    """An aggregate emits a group's delete and insert only when its row changed (-0.0 to 0.0 and NaN to NaN
    are no change); a projection that drops the changed column makes equal pairs, which the sink cancels.
    Checked against the reference on values that change sign of zero and stay NaN."""
    statements = ("REGISTER STREAM S (k INT, x FLOAT, v INT)",)
    eng = Engine()
    for s in statements:
        eng.execute(s)
    eng.execute(query)
    sinks = [op for op in eng.ops if isinstance(op, ChangelogOp)]
    assert [op.cancel for op in sinks] == [cancel]
    xs = [0.0, -0.0, float("nan"), 1.5, -1.5, 0.0, float("nan"), 2.0]
    actions = tuple(("push", "S", [{"k": i % 2, "x": x, "v": i}], [i]) for i, x in enumerate(xs))
    w = Workload(statements, query, actions + (("run",),), len(xs) + 5)
    compare(run_reference(w), run_engine(w))
