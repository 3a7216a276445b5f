"""The row-at-a-time aggregate's MIN/MAX heaps and running DISTINCT sums, through the engine over a sliding
window: at every instant the result relation equals a plain-Python evaluation of the window's contents, while
the extreme leaves the window at every step (rising and falling runs) or rarely (random values)."""

import numpy as np
import pytest

from dsms import Engine

QUERY = ("SELECT MIN(v) AS lo, MAX(v) AS hi, MAX(s) AS hs, MIN(s) AS ls, SUM(DISTINCT i) AS sd, "
         "AVG(DISTINCT i) AS ad, COUNT(DISTINCT i) AS cd FROM S [RANGE {w}]")


def expected(rows: list[tuple], t: int, w: int) -> tuple | None:
    win = [r for r in rows if t - w < r[0] <= t]
    if not win:
        return None
    v = [r[1] for r in win]
    i = sorted({r[2] for r in win})
    s = [r[3] for r in win]
    return (min(v), max(v), max(s), min(s), sum(i), sum(i) / len(i), len(i))


@pytest.mark.parametrize("shape", ["rising", "falling", "random"])
def test_extremes_and_distinct_sums_over_a_sliding_window(shape):
    rng = np.random.default_rng(len(shape))
    n, w = 2000, 150
    v = {"rising": np.arange(n) * 0.5, "falling": -np.arange(n) * 0.5, "random": rng.random(n)}[shape]
    i = rng.integers(-20, 20, n)
    s = np.array([f"s{x:04d}" for x in (np.arange(n) if shape != "falling" else n - np.arange(n))], dtype=object)
    eng = Engine()
    eng.execute("REGISTER STREAM S (v FLOAT, i INT, s STRING)")
    q = eng.execute(QUERY.format(w=w))
    rows = list(zip(range(n), v.tolist(), i.tolist(), s.tolist()))
    for a in range(0, n, 256):
        b = min(n, a + 256)
        eng.push("S", {"v": v[a:b], "i": i[a:b], "s": s[a:b]}, ts=np.arange(a, b))
        eng.run()
    eng.heartbeat(n + w + 1)
    eng.run()
    changes: dict[int, list] = {}
    for e in q.drain():
        changes.setdefault(e.ts, []).append((e.sign, tuple(e.row.values())))
    rel: list[tuple] = []
    for t in range(n + w + 1):
        for sign, row in changes.get(t, []):
            if sign > 0:
                rel.append(row)
            else:
                rel.remove(row)
        want = expected(rows, t, w)
        assert rel == ([want] if want is not None else []), t
