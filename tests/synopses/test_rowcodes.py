"""``row_codes`` (one int64 per row, equal exactly when the rows are equal) against the rows as Python tuples,
over integer columns coded by offset (narrow spans) or by rank (wide spans, int64 and uint64 extremes), floats
(-0.0 equal to 0.0), strings and booleans; and ``segments`` (runs of equal (instant, code)) against a sort of
the tuples."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.rowcodes import row_codes, segments

COLUMNS = [
    ("int64", st.integers(-3, 3)),
    ("int64", st.integers(-2**63, 2**63 - 1)),
    ("int64", st.sampled_from([-2**63, -2**63 + 1, 2**63 - 1, 0])),
    ("uint64", st.sampled_from([0, 1, 2**63, 2**64 - 1, 2**63 - 1])),
    ("uint8", st.integers(0, 255)),
    ("int16", st.integers(-2**15, 2**15 - 1)),
    ("float64", st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e300])),
    ("object", st.sampled_from(["a", "b", "", "ab"])),
    ("bool", st.booleans()),
]


@st.composite
def tables(draw):
    n = draw(st.integers(1, 60))
    kinds = draw(st.lists(st.integers(0, len(COLUMNS) - 1), min_size=1, max_size=5))
    cols = []
    for k in kinds:
        dtype, values = COLUMNS[k]
        vals = draw(st.lists(values, min_size=n, max_size=n))
        cols.append(np.array(vals, dtype=dtype))
    return cols


def _norm(v):
    return v + 0.0 if isinstance(v, float) else v


@settings(max_examples=300, deadline=None)
@given(tables())
def test_codes_equal_exactly_when_rows_equal(cols):
    code = row_codes(cols)
    assert code is not None and code.dtype == np.int64
    rows = [tuple(_norm(v) for v in r) for r in zip(*[c.tolist() for c in cols])]
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            assert (code[i] == code[j]) == (rows[i] == rows[j]), (rows[i], rows[j])


@settings(max_examples=150, deadline=None)
@given(tables(), st.data())
def test_segments_are_runs_of_equal_instant_and_row(cols, data):
    n = len(cols[0])
    ts = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    code = row_codes(cols)
    order, starts, ends = segments(ts, code)
    assert sorted(order.tolist()) == list(range(n))
    keys = [(int(ts[i]), int(code[i]), i) for i in order.tolist()]
    assert keys == sorted(keys)                       # by instant, code, then position (stable)
    runs = set(zip(starts.tolist(), ends.tolist()))
    bounds = [0] + [p for p in range(1, n) if keys[p][:2] != keys[p - 1][:2]] + [n]
    assert runs == set(zip(bounds[:-1], bounds[1:]))


@settings(max_examples=40, deadline=None)
@given(st.integers(256, 900), st.integers(1, 50), st.integers(0, 2**32 - 1), st.booleans())
def test_segments_of_many_rows(n, distinct, seed, wide):
    """Past 256 rows ``segments`` orders by one packed sort (``stable_lexsort2``): the same order."""
    rng = np.random.default_rng(seed)
    ts = rng.integers(0, 5, n) * (10**12 if wide else 1)
    code = row_codes([rng.integers(0, distinct, n), rng.integers(-2**62, 2**62, n) if wide else
                      rng.integers(0, 3, n)])
    order, starts, ends = segments(ts, code)
    assert order.tolist() == np.lexsort((np.arange(n), code, ts)).tolist()
    t, c = ts[order], code[order]
    change = [0] + [p for p in range(1, n) if (t[p], c[p]) != (t[p - 1], c[p - 1])]
    assert starts.tolist() == change and ends.tolist() == change[1:] + [n]
