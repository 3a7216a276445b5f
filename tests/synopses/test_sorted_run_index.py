"""The join's sorted-run index holds exactly its input's multiset of rows, whether deletes come first in, first out
(a window's, retracted outright) or at random (stored signed, then compacted), and its probes find exactly the
rows with an equal key."""

import sys
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses import row_log, sorted_run_index
from synopses.sorted_run_index import SortedRunIndexSynopsis

# a step: insert a row (key, value), delete the oldest live row, or delete a live row picked at random
step = st.one_of(
    st.tuples(st.just("ins"), st.one_of(st.integers(0, 4), st.just(10**9)),     # a far key: binary search
              st.sampled_from([0.0, -0.0, 2.5, 7.0])),
    st.tuples(st.just("fifo"), st.just(0), st.just(0.0)),
    st.tuples(st.just("any"), st.integers(0, 50), st.just(0.0)),
)


def live_multiset(idx: SortedRunIndexSynopsis) -> Counter:
    c: Counter = Counter()
    if idx.table is not None:
        t = idx.table
        if not t.known:
            return c
        for s, k, v in zip(t.sign.tolist(), t.cols[0].tolist(), t.cols[1].tolist()):
            c[(k, v)] += s
        return +c
    if idx.log is None:
        return c
    k, v = idx.log.live_cols()
    return Counter(zip(k.tolist(), v.tolist()))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(step, min_size=1, max_size=15), min_size=1, max_size=8))
def test_index_holds_the_multiset_and_probes_exactly(batches):
    idx = SortedRunIndexSynopsis()
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
        if idx.table is not None:
            assert np.all(np.diff(idx.table.codes) >= 0), "table out of key order"
        probes = np.array([0, 3, 9, 2, 2, 10**9], dtype=np.int64)
        pidx, cols, sign = idx.lookup(probes)
        found: Counter = Counter()
        for p, i in zip(pidx.tolist(), range(len(pidx))):
            found[(int(probes[p]), cols[0][i], cols[1][i] + 0.0)] += 1 if sign is None else int(sign[i])
        want = Counter((int(k), key, v) for k in probes.tolist() for (key, v), n in expect.items() if key == k
                       for _ in range(n))
        assert +found == want
        cnt = idx.counts(probes)
        assert all(c >= sum(n for (key, _), n in expect.items() if key == k)
                   for c, k in zip(cnt.tolist(), probes.tolist()))
        every = np.array([0, 1, 2, 3, 4, 10**9], dtype=np.int64)     # every key the workload uses
        assert idx.most_per_key() >= int(idx.counts(every).max())


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(1, 3000), st.integers(1, 300), st.integers(0, 2**32 - 1),
       st.sampled_from([0, 2048]))
def test_sliding_window_stays_first_in_first_out_with_few_runs(window, rows, batch, seed, small):
    """A window's input (each row deleted ``window`` rows after it came, in order) keeps the index in its
    first-in-first-out form, probes exact, and the runs few: a batch must not cost the whole table. ``small``
    0 makes even a small index keep merged runs rather than one run re-sorted per release."""
    saved, sorted_run_index.SMALL = sorted_run_index.SMALL, small
    try:
        sliding_window(window, rows, batch, seed)
    finally:
        sorted_run_index.SMALL = saved


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 400), st.integers(1, 1500), st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_sliding_window_with_releases_kept_as_they_came(window, rows, batch, seed):
    """The same with the log keeping every release of at least 8 rows as the arrays it came in (segments,
    ``synopses/row_log.py``) beside the rows it copies: probes, gathers across segments and drops stay exact."""
    saved, row_log.ADOPT_ROWS = row_log.ADOPT_ROWS, 8
    try:
        sliding_window(window, rows, batch, seed)
    finally:
        row_log.ADOPT_ROWS = saved


