"""A join's state as a bounded sample of each input's window (issue 14 item 3: join synopses as a reservoir
sample; docs/approximate-synopses.md): what the sampled join outputs is exactly the join of the rows it holds;
a delete of a copy that is not sampled leaves sampled copies of the same row alone; a windowed COUNT over the
join, scaled by 1/(p_L p_R), lies within its stated bound at its stated confidence (and the same check fails
unscaled); the state stays bounded; switching kinds mid-stream loses nothing exact; bad knob values are refused
and change nothing."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

import dsms.operators.join as join_module
from control_tables import ControlTableError
from dsms import Engine
from dsms.batch import Batch

SCHEMA = "REGISTER STREAM S (a INT, b INT); REGISTER STREAM T (a INT, b INT)"
RANGE = 300


def _engine(cql: str, seed: int = 0, k: int | None = None):
    eng = Engine({"seed": seed})
    eng.execute(SCHEMA)
    q = eng.execute(cql)
    join = eng.registry.entities("join")[0]
    if k is not None:
        for syn in join.sides:
            eng.registry.set(syn.id, "reservoir_rows", k)
    return eng, q, join


def _rows(rng: random.Random, n: int, keys: int) -> list[dict]:
    return [{"a": rng.randrange(keys), "b": rng.randrange(1000)} for _ in range(n)]


def _feed(eng, rng: random.Random, until: int, value) -> dict[str, list]:
    """100 rows of 5 keys into S and into T per 100 instants up to ``until``; per stream (ts, value(row))."""
    hist: dict[str, list] = {"S": [], "T": []}
    for i in range(0, until, 100):
        for s in ("S", "T"):
            rows = _rows(rng, 100, 5)
            eng.push(s, rows, ts=list(range(i, i + 100)))
            hist[s] += [(t, value(r)) for t, r in zip(range(i, i + 100), rows)]
    return hist


def _held(join, side: int) -> Counter:
    """The rows a side holds now, read from its index (live rows, stored deletes subtracted)."""
    index = join.sides[side]
    out: Counter = Counter()
    if index.table is not None:
        t = index.table
        for row, s in zip(zip(*[c.tolist() for c in t.cols]), t.sign.tolist()):
            out[row] += s
    elif index.log is not None:
        out.update(zip(*[c.tolist() for c in index.log.live_cols()]))
    return +out


def _window(hist: list[tuple[int, tuple]], now: int) -> Counter:
    return Counter(row for ts, row in hist if now - RANGE < ts <= now)


def _pairs(left: Counter, right: Counter) -> Counter:
    """The equi-join on column 0 of two bags of rows (plain Python: the oracle)."""
    out: Counter = Counter()
    for lr, ln in left.items():
        for rr, rn in right.items():
            if lr[0] == rr[0]:
                out[lr + rr] += ln * rn
    return out


@pytest.mark.parametrize("other, bounded", [("T", False), ("S", False), ("T", True)])
def test_the_sampled_join_is_the_join_of_the_rows_held(other, bounded, monkeypatch):
    """After every batch, the join's result (its output netted) equals the join of the rows each side holds,
    every held row is in its window, and each side holds at most reservoir_rows rows: deletes of copies
    that are not sampled removed nothing, and displaced rows left the result. Also when the join applies
    its releases in small bounded chunks (the sample's deltas put back for a later run)."""
    if bounded:
        monkeypatch.setattr(join_module, "PAIR_BUDGET", 3)
        monkeypatch.setattr(join_module, "RELEASE_ROWS", 5)
    eng, q, join = _engine(f"SELECT * FROM S [RANGE {RANGE}] X, {other} [RANGE {RANGE}] Y WHERE X.a = Y.a",
                           seed=3, k=40)
    out = join.output.reader()                   # the join's own output: its inserts and deletes
    rng = random.Random(5)
    hist: dict[str, list] = {"S": [], "T": []}
    result: Counter = Counter()
    for i in range(0, 1500, 50):
        if i == 250:
            join.switch_kind("reservoir")
        for s in {"S", other}:
            rows = [{"a": rng.randrange(4), "b": rng.randrange(3)} for _ in range(50)]   # many duplicates
            ts = list(range(i, i + 50))
            eng.push(s, rows, ts=ts)
            hist[s] += [(t, (r["a"], r["b"])) for t, r in zip(ts, rows)]
        eng.run()
        while (b := out.get()) is not None:
            if isinstance(b, Batch):
                for row, sign in zip(b.rows(), b.sign.tolist()):
                    result[tuple(row)] += sign
        held = [_held(join, 0), _held(join, 1)]
        assert +result == _pairs(held[0], held[1])
        now = i + 49
        for side, s in enumerate(("S", other)):
            assert not held[side] - _window(hist[s], now)
            if i >= 300:
                assert sum(held[side].values()) <= 40
    assert join.kind_in_effect() == "reservoir"
    assert [syn.get("in_effect") for syn in join.sides] == ["reservoir", "reservoir"]


def test_a_delete_of_a_copy_not_sampled_leaves_the_sampled_copy():
    """Copies of one row at different insert times: with a sample of one row, the copies that were not
    sampled leave the window without taking the sampled copy with them."""
    eng, q, join = _engine("SELECT * FROM S [RANGE 10] X, T [RANGE 1000] Y WHERE X.a = Y.a", k=1)
    out = join.output.reader()
    eng.push("T", [{"a": 1, "b": 0}], ts=[0])
    eng.push("S", [{"a": 1, "b": 7}], ts=[0])
    eng.run()
    join.switch_kind("reservoir")
    # copies of S's row (1, 7) at instants 1..5; the sample holds one of the six copies
    for t in range(1, 6):
        eng.push("S", [{"a": 1, "b": 7}], ts=[t])
        eng.heartbeat(t + 1)
        eng.run()
    gate = join.gates[0]
    assert gate.held == 1 and gate.window_rows == 6
    sampled = int(gate.copy[0]) - gate.n_out     # which copy (0: inserted at 0, ..., 5: at 5)
    for t in range(7, 10 + sampled):             # every copy inserted before the sampled one leaves
        eng.heartbeat(t)                         # (a join applies what is stamped up to the frontier)
        eng.run()
        assert sum(_held(join, 0).values()) == 1, t
    eng.heartbeat(10 + sampled)                  # the sampled copy leaves at its insert time + 10
    eng.run()
    assert sum(_held(join, 0).values()) == 0
    net: Counter = Counter()
    while (b := out.get()) is not None:
        if isinstance(b, Batch):
            for row, sign in zip(b.rows(), b.sign.tolist()):
                net[tuple(row)] += sign
    assert not +net and not -net                 # every pair inserted was retracted


def _count_run(seed: int, other: str, scale: str = "both", k: int = 60, keys: int = 6):
    """A windowed COUNT over a sampled equi-join, read after each batch from the second window on: (estimate,
    exact, stated bound) per batch."""
    eng, q, join = _engine(f"SELECT COUNT(*) AS c FROM S [RANGE {RANGE}] X, {other} [RANGE {RANGE}] Y "
                           "WHERE X.a = Y.a", seed=seed, k=k)
    join.switch_kind("reservoir")
    rng = random.Random(seed)
    hist: dict[str, list] = {"S": [], "T": []}
    out = []
    weights = [1 + j for j in range(keys)]                    # skewed keys
    for i in range(0, 900, 100):
        for s in {"S", other}:
            rows = [{"a": rng.choices(range(keys), weights)[0], "b": 0} for _ in range(100)]
            ts = list(range(i, i + 100))
            eng.push(s, rows, ts=ts)
            hist[s] += [(t, r["a"]) for t, r in zip(ts, rows)]
        eng.run()
        got = [e for e in q.drain() if e.sign > 0]
        if i < 2 * RANGE or not got:
            continue
        now = got[-1].ts                                       # the last final instant
        left, right = _window(hist["S"], now), _window(hist[other], now)
        exact = sum(n * right[a] for a, n in left.items())
        est = got[-1].row["c"]
        approx = got[-1].approx
        assert approx is not None and approx == q.approximation()
        if scale == "none":                                     # deliberately wrong: not scaled
            est = est * approx.sampling_rate
        elif scale == "one side":                               # deliberately wrong: by 1/p_L alone
            est = est * approx.sampling_rate ** 0.5
        out.append((est, exact, approx))
    return out


@pytest.mark.parametrize("other", ["T", "S"])
def test_scaled_count_within_its_bound_at_its_confidence(other):
    hits = total = 0
    for seed in range(40):
        for est, exact, approx in _count_run(seed, other):
            assert 0 < approx.sampling_rate < 0.25 and approx.confidence == 0.95
            total += 1
            hits += abs(est - exact) <= approx.rel_error * exact
    assert total >= 100
    assert hits / total >= 0.93, (hits, total)


@pytest.mark.parametrize("wrong", ["none", "one side"])
def test_the_same_check_fails_for_a_wrong_scaling(wrong):
    hits = total = 0
    for seed in range(10):
        for est, exact, approx in _count_run(seed, "T", scale=wrong):
            total += 1
            hits += abs(est - exact) <= approx.rel_error * exact
    assert total >= 25 and hits / total < 0.5


def test_memory_stays_bounded_while_the_exact_kind_grows():
    sizes = {}
    for kind in ("exact", "reservoir"):
        eng, q, join = _engine("SELECT COUNT(*) FROM S [RANGE 1000000] X, T [RANGE 1000000] Y WHERE X.a = Y.a",
                               k=200)
        if kind == "reservoir":
            join.switch_kind("reservoir")
        rng = random.Random(1)
        seen = []
        for i in range(0, 20000, 2000):
            for s in ("S", "T"):
                eng.push(s, _rows(rng, 2000, 50), ts=list(range(i, i + 2000)))
            eng.run()
            q.drain()
            seen.append((join.table_bytes(), [syn.get("size") for syn in join.sides]))
        sizes[kind] = seen
    ex, sm = sizes["exact"], sizes["reservoir"]
    assert [n for _, n in ex] == [[2000 * (i + 1)] * 2 for i in range(10)]    # exact: the whole window
    assert ex[-1][0] > 3 * ex[1][0]
    # sample: k rows, and until the index compacts them the deletes of displaced rows (each with its insert)
    assert all(max(n) <= 2 * 200 + 128 for _, n in sm)
    assert max(b for b, _ in sm) < 2 * sm[0][0] and sm[-1][0] * 10 < ex[-1][0]


def test_switching_kinds_mid_stream_loses_nothing_exact():
    """exact -> reservoir -> exact: after the switch back, once the sampled rows have left the window, the
    output is the exact run's element for element and nothing is marked approximate any more."""
    cql = f"SELECT * FROM S [RANGE {RANGE}] X, T [RANGE {RANGE}] Y WHERE X.a = Y.a"

    def run(switches: dict[int, str]):
        eng, q, join = _engine(cql, seed=2, k=30)
        rng = random.Random(8)
        per_batch, kinds, approx = [], [], []
        for n, i in enumerate(range(0, 2000, 50)):
            if n in switches:
                join.switch_kind(switches[n])
            for s in ("S", "T"):
                eng.push(s, _rows(rng, 50, 8), ts=list(range(i, i + 50)))
            eng.run()
            per_batch.append(sorted((e.ts, e.sign, tuple(e.row.values())) for e in q.drain()))
            kinds.append(join.kind_in_effect())
            approx.append(q.approximation())
        return per_batch, kinds, approx, join

    exact, kinds0, _, _ = run({})
    assert set(kinds0) == {"exact"}
    got, kinds, approx, join = run({5: "reservoir", 15: "exact"})
    assert kinds[4] == "exact" and kinds[5] == "reservoir" and kinds[15] == "draining"
    assert approx[4] is None and approx[5] is not None and approx[15] is not None
    back = kinds.index("exact", 15)
    assert back <= 15 + RANGE // 50 + 1                       # the sampled rows left within one window length
    assert all(a is None for a in approx[back:])
    assert got[:5] == exact[:5]
    assert got[back + 1:] == exact[back + 1:] and got[5:back] != exact[5:back]
    assert [syn.get("in_effect") for syn in join.sides] == ["exact", "exact"]


def _net_by_instant(reader) -> Counter:
    out: Counter = Counter()
    while (b := reader.get()) is not None:
        if isinstance(b, Batch):
            for t, sign in zip(b.ts.tolist(), b.sign.tolist()):
                out[t] += sign
    return out


def test_the_switch_waits_for_the_next_instant():
    """The join has applied instants up to 2 (its frontier); the switch asked for now samples its state
    at instant 3: the rows not kept leave then, with their pairs, and nothing earlier changes."""
    eng, q, join = _engine("SELECT * FROM S [RANGE 100] X, T [RANGE 100] Y WHERE X.a = Y.a", k=1)
    out = join.output.reader()
    for t in (1, 2):
        eng.push("S", [{"a": 1, "b": t}], ts=[t])
        eng.push("T", [{"a": 1, "b": t}], ts=[t])
    eng.run()
    assert _net_by_instant(out) == {1: 1, 2: 3}            # 4 pairs
    join.switch_kind("reservoir")
    assert join.sides[0].get("kind") == "reservoir" and join.kind_in_effect() == "exact"
    assert join.sides[0].get("in_effect") == "exact"
    eng.push("S", [{"a": 2, "b": 0}], ts=[5])
    eng.push("T", [{"a": 2, "b": 0}], ts=[5])
    eng.run()
    assert join.kind_in_effect() == "reservoir" and join.sides[0].get("in_effect") == "reservoir"
    net = _net_by_instant(out)
    assert set(net) <= {3, 5} and net[3] == -3               # one row a side kept: one pair of four


@pytest.mark.parametrize("attr, value", [("kind", "bloom"), ("kind", "sketch"), ("kind", 3), ("kind", None),
                                         ("reservoir_rows", 0), ("reservoir_rows", -5),
                                         ("reservoir_rows", 1 << 30), ("reservoir_rows", 2.5),
                                         ("reservoir_rows", "10"), ("memory", -1)])
def test_bad_knob_values_are_refused_and_change_nothing(attr, value):
    eng, q, join = _engine("SELECT * FROM S [RANGE 10] X, T [RANGE 10] Y WHERE X.a = Y.a")
    syn = join.sides[0]
    before = syn.get()
    with pytest.raises(ControlTableError, match=attr):
        eng.registry.set(syn.id, attr, value)
    assert syn.get() == before and join.pending_kinds == [None, None]


@pytest.mark.parametrize("cql", [
    "SELECT * FROM S [ROWS 10] X, T [RANGE 10] Y WHERE X.a = Y.a",                  # not a RANGE window
    "SELECT * FROM S [PARTITION BY a ROWS 2] X, T [RANGE 10] Y WHERE X.a = Y.a",    # deletes out of order
])
def test_a_side_whose_copies_cannot_be_told_apart_is_refused(cql):
    eng, q, join = _engine(cql)
    syn = join.sides[0]
    with pytest.raises(ControlTableError, match="kind.*first in, first out"):
        eng.registry.set(syn.id, "kind", "reservoir")
    assert syn.get("kind") == "exact" and join.pending_kinds == [None, None]
    with pytest.raises(ValueError, match="first in, first out"):
        join.switch_kind("reservoir")                          # both sides or neither
    assert [s.get("kind") for s in join.sides] == ["exact", "exact"] and join.pending_kinds == [None, None]
    eng.registry.set(join.sides[1].id, "kind", "reservoir")  # the RANGE side alone can be sampled
    assert join.pending_kinds == [None, "reservoir"]


def test_unknown_kind_through_switch_kind_is_refused():
    eng, q, join = _engine("SELECT * FROM S [RANGE 10] X, T [RANGE 10] Y WHERE X.a = Y.a")
    with pytest.raises(ValueError, match="unknown synopsis kind 'bloom'"):
        join.switch_kind("bloom")
    assert [s.get("kind") for s in join.sides] == ["exact", "exact"]


def test_exact_kind_is_unchanged():
    """Left at exact, the join reports no approximation and its results are not scaled."""
    eng, q, join = _engine(f"SELECT COUNT(*) AS c FROM S [RANGE {RANGE}] X, T [RANGE {RANGE}] Y WHERE X.a = Y.a")
    hist = _feed(eng, random.Random(0), 600, lambda r: r["a"])
    eng.run()
    last = [e for e in q.drain() if e.sign > 0][-1]
    left, right = _window(hist["S"], last.ts), _window(hist["T"], last.ts)
    assert last.row["c"] == sum(n * right[a] for a, n in left.items())
    assert last.approx is None and join.approximation() is None and join.kind_in_effect() == "exact"
    assert join.table_bytes() == sum(s.nbytes() for s in join.sides) and np.isfinite(join.table_bytes())


def test_the_window_of_a_sampled_input_keeps_its_size():
    """A sampled input numbers its window's copies by the order they leave; a new window size would change
    that order, so it is refused until the join is exact again."""
    eng, q, join = _engine("SELECT * FROM S [RANGE 10] X, T [RANGE 10] Y WHERE X.a = Y.a", k=2)
    window = join.windows[0]
    join.switch_kind("reservoir")
    eng.push("S", [{"a": 1, "b": 1}], ts=[1])
    eng.push("T", [{"a": 1, "b": 1}], ts=[1])
    eng.run()
    with pytest.raises(ControlTableError, match="range.*switch the join's kind to exact first"):
        eng.registry.set(window.id, "range", 20)
    assert window.get("range") == 10
    join.switch_kind("exact")
    eng.heartbeat(30)
    eng.run()
    assert join.kind_in_effect() == "exact"
    eng.registry.set(window.id, "range", 20)
    assert window.get("range") == 20


def test_count_and_sum_are_scaled_and_avg_is_not():
    eng, q, join = _engine(f"SELECT COUNT(*) AS c, SUM(X.b) AS s, AVG(X.b) AS m FROM S [RANGE {RANGE}] X, "
                           f"T [RANGE {RANGE}] Y WHERE X.a = Y.a", seed=4, k=50)
    join.switch_kind("reservoir")
    hist = _feed(eng, random.Random(4), 900, lambda r: (r["a"], r["b"]))
    eng.run()
    last = [e for e in q.drain() if e.sign > 0][-1]
    held = _pairs(_held(join, 0), _held(join, 1))
    raw_c = sum(held.values())
    raw_s = sum(n * row[1] for row, n in held.items())
    rate = last.approx.sampling_rate
    assert rate == pytest.approx(join.sampling_rate()) and rate < 0.05
    assert last.row["c"] == round(raw_c / rate)                       # scaled
    assert last.row["s"] == round(raw_s / rate)
    assert last.row["m"] == pytest.approx(raw_s / raw_c)              # a ratio: not scaled
    exact = _pairs(_window(hist["S"], last.ts), _window(hist["T"], last.ts))
    assert abs(last.row["c"] - sum(exact.values())) <= last.approx.rel_error * sum(exact.values())
