"""``AppendIndexSynopsis`` and ``ColumnSegments`` against brute force: every probe finds exactly the rows held
with its key (oldest first), through blocks that move and pools that are compacted, and a gather returns the
right values from adopted and copied segments alike."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.append_index import AppendIndexSynopsis
from synopses.column_segments import ADOPT_ROWS, ColumnSegments
from synopses.key_slots import KeySlots

batches = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 6), st.integers(0, 2**40)), min_size=1,
                   max_size=25)


@settings(max_examples=150, deadline=None)
@given(batches, st.integers(0, 2**31))
def test_probes_find_exactly_the_rows_with_their_key(spec, seed):
    rng = np.random.default_rng(seed)
    slots = KeySlots()
    ix = AppendIndexSynopsis(slots)
    keys: list[int] = []
    for n, nkeys, base in spec:
        codes = base + rng.integers(0, nkeys, n) * (1 if base < 2**20 else 2**19)   # dense or sparse keys
        first = ix.append([codes.copy(), -codes], slots.of(codes))
        assert first == len(keys)
        keys += codes.tolist()
        probe = np.concatenate([codes[: n // 2], rng.integers(0, 2**41, 3)])
        p, rows = ix.find(slots.of(probe))
        want = [(i, r) for i, c in enumerate(probe.tolist()) for r, k in enumerate(keys) if k == c]
        assert sorted(zip(p.tolist(), rows.tolist())) == want
        assert ix.gather(rows)[0].tolist() == [keys[r] for r in rows.tolist()]
        assert ix.counts(probe).tolist() == [keys.count(c) for c in probe.tolist()]
        assert ix.most_per_key() == max(keys.count(k) for k in set(keys))
    assert len(ix) == len(keys) and ix.get("keys") == len(set(keys)) and ix.stale <= ix.used


def test_a_hot_key_moves_its_block_and_the_pool_is_compacted():
    slots = KeySlots()
    ix = AppendIndexSynopsis(slots)
    held = []
    for i in range(200):
        codes = np.array([0, i, 0])                       # key 0 grows by two rows per batch
        ix.append([codes], slots.of(codes))
        held += codes.tolist()
    _, rows = ix.find(slots.of(np.array([0])))
    assert sorted(rows.tolist()) == [r for r, k in enumerate(held) if k == 0]
    assert ix.stale < ix.used                              # compacted on the way: stale entries do not pile up
    assert ix.cap[slots.of(np.array([0]))[0]] < 2 * 400 + 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 3, 100, ADOPT_ROWS, ADOPT_ROWS + 7]), min_size=1, max_size=8),
       st.integers(0, 2**31))
def test_segments_gather_rows_from_adopted_and_copied_batches(sizes, seed):
    rng = np.random.default_rng(seed)
    cs = ColumnSegments()
    ints, strs = [], []
    for j, n in enumerate(sizes):
        a = rng.integers(-5, 5, n) if j % 2 else rng.integers(-5, 5, n).astype(np.int32)   # widened on the way
        s = np.array([f"r{len(ints) + i}" for i in range(n)], dtype=object)
        cs.append([a, s], n)
        ints += a.tolist()
        strs += s.tolist()
    rows = rng.integers(0, len(ints), 50)
    a, s = cs.take(rows)
    assert a.tolist() == [ints[r] for r in rows.tolist()] and s.tolist() == [strs[r] for r in rows.tolist()]
    assert cs.take(rows, [1])[0].tolist() == s.tolist() and len(cs.take(rows[:0])[0]) == 0
    assert cs.nbytes() >= sum(len(x) for x in strs) and len(cs) == len(ints)