def sliding_window(window, rows, batch, seed):
    rng = np.random.default_rng(seed)
    keys = rng.integers(-5, 40, rows) * (10**12 if seed % 2 else 1)        # odd seeds: far keys, binary search
    vals = np.array([f"v{i}" for i in range(rows)], dtype=object)           # object columns too
    idx = SortedRunIndexSynopsis()
    live: list[int] = []
    for lo in range(0, rows, batch):
        hi = min(rows, lo + batch)
        ins = list(range(lo, hi))
        # in time order: row i enters at i and leaves at i + window
        events = sorted([(i, 1, i) for i in ins] + [(i + window, -1, i) for i in range(max(0, lo - window),
                                                                                       hi - window)])
        ts = np.array([e[0] for e in events], dtype=np.int64)
        sign = np.array([e[1] for e in events], dtype=np.int8)
        who = np.array([e[2] for e in events], dtype=np.int64)
        idx.insert(ts, sign, [keys[who], vals[who]], keys[who])
        live = [i for i in range(max(0, hi - window), hi)]
        assert not idx.signed(), "first-in-first-out deletes left the first-in-first-out form"
        assert len(idx) == len(live)
        assert len(idx.runs) <= 2 * max(1, len(live)).bit_length() + 2
        probes = np.unique(keys[rng.integers(0, rows, 8)])
        pidx, cols, sign_ = idx.lookup(probes)
        assert sign_ is None
        found = Counter(zip(probes[pidx].tolist(), cols[1].tolist() if len(pidx) else []))
        want = Counter((int(keys[i]), vals[i]) for i in live if keys[i] in set(probes.tolist()))
        assert found == want
        log = idx.log
        for seg in log.segs:
            assert seg.end > log.head, "a segment all of whose rows were dropped is still held"
            if seg.owned:
                dead = max(0, log.head - seg.seq0)
                assert seg.cols[1][:dead].tolist() == [None] * dead, "dropped rows still held"


def test_bytes_reported_match_tracemalloc_within_ten_percent():
    """The synopsis's ``bytes`` statistic (and so its memory knob) counts what it really holds: the log's
    buffers with their spare capacity, the strings its live rows point to, and the index runs."""
    import gc
    import tracemalloc

    n = 30_000
    keys = np.arange(n, dtype=np.int64) % 977
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    idx = SortedRunIndexSynopsis()
    for lo in range(0, n, 1000):                   # a window of 10,000 rows sliding over the input
        ins = np.arange(lo, lo + 1000)
        gone = np.arange(max(0, lo - 10_000), lo + 1000 - 10_000) if lo + 1000 > 10_000 else np.arange(0)
        who = np.concatenate([gone, ins])
        sign = np.concatenate([np.full(len(gone), -1, np.int8), np.ones(len(ins), np.int8)])
        names = np.empty(len(who), dtype=object)
        names[:] = [f"sensor-{i:06d}" for i in who.tolist()]
        idx.insert(who.astype(np.int64), sign, [keys[who], names, who / 3], keys[who])
    del names, who, sign, ins, gone
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base - sys.getsizeof(idx)
    tracemalloc.stop()
    assert len(idx) == 10_000 and not idx.signed()
    assert abs(idx.nbytes() - held) <= 0.10 * held, (idx.nbytes(), held)


EXTREME = [-2**63, -2**63 + 1, -2**62, -5, -1, 0, 1, 2, 3, 7, 2**62, 2**63 - 2, 2**63 - 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 12), st.sampled_from(EXTREME)), min_size=1, max_size=30),
       st.lists(st.one_of(st.integers(-3, 12), st.sampled_from(EXTREME)), max_size=30))
def test_locate_finds_equal_codes_whatever_their_range(table, probes):
    """``locate`` (first position and count of each probe's code in a sorted table) against a count by hand,
    on both of its paths (a lookup when the table's codes span a small range, else binary search) and with
    codes at the ends of int64, where the offset of a probe from the table's smallest code wraps around."""
    table = np.sort(np.array(table, dtype=np.int64))
    probes = np.array(probes, dtype=np.int64)
    lo, cnt = sorted_run_index.locate(table, probes)
    for p, first, n in zip(probes.tolist(), lo.tolist(), cnt.tolist()):
        assert n == table.tolist().count(p)
        if n:
            assert table[first:first + n].tolist() == [p] * n


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-3, 40), min_size=1, max_size=60), st.sampled_from([0, -2**63, 2**63 - 100, 10**12]),
       st.lists(st.lists(st.one_of(st.integers(-5, 45), st.integers(-2**63, 2**63 - 1)), max_size=20),
                min_size=1, max_size=4))
