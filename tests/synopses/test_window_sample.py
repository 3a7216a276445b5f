"""The sample of a sliding window behind a join of kind reservoir (``synopses/window_sample.py``), with fixed
seeds and many runs: uniform over the rows in the window (chi-square), at k rows in a steady window, the
same k after the window shrank to nothing and refilled; the scaled SUM within its bound and unbiased over a
window that grows and shrinks; deletes retract the copies they name (first in, first out), sampled or not;
``ReservoirSample.restart`` resumes Algorithm L with the acceptance probability of a reservoir that has seen
that many rows."""

from __future__ import annotations

import numpy as np
import pytest

from synopses.reservoir import ReservoirSample
from synopses.window_sample import WindowSample


def _slide(s: WindowSample, rows_ts: np.ndarray, width: int, until: int, rng, held: dict) -> None:
    """Feed ``s`` a RANGE ``width`` window over rows stamped ``rows_ts`` (values: their index), in releases
    of random length, up to instant ``until``; ``held`` collects the net multiplicity of what it passes on."""
    vals = np.arange(len(rows_ts))
    t = 0
    while t < until:
        hi = min(until, t + int(rng.integers(1, 30)))
        ins = (rows_ts >= t) & (rows_ts < hi)
        dels = (rows_ts + width >= t) & (rows_ts + width < hi)
        ts, sign, cols = s.step((rows_ts[dels] + width, [vals[dels]]), (rows_ts[ins], [vals[ins]]))
        assert (np.diff(ts) >= 0).all()
        for sg, v in zip(sign.tolist(), cols[0].tolist()):
            held[v] = held.get(v, 0) + sg
            assert held[v] in (0, 1)
        t = hi


def test_uniform_over_the_window_and_k_rows_held():
    # five rows a tick, a window of 10 ticks (50 rows), a sample of 10: after 30 ticks each row of the
    # window is held in 10/50 of 1,000 runs; chi-square over 49 degrees of freedom below its 0.999
    # quantile (85.35)
    k, width, until, runs = 10, 10, 30, 1000
    hits = np.zeros(5 * width)
    rows_ts = np.repeat(np.arange(until), 5)
    first = 5 * (until - width)
    for seed in range(runs):
        s = WindowSample(k, seed=seed)
        held: dict = {}
        _slide(s, rows_ts, width, until, np.random.default_rng(seed + 10**6), held)
        live = [v for v, c in held.items() if c]
        assert len(live) == s.held == k and s.window_rows == 5 * width
        for v in live:
            assert v >= first
            hits[v - first] += 1
    expected = runs * k / (5 * width)
    chi2 = float(((hits - expected) ** 2 / expected).sum())
    assert chi2 < 85.35
    assert s.fraction() == k / (5 * width)


def test_scaled_sum_unbiased_and_within_bound_as_the_window_grows_and_shrinks():
    """Rows at 0-3 a tick, 0-7 during a burst; the window of 40 ticks grows (reservoir steps) and shrinks
    (random pairing). SUM of the held values / fraction estimates the window's SUM without bias, within
    1.96 standard deviations of a sample of m (finite population) in about 95% of runs."""
    ratios, hits, n = [], 0, 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        rate = rng.integers(0, 4, size=200)
        rate[60:120] = rng.integers(0, 8, size=60)
        rows_ts = np.repeat(np.arange(200), rate)
        s = WindowSample(15, seed=seed)
        held: dict = {}
        _slide(s, rows_ts, 40, 200, rng, held)
        win = np.flatnonzero(rows_ts > 199 - 40).astype(float)
        live = np.array([v for v, c in held.items() if c], dtype=float)
        assert len(live) == s.held and len(win) == s.window_rows
        if not len(live):
            continue
        est = live.sum() / s.fraction()
        ratios.append(est / win.sum())
        m, big_n = len(live), len(win)
        sd = big_n * win.std(ddof=1) * np.sqrt((1 - m / big_n) / m)
        hits += abs(est - win.sum()) <= 1.96 * sd
        n += 1
    assert n >= 270
    assert abs(np.mean(ratios) - 1.0) < 0.015
    assert hits / n >= 0.92


def test_a_wrong_scaling_fails_the_same_check():
    ratios = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        rows_ts = np.repeat(np.arange(200), rng.integers(0, 4, size=200))
        s = WindowSample(15, seed=seed)
        held: dict = {}
        _slide(s, rows_ts, 40, 200, rng, held)
        live = [v for v, c in held.items() if c]
        win = np.flatnonzero(rows_ts > 199 - 40)
        ratios.append(sum(live) * s.window_rows / s.k / win.sum() * 0.95)   # 5% off
    assert abs(np.mean(ratios) - 1.0) > 0.03


def test_the_sample_refills_after_the_window_emptied():
    s = WindowSample(10, seed=1)
    held: dict = {}
    rows_ts = np.concatenate([np.repeat(np.arange(50), 5), np.repeat(np.arange(200, 260), 5)])
    _slide(s, rows_ts, 30, 250, np.random.default_rng(2), held)
    assert s.window_rows == 5 * 30 and s.held == 10 and s.c1 == s.c2 == 0


def test_deletes_retract_the_copies_they_name():
    """Six copies of one row; the sample of one holds copy j. The deletes of the copies before it pass
    nothing on; the delete of copy j retracts it."""
    for seed in range(20):
        s = WindowSample(1, seed=seed)
        row = [np.array([7] * 6)]
        ts, sign, cols = s.step(None, (np.arange(6), row))
        j = int(s.copy[0])
        assert sign.sum() == 1 and s.window_rows == 6
        for d in range(6):
            ts, sign, _ = s.step((np.array([10 + d]), [np.array([7])]), None)
            assert list(sign) == ([-1] if d == j else [])
        assert s.held == 0 and s.window_rows == 0


def test_draining_keeps_new_rows_and_lets_the_sampled_ones_leave():
    s = WindowSample(3, seed=0)
    s.step(None, (np.arange(10), [np.arange(10)]))
    sampled = sorted(s.cols[0][s.copy >= 0].tolist())
    s.drain()
    ts, sign, cols = s.step(None, (np.arange(10, 15), [np.arange(10, 15)]))
    assert list(cols[0]) == [10, 11, 12, 13, 14] and (sign == 1).all()
    assert s.fraction() == pytest.approx(8 / 15) and not s.drained()
    ts, sign, cols = s.step((np.arange(20, 30), [np.arange(10)]), None)    # the ten old copies leave
    assert sorted(cols[0].tolist()) == sampled and len(sampled) == 3 and (sign == -1).all()
    assert s.drained() and s.fraction() == 1.0
    ts, sign, cols = s.step((np.arange(30, 32), [np.array([10, 11])]), None)
    assert list(cols[0]) == [10, 11] and (sign == -1).all()


def test_restart_resumes_with_the_acceptance_rate_of_the_rows_seen():
    # a full reservoir of 10 restarted at 1,000 rows accepts the next 1,000 with probability 10/(1000+i):
    # 10 ln 2 = 6.93 of them on average
    taken = []
    for seed in range(400):
        r = ReservoirSample(10, seed=seed)
        r.restart(1000, 10)
        taken.append(len(r.offer(1000)[0]))
    assert abs(np.mean(taken) - 10 * np.log(2)) < 0.4
    with pytest.raises(ValueError, match="cannot hold"):
        ReservoirSample(10).restart(5, 6)
