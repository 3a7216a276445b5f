"""The join's two ways of applying a release give the same results: rows with lifetimes (deletes matched first
in, first out; each pair inserted when both rows are in and deleted when the first leaves) and signed rows
(each side's deltas against the other's state, plus the pairs of new deltas). Inputs mix what keeps deletes
first in, first out (RANGE and ROWS windows) with what does not (PARTITION BY windows, a relation updated at
random, a window whose size changes mid-run), so the lifetime path also hands over to the signed one and back.
The reference evaluator checks the joins on generated workloads as well (tests/test_properties.py)."""

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms import Engine
from dsms.operators.join import JoinOp
from synopses.sorted_run_index import SortedRunIndexSynopsis

QUERIES = [
    "SELECT * FROM S [RANGE 3], T [RANGE 2] WHERE S.a = T.a",
    "SELECT * FROM S [ROWS 2], T [RANGE 4] WHERE S.a = T.a AND S.b < T.d",
    "SELECT * FROM S [PARTITION BY b ROWS 1], T [NOW] WHERE S.a = T.a",
    "SELECT * FROM S [RANGE 5], R WHERE S.a = R.a",
    "SELECT * FROM S [RANGE 2], T [RANGE 3]",
    "SELECT S.a, COUNT(*) AS n FROM S [RANGE 4], T [ROWS 3] WHERE S.a = T.a GROUP BY S.a",
]

# (instant gap, input, a, b or d); the relation's deletes pick a live row at random
action = st.tuples(st.integers(0, 2), st.sampled_from("SSTTR"), st.integers(0, 2), st.integers(0, 2),
                   st.booleans())


def run(query: str, actions, resize_at: int | None, lifetimes: bool, joined: list | None = None,
        unique: bool = False):
    saved, saved_emit = SortedRunIndexSynopsis.match, JoinOp.emit
    if not lifetimes:
        SortedRunIndexSynopsis.match = lambda self, *a: None
    if joined is not None:
        JoinOp.emit = lambda self, batch: (joined.append(batch), saved_emit(self, batch))[1]
    try:
        eng = Engine()
        eng.execute("REGISTER STREAM S (a INT, b INT)")
        eng.execute("REGISTER STREAM T (a INT, d FLOAT)")
        eng.execute("REGISTER RELATION R (a INT, e INT)")
        q = eng.execute(query)
        windows = [op for op in eng.ops if op.kind == "range_window"]
        live: list[dict] = []
        t = 0
        for i, (gap, src, a, b, delete) in enumerate(actions):
            t += gap
            if i == resize_at and windows:
                eng.set(windows[0].id, "range", 1 + (a + b) % 4)
            value = 10 + i if unique else b          # unique: equal joined rows come from the same pair
            if src == "S":
                eng.push("S", [{"a": a, "b": value}], ts=[t])
            elif src == "T":
                eng.push("T", [{"a": a, "d": value / 2}], ts=[t])
            elif delete and live:
                row = live.pop((a * 3 + b) % len(live))
                eng.update("R", delete=[row], ts=t)
            else:
                row = {"a": a, "e": b}
                live.append(row)
                eng.update("R", insert=[row], ts=t)
            if b == 0:
                eng.run()
        eng.heartbeat(t + 10)
        eng.run()
        out: dict = {}
        for e in q.drain():
            out.setdefault(e.ts, Counter())[(e.sign, tuple(sorted(e.row.items())))] += 1
        return out
    finally:
        SortedRunIndexSynopsis.match, JoinOp.emit = saved, saved_emit


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(QUERIES), st.lists(action, min_size=1, max_size=30), st.none() | st.integers(0, 29))
def test_lifetime_path_equals_signed_path(query, actions, resize_at):
    assert run(query, actions, resize_at, True) == run(query, actions, resize_at, False)


# the joined rows of a SELECT * identify their pair (unique values below); the COUNT query's join keeps only the
# key since projection pushdown, so equal joined rows there may be different pairs
FIFO_QUERIES = [q for q in QUERIES if "PARTITION" not in q and " R " not in q + " " and q.startswith("SELECT *")]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FIFO_QUERIES), st.lists(action.filter(lambda a: a[1] != "R"), min_size=1, max_size=30))
def test_lifetime_path_emits_no_changes_that_cancel(query, actions):
    """Over windows whose deletes are first in, first out, no release of the join inserts and deletes a
    joined row at one instant, so its work does not grow with how much input one release holds. (Two
    releases may: when more input arrives at an instant already released, a pair can end there.)"""
    joined: list = []
    run(query, actions, None, True, joined, unique=True)
    for b in joined:
        seen: dict = {}
        for t, s, *row in zip(b.ts.tolist(), b.sign.tolist(), *[c.tolist() for c in b.cols]):
            seen.setdefault((t, tuple(row)), set()).add(s)
        assert not [k for k, signs in seen.items() if len(signs) == 2]


