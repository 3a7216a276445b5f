"""Releases of an insert-only join through the unique-key path (``dsms/operators/append_dense.py``: one input
holding each key once gets fresh distinct keys, the other input's rows counted per key but placed only when a
probe needs them), against the reference evaluator (tests/oracle/).

The path applies from ``DENSE_ROWS`` released rows while both inputs are in the dict form, and to every release
once they are in the arrays. Here ``DENSE_ROWS`` is 0, so every release it can take goes through it, and the
workloads make it stop applying midway in each way it can: a key of the unique input arriving again (the
general path then, for good on that input), new keys not in ascending order, a key of the unique input that
held rows of the other input already name (those rows placed, then found), a band predicate or a predicate on
the pairs (never taken), and the pair budget's cut. Under the default, round robin and greedy scheduling: the
order in which the operators run decides which rows one release holds.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import Workload, check_query, diff, run_engine, run_reference

import dsms.operators.join as join_mod
from dsms.operators import append_dense
from dsms.operators.join import JoinOp
from synopses.key_slots import KeySlots
from synopses.small_append_index import SmallAppendIndexSynopsis

CATALOG = ("REGISTER STREAM P (id INT, name STRING, st STRING)",
           "REGISTER STREAM A (id INT, seller INT, cat INT)")
QUERIES = [
    # NEXMark q3's shape: the selections and the projection fused into the join
    "SELECT ISTREAM(Y.name, Y.st, X.id) FROM A [RANGE UNBOUNDED] X, P [RANGE UNBOUNDED] Y "
    "WHERE X.seller = Y.id AND Y.st IN ('OR', 'CA') AND X.cat = 10",
    "SELECT * FROM P [RANGE UNBOUNDED] Y, A [RANGE UNBOUNDED] X WHERE X.seller = Y.id",
    "SELECT X.id, Y.name FROM A [RANGE UNBOUNDED] X, P [RANGE UNBOUNDED] Y WHERE X.seller = Y.id",
    # the unique input on the left; a self-join (both inputs the same batches)
    "SELECT X.id, Z.id FROM P [RANGE UNBOUNDED] X, A [RANGE UNBOUNDED] Z WHERE X.id = Z.id",
    "SELECT X.name, Y.st FROM P [RANGE UNBOUNDED] X, P [RANGE UNBOUNDED] Y WHERE X.id = Y.id",
    # must not take the path: a predicate on the pairs, a band
    "SELECT X.id, Y.name FROM A [RANGE UNBOUNDED] X, P [RANGE UNBOUNDED] Y WHERE X.seller = Y.id AND X.id > Y.id",
    "SELECT X.id, Y.id FROM A [RANGE UNBOUNDED] X, P [RANGE UNBOUNDED] Y WHERE X.seller = Y.id "
    "AND X.cat >= Y.id",
    # over a view that never deletes: its output joined again
    "SELECT V.id, Y.name FROM V, P [RANGE UNBOUNDED] Y WHERE V.seller = Y.id",
]
VIEWS = ("REGISTER VIEW V AS SELECT X.id AS id, X.seller AS seller FROM A [RANGE UNBOUNDED] X, "
         "P [RANGE UNBOUNDED] Y WHERE X.seller = Y.id",)


@st.composite
def _actions(draw, max_pushes: int = 12):
    """People with ids mostly ascending and new (sometimes an id again, or a push out of order), auctions by
    recent sellers, some not arrived yet; several rows at one instant; runs and heartbeats in between."""
    acts, nxt, auction, t = [], 0, 0, {"P": 0, "A": 0}
    for _ in range(draw(st.integers(1, max_pushes))):
        kind = draw(st.sampled_from(["P", "A", "A", "run", "heartbeat", "heartbeat"]))
        if kind == "run":
            acts.append(("run",))
            continue
        if kind == "heartbeat":
            h = max(t.values()) + draw(st.integers(0, 2))
            acts.append(("heartbeat", h))
            t = {k: max(v, h) for k, v in t.items()}
            continue
        rows, ts = [], []
        for _ in range(draw(st.integers(1, 5))):
            t[kind] += draw(st.sampled_from([0, 0, 1, 2]))
            ts.append(t[kind])
            if kind == "P":
                how = draw(st.sampled_from(["new", "new", "new", "again", "skip"]))
                if how == "again" and nxt:
                    pid = draw(st.integers(0, nxt - 1))
                else:
                    nxt += draw(st.integers(1, 2)) if how == "skip" else 1
                    pid = nxt - 1
                rows.append({"id": pid, "name": f"p{pid}", "st": draw(st.sampled_from(["OR", "CA", "ID"]))})
            else:
                rows.append({"id": auction, "seller": draw(st.integers(max(0, nxt - 3), nxt + 2)),
                             "cat": draw(st.sampled_from([9, 10]))})
                auction += 1
        if kind == "P" and draw(st.booleans()):
            rows.reverse()                           # ids descending within the push (times stay in order)
        acts.append(("push", kind, rows, ts))
    return tuple(acts), max(t.values()) + 3


@pytest.fixture
def dense_always(monkeypatch):
    monkeypatch.setattr(append_dense, "DENSE_ROWS", 0)
    monkeypatch.setattr(JoinOp, "emit", _ordered_emit(JoinOp.emit))


def _ordered_emit(emit):
    """``JoinOp.emit`` that first checks the batch is in time order (a queue's batches must be; the comparison
    with the reference groups rows by instant, so it would not see a batch out of order)."""
    def checked(self, batch):
        ts = batch.ts
        assert (ts[1:] >= ts[:-1]).all(), f"{self.detail}: a batch out of time order: {ts.tolist()}"
        emit(self, batch)
    return checked


@contextmanager
def _limits(dense_rows: int = 0, budget: int | None = None):
    """``DENSE_ROWS`` (and the join's ``PAIR_BUDGET``) set for one example, and every batch the join emits
    checked to be in time order; restored after it."""
    saved = append_dense.DENSE_ROWS, join_mod.PAIR_BUDGET, JoinOp.emit
    append_dense.DENSE_ROWS = dense_rows
    JoinOp.emit = _ordered_emit(saved[2])
    if budget is not None:
        join_mod.PAIR_BUDGET = budget
    try:
        yield
    finally:
        append_dense.DENSE_ROWS, join_mod.PAIR_BUDGET, JoinOp.emit = saved


@pytest.mark.parametrize("policy", [None, "round_robin", "greedy"])
@settings(max_examples=100, deadline=None)
@given(query=st.sampled_from(QUERIES), acts=_actions())
def test_the_unique_key_path_equals_reference(policy, query, acts):
    w = Workload(CATALOG + VIEWS, query, *acts)
    with _limits():
        problem = diff(run_reference(w), run_engine(w, policy=policy))
    assert problem is None, f"{w!r}\n{problem}"


@settings(max_examples=30, deadline=None)
@given(query=st.sampled_from(QUERIES[:4]), acts=_actions())
def test_the_unique_key_path_under_a_tiny_pair_budget_equals_reference(query, acts):
    """A budget of 3 pairs: the join cuts releases (``JoinOp._bounded``), counting against rows counted and
    not placed (``AppendJoin.fits`` reads ``count`` and ``most``)."""
    w = Workload(CATALOG + VIEWS, query, *acts)
    with _limits(budget=3):
        problem = diff(run_reference(w), run_engine(w, policy="round_robin"))
    assert problem is None, f"{w!r}\n{problem}"


@settings(max_examples=40, deadline=None)
@given(query=st.sampled_from(QUERIES[:5]), acts=_actions(), steps=st.integers(1, 3))
def test_the_unique_key_path_in_time_slices_equals_reference(query, acts, steps):
    """Every run cut after a few scheduling steps, as a server's time slices do: the join's releases then hold
    whatever its inputs had delivered by then."""
    w = Workload(CATALOG + VIEWS, query, *acts)
    with _limits():
        problem = diff(run_reference(w), run_engine(w, policy="round_robin", slice_steps=steps))
    assert problem is None, f"{w!r}\n{problem}"


def _count_path(monkeypatch) -> dict:
    """Wrap the path to count the releases it took and refused."""
    seen = {True: 0, False: 0}
    orig = append_dense.dense_release

    def counted(aj, op, parts):
        got = orig(aj, op, parts)
        seen[got] += 1
        return got
    monkeypatch.setattr(append_dense, "dense_release", counted)
    return seen


def _join(eng) -> JoinOp:
    return next(op for op in eng.ops if isinstance(op, JoinOp))


def _q3_pushes(sizes: list[int], seed: int, early: float = 0.0) -> list:
    """q3-shaped pushes of ``sizes`` events each: a Person push of new ascending ids and an Auction push by
    recent sellers (a fraction ``early`` by sellers whose person arrives in a later push)."""
    rng = np.random.default_rng(seed)
    acts, pid, aid, t = [], 0, 0, 0
    for per_push in sizes:
        people, pts, auctions, ats = [], [], [], []
        for _ in range(per_push):
            t += int(rng.integers(0, 2))
            if rng.random() < 0.4:
                people.append({"id": pid, "name": f"p{pid}", "st": ["OR", "CA", "ID"][pid % 3]})
                pts.append(t)
                pid += 1
            else:
                late = rng.random() < early
                seller = pid + int(rng.integers(0, 4)) if late else int(rng.integers(max(0, pid - 6), pid + 1))
                auctions.append({"id": aid, "seller": seller, "cat": 10 if rng.random() < 0.7 else 9})
                ats.append(t)
                aid += 1
        if people:
            acts.append(("push", "P", people, pts))
        if auctions:
            acts.append(("push", "A", auctions, ats))
        acts += [("heartbeat", t), ("run",)]
    return acts


def test_q3_shaped_releases_take_the_path_and_place_rows_only_when_a_new_key_was_named(monkeypatch):
    """Pushes over ``DENSE_ROWS`` (lowered to 8, so that the reference evaluator stays quick) released rows:
    every release takes the path; sellers named before their person arrives make some releases place the
    counted rows (``flush``), and the answers stay the reference's."""
    monkeypatch.setattr(append_dense, "DENSE_ROWS", 8)
    monkeypatch.setattr(JoinOp, "emit", _ordered_emit(JoinOp.emit))
    seen = _count_path(monkeypatch)
    places = []
    orig_place = SmallAppendIndexSynopsis._place

    def place(self):
        places.append(sum(len(s) for s in self.counted))
        orig_place(self)
    monkeypatch.setattr(SmallAppendIndexSynopsis, "_place", place)
    eng = check_query(CATALOG, QUERIES[0], _q3_pushes([30] * 12, seed=3, early=0.1), until=100_000)
    assert seen[True] >= 12 and not seen[False]
    assert places and sum(places) < sum(len(s) for s in _join(eng).sides)   # some rows placed, not all at once
    people = _join(eng).sides[1]
    assert people.most == 1 and not people.counted


def test_a_large_release_after_small_ones_moves_the_dicts_to_the_arrays(monkeypatch):
    """Small releases in the dict form, then one of at least ``DENSE_ROWS`` (lowered to 8) rows: both inputs
    move into the arrays with the rows they hold, the path applies from then on, small releases included, and
    pairs with rows held in the dict form are found."""
    monkeypatch.setattr(append_dense, "DENSE_ROWS", 8)
    seen = _count_path(monkeypatch)
    eng = check_query(CATALOG, QUERIES[2], _q3_pushes([3] * 8 + [40] + [3] * 8, seed=8), until=100_000)
    assert seen[True] >= 2 and all(s.keys is None for s in _join(eng).sides)


def test_small_releases_stay_in_the_dict_form(monkeypatch):
    """Below ``DENSE_ROWS`` released rows, while both inputs are dicts, the path is not taken."""
    seen = _count_path(monkeypatch)
    eng = check_query(CATALOG, QUERIES[0], _q3_pushes([12] * 10, seed=4), until=100_000)
    assert not seen[True] and seen[False]
    assert all(s.keys is not None for s in _join(eng).sides)


@pytest.mark.parametrize("query", QUERIES[5:7])
def test_a_predicate_on_the_pairs_never_takes_the_path(dense_always, monkeypatch, query):
    seen = _count_path(monkeypatch)
    check_query(CATALOG, query, _q3_pushes([20] * 6, seed=5), until=100_000)
    assert not seen[True] and seen[False]


def test_a_unique_key_seen_again_leaves_the_path_to_the_general_one(dense_always, monkeypatch):
    """A person id pushed a second time: that release goes the general way (nothing changed first), and the
    people no longer count as held once per key (the later pushes bring the same ids again), so later releases do too (the auctions, counted, cannot take
    their place); the answers stay the reference's."""
    seen = _count_path(monkeypatch)
    acts = _q3_pushes([20] * 4, seed=6)
    last = max(a[3][-1] for a in acts if a[0] == "push")
    acts += [("push", "P", [{"id": 3, "name": "again", "st": "OR"}], [last + 1]), ("run",)]
    acts += [(a[0], a[1], a[2], [t + last + 2 for t in a[3]]) if a[0] == "push" else
             (("heartbeat", a[1] + last + 2) if a[0] == "heartbeat" else a) for a in _q3_pushes([20] * 4, seed=7)]
    eng = check_query(CATALOG, QUERIES[1], acts, until=100_000)
    assert seen[True] >= 4 and seen[False] >= 1
    assert _join(eng).sides[0].most >= 2


def test_new_keys_finding_counted_rows_emit_their_pairs_in_time_order(dense_always):
    """Auctions by sellers not arrived yet (5 twice, 6 once) are counted; the release that brings persons 5
    and 6 places them and finds three pairs by key (5's head, 6's head, then 5's second row): put in time
    order before they are emitted (``_ordered_emit`` checks)."""
    acts = [("push", "A", [{"id": 1, "seller": 5, "cat": 10}, {"id": 2, "seller": 5, "cat": 10},
                           {"id": 3, "seller": 6, "cat": 10}], [1, 2, 3]),
            ("heartbeat", 5), ("run",),
            ("push", "P", [{"id": 5, "name": "a", "st": "OR"}, {"id": 6, "name": "b", "st": "CA"}], [10, 11]),
            ("heartbeat", 12), ("run",)]
    eng = check_query(CATALOG, QUERIES[2], acts, until=100)
    auctions = _join(eng).sides[0]
    assert not auctions.counted and auctions.most == 2


def test_rows_counted_but_not_placed_are_found_and_counted_exactly():
    """``add_counted`` keeps ``count`` and ``most`` exact; ``find`` (and every other entry point) places them
    first, in arrival order, after rows placed before."""
    ix = SmallAppendIndexSynopsis(KeySlots())
    ix.to_arrays()
    slots = ix.slots
    ix.append([np.array([0, 1])], slots.of(np.array([7, 8])))
    ix.add_counted([np.array([2, 3, 4])], slots.of(np.array([8, 8, 9])))
    ix.add_counted([np.array([5])], slots.of(np.array([7])))
    assert ix.counted and ix.most == 3 and len(ix) == 6
    assert ix.count[slots.of(np.array([7, 8, 9, 10]))].tolist() == [2, 3, 1, 0]
    p, rows = ix.find(slots.of(np.array([8, 7])))
    assert not ix.counted
    assert sorted(zip(p.tolist(), rows.tolist())) == [(0, 1), (0, 2), (0, 3), (1, 0), (1, 5)]
    assert ix.gather(rows)[0].tolist() == rows.tolist()
    assert ix.count[slots.of(np.array([7, 8, 9]))].tolist() == [2, 3, 1] and ix.key_count() == 3


def test_a_band_defer_after_counted_rows_places_them_first():
    ix = SmallAppendIndexSynopsis(KeySlots())
    ix.to_arrays()
    slots = ix.slots
    ix.add_counted([np.array([10, 11])], slots.of(np.array([1, 2])))
    ix.defer([np.array([12])], slots.of(np.array([1])), np.array([5]))
    assert not ix.counted
    p, rows = ix.find_above(slots.of(np.array([1])), 0)
    assert sorted(rows.tolist()) == [0, 2]
    with pytest.raises(AssertionError, match="deferred"):
        ix.add_counted([np.array([13])], slots.of(np.array([2])))
