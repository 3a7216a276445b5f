"""The join's hash index holds exactly its input's multiset of rows, whether deletes come first in, first out
(a window's, retracted outright) or at random (stored signed, then compacted), and its probes find exactly the
rows with an equal key."""

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.hash_index import HashIndexSynopsis

# a step: insert a row (key, value), delete the oldest live row, or delete a live row picked at random
step = st.one_of(
    st.tuples(st.just("ins"), st.one_of(st.integers(0, 4), st.just(10**9)),     # a far key: binary search
              st.sampled_from([0.0, -0.0, 2.5, 7.0])),
    st.tuples(st.just("fifo"), st.just(0), st.just(0.0)),
    st.tuples(st.just("any"), st.integers(0, 50), st.just(0.0)),
)


def live_multiset(idx: HashIndexSynopsis) -> Counter:
    c: Counter = Counter()
    if idx.cols is None:
        return c
    for s, k, v in zip(idx.sign.tolist(), idx.cols[0].tolist(), idx.cols[1].tolist()):
        c[(k, v)] += s
    return +c


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(step, min_size=1, max_size=15), min_size=1, max_size=8))
def test_index_holds_the_multiset_and_probes_exactly(batches):
    idx = HashIndexSynopsis()
    live: list[tuple[int, float]] = []          # live rows, oldest first
    for batch in batches:
        sign, rows = [], []
        for op, a, b in batch:
            if op == "ins":
                row = (a, b)
                live.append(row)
            elif not live:
                continue
            else:
                row = live.pop(0 if op == "fifo" else a % len(live))
            sign.append(1 if op == "ins" else -1)
            rows.append(row)
        if not rows:
            continue
        keys = np.array([r[0] for r in rows], dtype=np.int64)
        ts = np.arange(len(rows), dtype=np.int64)
        idx.insert(ts, np.array(sign, dtype=np.int8), [keys, np.array([r[1] for r in rows])], keys)
        expect = Counter((k, v + 0.0) for k, v in live)
        assert live_multiset(idx) == +expect
        assert np.all(np.diff(idx.codes) >= 0), "table out of key order"
        probes = np.array([0, 3, 9, 2, 2, 10**9], dtype=np.int64)
        pidx, tidx = idx.probe(probes)
        found = Counter((int(probes[p]), int(t)) for p, t in zip(pidx.tolist(), tidx.tolist()))
        want = Counter((int(k), t) for k in probes.tolist() for t in np.flatnonzero(idx.codes == k).tolist())
        assert found == want
