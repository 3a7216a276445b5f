"""The per-group sketches of the approximate aggregates (synopses/sketches.py): each stays within the error
bound it states, at the confidence it states, over many seeded runs; a deliberately wrong estimator fails the
same check (so the check can fail); deletes rebuild the sketch from the values still present."""

from __future__ import annotations

import random

import numpy as np
import pytest

from synopses.sketches import (
    DistinctSketch,
    QuantileSketch,
    TopKSketch,
    distinct_confidence,
    distinct_rel_error,
    quantile_rank_error,
    topk_error_fraction,
)

RUNS = 60


def _misses(estimates, truths, bound) -> int:
    return sum(abs(e - t) > bound * t for e, t in zip(estimates, truths))


def _distinct_runs(scale: float = 1.0) -> tuple[list[float], list[int]]:
    est, truth = [], []
    for seed in range(RUNS):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(5_000, 20_000))              # above the exact small-count modes
        values = rng.integers(0, 1 << 40, size=n).tolist()
        d = DistinctSketch(keep_values=False)
        for v in values:
            d.add(v, 1)
        est.append(d.value() * scale)
        truth.append(len(set(values)))
    return est, truth


def test_count_distinct_within_its_bound_at_its_confidence():
    est, truth = _distinct_runs()
    allowed = RUNS * (1 - distinct_confidence()) + 3 * (RUNS * 0.05) ** 0.5   # mean + 3 sd of the miss count
    assert _misses(est, truth, distinct_rel_error()) <= allowed


def test_a_wrongly_scaled_count_distinct_fails_the_same_check():
    est, truth = _distinct_runs(scale=1.05)                # 5% off: twice the stated 2.6% bound
    allowed = RUNS * (1 - distinct_confidence()) + 3 * (RUNS * 0.05) ** 0.5
    assert _misses(est, truth, distinct_rel_error()) > allowed


def test_quantile_rank_within_its_bound():
    eps = quantile_rank_error()
    misses = 0
    for seed in range(RUNS):
        rng = np.random.default_rng(seed)
        values = rng.lognormal(size=int(rng.integers(3_000, 10_000)))
        qs = QuantileSketch(keep_values=False)
        for v in values.tolist():
            qs.add(v, 1)
        srt = np.sort(values)
        for q in (0.1, 0.5, 0.9, 0.99):
            got = qs.value(q)
            rank = np.searchsorted(srt, got, side="right") / len(srt)   # fraction of values <= got
            misses += abs(rank - q) > eps
    assert misses <= 4 * RUNS * 0.01 + 3                   # 99% confidence per query, 4 queries a run


def test_deletes_rebuild_the_sketch_from_the_values_left():
    d = DistinctSketch(keep_values=True)
    q = QuantileSketch(keep_values=True)
    for v in range(1000):
        d.add(v, 1)
        q.add(float(v), 1)
    for v in range(900):                                   # the oldest 900 leave, as a window retracts them
        d.add(v, -1)
        q.add(float(v), -1)
    assert d.value() == 100                                # HLL is exact at this size (its list mode)
    assert 900 <= q.value(0.0) and q.value(1.0) == 999.0
    assert abs(q.value(0.5) - 950) <= 100 * quantile_rank_error() + 1


def test_multiplicities_count_in_quantiles_not_in_distinct_counts():
    d = DistinctSketch(keep_values=True)
    q = QuantileSketch(keep_values=True)
    for v, c in ((1.0, 1), (2.0, 1), (3.0, 8)):
        d.add(v, c)
        q.add(v, c)
    assert d.value() == 3
    assert q.value(0.5) == 3.0                             # 8 of the 10 values are 3.0
    q.add(3.0, -8)
    assert q.value(1.0) == 2.0


def test_insert_only_sketch_refuses_a_delete():
    d = DistinctSketch(keep_values=False)
    d.add(1, 1)
    with pytest.raises(ValueError, match="insert-only"):
        d.add(1, -1)


def test_insert_only_sketch_memory_does_not_grow_with_distinct_values():
    d = DistinctSketch(keep_values=False)
    for v in range(50_000):
        d.add(v, 1)
    assert d.nbytes() <= 5_000                             # 2**12 one-byte registers and a header
    kept = DistinctSketch(keep_values=True)
    for v in range(50_000):
        kept.add(v, 1)
    assert kept.nbytes() > 50_000                          # the multiset a window needs is counted too


def test_top_k_finds_the_heavy_values_and_states_its_bound():
    rng = random.Random(7)
    t = TopKSketch(keep_values=False)
    for _ in range(20_000):
        t.add(rng.choice("aaaaabbbbcc") if rng.random() < 0.5 else rng.randrange(100_000), 1)
    assert t.value(2) == "a, b"
    assert 0 < topk_error_fraction() < 0.01
