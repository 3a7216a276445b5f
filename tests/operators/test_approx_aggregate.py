"""APPROX_COUNT_DISTINCT, APPROX_QUANTILE and APPROX_TOP_K through CQL (issue 14 item 4): windowed and grouped
like the other aggregates, checked against the exact answer computed here from the input (the window's
contents at each instant, by SPEC section 3's rule), within the bound the operator states."""

from __future__ import annotations

import bisect
import random
from collections import Counter

import numpy as np
import pytest

from dsms import Engine
from dsms.approx import Approx
from dsms.errors import CQLError, SchemaError
from synopses.sketches import distinct_rel_error, quantile_rank_error


def _engine(cql: str, rows, ts):
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, x INT, f FLOAT, s STRING)")
    q = eng.execute(cql)
    eng.push("S", rows, ts=ts)
    eng.heartbeat(max(ts) + 10**6)
    eng.run()
    return eng, q


def _state_at(changes):
    """The relation at the end of instant t, from a changelog: a function t -> {group: row}."""
    cur: dict = {}
    out: dict = {}
    for e in changes:
        if e.sign < 0:
            del cur[e.row["g"]]
        else:
            cur[e.row["g"]] = e.row
        out[e.ts] = dict(cur)
    stamps = sorted(out)
    return lambda t: out[stamps[bisect.bisect_right(stamps, t) - 1]] if t >= stamps[0] else {}


def _window(rows, ts, t, size):
    return [r for r, u in zip(rows, ts) if t - size < u <= t]


def test_sliding_window_grouped_distinct_and_quantile_within_bounds():
    rng = random.Random(3)
    n, size = 1500, 400
    ts = sorted(rng.randrange(0, 3000) for _ in range(n))
    rows = [{"g": rng.randrange(3), "x": rng.randrange(2000), "f": rng.random(), "s": "a"} for _ in range(n)]
    eng, q = _engine(f"SELECT g, APPROX_COUNT_DISTINCT(x) AS d, APPROX_QUANTILE(f, 0.5) AS m "
                     f"FROM S [RANGE {size}] GROUP BY g", rows, ts)
    states = _state_at(q.drain())
    eps_d, eps_q = distinct_rel_error(), quantile_rank_error()
    checked = 0
    for t in sorted(set(ts))[::7]:
        win = _window(rows, ts, t, size)
        for g in range(3):
            xs = [r["x"] for r in win if r["g"] == g]
            fs = np.sort([r["f"] for r in win if r["g"] == g])
            got = states(t).get(g)
            if not xs:
                assert got is None
                continue
            assert abs(got["d"] - len(set(xs))) <= eps_d * len(set(xs))
            rank = np.searchsorted(fs, got["m"], side="right") / len(fs)
            assert abs(rank - 0.5) <= eps_q + 1 / len(fs)
            checked += 1
    assert checked > 100


def test_unbounded_input_keeps_the_sketch_alone():
    n = 30_000
    rows = [{"g": 0, "x": i, "f": float(i), "s": "a"} for i in range(n)]
    ts = list(range(n))
    eng, q = _engine("SELECT APPROX_COUNT_DISTINCT(x) AS d, APPROX_QUANTILE(x, 0.9) AS p FROM S", rows, ts)
    last = q.drain()[-1].row
    assert abs(last["d"] - n) <= distinct_rel_error() * n
    assert abs(last["p"] - 0.9 * n) <= quantile_rank_error() * n + 1
    assert isinstance(last["p"], int)                      # a quantile keeps its input's type
    agg = next(iter(eng.registry.entities("aggregate")))
    assert agg.keep_values is False
    assert agg.synopses[0].nbytes() < 100_000               # two sketches, not 30,000 values


def test_tumbling_window_starts_each_period_afresh():
    rows, ts = [], []
    for period in range(3):
        for i in range(50):
            rows.append({"g": 1, "x": period * 1000 + i % (10 * (period + 1)), "f": 1.0, "s": "a"})
            ts.append(period * 100 + 1 + i)             # inside (100k, 100k + 100]: one period
    eng, q = _engine("SELECT g, APPROX_COUNT_DISTINCT(x) AS d FROM S [RANGE 100 SLIDE 100] GROUP BY g",
                     rows, ts)
    inserts = [e.row["d"] for e in q.drain() if e.sign > 0]
    assert inserts == [10, 20, 30]                         # exact at these sizes; no value of a past period


def test_top_k_per_group():
    rows = [{"g": i % 2, "x": 0, "f": 0.0, "s": ("pq"[i % 2] if i % 3 == 0 else "r" if i % 7 == 0 else str(i))}
            for i in range(300)]
    eng, q = _engine("SELECT g, APPROX_TOP_K(s, 1) AS top FROM S GROUP BY g", rows, list(range(300)))
    final = _state_at(q.drain())(299)
    for g in (0, 1):
        exact = Counter(r["s"] for r in rows if r["g"] == g).most_common(1)[0][0]
        assert final[g]["top"] == exact


def test_approximation_states_the_loosest_bound():
    eng, _ = _engine("SELECT APPROX_COUNT_DISTINCT(x) AS d, APPROX_QUANTILE(f, 0.5) AS m FROM S [ROWS 5]",
                     [{"g": 0, "x": 1, "f": 1.0, "s": "a"}], [1])
    eng2, _ = _engine("SELECT COUNT(DISTINCT x) AS d FROM S [ROWS 5]", [{"g": 0, "x": 1, "f": 1.0, "s": "a"}], [1])
    ops = list(eng.registry.entities("aggregate"))
    exact_ops = list(eng2.registry.entities("aggregate"))
    a = ops[0].approximation()
    assert isinstance(a, Approx)
    assert a.rel_error == max(distinct_rel_error(), quantile_rank_error())
    assert a.confidence == pytest.approx(0.9545, abs=1e-4)        # 2 standard deviations (HLL), < KLL's 0.99
    assert exact_ops[0].approximation() is None


@pytest.mark.parametrize("cql, err, words", [
    ("SELECT APPROX_QUANTILE(x, 1.5) FROM S", CQLError, "between 0 and 1"),
    ("SELECT APPROX_QUANTILE(x) FROM S", CQLError, "takes 2 argument"),
    ("SELECT APPROX_QUANTILE(x, f) FROM S", CQLError, "constant fraction"),
    ("SELECT APPROX_QUANTILE(s, 0.5) FROM S", SchemaError, "needs a number"),
    ("SELECT APPROX_COUNT_DISTINCT(DISTINCT x) FROM S", CQLError, "DISTINCT is not allowed"),
    ("SELECT APPROX_COUNT_DISTINCT(*) FROM S", CQLError, r"\* is not allowed"),
    ("SELECT APPROX_TOP_K(s, 0) FROM S", CQLError, "between 1 and 1000"),
])
def test_bad_approximate_aggregates_are_refused(cql, err, words):
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, x INT, f FLOAT, s STRING)")
    with pytest.raises(err, match=words):
        eng.execute(cql)
