"""A join whose one side holds a few rows and whose other side turns over a whole window at once (NEXMark q7:
the bids of a tumbling window joined with their MAX): the big side's releases are kept in the log as the arrays
they came in (``synopses/row_log.py``), its deletes are applied without their columns being joined
(``dsms.batch.ConcatBatch``), and probes against the few rows compare codes one entry at a time
(``_Run.matches``, ``total_matches``). Each workload is checked against the reference evaluator, with the log's
adoption threshold as shipped and lowered to a few rows so that small releases take the path large ones do:
deletes from both sides, duplicate rows on both sides, the small side changing at the same instant as the big
one, and either side empty for a while."""

from __future__ import annotations

import random

import pytest
from oracle.generators import CATALOG, Workload, compare, run_engine, run_reference

from dsms.plan import physical
from synopses import row_log


@pytest.fixture(params=[row_log.ADOPT_ROWS, 3], ids=["shipped", "adopt-3-rows"])
def adopt_rows(request, monkeypatch):
    monkeypatch.setattr(row_log, "ADOPT_ROWS", request.param)
    return request.param


def _bids(seed: int, until: int, gap_from: int, gap_to: int) -> tuple:
    """Pushes to S of 0-30 rows per instant (many probes against the few rows of the other side, prices
    b often tied so that a window's MAX is held by several rows), none between ``gap_from`` and ``gap_to``
    (a window with no rows), in chunks of a few instants, sometimes with an engine run between them."""
    rng = random.Random(seed)
    actions = []
    t = 0
    while t < until:
        step = rng.randint(1, 4)
        rows, ts = [], []
        for u in range(t, min(t + step, until)):
            if gap_from <= u < gap_to:
                continue
            for _ in range(rng.randint(0, 30)):
                rows.append({"a": rng.randint(0, 3), "b": rng.choice([-1, 0, 1, 2, 5, 5]), "c": rng.choice("xyz")})
                ts.append(u)
        if rows:
            actions.append(("push", "S", rows, ts))
        if rng.random() < 0.4:
            actions.append(("run",))
        t += step
    return tuple(actions)


def _check(query: str, actions: tuple, until: int) -> None:
    """Against the reference, as planned and as a JoinOp: a tumbling window joined with its own MAX is
    planned as one operator (``window_extreme_join.py``), so the join's path is forced for the second run."""
    w = Workload(CATALOG, query, actions, until)
    expected = run_reference(w)
    assert expected, "the workload should produce some results"
    compare(expected, run_engine(w))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(physical, "window_extreme", lambda node: None)
        compare(expected, run_engine(w))


Q7_SHAPE = ("SELECT ISTREAM(B.a, B.b, B.c) FROM S [RANGE 10 SLIDE 10] B, "
            "(SELECT MAX(b) AS m FROM S [RANGE 10 SLIDE 10]) M WHERE B.b = M.m")


@pytest.mark.parametrize("seed", [1, 2])
def test_tumbling_window_joined_with_its_max(adopt_rows, seed):
    """q7's shape: both sides change at every window boundary (the old bids and the old MAX leave, the new
    ones enter, at one instant), MAX tied by several bids, and a window with no bids at all (no MAX row)."""
    _check(Q7_SHAPE, _bids(seed, 60, 20, 31), 75)


def test_max_as_a_relation_with_deletes_from_both_sides(adopt_rows):
    """Without ISTREAM the join's changelog shows every pair's delete when a window turns over: deletes
    from both sides at the same instant, and the window's duplicate rows each paired once per MAX row."""
    q = ("SELECT B.a, B.b FROM S [RANGE 10 SLIDE 10] B, (SELECT MAX(b) AS m FROM S [RANGE 10 SLIDE 10]) M "
         "WHERE B.b = M.m")
    _check(q, _bids(3, 45, 12, 18), 60)


def _relation_changes(seed: int, until: int) -> tuple:
    """Inserts and deletes of a few rows of R (duplicates included), some at the same instants as S's
    pushes, and a stretch where R is empty."""
    rng = random.Random(seed)
    held: list[dict] = []
    actions = []
    for t in range(0, until, 3):
        ins, dels = [], []
        if held and rng.random() < 0.5:
            dels.append(held.pop(rng.randrange(len(held))))
        if 20 <= t < 30:                        # R empty for a while
            dels += held
            held = []
        elif rng.random() < 0.7:
            row = {"a": rng.randint(0, 3), "e": rng.choice("pq")}
            ins += [row] * rng.randint(1, 2)    # a duplicate row now and then
            held += [dict(r) for r in ins]
        if ins or dels:
            actions.append(("update", "R", ins, dels, t))
    return tuple(actions)


def _merge(*lists: tuple) -> tuple:
    """Interleave per-input actions by their timestamps (each input's own order kept; R before S at a tie)."""
    def ts(a):
        return a[4] if a[0] == "update" else a[3][0] if a[0] == "push" else None
    out, pending = [], [list(x) for x in lists]
    while any(pending):
        firsts = [(ts(p[0]), i) for i, p in enumerate(pending) if p and ts(p[0]) is not None]
        runs = [i for i, p in enumerate(pending) if p and ts(p[0]) is None]
        i = runs[0] if runs else min(firsts)[1]
        out.append(pending[i].pop(0))
    return tuple(out)


@pytest.mark.parametrize("order", ["window first", "relation first"])
def test_window_joined_with_a_few_relation_rows(adopt_rows, order):
    """A sliding window of many rows against a relation of a few rows updated at random (the signed form on
    that side, the first-in-first-out one on the window's), R changing at the same instants as S, R empty
    for a while, duplicate rows in both; the small side on the left or on the right."""
    frm = "S [RANGE 7] X, R" if order == "window first" else "R, S [RANGE 7] X"
    q = f"SELECT X.b, X.c, R.e FROM {frm} WHERE X.a = R.a"
    _check(q, _merge(_relation_changes(4, 50), _bids(5, 50, 35, 42)), 62)


def test_small_side_empty_throughout_and_big_side_emptied(adopt_rows):
    """The MAX side sees only rows of another key range (no pair ever), then the window side empties and
    refills; the join's output is empty until both sides hold matching rows again."""
    q = ("SELECT ISTREAM(B.a, B.c) FROM S [RANGE 10 SLIDE 10] B, (SELECT MAX(d) AS m FROM T [RANGE 10 SLIDE 10]) M "
         "WHERE B.b = M.m")
    t_rows = (("push", "T", [{"a": 0, "d": 7.0}], [3]), ("push", "T", [{"a": 0, "d": 5.0}], [33]),
              ("push", "T", [{"a": 1, "d": 2.0}, {"a": 2, "d": 2.0}], [47, 48]))
    _check(q, _merge(t_rows, _bids(6, 55, 10, 30)), 70)
