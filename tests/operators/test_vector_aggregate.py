"""The vectorised aggregate gives the same changelog as the row-at-a-time aggregate (an independent
implementation of the same definition), on random streams with several rows per instant and deletes."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms import Engine
from dsms.batch import Batch
from dsms.operators.vector_aggregate import VectorAggregateOp
from dsms.plan import physical
from dsms.queues import Queue
from synopses import int_extremes

QUERY = "SELECT k, COUNT(*) AS c, SUM(v) AS s, AVG(v) AS a, SUM(i) AS si, AVG(i) AS ai FROM S [RANGE 7] GROUP BY k"

# keys mostly from a small domain (the direct lookup table), sometimes far apart or negative (the sorted
# table); gaps mostly small, sometimes wider than an int16 span (the radix-sort shortcut must step aside)
keys = st.one_of(st.integers(2, 5), st.integers(0, 7), st.sampled_from([-2**62, -70_000, 70_000, 2**40]))
gaps = st.one_of(st.integers(0, 3), st.integers(0, 3), st.just(40_000))
rows = st.lists(st.tuples(keys, st.sampled_from([0.1, 0.2, 1.5, -3.25, 1e6]), st.integers(-5, 5), gaps),
                min_size=1, max_size=40)


def run(batches, vectorised: bool):
    saved = physical.vectorisable
    if not vectorised:
        physical.vectorisable = lambda *args: False
    try:
        eng = Engine()
        eng.execute("REGISTER STREAM S (k INT, v FLOAT, i INT)")
        q = eng.execute(QUERY)
        kinds = {op.kind + type(op).__name__ for op in eng.ops}
        t = 0
        for batch in batches:
            ts = []
            for *_, gap in batch:
                t += gap
                ts.append(t)
            eng.push("S", [{"k": k, "v": v, "i": i} for k, v, i, _ in batch], ts=ts)
            eng.run()
        eng.heartbeat(t + 20)
        eng.run()
        return kinds, [(e.ts, e.sign, e.row) for e in q.drain()]
    finally:
        physical.vectorisable = saved


def same(a, b):
    if a[:2] != b[:2] or a[2].keys() != b[2].keys():
        return False
    return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6) if isinstance(x, float) else x == y
               for x, y in zip(a[2].values(), b[2].values()))


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, min_size=1, max_size=6))
def test_vectorised_equals_row_at_a_time(batches):
    kv, fast = run(batches, True)
    kr, slow = run(batches, False)
    assert "aggregateVectorAggregateOp" in kv and "aggregateAggregateOp" in kr
    assert all(a[0] <= b[0] for a, b in zip(fast, fast[1:])), "results out of timestamp order"
    key = lambda e: (e[0], e[1], e[2]["k"])  # noqa: E731
    fast, slow = sorted(fast, key=key), sorted(slow, key=key)
    assert len(fast) == len(slow) and all(same(a, b) for a, b in zip(fast, slow)), (fast, slow)


def test_float_sum_keeps_no_residue_of_expired_values():
    """SPEC section 3: SUM is taken over the instantaneous relation. Once 1e17 has left the window {1e17, 1.0},
    SUM and AVG are 1.0; a plain float running sum says 0.0 (1e17 + 1.0 rounds to 1e17), whether the insert
    and the delete meet in one batch or in two."""
    def changelog(vectorised: bool, one_batch: bool):
        saved = physical.vectorisable
        if not vectorised:
            physical.vectorisable = lambda *args: False
        try:
            eng = Engine()
            eng.execute("REGISTER STREAM T (k INT, d FLOAT)")
            q = eng.execute("SELECT k, SUM(d) AS s, AVG(d) AS a FROM T [RANGE 5] GROUP BY k")
            q1 = eng.execute("SELECT SUM(d) AS s FROM T [ROWS 1]")
            rows, ts = [{"k": 1, "d": 1e17}, {"k": 1, "d": 1.0}, {"k": 1, "d": 2.0}], [1, 2, 8]
            if one_batch:
                eng.push("T", rows, ts=ts)
            else:
                for r, t in zip(rows, ts):
                    eng.push("T", [r], ts=t)
                    eng.run()
            eng.heartbeat(20)
            eng.run()
            return ([(e.ts, e.sign, e.row) for e in q.drain()], [(e.ts, e.sign, e.row) for e in q1.drain()])
        finally:
            physical.vectorisable = saved

    expected = [(1, 1, {"k": 1, "s": 1e17, "a": 1e17}),
                (2, -1, {"k": 1, "s": 1e17, "a": 1e17}), (2, 1, {"k": 1, "s": 1e17, "a": 5e16}),
                (6, -1, {"k": 1, "s": 1e17, "a": 5e16}), (6, 1, {"k": 1, "s": 1.0, "a": 1.0}),
                (7, -1, {"k": 1, "s": 1.0, "a": 1.0}),
                (8, 1, {"k": 1, "s": 2.0, "a": 2.0}), (13, -1, {"k": 1, "s": 2.0, "a": 2.0})]
    expected_rows1 = [(1, 1, {"s": 1e17}), (2, -1, {"s": 1e17}), (2, 1, {"s": 1.0}),
                      (8, -1, {"s": 1.0}), (8, 1, {"s": 2.0})]
    key = lambda e: (e[0], e[1])  # noqa: E731
    for vectorised in (True, False):
        for one_batch in (True, False):
            grouped, rows1 = changelog(vectorised, one_batch)
            assert sorted(grouped, key=key) == expected, (vectorised, one_batch, grouped)
            assert sorted(rows1, key=key) == expected_rows1, (vectorised, one_batch, rows1)


# ---------------------------------------------------------------- the group table at high cardinality

def model_batch(state: dict, ids: dict, rows: list[tuple[int, int, int, int]]) -> list[tuple]:
    """What the vectorised aggregate emits for one batch of final instants, computed row by row with dicts:
    the keys new in the batch take the next group ids in ascending key order, and each instant emits, in
    group-id order, the old row (deleted) and the new row (inserted) of every group it changed."""
    for k in sorted({k for _, _, k, _ in rows} - ids.keys()):
        ids[k] = len(ids)
    out = []
    for t in sorted({t for t, *_ in rows}):
        before = {}
        for _, s, k, v in (r for r in rows if r[0] == t):
            before.setdefault(k, state.get(k, (0, 0)))
            c, total = state.get(k, (0, 0))
            state[k] = (c + s, total + s * v)
        for k in sorted(before, key=ids.get):
            old, new = before[k], state[k]
            if new[0] == 0:
                del state[k]
            if old != new:
                if old[0] > 0:
                    out.append((t, -1, (k, *old)))
                if new[0] > 0:
                    out.append((t, 1, (k, *new)))
    return out


def batches_of_keys(rng: np.random.Generator, sparse: bool) -> list[np.ndarray]:
    """Key batches that grow the state through every path of the group table: a small span (the lookup
    table), far-apart and negative keys (``sparse``: the lookup table gives way to the hash table), a span
    wider than the lookup table's fixed one, ascending and descending runs, and known and new keys mixed."""
    out, hi = [], 16
    for b in range(240):
        kind = b % 6
        if kind == 0:
            k = rng.integers(-8, 8, 200)
        elif kind == 1 and sparse:
            k = rng.choice(np.array([-2**63, -2**62, -70_000, 2**40, 2**63 - 1]), 50)
        elif kind == 2:
            hi = min(hi * 2, 1 << (22 if sparse else 16))
            k = rng.integers(-hi, hi, 500)
        elif kind == 3:
            k = np.arange(hi, hi + 300)[::1 if b % 12 == 3 else -1]
        else:
            k = rng.integers(-hi, hi, 300)
        out.append(k.astype(np.int64))
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_group_table_growth_against_a_model(sparse):
    """Many batches, each processed as final instants, through the operator itself: the exact output rows
    and their order equal the model's, while groups are created in every order, emptied and refilled."""
    rng = np.random.default_rng(3)
    inp, out = Queue(), Queue()
    reader = out.reader()
    i64 = np.dtype(np.int64)
    op = VectorAggregateOp((0,), (("COUNT", None, False), ("SUM", 1, False)), [None, "INT"], inp, out,
                           [i64, i64, i64])
    state, ids, live, t = {}, {}, [], 0
    for keys in batches_of_keys(rng, sparse):
        n = len(keys)
        vals = rng.integers(-5, 6, n)
        ts = t + np.sort(rng.integers(0, 6, n))
        rows = [(int(a), 1, int(k), int(v)) for a, k, v in zip(ts, keys, vals)]
        # retract some live rows (whole groups at times: emptied, and refilled by a later batch)
        if live:
            gone = rng.choice(len(live), size=min(len(live), n // 2), replace=False)
            drop = {int(i) for i in gone}
            if rng.random() < 0.3:                                    # empty a few groups completely
                victims = {live[int(i)][0] for i in gone[:5]}
                drop |= {i for i, (k, _) in enumerate(live) if k in victims}
            at = int(ts[-1])
            rows += [(at, -1, live[i][0], live[i][1]) for i in sorted(drop)]
            live = [r for i, r in enumerate(live) if i not in drop]
        live += [(k, v) for _, _, k, v in rows[:n]]                   # this batch's inserts
        rows.sort(key=lambda r: r[0])                                 # stable: arrival order within an instant
        t = rows[-1][0] + 1
        batch = Batch(np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int8),
                      [np.array([r[2] for r in rows], np.int64), np.array([r[3] for r in rows], np.int64)])
        op.process(batch)
        got = []
        while (item := reader.get()) is not None:
            if isinstance(item, Batch):
                got += zip(item.ts.tolist(), item.sign.tolist(), item.rows())
        assert got == model_batch(state, ids, rows)
    assert op.n == len(ids) > 30_000
    assert sorted(ids)[-2] - sorted(ids)[1] > 1 << 16                # beyond the lookup table's fixed span
    assert bool(len(op.int_ids.lut)) != sparse                        # dense keys: the table widened with them
    assert op._groups_live() == len(state)


EXTREME_QUERIES = [
    # a RANGE window: inserts and expiries at many instants, several rows per instant, negative values
    "SELECT k, MIN(i) AS lo, MAX(i) AS hi, COUNT(*) AS c FROM S [RANGE 7] GROUP BY k",
    # a tumbling window: the whole window replaced at one instant (NEXMark q7's MAX)
    "SELECT MAX(i) AS hi, MIN(i) AS lo FROM S [RANGE 6 SLIDE 6]",
    # a ROWS window: every insert past the first four deletes the oldest row at the same instant
    "SELECT k, MAX(i) AS hi FROM S [ROWS 4] GROUP BY k",
    # insert-only: every group takes the running-maximum path
    "SELECT k, MAX(i) AS hi, MIN(i) AS lo FROM S GROUP BY k",
    # two INT key columns: packed keys with one id table while they fit the fields fixed at the first batch,
    # then (a negative or a far key) every key handed over to the dict of key tuples
    "SELECT k, i, COUNT(*) AS c, MAX(i) AS hi FROM S [RANGE 7] WHERE i >= 0 GROUP BY k, i",
]


def run_extremes(query: str, batches, vectorised: bool):
    saved = physical.vectorisable
    if not vectorised:
        physical.vectorisable = lambda *args: False
    try:
        eng = Engine()
        eng.execute("REGISTER STREAM S (k INT, v FLOAT, i INT)")
        q = eng.execute(query)
        kinds = {type(op).__name__ for op in eng.ops}
        t = 0
        for batch in batches:
            ts = []
            for *_, gap in batch:
                t += gap
                ts.append(t)
            eng.push("S", [{"k": k, "v": v, "i": i} for k, v, i, _ in batch], ts=ts)
            eng.run()
        eng.heartbeat(t + 20)
        eng.run()
        return kinds, sorted((e.ts, e.sign, tuple(e.row.items())) for e in q.drain())
    finally:
        physical.vectorisable = saved


@pytest.mark.parametrize("small", [int_extremes.SMALL, 0], ids=["small-groups-in-python", "numpy-only"])
@pytest.mark.parametrize("query", EXTREME_QUERIES)
@settings(max_examples=40, deadline=None)
@given(batches=st.lists(rows, min_size=1, max_size=6))
def test_vectorised_min_max_equal_row_at_a_time(query, small, batches):
    """MIN/MAX of INT under window deletes: the vectorised aggregate (synopses/int_extremes.py) gives the
    changelog of the row-at-a-time one (ExtremeBag), instant by instant; with the groups of one segment per
    batch netted by one sort and small groups walked in Python, and with every group through the numpy segment
    walk (``SMALL = SINGLE_MAX = 0``)."""
    saved = int_extremes.SMALL, int_extremes.SINGLE_MAX
    int_extremes.SMALL, int_extremes.SINGLE_MAX = small, (saved[1] if small else 0)
    try:
        kv, fast = run_extremes(query, batches, True)
    finally:
        int_extremes.SMALL, int_extremes.SINGLE_MAX = saved
    kr, slow = run_extremes(query, batches, False)
    assert "VectorAggregateOp" in kv and "VectorAggregateOp" not in kr
    assert fast == slow


def test_min_max_of_float_stay_row_at_a_time():
    """FLOAT extremes keep ExtremeBag (NaN and -0.0 have their contract there)."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (k INT, v FLOAT, i INT)")
    eng.execute("SELECT k, MAX(v) AS m FROM S [RANGE 5] GROUP BY k")
    eng.execute("SELECT k, MAX(i) AS m FROM S [RANGE 5] GROUP BY k")
    assert [type(op).__name__ for op in eng.ops if op.kind == "aggregate"] == ["AggregateOp", "VectorAggregateOp"]
