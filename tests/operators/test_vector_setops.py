"""The vectorised duplicate elimination and set operations give exactly the changelog of a row-at-a-time
implementation of the same definition (written here, independently of the operators), on random batches of
signed deltas: several rows per instant, deletes before inserts (negative transient counts), strings, floats
with -0.0 beside 0.0 (equal in SQL) and NaN (equal to itself, as in GROUP BY), one integer column (the
searchsorted id table), strings (a dict) and several columns (chained id tables), with and without forgetting
emptied rows."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dsms.operators.distinct as distinct_mod
from dsms.batch import Batch, Heartbeat, from_rows
from dsms.operators.base import Operator
from dsms.operators.binary import BinaryOperator
from dsms.operators.distinct import DistinctOp
from dsms.operators.set_op import SetOpOp
from dsms.queues import Queue
from synopses.prefix_rowids import PrefixRowIds
from synopses.rowcodes import IntIds, ObjectIds, RowIds

NAN = float("nan")
VALUES = {
    "INT": st.integers(-2, 2) | st.sampled_from([-2**63, 2**63 - 1]),
    "FLOAT": st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e300, 5e-324, math.inf, -math.inf, NAN]),
    "STRING": st.sampled_from(["", "a", "b", "é"]),
    "BOOLEAN": st.booleans(),
}
DTYPES = {"INT": np.dtype(np.int64), "FLOAT": np.dtype(np.float64), "STRING": np.dtype(object),
          "BOOLEAN": np.dtype(np.bool_)}
SCHEMAS = [("INT",), ("FLOAT",), ("STRING",), ("STRING", "FLOAT"), ("INT", "STRING", "BOOLEAN"),
           ("FLOAT", "FLOAT"), ("BOOLEAN", "INT", "STRING", "FLOAT")]
VARIANTS = [(op, all_) for op in ("UNION", "EXCEPT", "INTERSECT") for all_ in (False, True)]
REF_F = {
    ("UNION", True): lambda a, b: a + b,
    ("UNION", False): lambda a, b: 1 if a + b > 0 else 0,
    ("EXCEPT", True): lambda a, b: max(0, a - b),
    ("EXCEPT", False): lambda a, b: 1 if a > 0 and b == 0 else 0,
    ("INTERSECT", True): lambda a, b: min(a, b),
    ("INTERSECT", False): lambda a, b: 1 if a > 0 and b > 0 else 0,
}


def key(row: tuple) -> tuple:
    """SQL equality as a dict key: -0.0 already hashes like 0.0; every NaN becomes one object."""
    return tuple(NAN if isinstance(v, float) and v != v else v for v in row)


class RefDistinct(Operator):
    kind = "distinct"

    def __init__(self, inp, out, dtypes):
        super().__init__([inp], out)
        self.counts, self.dtypes = {}, dtypes

    @property
    def size(self):
        return len(self.counts)

    def on_batch(self, i, batch):
        out = []
        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
            old = self.counts.get(key(row), 0)
            new = old + s
            if new:
                self.counts[key(row)] = new
            else:
                del self.counts[key(row)]
            if (old > 0) != (new > 0):
                out.append((t, 1 if new > 0 else -1, row))
        if out:
            self.emit(from_rows(*map(list, zip(*out)), self.dtypes))


class RefSetOp(BinaryOperator):
    kind = "set_op"

    def __init__(self, op, all_, left, right, out, dtypes):
        super().__init__([left, right], out)
        self.f, self.counts, self.dtypes = REF_F[(op, all_)], {}, dtypes

    @property
    def size(self):
        return len(self.counts)

    def apply_run(self, side, batch):
        out = []
        for t, s, row in zip(batch.ts.tolist(), batch.sign.tolist(), batch.rows()):
            c = self.counts.setdefault(key(row), [0, 0])
            old = self.f(*c)
            c[side] += s
            d = self.f(*c) - old
            if c == [0, 0]:
                del self.counts[key(row)]
            out += [(t, 1 if d > 0 else -1, row)] * abs(d)
        if out:
            self.emit(from_rows(*map(list, zip(*out)), self.dtypes))


def elements(types):
    row = st.tuples(*[VALUES[t] for t in types])
    # (gap to the previous delta's instant, sign, row); mostly gap 0 so that instants hold several deltas
    return st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2]), st.sampled_from([1, 1, -1]), row), max_size=40)


def schedule(draw, sides, n_ops):
    """The pushes of each side, split into batches, interleaved with heartbeats and operator runs."""
    steps = []
    for side, elems in enumerate(sides):
        t, cut = 0, 0
        rows = []
        for gap, s, row in elems:
            t += gap
            rows.append((t, s, row))
        while cut < len(rows):
            k = draw(st.integers(1, 12))
            steps.append(("push", side, rows[cut:cut + k]))
            cut += k
    order = draw(st.permutations(range(len(steps))))
    by_side = [[s for s in steps if s[1] == side] for side in range(n_ops)]
    # keep each side's own pushes in time order, interleave the sides as drawn
    out, pos = [], [0] * n_ops
    for i in order:
        side = steps[i][1]
        out.append(by_side[side][pos[side]])
        pos[side] += 1
        if draw(st.booleans()):
            out.append(("run",))
    return out


def drive(op_cls, args, types, plan, n_in):
    dtypes = [DTYPES[t] for t in types]
    ins = [Queue() for _ in range(n_in)]
    out = Queue()
    op = op_cls(*args, *ins, out, dtypes)
    reader = out.reader()
    sizes = []
    last = [0] * n_in
    for step in plan:
        if step[0] == "push":
            _, side, rows = step
            ts, sign, rs = zip(*rows)
            ins[side].put(from_rows(list(ts), list(sign), list(rs), dtypes))
            last[side] = ts[-1]
        else:
            op.run()
            sizes.append(op.size)
            check_table(op)
    end = max(last) + 1
    for q in ins:
        q.put(Heartbeat(end))
    op.run()
    sizes.append(op.size)
    check_table(op)
    got = []
    while (item := reader.get()) is not None:
        if isinstance(item, Batch):
            got += [(t, s, repr(r)) for t, s, r in zip(item.ts.tolist(), item.sign.tolist(), item.rows())]
    return got, sizes, op


def check_table(op):
    """The live-row count kept incrementally agrees with the count arrays, and ids stay dense."""
    table = getattr(op, "table", None)
    if table is None:
        return
    n = table.rowids.n
    assert table.live == int((table.counts[:, :n] != 0).any(axis=0).sum())
    assert not table.counts[:, n:].any()
    rowids = [table.rowids]
    if isinstance(table.rowids, PrefixRowIds):        # numbers and strings: two RowIds inside
        r = table.rowids
        rowids = [r.prefix, r.spill]
        rep = r.rep[:r.prefix.n]
        assert (rep >= 0).all() and (r.prefix_of[rep] == np.arange(r.prefix.n)).all()
    for ids in rowids:
        for t in [*ids.columns, *ids.links]:
            if isinstance(t, ObjectIds):
                assert sorted(t.id_of.values()) == list(range(t.n))
            else:
                assert t.ids(t.key_of().copy()).tolist() == list(range(t.n))


def configure(compact_small, monkeypatch):
    if compact_small:
        monkeypatch.setattr(distinct_mod, "COMPACT_MIN", 0)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_distinct_matches_row_at_a_time(data):
    types = data.draw(st.sampled_from(SCHEMAS))
    elems = data.draw(elements(types))
    plan = schedule(data.draw, [elems], 1)
    compact_small = data.draw(st.booleans())
    with _patch() as mp:
        configure(compact_small, mp)
        fast, fast_sizes, op = drive(DistinctOp, (), types, plan, 1)
        slow, slow_sizes, _ = drive(RefDistinct, (), types, plan, 1)
        assert op.synopses[0].nbytes() >= 0 and op.synopses[0].rows() == op.size
    assert fast == slow
    assert fast_sizes == slow_sizes


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_set_ops_match_row_at_a_time(data):
    types = data.draw(st.sampled_from(SCHEMAS))
    variant = data.draw(st.sampled_from(VARIANTS))
    left, right = data.draw(elements(types)), data.draw(elements(types))
    plan = schedule(data.draw, [left, right], 2)
    compact_small = data.draw(st.booleans())
    with _patch() as mp:
        configure(compact_small, mp)
        fast, fast_sizes, _ = drive(SetOpOp, variant, types, plan, 2)
        slow, slow_sizes, _ = drive(RefSetOp, variant, types, plan, 2)
    assert fast == slow
    if variant != ("UNION", True):                 # UNION ALL passes deltas through and keeps no counts
        assert fast_sizes == slow_sizes


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_row_ids_persist_through_forgetting(data):
    """Equal rows get one id and different rows different ids, across batches and after forgetting any set of
    ids (the survivors renumbered as ``compact`` says)."""
    types = data.draw(st.sampled_from(SCHEMAS))
    dtypes = [DTYPES[t] for t in types]
    r = RowIds(dtypes)
    known: dict = {}
    for _ in range(data.draw(st.integers(1, 6))):
        rows = data.draw(st.lists(st.tuples(*[VALUES[t] for t in types]), min_size=1, max_size=30))
        ids = r.ids(from_rows([0] * len(rows), [1] * len(rows), rows, dtypes).cols).tolist()
        for row, i in zip(rows, ids):
            assert known.setdefault(key(row), i) == i
        assert r.n == len(known) == len(set(known.values()))
        if data.draw(st.booleans()):
            keep = np.array(data.draw(st.lists(st.booleans(), min_size=r.n, max_size=r.n)), dtype=bool)
            new = r.compact(keep).tolist()
            known = {k: new[i] for k, i in known.items() if keep[i]}
            assert r.n == len(known) and sorted(known.values()) == list(range(r.n))


def test_every_variant_on_a_fixed_example():
    """A row deleted before it is inserted within one instant, and zeros of both signs."""
    types = ("FLOAT", "STRING")
    left = [(1, 1, (0.0, "a")), (0, -1, (1.5, "b")), (0, 1, (1.5, "b")), (0, 1, (-0.0, "a")), (1, -1, (0.0, "a"))]
    right = [(1, 1, (-0.0, "a")), (1, -1, (-0.0, "a")), (0, 1, (1.5, "b"))]
    plan = [("push", 0, [(1 + i, s, r) for i, (_, s, r) in enumerate(left)]),
            ("push", 1, [(2, s, r) for _, s, r in right]), ("run",)]
    for variant in VARIANTS:
        fast, _, _ = drive(SetOpOp, variant, types, plan, 2)
        slow, _, _ = drive(RefSetOp, variant, types, plan, 2)
        assert fast == slow, variant


def test_forgets_emptied_rows(monkeypatch):
    """Rows whose counts return to zero are dropped from the id table once they outnumber the live ones."""
    monkeypatch.setattr(distinct_mod, "COMPACT_MIN", 10)
    inp, out = Queue(), Queue()
    op = DistinctOp(inp, out, [np.dtype(object)])
    for t in range(100):
        inp.put(from_rows([2 * t, 2 * t + 1], [1, -1], [(f"r{t}",), (f"r{t}",)], [np.dtype(object)]))
        op.run()
    assert op.size == 0 and op.table.rowids.n <= 11 and len(op.table.rowids.columns[0].id_of) <= 11


def test_negative_count_survives_forgetting(monkeypatch):
    """A row at count -1 at the end of a batch (its insert is still to come) is kept when emptied rows are
    forgotten, so the insert that follows brings it to 0, not 1."""
    monkeypatch.setattr(distinct_mod, "COMPACT_MIN", 0)
    obj = [np.dtype(object)]
    inp, out = Queue(), Queue()
    op = DistinctOp(inp, out, obj)
    reader = out.reader()
    inp.put(from_rows([1] * 5, [1, -1, 1, -1, -1], [("a",), ("a",), ("c",), ("c",), ("b",)], obj))
    op.run()
    assert op.table.rowids.n == 1 and op.size == 1
    assert len([item for item in iter(reader.get, None) if isinstance(item, Batch)]) == 1
    inp.put(from_rows([1], [1], [("b",)], obj))
    op.run()
    assert op.size == 0
    assert not [item for item in iter(reader.get, None) if isinstance(item, Batch)]


class _patch:
    """A monkeypatch usable inside a hypothesis test (the fixture is function-scoped)."""

    def __enter__(self):
        from _pytest.monkeypatch import MonkeyPatch
        self.mp = MonkeyPatch()
        return self.mp

    def __exit__(self, *exc):
        self.mp.undo()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(-2**63, 2**63 - 1) | st.integers(0, 50) | st.sampled_from([0, 1 << 40, 2 << 40]),
                         max_size=300), min_size=1, max_size=8), st.integers(0, 2**32))
def test_int_ids_hash_table(batches, seed):
    """Ids of int64 keys through growth of the hash table, collisions in one batch and forgetting."""
    t, known = IntIds(), {}
    rng = np.random.default_rng(seed)
    for keys in [*batches, rng.integers(-1000, 1000, 5000).tolist()]:
        got = t.ids(np.array(keys, dtype=np.int64)).tolist()
        for k, i in zip(keys, got):
            assert known.setdefault(k, i) == i
        assert t.n == len(known) == len(set(known.values()))
        if rng.random() < 0.3:
            keep = rng.random(t.n) < 0.5
            new = t.compact(keep).tolist()
            known = {k: new[i] for k, i in known.items() if keep[i]}
            assert t.ids(np.array(list(known), dtype=np.int64)).tolist() == list(known.values())