def test_run_probes_built_once_find_what_a_binary_search_finds(offsets, base, probe_batches):
    """A run's probe tables (built on first probe and kept: the run never changes) answer every later probe
    batch as a binary search of its codes would, near the ends of the int64 range too."""
    lo = max(-2**63, min(base, 2**63 - 1 - 45))
    table = np.sort(np.array([lo + max(0, o) for o in offsets], dtype=np.int64))
    run = sorted_run_index._Run(table, np.arange(len(table)), 0)
    for probes in probe_batches:
        codes = np.array(probes + [int(table[0]), int(table[-1])], dtype=np.int64)
        first, cnt = run.locate(codes)
        left, right = np.searchsorted(table, codes, "left"), np.searchsorted(table, codes, "right")
        assert cnt.tolist() == (right - left).tolist()
        assert first[cnt > 0].tolist() == left[cnt > 0].tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 12), st.sampled_from(EXTREME)), max_size=40), st.booleans())
def test_a_runs_most_frequent_code_is_counted_exactly(table, probed_first):
    """``_Run.most`` (how many entries the most frequent code has: the join's pair bound without probing,
    ``JoinOp._bounded``) is the largest multiplicity in the table, on every path (few entries, a small span
    of codes, binary search; codes at the ends of int64), whether a probe built the structures first or not."""
    table = np.sort(np.array(table, dtype=np.int64))
    run = sorted_run_index._Run(table, np.arange(len(table)), 0)
    if probed_first and len(table):
        run.locate(table[:1])
    assert run.most() == max(Counter(table.tolist()).values(), default=0)
    if not len(table):
        return                                           # an empty run is never probed
    first, cnt = run.locate(table)                       # the probe structures still answer exactly
    left, right = np.searchsorted(table, table, "left"), np.searchsorted(table, table, "right")
    assert cnt.tolist() == (right - left).tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=30), st.lists(st.integers(0, 6), max_size=30), st.integers(0, 70))
def test_two_runs_merge_as_the_sorted_concatenation(old_codes, new_codes, head):
    """Two runs merge by binary search (``_Merge``) into exactly the run a stable sort of their concatenation
    gives (the older run's entries first among equal codes), without the entries of rows before ``head``."""
    Run = sorted_run_index._Run

    def run(codes, first):
        codes = np.array(codes, dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        return Run(codes[order], first + order, first)

    old, new = run(old_codes, 0), run(new_codes, len(old_codes))
    merged = Run.merge([old, new], head)
    codes = np.concatenate([old.codes, new.codes])
    seqs = np.concatenate([old.seqs, new.seqs])
    live = seqs >= head
    order = np.argsort(codes[live], kind="stable")
    assert merged.codes.tolist() == codes[live][order].tolist()
    assert merged.seqs.tolist() == seqs[live][order].tolist()
    assert (merged.seqs >= merged.low).all()           # a probe from ``low`` on need not filter


@settings(max_examples=120, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=40), min_size=1, max_size=6),
       st.lists(st.lists(st.integers(-1, 13), min_size=1, max_size=12), min_size=1, max_size=6),
       st.integers(0, 30), st.sampled_from([0, 16, 10**6]))