# keys of several INT columns: values that pack into the bit fields chosen at the first batch, and values that
# do not (negative, or wider than their field), in any mix across batches
key_value = st.one_of(st.integers(0, 3), st.integers(0, 2**20), st.integers(-2**63, 2**63 - 1),
                      st.sampled_from([-1, 2**40, 2**62, 2**63 - 1]))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 3), st.lists(st.lists(st.lists(key_value, min_size=3, max_size=3), min_size=1,
                                            max_size=12), min_size=1, max_size=5))
def test_int_key_codes_equal_exactly_when_keys_are_equal(width, batches):
    """``JoinOp._int_codes`` (packed bit fields, or per-column id tables) gives equal codes
    to equal keys and different codes to different keys, across batches and both paths."""
    op = JoinOp.__new__(JoinOp)
    op.int_key_ids = op.pack_bits = None
    seen: dict[tuple, int] = {}
    for rows in batches:
        keys = [tuple(r[:width]) for r in rows]
        cols = [np.array([k[j] for k in keys], dtype=np.int64) for j in range(width)]
        for key, code in zip(keys, op._int_codes(cols).tolist()):
            assert seen.setdefault(key, code) == code
    assert len(set(seen.values())) == len(seen)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from(["x", "y"])),
                     min_size=1, max_size=12),
       per_push=st.integers(1, 4))
def test_a_self_join_on_different_columns_of_each_side(rows, per_push):
    """Both sides of a self-join read the same batches but key them on different columns (X.a, X.c against
    Y.b, Y.c): the codes the join keeps per batch within a release must be per side as well (a cache keyed
    by the batch alone gave side 1 side 0's codes, so X.a = 0 matched Y.b = 1). Over an unbounded window
    the implicit ISTREAM emits every pair once; the pairs are counted here directly."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT, c STRING)")
    q = eng.execute("SELECT X.a AS xa, X.b AS xb, Y.a AS ya, Y.b AS yb, Y.c AS c FROM S X [RANGE UNBOUNDED], "
                    "S Y WHERE X.a = Y.b AND X.c = Y.c AND X.b != Y.a")
    for i in range(0, len(rows), per_push):
        part = rows[i:i + per_push]
        eng.push("S", [{"a": a, "b": b, "c": c} for a, b, c in part], ts=list(range(i, i + len(part))))
        eng.run()
    eng.heartbeat(len(rows) + 1)
    eng.run()
    got = Counter(tuple(e.row.values()) for e in q.drain())
    want = Counter((x[0], x[1], y[0], y[1], y[2]) for x in rows for y in rows
                   if x[0] == y[1] and x[2] == y[2] and x[1] != y[0])
    assert got == want


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(QUERIES), st.lists(action, min_size=1, max_size=30), st.integers(1, 6), st.booleans())
def test_the_pair_bound_without_probes_never_changes_a_cut(query, actions, budget, small):
    """A release is applied whole without counting its matches when its rows times the most rows any key has
    held (``most_per_key``) stay within ``PAIR_BUDGET``; that bound is never below what counting finds for
    any key (checked before every release, over every key the workload uses), so the releases are cut where
    they were and the results are the same as with the bound off (small budgets, so that releases are cut;
    with ``small`` every release leaves its rows to be indexed by runs or scans, ``SMALL`` 0)."""
    import dsms.operators.join as join_module
    import synopses.sorted_run_index as sri
    saved = join_module.PAIR_BUDGET, sri.SMALL, SortedRunIndexSynopsis.most_per_key, JoinOp._bounded
    every_key = np.arange(3, dtype=np.int64)         # a takes 0-2; a join without keys codes every row 0
    cuts: list = []

    def bounded(self, parts):
        for index in self.sides:
            most = index.most_per_key()
            assert int(index.counts(every_key).max()) <= most
        out = saved[3](self, parts)
        cuts.append((self.more, sorted(out)))
        return out

    join_module.PAIR_BUDGET = budget
    if small:
        sri.SMALL = 0
    JoinOp._bounded = bounded
    try:
        with_bound, cuts_with = run(query, actions, None, True), list(cuts)
        cuts.clear()
        SortedRunIndexSynopsis.most_per_key = lambda self: 1 << 40
        without, cuts_without = run(query, actions, None, True), list(cuts)
    finally:
        join_module.PAIR_BUDGET, sri.SMALL, SortedRunIndexSynopsis.most_per_key, JoinOp._bounded = saved
    assert with_bound == without
    assert cuts_with == cuts_without
