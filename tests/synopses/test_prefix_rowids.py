"""``PrefixRowIds`` against ``RowIds``: the same rows get the same ids, across batches and compactions.

Drawn rows have few non-string values (so prefixes repeat with other strings: the rows unlike their
representative) or many (the prefix nearly decides the row), strings equal but not the same objects, -0.0 and
NaN in a float prefix column, and a NaN object in a string column (equal to itself as a dict key only)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.prefix_rowids import PrefixRowIds
from synopses.rowcodes import RowIds

NAN_OBJ = float("nan")
STRINGS = ["a", "b", "ab", "", "Ba"]


def _column(kind: str, values: list) -> np.ndarray:
    if kind == "i":
        return np.array(values, dtype=np.int64)
    if kind == "f":
        return np.array(values, dtype=np.float64)
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        # equal strings as distinct objects half the time (a join's gather passes the same objects)
        out[i] = v if v is NAN_OBJ or i % 2 else "".join(list(v))
    return out


@st.composite
def tables(draw):
    kinds = draw(st.sampled_from([["i", "O"], ["O", "i"], ["i", "O", "O"], ["f", "O"], ["i", "f", "O"]]))
    wide = draw(st.booleans())
    ints = st.integers(0, 400 if wide else 3)
    floats = st.sampled_from([0.0, -0.0, 1.5, float("nan"), 2.0])
    strs = st.sampled_from(STRINGS + [NAN_OBJ]) if draw(st.integers(0, 5)) == 0 else st.sampled_from(STRINGS)
    gen = {"i": ints, "f": floats, "O": strs}
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        if steps and draw(st.integers(0, 3)) == 0:
            steps.append(("compact", draw(st.integers(0, 2**30))))
            continue
        n = draw(st.integers(0, 40))
        rows = [[draw(gen[k]) for k in kinds] for _ in range(n)]
        if "i" in kinds and draw(st.integers(0, 2)) == 0:
            # every row a new prefix, once (a tumbling window's new persons in q8): no string compared
            j = kinds.index("i")
            for i, r in enumerate(rows):
                r[j] = 1000 + 100 * len(steps) + i
        steps.append(("batch", [_column(k, [r[j] for r in rows]) for j, k in enumerate(kinds)]))
    dtypes = [np.dtype(object) if k == "O" else np.dtype(np.int64 if k == "i" else np.float64) for k in kinds]
    return dtypes, steps


@settings(max_examples=300, deadline=None)
@given(t=tables())
def test_prefix_row_ids_code_rows_as_row_ids_do(t):
    """Ids equal exactly where ``RowIds``'s are, in every batch and after compactions that keep the same rows;
    ``rows`` gives back what was coded"""
    dtypes, steps = t
    ours, ref = PrefixRowIds(dtypes), RowIds(dtypes)
    to_ref: dict[int, int] = {}          # our id -> the reference's, one to one
    to_ours: dict[int, int] = {}
    for kind, arg in steps:
        if kind == "batch":
            cols = arg
            if not len(cols[0]):
                continue
            a, b = ours.ids(cols).tolist(), ref.ids(cols).tolist()
            for x, y in zip(a, b):
                assert to_ref.setdefault(x, y) == y and to_ours.setdefault(y, x) == x
            assert ours.n == ref.n
            back = ours.rows(np.array(a), dtypes)
            for c, got in zip(cols, back):
                if c.dtype.kind == "f":
                    assert np.array_equal(c + 0.0, got, equal_nan=True)
                else:
                    assert all(x is y or x == y for x, y in zip(c.tolist(), got.tolist()))
        else:
            rng = np.random.default_rng(arg)
            keep_ref = rng.random(ref.n) < 0.5
            keep_ours = np.zeros(ours.n, dtype=bool)
            for x, y in to_ref.items():
                keep_ours[x] = keep_ref[y]
            new_ours, new_ref = ours.compact(keep_ours), ref.compact(keep_ref)
            to_ref = {int(new_ours[x]): int(new_ref[y]) for x, y in to_ref.items() if keep_ours[x]}
            to_ours = {y: x for x, y in to_ref.items()}
            assert ours.n == ref.n == len(to_ref)


def test_rows_unlike_their_prefix_share_no_id():
    """One prefix, its representative "a", and rows "b", "b", "a", "c" in a later batch: three ids, "a" the
    representative's."""
    r = PrefixRowIds([np.dtype(np.int64), np.dtype(object)])
    assert r.ids([np.array([1]), np.array(["a"], dtype=object)]).tolist() == [0]
    got = r.ids([np.array([1, 1, 1, 1]), np.array(["b", "b", "a", "c"], dtype=object)]).tolist()
    assert got[2] == 0 and got[0] == got[1] and len({got[0], got[3], 0}) == 3
    assert r.ids([np.array([1, 1]), np.array(["c", "b"], dtype=object)]).tolist() == [got[3], got[0]]
