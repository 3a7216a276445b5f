"""The approximate synopses of issue 14 item 3, statistically, with fixed seeds and many runs: the Bloom
filter's false-positive rate within 10% of the formula; the reservoir sample uniform (chi-square); its scaled
COUNT and SUM unbiased and within their bound, and a deliberately wrong scaling caught by the same check; the
counting Bloom filter exact on multiplicities when nothing collides and never undercounting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synopses.bloom import BloomFilter, bloom_size, false_positive_rate
from synopses.counting_bloom import CountingBloomFilter
from synopses.reservoir import ReservoirRows, ReservoirSample


def test_bloom_false_positive_rate_within_ten_percent_of_the_formula():
    rates, formula = [], []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        keys = rng.choice(1 << 40, size=60_000, replace=False)
        f = BloomFilter(10_000, 0.02)
        f.add([keys[:10_000]])
        probe = keys[10_000:]                                   # never added
        rates.append(float(f.might_contain([probe]).mean()))
        formula.append(false_positive_rate(f.m, f.k, 10_000))
    assert abs(np.mean(rates) - np.mean(formula)) <= 0.10 * np.mean(formula)
    assert f.might_contain([keys[:10_000]]).all()                      # no false negatives


def test_bloom_filter_with_strings_and_floats():
    f = BloomFilter(5_000, 0.01)
    words = np.array([f"w{i}" for i in range(5_000)], dtype=object)
    vals = np.arange(5_000) * 0.5
    f.add([words, vals])
    assert f.might_contain([words, vals]).all()
    assert f.might_contain([np.array(["w1"], dtype=object), np.array([-0.0 + 0.5])]).all()
    fresh = f.might_contain([np.array([f"x{i}" for i in range(20_000)], dtype=object), np.zeros(20_000)])
    assert fresh.mean() < 0.02


def test_bloom_size_refuses_a_bad_rate():
    for p in (0.0, 1.0, -0.1, 2):
        with pytest.raises(ValueError, match="false-positive rate"):
            bloom_size(100, p)


def test_counting_bloom_never_undercounts_and_deletes_restore():
    rng = np.random.default_rng(5)
    f = CountingBloomFilter(2_000, 0.01)
    keys = rng.integers(0, 500, size=5_000)
    f.add([keys], np.ones(len(keys), dtype=np.int64))
    true = np.bincount(keys, minlength=500)
    est = f.estimate([np.arange(500)])
    assert (est >= true).all() and (est == true).mean() > 0.95
    f.add([keys], -np.ones(len(keys), dtype=np.int64))
    assert f.counters.sum() == 0 and f.total == 0


def test_reservoir_is_uniform_chi_square():
    # 20,000 runs of a size-10 reservoir over 100 rows offered in uneven batches: each row should be kept in
    # 2,000 of them; the chi-square statistic over 99 degrees of freedom stays below its 0.999 quantile (148.2)
    hits = np.zeros(100, dtype=np.int64)
    for run in range(20_000):
        r = ReservoirSample(10, seed=run)
        held = np.full(10, -1)
        start = 0
        for m in (7, 1, 30, 2, 60):
            taken, slots = r.offer(m)
            held[slots] = start + taken
            start += m
        hits[held] += 1
    expected = 20_000 * 10 / 100
    chi2 = float(((hits - expected) ** 2 / expected).sum())
    assert chi2 < 148.2


def _count_errors(scale_fix: float) -> list[float]:
    errs = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        vals = rng.exponential(10.0, size=int(rng.integers(5_000, 20_000)))
        s = ReservoirRows(500, [np.dtype(np.float64)], seed=seed)
        for chunk in np.array_split(vals, 7):
            s.add([chunk])
        errs.append((s.estimate_sum(0) * scale_fix - vals.sum()) / vals.sum())
    return errs


def test_reservoir_scaled_sum_is_unbiased_and_within_its_bound():
    errs = np.array(_count_errors(1.0))
    # SUM of a size-k sample scaled by n/k: relative standard error about cv / sqrt(k) = 1 / sqrt(500)
    bound = 1.96 / math.sqrt(500)
    assert abs(errs.mean()) < 3 * errs.std() / math.sqrt(len(errs))
    assert (np.abs(errs) <= bound).mean() >= 0.90


def test_a_wrong_scaling_fails_the_same_check():
    # scaling by n/(k+25) instead of n/k (5% off): the bias shows against the same bound and mean check
    errs = np.array(_count_errors(500 / 525))
    assert abs(errs.mean()) >= 3 * errs.std() / math.sqrt(len(errs))
    assert ReservoirRows(3, [np.dtype(np.int64)]).estimate_count() == 0


def test_reservoir_refuses_size_zero():
    with pytest.raises(ValueError, match="at least one row"):
        ReservoirSample(0)
