"""The aggregate's integer group ids (``synopses.group_ids.IntGroupIds``) equal a dict model's across many
batches: every known key keeps its id, and the keys new in a batch get the next ids in ascending key order,
whatever order they arrive in, however far apart or negative they are, and whether the direct lookup table
covers them, has to widen, is dropped (keys too sparse) or is built again (keys dense once more)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses import group_ids
from synopses.group_ids import IntGroupIds
from synopses.rowcodes import IntIds

I64 = (-2**63, 2**63 - 1)


def model_ids(known: dict, keys: list[int]) -> list[int]:
    for k in sorted(set(keys) - known.keys()):
        known[k] = len(known)
    return [known[k] for k in keys]


def check(batches: list[list[int]]) -> IntGroupIds:
    t, known = IntGroupIds(), {}
    for keys in batches:
        got = t.ids(np.array(keys, dtype=np.int64)).tolist()
        assert got == model_ids(known, keys)
        assert t.n == len(known)
        assert t.key_of().tolist() == list(known)          # the key of every id, in id order
        if len(t.lut):                                           # the lookup table covers every known key
            assert t.lo <= min(known) and max(known) < t.lo + len(t.lut)
            assert (t.lut >= 0).sum() == len(known)
    return t


# a batch: keys near one another (the lookup table), far apart or extreme (the hash table), or a run
near = st.lists(st.integers(-40, 40), max_size=60)
far = st.lists(st.one_of(st.integers(*I64), st.sampled_from([I64[0], I64[1], -1, 0, 70_000, -70_000])),
               max_size=30)
run = st.builds(lambda a, n, step: list(range(a, a + n * step, step)) if step > 0 else [],
                st.integers(-10**6, 10**6), st.integers(1, 300), st.sampled_from([1, 3, 1000, 2**20]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(near, far, run, run.map(lambda r: r[::-1])), min_size=1, max_size=12))
def test_ids_equal_a_dict_model(batches):
    check(batches)


def test_many_batches_growth_and_order():
    """Thousands of batches from a growing key range, in every arrival order, with known and new keys mixed;
    the state ends far beyond the lookup table's fixed span (it widens, then gives way to the hash table)."""
    rng = np.random.default_rng(7)
    batches = []
    hi = 100
    for b in range(1500):
        hi = int(hi * 1.01) + 1
        keys = rng.integers(-hi // 4, hi, 1024)
        if b % 3 == 0:
            keys = np.sort(keys)
        elif b % 3 == 1:
            keys = np.sort(keys)[::-1]
        batches.append(keys.tolist())
    t = check(batches)
    assert t.n > group_ids.LUT_SPAN                               # past the span a table may always have


def test_lookup_table_at_the_ends_of_int64():
    """A table widened downwards below the smallest int64 (or upwards past the largest) stays in range."""
    lo, hi = I64
    check([[lo + 5, lo + 10], [lo], [lo + 3], list(range(lo, lo + 3000, 7))])
    check([[hi - 5, hi - 10], [hi], [hi - 3], list(range(hi - 3000, hi, 7))[::-1]])
    # known keys in the table beside new keys outside it, at the far end of int64 (new without a hash probe)
    check([[hi - 5, hi - 10], [lo, hi - 5, hi - 7, lo + 1], [hi - 6, lo]])
    check([[lo + 5, lo + 10], [hi, lo + 5, lo + 7, hi - 1], [lo + 6, hi]])
    check([list(range(100)), list(range(50, 150)) + [-1, 10**6], list(range(140, 160))])


def test_lookup_table_dropped_and_rebuilt():
    """Sparse keys drop the lookup table; once the keys are dense again it is built again (and stays right)."""
    t = check([list(range(100)), [10**12], list(range(100, 200))])
    assert not len(t.lut)
    t = check([list(range(100)), [10**6]] + [list(range(i, i + 5000)) for i in range(0, 300_000, 5000)])
    assert len(t.lut)


def test_int_ids_append_numbers_in_order():
    t = IntIds()
    t.append(np.array([50, -3, 2**40], dtype=np.int64))
    t.append(np.arange(1000, 3000, dtype=np.int64))               # grows the table past a rebuild
    assert t.find(np.array([2**40, 50, -3, 1000, 2999, 7])).tolist() == [2, 0, 1, 3, 2002, -1]
    assert t.ids(np.array([7, 50])).tolist() == [2003, 0]


# batches of new keys only (a key that only grows), then batches mixing present keys, repeats and new ones:
# after a batch of new keys ``IntIds.ids`` finds-or-inserts in one pass (``_add``)
fresh_run = st.integers(0, 300).map(lambda n: ("fresh", n))
mixed = st.lists(st.integers(-40, 3000), max_size=80).map(lambda ks: ("mixed", ks))


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.one_of(fresh_run, mixed), max_size=12))
def test_int_ids_equal_exactly_for_equal_keys_after_batches_of_new_keys(steps):
    """Ids equal exactly where the keys are, dense and persistent across batches, whichever path a batch takes"""
    t, seen, top = IntIds(), {}, 10_000
    for kind, arg in steps:
        if kind == "fresh":
            keys = list(range(top, top + arg))
            top += arg
        else:
            keys = arg
        got = t.ids(np.array(keys, dtype=np.int64)).tolist()
        for k, i in zip(keys, got):
            assert seen.setdefault(k, i) == i
        assert len(set(seen.values())) == len(seen) == t.n       # one id per key, dense
        assert sorted(seen.values()) == list(range(t.n))
        assert t.find(np.array(list(seen), dtype=np.int64)).tolist() == list(seen.values())
