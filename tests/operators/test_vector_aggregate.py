"""The vectorised aggregate gives the same changelog as the row-at-a-time aggregate (an independent
implementation of the same definition), on random streams with several rows per instant and deletes."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dsms import Engine
from dsms.plan import physical

QUERY = "SELECT k, COUNT(*) AS c, SUM(v) AS s, AVG(v) AS a, SUM(i) AS si, AVG(i) AS ai FROM S [RANGE 7] GROUP BY k"

# keys mostly from a small domain (the direct lookup table), sometimes far apart or negative (the sorted
# table); gaps mostly small, sometimes wider than an int16 span (the radix-sort shortcut must step aside)
keys = st.one_of(st.integers(2, 5), st.integers(0, 7), st.sampled_from([-2**62, -70_000, 70_000, 2**40]))
gaps = st.one_of(st.integers(0, 3), st.integers(0, 3), st.just(40_000))
rows = st.lists(st.tuples(keys, st.sampled_from([0.1, 0.2, 1.5, -3.25, 1e6]), st.integers(-5, 5), gaps),
                min_size=1, max_size=40)


def run(batches, vectorised: bool):
    saved = physical.vectorisable
    if not vectorised:
        physical.vectorisable = lambda aggs: False
    try:
        eng = Engine()
        eng.execute("REGISTER STREAM S (k INT, v FLOAT, i INT)")
        q = eng.execute(QUERY)
        kinds = {op.kind + type(op).__name__ for op in eng.ops}
        t = 0
        for batch in batches:
            ts = []
            for *_, gap in batch:
                t += gap
                ts.append(t)
            eng.push("S", [{"k": k, "v": v, "i": i} for k, v, i, _ in batch], ts=ts)
            eng.run()
        eng.heartbeat(t + 20)
        eng.run()
        return kinds, [(e.ts, e.sign, e.row) for e in q.drain()]
    finally:
        physical.vectorisable = saved


def same(a, b):
    if a[:2] != b[:2] or a[2].keys() != b[2].keys():
        return False
    return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6) if isinstance(x, float) else x == y
               for x, y in zip(a[2].values(), b[2].values()))


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, min_size=1, max_size=6))
def test_vectorised_equals_row_at_a_time(batches):
    kv, fast = run(batches, True)
    kr, slow = run(batches, False)
    assert "aggregateVectorAggregateOp" in kv and "aggregateAggregateOp" in kr
    assert all(a[0] <= b[0] for a, b in zip(fast, fast[1:])), "results out of timestamp order"
    key = lambda e: (e[0], e[1], e[2]["k"])  # noqa: E731
    fast, slow = sorted(fast, key=key), sorted(slow, key=key)
    assert len(fast) == len(slow) and all(same(a, b) for a, b in zip(fast, slow)), (fast, slow)
