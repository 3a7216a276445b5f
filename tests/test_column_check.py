"""``ColumnCheck.exact``, the columnar push's fast path (dsms/types.py): whatever it accepts, the general
``typed_columns`` accepts too and returns the same arrays; whatever it declines is left to ``typed_columns``, so
a push's verdict and its stored columns do not depend on which path took it. Also a push to a stream no query
reads, which builds no batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms import Engine, InputError
from dsms.types import TS_LIMIT, ColumnCheck, typed_columns

SCHEMA = [("a", "INT"), ("b", "FLOAT"), ("s", "STRING"), ("t", "TIMESTAMP"), ("ok", "BOOLEAN")]
DTYPES = {"INT": np.int64, "FLOAT": np.float64, "STRING": object, "TIMESTAMP": np.int64, "BOOLEAN": np.bool_}
EDGE_TS = [0, 5, -5, TS_LIMIT, -TS_LIMIT, TS_LIMIT + 1, -TS_LIMIT - 1, 2**63 - 1, -(2**63)]


@st.composite
def columns(draw):
    """A column map close to the schema: sometimes a column renamed (other case, unknown), missing, of another
    dtype or length, or a list instead of an array; TIMESTAMP values near the limits."""
    n = draw(st.integers(0, 6))
    cols: dict = {}
    for name, t in SCHEMA:
        if draw(st.integers(0, 12)) == 0:
            continue                                        # missing
        key = draw(st.sampled_from([name, name, name, name.upper(), name + "x"]))
        m = n if draw(st.integers(0, 10)) else n + 1
        if t == "TIMESTAMP":
            vals = draw(st.lists(st.sampled_from(EDGE_TS), min_size=m, max_size=m))
        elif t == "STRING":
            vals = draw(st.lists(st.text(max_size=3), min_size=m, max_size=m))
        elif t == "BOOLEAN":
            vals = draw(st.lists(st.booleans(), min_size=m, max_size=m))
        else:
            vals = draw(st.lists(st.integers(-100, 100), min_size=m, max_size=m))
        dtype = draw(st.sampled_from([DTYPES[t], DTYPES[t], np.int32, np.float64, object]))
        if draw(st.integers(0, 8)) == 0:
            cols[key] = vals                                # a list: never the fast path
            continue
        try:
            arr = np.array(vals, dtype=dtype) if dtype is not object else np.array(vals + [None], dtype=object)[:-1]
        except (OverflowError, ValueError):
            arr = np.array(vals + [None], dtype=object)[:-1]
        if draw(st.integers(0, 15)) == 0:
            arr = arr.reshape(1, -1)                        # not one-dimensional
        cols[key] = arr
    return cols


@settings(max_examples=400, deadline=None)
@given(columns(), st.randoms(use_true_random=False))
def test_fast_path_agrees_with_typed_columns(cols, rnd):
    if rnd.random() < 0.5:                                  # the columns in another order than the schema's
        keys = list(cols)
        rnd.shuffle(keys)
        cols = {k: cols[k] for k in keys}
    check = ColumnCheck(SCHEMA)
    fast = check.exact(cols)
    try:
        want = typed_columns(SCHEMA, cols=cols)
    except InputError:
        assert fast is None, "the fast path accepted what typed_columns refuses"
        return
    if fast is None:
        return
    got, n = fast
    assert n == want[1]
    for g, w in zip(got, want[0], strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tolist() == w.tolist()


def test_fast_path_declines_out_of_range_timestamps_and_the_push_says_why():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, t TIMESTAMP)")
    good = {"a": np.arange(3, dtype=np.int64), "t": np.array([1, 2, TS_LIMIT], dtype=np.int64)}
    assert eng.sources["s"].check.exact(good) is not None
    bad = {"a": np.arange(3, dtype=np.int64), "t": np.array([1, TS_LIMIT + 1, 3], dtype=np.int64)}
    assert eng.sources["s"].check.exact(bad) is None
    with pytest.raises(InputError, match="column 't'"):
        eng.push("S", bad, np.arange(3, dtype=np.int64))
    assert eng.push("S", good, np.arange(3, dtype=np.int64)) == 3


def test_a_push_nobody_reads_is_validated_and_counted_like_any_other():
    """A stream no query reads gets no batch built (``Queue.put_unread``), but the same verdicts, frontier and
    counters as one that is read, and a query registered later starts after it."""
    read, unread = Engine(), Engine()
    for eng in (read, unread):
        eng.execute("REGISTER STREAM S (a INT, t TIMESTAMP)")
    q = read.execute("SELECT * FROM S")
    cols = {"a": np.arange(3, dtype=np.int64), "t": np.arange(3, dtype=np.int64)}
    for eng in (read, unread):
        assert eng.push("S", cols, np.array([1, 2, 2], dtype=np.int64)) == 3
        with pytest.raises(InputError, match="below what 'S' has already passed"):
            eng.push("S", cols, np.array([0, 5, 6], dtype=np.int64))
        with pytest.raises(InputError, match="goes backwards"):
            eng.push("S", cols, np.array([5, 4, 6], dtype=np.int64))
        with pytest.raises(InputError, match="column 'a'"):
            eng.push("S", {"a": ["x", "y", "z"], "t": [1, 2, 3]}, 7)
    read.run()
    assert [len(b) for b in q.drain_batches()] == [3]
    a, b = read.sources["s"], unread.sources["s"]
    assert (a.frontier, a.elements_in, a.queue.tuples_in, a.queue.last_ts) == \
        (b.frontier, b.elements_in, b.queue.tuples_in, b.queue.last_ts) == (2, 3, 3, 2)
    late = unread.execute("SELECT * FROM S")
    unread.push("S", cols, np.array([3, 4, 5], dtype=np.int64))
    unread.run()
    assert [e.ts for e in late.drain()] == [3, 4, 5]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 5), st.randoms(use_true_random=False))
def test_columns_in_any_order_land_in_the_schemas_positions(n, rnd):
    """The fast path takes a dict in the schema's order without a lookup per column; in any other order each
    column still goes to its own position (INT and TIMESTAMP share a dtype, so a mix-up would pass the checks)."""
    good = {"a": np.arange(n, dtype=np.int64), "b": np.arange(n, dtype=np.float64) / 2,
            "s": np.array([str(i) for i in range(n)] + [None], dtype=object)[:-1],
            "t": np.arange(n, dtype=np.int64) * 1000 + 7, "ok": np.arange(n) % 2 == 0}
    keys = list(good)
    rnd.shuffle(keys)
    cols = {k: good[k] for k in keys}
    got, m = ColumnCheck(SCHEMA).exact(cols)
    want, k = typed_columns(SCHEMA, cols=cols)
    assert m == k == n
    assert [g.tolist() for g in got] == [w.tolist() for w in want] == [good[c].tolist() for c, _ in SCHEMA]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2, 5, -5, TS_LIMIT, -TS_LIMIT, TS_LIMIT + 1, -TS_LIMIT - 1, 2**63 - 1,
                                 -(2**63)]), min_size=1, max_size=40), st.sampled_from([None, -TS_LIMIT, 0, 2]))
def test_timestamp_checks_of_an_int64_array_agree_with_a_list(values, frontier):
    """``check_timestamps`` on an int64 array (its fast path: order by ``argmax`` of the descents, range at the
    ends) and on the same values as a Python list (the general path) accept and refuse alike."""
    from dsms.types import check_timestamps

    def verdict(ts):
        try:
            return check_timestamps("S", ts, len(values), frontier).tolist()
        except InputError as e:
            return ("refused", e.index)

    assert verdict(np.array(values, dtype=np.int64)) == verdict(list(values))


@pytest.mark.parametrize("bad", [None, 3, b"ab"])
def test_a_string_list_is_checked_value_by_value_and_an_object_array_is_taken_on_trust(bad):
    """The documented split (docs/contract-engine-api.md, "Columnar input"): a list for a STRING column is
    refused at its bad value; a numpy object array is not scanned, and a short one holding a non-str still
    goes through whole (its byte count must not raise after the stream's frontier has moved)."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, s STRING)")
    q = eng.execute("SELECT a FROM S")
    with pytest.raises(InputError, match="element 1: column 's': expected STRING") as e:
        eng.push("S", {"a": [1, 2], "s": ["x", bad]}, [1, 2])
    assert e.value.index == 1
    assert eng.frontier("S") is None                       # refused whole: nothing moved
    trusted = np.array(["x", bad, "y"], dtype=object)
    assert eng.push("S", {"a": np.arange(3, dtype=np.int64), "s": trusted}, [1, 2, 3]) == 3
    eng.heartbeat(10)
    eng.run()
    assert [e.row["a"] for e in q.drain()] == [0, 1, 2]


def test_fast_path_declines_one_column_of_another_length_or_shape_in_any_position():
    """Every column exact but one, which is one row longer or shorter, or two-dimensional: the fast path
    declines (it compares every column's shape with the first one's), and the push says what is wrong."""
    n = 4
    good = {}
    for name, t in SCHEMA:
        if t == "STRING":
            good[name] = np.array([str(i) for i in range(n)] + [None], dtype=object)[:-1]
        else:
            good[name] = np.arange(n).astype(DTYPES[t])
    check = ColumnCheck(SCHEMA)
    got, rows = check.exact(good)
    assert rows == n and all(g is good[c] for g, (c, _) in zip(got, SCHEMA, strict=True))
    for name, _ in SCHEMA:
        for bad in (good[name][:-1], np.concatenate([good[name], good[name][:1]]), good[name].reshape(2, 2)):
            cols = {**good, name: bad}
            assert check.exact(cols) is None, (name, bad.shape)
            with pytest.raises(InputError):
                typed_columns(SCHEMA, cols=cols)


@pytest.mark.parametrize("value", [0, 7, -7, TS_LIMIT, -TS_LIMIT, TS_LIMIT + 1, -TS_LIMIT - 1, 2**70, True, False,
                                   np.int64(5), 5.0, 5.5, "1970-01-01T00:00:01Z"])
def test_a_heartbeat_takes_a_timestamp_as_to_ticks_decides(value):
    """``to_ticks`` takes a plain int in range at once (every heartbeat; issue 15); any other value, and an int
    out of range, goes the general way: the verdicts are the documented ones (dsms/types.py)."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT)")
    ok = not isinstance(value, bool) and value not in (TS_LIMIT + 1, -TS_LIMIT - 1, 2**70, 5.5)
    if ok:
        eng.heartbeat(value)
        want = 1000 if isinstance(value, str) else int(value)
        assert eng.frontier("S") == want and type(eng.frontier("S")) is int
    else:
        with pytest.raises(InputError, match="heartbeat: timestamp"):
            eng.heartbeat(value)
        assert eng.frontier("S") is None


@settings(max_examples=400, deadline=None)
@given(columns(), st.lists(st.sampled_from([0, 1, 2, 5, -5, TS_LIMIT, -TS_LIMIT, TS_LIMIT + 1, -(2**63)]),
                           max_size=7),
       st.sampled_from([np.int64, np.int32, np.float64, list]), st.sampled_from([None, -TS_LIMIT, 0, 2]))
def test_the_push_check_accepts_what_the_two_checks_accept(cols, stamps, kind, frontier):
    """``ColumnCheck.push`` (the columns and the timestamps of a columnar push checked in one call) accepts
    exactly what ``exact`` then ``check_timestamps`` would accept on their fast paths, returning the same
    columns, row count and timestamps; when it declines, ``Engine.push`` takes the general path, whose verdict
    is the one the push gives (checked in the test below)."""
    from dsms.types import check_timestamps
    ts = list(stamps) if kind is list else np.array(stamps).astype(kind)
    check = ColumnCheck(SCHEMA)
    got = check.push(cols, ts, frontier)
    fast = check.exact(cols)
    want = None
    if fast is not None and type(ts) is np.ndarray and ts.dtype == np.int64 and fast[1] and len(ts) == fast[1]:
        try:
            want = fast[0], fast[1], check_timestamps("S", ts, fast[1], frontier)
        except InputError:
            want = None
    if want is None:
        assert got is None
        return
    assert got is not None and got[1] == want[1] and got[2] is ts
    assert all(g is w for g, w in zip(got[0], want[0], strict=True))


@settings(max_examples=200, deadline=None)
@given(columns(), st.lists(st.sampled_from([0, 1, 2, 5, -5, TS_LIMIT, TS_LIMIT + 1]), max_size=7),
       st.booleans())
def test_a_columnar_push_gives_the_verdict_of_the_general_checks(cols, stamps, pushed_before):
    """Whatever path ``Engine.push`` takes, a push of numpy columns is accepted exactly when the general checks
    (``typed_columns``, then ``check_timestamps``) accept it, stores the same values, and a refusal is an
    ``InputError`` that leaves the stream as it was (frontier and counters)."""
    from dsms.types import check_timestamps
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b FLOAT, s STRING, t TIMESTAMP, ok BOOLEAN)")
    q = eng.execute("SELECT * FROM S")
    frontier = None
    if pushed_before:
        eng.push("S", [{"a": 1, "b": 1.0, "s": "x", "t": 0, "ok": True}], 2)
        frontier = 2
    ts = np.array(stamps, dtype=np.int64)
    try:
        want_cols, n = typed_columns(SCHEMA, cols=cols)
        want_ts = check_timestamps("S", ts, n, frontier)
    except InputError:
        with pytest.raises(InputError):
            eng.push("S", cols, ts)
        assert eng.frontier("S") == frontier and eng.sources["s"].elements_in == (1 if pushed_before else 0)
        return
    assert eng.push("S", cols, ts) == n
    eng.heartbeat(TS_LIMIT)
    eng.run()
    got = q.drain()[1 if pushed_before else 0:]          # the earlier push's element first (its ts is the least)
    assert [e.ts for e in got] == want_ts.tolist()
    for j, (c, _) in enumerate(SCHEMA):
        assert [e.row[c] for e in got] == want_cols[j].tolist()


def _good(n: int = 4) -> dict:
    return {"a": np.arange(n, dtype=np.int64), "b": np.arange(n) / 2, "s": np.array(["x"] * n, dtype=object),
            "t": np.arange(n, dtype=np.int64), "ok": np.arange(n) % 2 == 0}


@pytest.mark.parametrize("change, ts, match, index", [
    ({"t": np.array([0, 1, TS_LIMIT + 1, 3], dtype=np.int64)}, [5, 6, 7, 8], "element 2: column 't'.*out of range", 2),
    ({"s": np.array(["x"] * 3, dtype=object)}, [5, 6, 7, 8], "column 's' has 3 values, others have 4", None),
    ({"a": np.array([1.5, 2, 3, 4])}, [5, 6, 7, 8], "element 0: column 'a'", 0),
    ({}, [5, 7, 6, 8], "timestamp 6 goes backwards", 2),
    ({}, [3, 6, 7, 8], "timestamp 3 is below what 'S' has already passed", 0),
    ({}, [5, 6, 7], "4 rows but 3 timestamps", None),
])
def test_a_columnar_push_of_numpy_arrays_is_refused_naming_what_and_where(change, ts, match, index):
    """The one-call check of a numpy push (``ColumnCheck.push``) declines bad input; the push then refuses it
    with the general path's message and element index, and nothing of it is taken."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b FLOAT, s STRING, t TIMESTAMP, ok BOOLEAN)")
    q = eng.execute("SELECT a FROM S")
    eng.push("S", _good(), np.arange(1, 5, dtype=np.int64))
    with pytest.raises(InputError, match=match) as e:
        eng.push("S", {**_good(), **change}, np.array(ts, dtype=np.int64))
    assert e.value.index == index
    assert eng.frontier("S") == 4 and eng.sources["s"].elements_in == 4
    eng.push("S", _good(), np.array([5, 6, 7, 8], dtype=np.int64))     # the stream takes good input after it
    eng.run()
    assert [e.ts for e in q.drain()] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_heartbeat_nobody_reads_moves_time_as_one_that_is_read():
    """``Engine.heartbeat`` builds no heartbeat for a stream no query reads, only records its time (what
    ``Queue.put`` keeps of it): frontier and the queue's last time are those of a stream that is read, and a
    query registered afterwards takes its frontier from there (an instant the heartbeat passed is final)."""
    read, unread = Engine(), Engine()
    for eng in (read, unread):
        eng.execute("REGISTER STREAM S (a INT)")
        eng.execute("REGISTER STREAM T (a INT)")
    q = read.execute("SELECT a FROM S")
    for step in ([("push", 5), ("hb", 9), ("hb", 7), ("push", 9), ("hb", 12), ("hb", 12)]):
        for eng in (read, unread):
            if step[0] == "push":
                eng.push("S", {"a": np.array([1], dtype=np.int64)}, np.array([step[1]], dtype=np.int64))
            else:
                eng.heartbeat(step[1])
        for name in ("s", "t"):
            a, b = read.sources[name], unread.sources[name]
            assert (a.frontier, a.queue.last_ts) == (b.frontier, b.queue.last_ts), (step, name)
    assert unread.sources["s"].queue.last_ts == 12 and not unread.sources["s"].queue._items
    late = unread.execute("SELECT ISTREAM(COUNT(*) AS n) FROM S [RANGE 5]")
    unread.push("S", {"a": np.array([1, 2], dtype=np.int64)}, np.array([12, 13], dtype=np.int64))
    unread.heartbeat(20)
    unread.run()
    read.run()
    assert [e.ts for e in q.drain()] == [5, 9]
    assert [(e.ts, e.sign, e.row["n"]) for e in late.drain() if e.sign > 0][:2] == [(12, 1, 1), (13, 1, 2)]
