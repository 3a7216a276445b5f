"""Shedding selection-only queries by promising regions (issue 14; P3's promising tuples, digest-004 section
2.L and experiment X8; docs/approximation.md, "Shedding selections"): on data with locality it returns more
of the exact output than random dropping at the same share of the input, every row it returns is a row of
the exact answer, results say they are a subset, and nothing is shed (results exact, byte for byte) while the
engine is not overloaded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dsms import Engine
from dsms.approx import Approx, combine
from dsms.batch import Batch, Element
from dsms.cql import ast
from dsms.formats import mark_approx
from dsms.load_shedder import allot
from dsms.operators.promising import PromisingDrop, RegionIndex, RegionSummary, column_intervals
from dsms.operators.shed import Shedder

N, BATCH = 40_000, 4_000


def local_data(seed: int, local: bool = True) -> dict[str, np.ndarray]:
    """f in runs (mean 300 rows) around uniform centres, or (local false) independent and uniform."""
    rng = np.random.default_rng(seed)
    if local:
        runs = rng.geometric(1 / 300, size=N // 50 + 10)
        f = np.mod(np.repeat(rng.random(len(runs)), runs)[:N] + rng.normal(0, 0.03, N), 1.0)
    else:
        f = rng.random(N)
    return {"g": rng.integers(0, 50, N), "v": rng.random(N), "f": f}


def predicates(seed: int, k: int = 12) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed + 99)
    out = []
    for _ in range(k):
        lo = round(float(rng.random() * 0.9), 4)
        out.append((lo, round(lo + float(rng.uniform(0.05, 0.10)), 4)))
    return out


def run(data: dict, preds: list, method: str, rate: float = 1.0, step_capacity: float | None = None):
    """Per query the result batches; ``method`` exact, promising (the load shedder's drops at ``rate``),
    random (a random drop at ``rate`` on every query's input edge) or stepped (the shedder's own control
    loop, asked between batches with ``step_capacity``)."""
    eng = Engine({"seed": 7})
    eng.execute("REGISTER STREAM S (g INT, v FLOAT, f FLOAT)")
    qs = [eng.execute(f"SELECT ISTREAM(g, v, f) FROM S WHERE f >= {lo} AND f < {hi}") for lo, hi in preds]
    if method == "promising":
        eng.shedder.shed({q.id: rate for q in qs})
    elif method == "random":
        for op in eng.ops:
            for r in op.readers:
                if r.queue is eng.source_queue("S"):
                    r.shed = Shedder(r, "random", eng.next_seed(), rate)
    out: list[list[Batch]] = [[] for _ in qs]
    approx = []
    for lo in range(0, N, BATCH):
        eng.push("S", {c: data[c][lo:lo + BATCH] for c in ("g", "v", "f")}, ts=np.arange(lo, lo + BATCH))
        eng.run()
        if step_capacity is not None:
            eng.shedder.step(capacity=step_capacity)
        for k, q in enumerate(qs):
            out[k] += q.drain_batches()
        approx.append(qs[0].approximation())
    return eng, qs, out, approx


def fraction(out, exact) -> float:
    return float(np.mean([sum(map(len, o)) / sum(map(len, e)) for o, e in zip(out, exact)]))


def rows(batches: list[Batch]) -> list[tuple]:
    return sorted((int(t), *r) for b in batches for t, r in zip(b.ts.tolist(), b.rows()))


def test_on_data_with_locality_promising_regions_return_more_than_random_dropping_at_the_same_share():
    data, preds = local_data(1), predicates(1)
    _, _, exact, _ = run(data, preds, "exact")
    for rate in (0.5, 0.25):
        eng, _, pt, _ = run(data, preds, "promising", rate)
        _, _, rnd, _ = run(data, preds, "random", rate)
        kept = sum(s.kept for s in eng.shedder.placed.values())
        assert kept <= rate * N * len(preds) + len(preds) * N / BATCH      # never more than the share
        assert abs(fraction(rnd, exact) - rate) < 0.05                      # random: about the share
        assert fraction(pt, exact) > fraction(rnd, exact) + 0.3             # the runs are found


def test_without_locality_promising_regions_gain_little():
    """On independent values the regions differ by noise only: about what random dropping gives (within
    0.15 of it: the per-region counts still pick slightly denser regions)."""
    data, preds = local_data(2, local=False), predicates(2)
    _, _, exact, _ = run(data, preds, "exact")
    _, _, pt, _ = run(data, preds, "promising", 0.25)
    _, _, rnd, _ = run(data, preds, "random", 0.25)
    assert fraction(rnd, exact) - 0.02 < fraction(pt, exact) < fraction(rnd, exact) + 0.15


def test_every_row_returned_is_a_row_of_the_exact_answer():
    data, preds = local_data(3), predicates(3)
    f = data["f"]
    for rate in (0.6, 0.2, 0.01):
        _, _, pt, _ = run(data, preds, "promising", rate)
        for (lo, hi), got in zip(preds, pt):
            idx = np.flatnonzero((f >= lo) & (f < hi))             # the exact answer, computed offline
            exact = {(int(i), int(data["g"][i]), float(data["v"][i]), float(f[i])) for i in idx}
            mine = rows(got)
            assert len(set(mine)) == len(mine) and set(mine) <= exact, (rate, lo, hi)


def test_not_overloaded_nothing_is_shed_and_results_are_exact():
    data, preds = local_data(4), predicates(4, k=4)
    _, _, exact, _ = run(data, preds, "exact")
    eng, qs, got, approx = run(data, preds, "stepped", step_capacity=1e12)
    assert not eng.shedder.placed and not eng.registry.entities(kind="shedder")
    assert all(a is None for a in approx)
    for e, g in zip(exact, got):
        assert rows(e) == rows(g) and all(b.approx is None for b in g)


def test_overloaded_selections_get_promising_drops_that_say_subset_and_go_when_the_load_falls():
    data, preds = local_data(5), predicates(5, k=4)
    eng, qs, got, approx = run(data, preds, "stepped", step_capacity=1e-12)
    sheds = eng.registry.entities(kind="shedder")
    assert sheds and all(s.method == "promising" and math.isinf(s.rel_error) for s in sheds)
    a = qs[0].approximation()
    assert a is not None and a.subset and math.isinf(a.rel_error) and a.sampling_rate < 1.0
    assert any(b.approx is not None and b.approx.subset for b in got[0])
    eng.shedder.step(capacity=1e12)          # nothing processed since: no news, still shed
    eng.push("S", {c: data[c][:10] for c in ("g", "v", "f")}, ts=[N] * 10)
    eng.shedder.step(capacity=1e12)          # arrived but not processed yet (a backlog): still shed
    assert eng.shedder.placed
    eng.run()
    eng.shedder.step(capacity=1e12)
    assert not eng.shedder.placed and qs[0].approximation() is None    # a selection holds no shed state


def test_a_select_shared_with_an_aggregate_is_dropped_at_random_not_by_region():
    """An aggregate needs a random sample (its estimate is scaled by 1/p); regions would bias it."""
    eng = Engine({"seed": 1})
    eng.execute("REGISTER STREAM S (g INT, v FLOAT, f FLOAT)")
    a = eng.execute("SELECT ISTREAM(g, v) FROM S WHERE f < 0.5")
    b = eng.execute("SELECT COUNT(*) AS c FROM S WHERE f < 0.5")
    eng.shedder.shed({a.id: 0.5, b.id: 0.5})
    assert eng.shedder.selection_edge(a.id) is not None and eng.shedder.selection_edge(b.id) is None
    methods = {s.method for s in eng.registry.entities(kind="shedder")}
    assert methods == {"random"}


def test_regions_estimated_empty_hold_no_match():
    """Regions that cost nothing (estimate 0) are never evaluated, so they must never hold a match."""
    rng = np.random.default_rng(11)
    for trial in range(30):
        n = int(rng.integers(1, 3000))
        x = np.round(rng.normal(0, 1, n).cumsum() * 0.1, 2) if trial % 2 else rng.integers(-5, 5, n)
        s = RegionSummary(Batch(np.arange(n), np.ones(n, np.int8), [x]), block=64, buckets=8)
        for _ in range(20):
            lo = float(rng.choice(x)) if rng.random() < 0.5 else float(rng.normal(0, 2))
            hi = lo if rng.random() < 0.3 else lo + float(abs(rng.normal(0, 1)))
            est = s.estimate({0: (lo, hi)})
            hit = np.add.reduceat(((x >= lo) & (x <= hi)).astype(int), np.arange(0, n, 64))
            assert not np.any((est == 0) & (hit > 0)), (trial, lo, hi)


def test_the_budget_is_respected_and_rows_stay_in_time_order():
    f = np.tile(np.repeat([0.1, 0.5, 0.9], 256), 4)
    b = Batch(np.arange(len(f)), np.ones(len(f), np.int8), [f])
    d = PromisingDrop(0.2, {0: (0.45, 0.55)}, RegionIndex(), seed=3)
    out = d.keep(b)
    assert len(out) <= int(0.2 * len(f)) + 1 and np.all(np.diff(out.ts) > 0)
    assert np.all(out.cols[0] == 0.5)                  # the budget went to the matching regions


@pytest.mark.parametrize("pred, want", [
    (ast.Between(ast.ColumnRef("$1"), ast.Literal(1, "INT"), ast.Literal(4, "INT")), {1: (1.0, 4.0)}),
    (ast.BinaryOp("<=", ast.ColumnRef("$0"), ast.UnaryOp("-", ast.Literal(2.5, "FLOAT"))), {0: (-math.inf, -2.5)}),
    (ast.BinaryOp("=", ast.Literal(3, "INT"), ast.ColumnRef("$2")), {2: (3.0, 3.0)}),
    (ast.BinaryOp("OR", ast.BinaryOp("<", ast.ColumnRef("$0"), ast.Literal(1, "INT")),
                  ast.BinaryOp(">", ast.ColumnRef("$0"), ast.Literal(5, "INT"))), {}),
    (ast.BinaryOp("<", ast.ColumnRef("$0"), ast.ColumnRef("$1")), {}),
])
def test_column_intervals_read_comparisons_with_constants_only(pred, want):
    assert column_intervals(pred) == want


def test_a_predicate_with_nothing_to_estimate_falls_back_to_a_random_drop():
    eng = Engine({"seed": 1})
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    q = eng.execute("SELECT ISTREAM(a) FROM S WHERE a < b")
    eng.shedder.shed({q.id: 0.5})
    assert [s.method for s in eng.registry.entities(kind="shedder")] == ["random"]
    assert q.approximation().subset            # still a subset of the exact answer


def test_subset_on_the_wire_and_in_combinations():
    a = Approx(math.inf, 1.0, 0.25, subset=True)
    nd = mark_approx("ndjson", b'{"ts":1,"sign":1,"row":{"a":1}}\n', a)
    assert b'"rel_error":"Infinity"' in nd and b'"subset":true' in nd
    xml = mark_approx("xml", b'<element ts="1" sign="+"><a>1</a></element>\n', a)
    assert b'subset="true"' in xml and b'rel_error="Infinity"' in xml
    assert b"subset" not in mark_approx("ndjson", b'{"ts":1,"sign":1,"row":{"a":1}}\n', Approx(0.1))
    assert combine([a, Approx(math.inf, 1.0, 0.5, subset=True)]).subset
    assert not combine([a, Approx(0.1)]).subset


def test_allot_gives_selections_the_share_the_sheddable_load_is_cut_to():
    r = allot({"s": 2.0, "m": 1.0, "a": 1.0}, {"a": (100, 0.0, ("COUNT",))}, {}, 2.0, {"s"})
    # m (no bound) keeps its 1.0; s and a (3.0 of load) share the 1.0 left: s at 1/3, a fits what s leaves
    assert r["m"] == 1.0 and abs(r["s"] - 1 / 3) < 1e-9
    assert abs(2.0 * r["s"] + 1.0 * r["a"] + 1.0 - 2.0) < 1e-6
    assert allot({"s": 1.0}, {}, {}, 5.0, {"s"}) == {"s": 1.0}


def test_exact_elements_stay_plain():
    """With no drop a selection's elements are plain ``Element``s (nothing extra on the wire)."""
    data, preds = local_data(6), predicates(6, k=1)
    _, qs, _, _ = run(data, preds, "exact")
    assert qs[0].approximation() is None
    eng = qs[0].engine
    eng.push("S", {"g": [1], "v": [0.5], "f": [preds[0][0]]}, ts=[N])
    eng.run()
    assert all(type(e) is Element for e in qs[0].drain())