def test_rows_not_indexed_yet_are_found_by_scan_or_sort(batches, probe_batches, window, scan_work):
    """Rows appended but not sorted into a run yet (``_lazy``: scanned while probes have few codes, sorted
    once scans would cost more) are found by ``find`` exactly as the rows held (and counted by ``counts``, an
    upper bound), whether the scan budget is none, the default, or unlimited; a window's
    deletes (``window`` rows) retract rows scanned or sorted alike."""
    saved = sorted_run_index.SMALL, sorted_run_index.SCAN_WORK
    sorted_run_index.SMALL, sorted_run_index.SCAN_WORK = 0, scan_work
    try:
        idx = SortedRunIndexSynopsis()
        live: list[int] = []
        seq = 0
        for b, probes in zip(batches, probe_batches * len(batches)):
            gone = max(0, len(live) + len(b) - window) if window else 0
            gone = min(gone, len(live))
            rows = live[:gone] + b
            sign = np.array([-1] * gone + [1] * len(b), dtype=np.int8)
            keys = np.array(rows, dtype=np.int64)
            idx.insert(np.arange(len(rows), dtype=np.int64), sign, [keys], keys)
            live = live[gone:] + b
            seq += len(b)
            codes = np.array(probes, dtype=np.int64)
            for _rep in range(2):                    # twice: scans count against the budget
                most = idx.most_per_key()                # before ``counts``, which may sort rows into a run
                cnt = idx.counts(codes)                  # an upper bound: entries of rows gone count
                assert most >= int(idx.counts(np.arange(13, dtype=np.int64)).max())
                assert all(n >= live.count(c) for n, c in zip(cnt.tolist(), probes))
                pidx, s = idx.find(codes)
                got = sorted(zip(pidx.tolist(), idx.gather(s)[0].tolist(), s.tolist()))
                assert [(p, k) for p, k, _ in got] == sorted((p, c) for p, c in enumerate(probes)
                                                             for k in live if k == c)
                assert len(set(zip(pidx.tolist(), s.tolist()))) == len(s)
    finally:
        sorted_run_index.SMALL, sorted_run_index.SCAN_WORK = saved


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([0, -2**63, 2**63 - 1, 5, 7]), min_size=1, max_size=4),
       st.lists(st.sampled_from([0, -2**63, 2**63 - 1, 5, 7, 6, 1]), min_size=17, max_size=60))
def test_a_run_of_few_entries_probed_by_many_codes(table, probes):
    """``_Run._few`` (a run of at most ``TINY`` entries probed by many codes: one comparison per distinct
    entry) gives the first position and count a binary search gives."""
    table = np.sort(np.array(table, dtype=np.int64))
    codes = np.array(probes, dtype=np.int64)
    first, cnt = sorted_run_index._Run(table, np.arange(len(table)), 0).locate(codes)
    left, right = np.searchsorted(table, codes, "left"), np.searchsorted(table, codes, "right")
    assert cnt.tolist() == (right - left).tolist()
    assert first[cnt > 0].tolist() == left[cnt > 0].tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=2, max_size=5),
       st.lists(st.lists(st.integers(-2, 200), min_size=1, max_size=12), min_size=1, max_size=3))
def test_runs_outside_the_probes_range_are_skipped_and_nothing_is_missed(gaps, probe_batches):
    """Keys that grow with time (NEXMark's ids) leave the older runs' codes below the newest probes: ``find``
    skips a run whose codes all lie outside the probes' range. Probes at each run's first and last code, just
    outside them and in the gaps between runs find exactly the rows a count by hand finds."""
    saved = sorted_run_index.SMALL
    sorted_run_index.SMALL = 0                  # every batch goes into runs of its own (no single re-sort)
    try:
        idx = SortedRunIndexSynopsis()
        held: list[int] = []
        base = 0
        edges: list[int] = []
        for i, gap in enumerate(gaps):
            n = 3 ** (len(gaps) - 1 - i)                    # each run over twice the next: none merged
            base += gap
            keys = [base + (i % 4) for i in range(n)]       # a run of codes base .. base + 3
            base = max(keys) + 1
            edges += [keys[0] - 1, keys[0], max(keys), max(keys) + 1]
            held += keys
            k = np.array(keys, dtype=np.int64)
            idx.insert(np.arange(n, dtype=np.int64), np.ones(n, np.int8), [k], k)
            idx.find(np.arange(20, dtype=np.int64))         # more than SCAN_CODES probes: sorted into a run
        assert len(idx.runs) > 1
        for probes in probe_batches + [edges, edges[:2], edges[-2:]]:
            codes = np.array(probes, dtype=np.int64)
            pidx, seq = idx.find(codes)
            got = sorted(zip(pidx.tolist(), idx.gather(seq)[0].tolist()))
            assert got == sorted((p, c) for p, c in enumerate(probes) for k in held if k == c)
    finally:
        sorted_run_index.SMALL = saved
