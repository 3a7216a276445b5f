"""Per-instant netting (ISTREAM, DSTREAM and the changelog sink) with numpy gives the same net changes as the
plain per-row dictionaries of ``net_rows``, on random signed inputs rich in cancellations: equal rows inserted
and deleted at one instant, instants holding both signs without cancelling, -0.0 beside 0.0, strings."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.batch import Batch, Heartbeat
from dsms.operators import netting
from dsms.operators.netting import ChangelogOp, ToStreamOp
from dsms.queues import Queue

DTYPES = [np.dtype(np.int64), np.dtype(np.float64), np.dtype(object)]

element = st.tuples(st.integers(0, 2),                              # gap to the previous element's instant
                    st.sampled_from([1, 1, -1]),                    # sign
                    st.integers(0, 2), st.sampled_from([0.0, -0.0, 1.5]), st.sampled_from(["a", "b"]))


def run(make, batches, vectorised: bool):
    inp, out = Queue(), Queue()
    op = make(inp, out)
    if not vectorised:
        op.net_vectorised = lambda ready: None
    reader = out.reader()
    t = 0
    for batch in batches:
        ts, sign, rows = [], [], []
        for gap, s, *row in batch:
            t += gap
            ts.append(t)
            sign.append(s)
            rows.append(row)
        cols = [np.array([r[j] for r in rows], dtype=d) for j, d in enumerate(DTYPES)]
        inp.put(Batch(np.array(ts, dtype=np.int64), np.array(sign, dtype=np.int8), cols))
        op.run()
    inp.put(Heartbeat(t + 1))
    op.run()
    got = []
    while (item := reader.get()) is not None:
        if isinstance(item, Batch):
            got += [(t_, s_, (k, v + 0.0, x)) for t_, s_, k, v, x in
                    zip(item.ts.tolist(), item.sign.tolist(), *[c.tolist() for c in item.cols])]
    return got


def by_instant(elements) -> dict:
    out: dict = {}
    for t, s, row in elements:
        out.setdefault(t, Counter())[(s, row)] += 1
    return out


MAKERS = {
    "ISTREAM": lambda i, o: ToStreamOp("ISTREAM", [i], o, DTYPES),
    "DSTREAM": lambda i, o: ToStreamOp("DSTREAM", [i], o, DTYPES),
    "changelog": lambda i, o: ChangelogOp([i], o, DTYPES, keep_state=False),
}


def weak_hashes(cols):
    """Row hashes that collide for unequal rows (the first column's value mod 2): the hashed netting must
    notice and code the rows instead."""
    return (cols[0].astype(np.int64) % 2).astype(np.uint64)


@pytest.mark.parametrize("path", ["set", "set-colliding", "hashed", "hashed-colliding"])
@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(MAKERS)), st.lists(st.lists(element, min_size=1, max_size=12), min_size=1,
                                                 max_size=5))
def test_vectorised_netting_equals_per_row(path, kind, batches):
    """``set``: the rows of a release checked for cancelling pairs with a Python set, and grouped by their
    hashes when some may cancel; ``hashed``: grouped by one sort of their hashes (``_net_hashed``, for releases
    of more than ``SET_MAX`` rows); with hashes that collide, every release hands over to ``_net_coded``."""
    saved = netting.SET_MAX, netting.row_hashes
    if not path.startswith("set"):
        netting.SET_MAX = 0
    if path.endswith("colliding"):
        netting.row_hashes = weak_hashes
    try:
        fast = run(MAKERS[kind], batches, True)
    finally:
        netting.SET_MAX, netting.row_hashes = saved
    slow = run(MAKERS[kind], batches, False)
    assert by_instant(fast) == by_instant(slow)
    assert [t for t, _, _ in fast] == sorted(t for t, _, _ in fast), "out of timestamp order"
    if kind == "changelog":       # deletes before inserts within each instant
        for a, b in zip(fast, fast[1:]):
            assert not (a[0] == b[0] and a[1] > b[1]), (a, b)


def test_a_frontier_that_releases_nothing_leaves_the_pending_rows_alone():
    """A heartbeat below every pending instant must cost nothing in the rows held: the buffered batches are
    kept as they came (not concatenated and cut again per frontier), and a frontier that passes some
    instants releases exactly those, in order, with the rest still pending."""
    inp, out = Queue(), Queue()
    op = ToStreamOp("ISTREAM", [inp], out, DTYPES)
    reader = out.reader()
    cols = lambda keys: [np.array(keys), np.zeros(len(keys)), np.array(["a"] * len(keys), dtype=object)]  # noqa: E731
    inp.put(Batch(np.array([10, 10, 20]), np.array([1, 1, 1], dtype=np.int8), cols([0, 1, 2])))
    op.run()                                    # the batch's last timestamp is a frontier of 20: 10 is final
    pending = op.buffer[0]
    assert pending.ts.tolist() == [20]
    for h in range(11, 20):
        inp.put(Heartbeat(h))
        op.run()
        assert op.buffer == [pending] and op.buffer[0] is pending
    second = Batch(np.array([30, 30]), np.array([1, -1], dtype=np.int8), cols([3, 4]))
    inp.put(second)
    op.run()
    assert op.buffer == [second] and op.buffer[0] is second
    inp.put(Heartbeat(31))
    op.run()
    got = [item for item in iter(reader.get, None) if isinstance(item, Batch)]
    assert [(t, k) for b in got for t, k in zip(b.ts.tolist(), b.cols[0].tolist())] == [
        (10, 0), (10, 1), (20, 2), (30, 3)]
    assert op.buffer == []
