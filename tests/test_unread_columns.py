"""A column that no reader of an input stream's queue reads goes into the queue as a filler of no bytes
(``Engine._input_batch``, ``dsms/operators/columns_read.py``): results must be those of the reference
evaluator whatever the plan reads, a query registered later (which may read every column) must see real
values, the server's prepare/apply path must do the same as ``push``, and the filler must really be there (the
queue counts no bytes for it), or the fast path is not taken at all."""

from __future__ import annotations

import numpy as np
import pytest
from oracle.generators import compare
from oracle.reference import Reference

from dsms import Engine
from dsms.batch import Batch

STREAMS = [
    "REGISTER STREAM S (a INT, b FLOAT, s STRING, t TIMESTAMP, e STRING, ok BOOLEAN)",
    "REGISTER STREAM P (id INT, name STRING, extra STRING)",
    "REGISTER STREAM A (seller INT, item STRING, price INT)",
]
SCHEMAS = {
    "S": [("a", "INT"), ("b", "FLOAT"), ("s", "STRING"), ("t", "TIMESTAMP"), ("e", "STRING"), ("ok", "BOOLEAN")],
    "P": [("id", "INT"), ("name", "STRING"), ("extra", "STRING")],
    "A": [("seller", "INT"), ("item", "STRING"), ("price", "INT")],
}
WORDS = np.array(["x", "yy", "zzz", "long string " * 3, ""], dtype=object)


def _pushes(seed: int, n_pushes: int = 12) -> list[tuple[str, dict, np.ndarray]]:
    """Columnar pushes (numpy arrays of the stored dtypes, so the fast path takes them) to S, P and A."""
    rng = np.random.default_rng(seed)
    out, t = [], 0
    for _ in range(n_pushes):
        for name, cols in SCHEMAS.items():
            n = int(rng.integers(0, 9))
            if n == 0:
                continue
            ts = t + np.sort(rng.integers(0, 4, n)).astype(np.int64)
            data = {}
            for c, typ in cols:
                if typ == "INT":
                    data[c] = rng.integers(0, 6, n).astype(np.int64)
                elif typ == "FLOAT":
                    data[c] = rng.random(n)
                elif typ == "STRING":
                    data[c] = WORDS[rng.integers(0, len(WORDS), n)]
                elif typ == "TIMESTAMP":
                    data[c] = rng.integers(-50, 50, n).astype(np.int64)
                else:
                    data[c] = rng.random(n) < 0.5
            out.append((name, data, ts))
            t = int(ts[-1])
        t += 3
    return out


def _rows(cols: dict) -> list[dict]:
    names = list(cols)
    return [dict(zip(names, vals)) for vals in zip(*(cols[c].tolist() for c in names))]


def _run(queries: list[str], pushes, via_prepare: bool = False) -> tuple[Engine, list]:
    eng = Engine()
    for s in STREAMS:
        eng.execute(s)
    qs = [eng.execute(q) for q in queries]
    for name, cols, ts in pushes:
        if via_prepare:
            eng.apply(name, eng.prepare(name, dict(cols), ts))
        else:
            eng.push(name, dict(cols), ts)
        eng.run()
    return eng, qs


def _check(queries: list[str], seed: int, via_prepare: bool = False) -> Engine:
    pushes = _pushes(seed)
    until = int(max(ts[-1] for _, _, ts in pushes)) + 25
    eng, qs = _run(queries, pushes, via_prepare)
    eng.heartbeat(until)
    eng.run()
    ref = Reference()
    for s in STREAMS:
        ref.execute(s)
    names = [ref.execute(q) for q in queries]
    for name, cols, ts in pushes:
        ref.push(name, _rows(cols), ts.tolist())
    for q, name in zip(qs, names):
        compare(ref.results(name, until), [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()])
    return eng


#: a tumbling window joined with its own MAX (NEXMark q7's shape): one WindowExtremeJoinOp reading seller and price
EXTREME = ("SELECT ISTREAM(X.seller, X.price) FROM A [RANGE 10 SLIDE 10] X, "
           "(SELECT MAX(price) AS m FROM A [RANGE 10 SLIDE 10]) M WHERE X.price = M.m")
NARROW = [
    "SELECT a, s FROM S WHERE b > 0.5",                                  # a selection keeping some columns
    "SELECT a, b * 2 AS x FROM S",                                       # a computing projection on S itself
    "SELECT ISTREAM(P.id, P.name) FROM P [RANGE 10 SLIDE 10], A [RANGE 10 SLIDE 10] WHERE P.id = A.seller",
    "SELECT ISTREAM(DISTINCT P.name) FROM P [RANGE 6], A [RANGE 6] WHERE P.id = A.seller AND A.price > 2",
    EXTREME,
    # a conjunct over both sides: run above it, on seller, which the operator then picks though none outputs it
    EXTREME.replace("X.seller, X.price", "X.price").replace("X.price = M.m", "X.price = M.m AND X.seller < M.m"),
]


@pytest.mark.parametrize("query", NARROW)
@pytest.mark.parametrize("seed", [1, 2])
def test_narrow_plans_match_the_reference(query: str, seed: int) -> None:
    _check([query], seed)


@pytest.mark.parametrize("seed", [3, 4])
def test_narrow_and_wide_readers_of_one_stream(seed: int) -> None:
    """A query reading every column of S beside one reading two: S's batches keep every column."""
    _check(["SELECT a, s FROM S WHERE b > 0.5", "SELECT * FROM S WHERE a % 2 = 0", NARROW[2]], seed)


def test_prepare_and_apply_give_what_push_gives() -> None:
    _check(NARROW, 5, via_prepare=True)


def _source_batches(eng: Engine, name: str) -> list[Batch]:
    return [b for b in eng.source_queue(name)._items if isinstance(b, Batch)]


@pytest.mark.parametrize("via_prepare", [False, True])
def test_an_unread_column_is_a_filler_counted_as_no_bytes(via_prepare: bool) -> None:
    eng = Engine()
    for s in STREAMS:
        eng.execute(s)
    eng.execute("SELECT a, s FROM S WHERE b > 0.5")       # reads a, b and s of S: t, e and ok are unread
    pushed = _pushes(6, 1)[0]
    name, cols, ts = pushed
    assert name == "S"
    if via_prepare:
        eng.apply("S", eng.prepare("S", dict(cols), ts))
    else:
        eng.push("S", dict(cols), ts)
    (b,) = _source_batches(eng, "S")
    for j, c in enumerate(["a", "b", "s"]):
        assert b.cols[j] is cols[c]
    for j in (3, 4, 5):
        assert b.cols[j] is not cols[SCHEMAS["S"][j][0]] and not b.cols[j].flags.owndata
        assert len(b.cols[j]) == len(ts) and b.cols[j].dtype == cols[SCHEMAS["S"][j][0]].dtype
    read = Batch(b.ts, b.sign, b.cols[:3])
    assert eng.source_queue("S").bytes == read.nbytes
    assert cols["e"][0] in WORDS.tolist()                # the caller's arrays are left as they were


def test_a_query_registered_later_reads_real_values() -> None:
    """After pushes that carried fillers for a narrow query, a query reading every column registers: the
    pushes after it reach it in full (what it reads from before registration is nothing: contract,
    "Registration time"), and the narrow query's results stay right."""
    pushes = [p for p in _pushes(7, 16) if p[0] == "S"]
    eng = Engine()
    for s in STREAMS:
        eng.execute(s)
    narrow = eng.execute("SELECT a, s FROM S WHERE b > 0.5")
    half = len(pushes) // 2
    for name, cols, ts in pushes[:half]:
        eng.push(name, dict(cols), ts)
    assert any(not b.cols[4].flags.owndata for b in _source_batches(eng, "S"))     # fillers were in the queue
    wide = eng.execute("SELECT * FROM S WHERE ok")
    for name, cols, ts in pushes[half:]:
        eng.push(name, dict(cols), ts)
        eng.run()
    eng.run()
    want = [(int(t), r) for _, cols, ts in pushes[half:] for t, r in zip(ts.tolist(), _rows(cols)) if r["ok"]]
    got = [(e.ts, e.row) for e in wide.drain()]
    assert got == want
    want_narrow = [(int(t), {"a": r["a"], "s": r["s"]}) for _, cols, ts in pushes
                   for t, r in zip(ts.tolist(), _rows(cols)) if r["b"] > 0.5]
    assert [(e.ts, e.row) for e in narrow.drain()] == want_narrow


@pytest.mark.parametrize("query", ["SELECT * FROM S WHERE b > 0.5", "SELECT ISTREAM(a, COUNT(*) AS n) FROM S [RANGE 5] "
                                   "GROUP BY a", "SELECT a, s FROM S WHERE b > 0.5 UNION ALL SELECT a, e FROM S"])
def test_a_reader_that_may_read_every_column_gets_them_all(query: str) -> None:
    """A selection keeping every column, an operator of another kind (here the pushed projection below the
    window reads only ``a``, but a projection's reads are narrowed only for the columns it names), a union:
    the queued batch holds exactly the caller's arrays for every column any reader reads, fillers only
    for the others, and the results still match the reference."""
    eng = _check([query], 8)
    name, cols, ts = next(p for p in _pushes(9, 3) if p[0] == "S")
    eng.push("S", dict(cols), ts + 10_000)
    (b,) = _source_batches(eng, "S")[-1:]
    from dsms.operators.columns_read import columns_read
    read = set()
    for op in eng.ops:
        for side, r in enumerate(op.readers):
            if r.queue is eng.source_queue("S"):
                got = columns_read(op, side)
                read |= set(range(6)) if got is None else got
    assert read, "some operator reads S"
    for j, (c, _) in enumerate(SCHEMAS["S"]):
        assert (b.cols[j] is cols[c]) == (j in read), (j, c, read)


@pytest.mark.parametrize("query, unread", [(EXTREME, ("item",)), (NARROW[5], ("item",))])
def test_a_window_joined_with_its_extreme_reads_only_the_columns_it_picks(query: str, unread: tuple) -> None:
    """NEXMark q7's operator (``WindowExtremeJoinOp``) reads the columns it picks and nothing else: a column it
    does not pick is a filler in A's queue (q7: Bid's channel and url, two string columns sampled for their
    bytes at every push before), one read above it is not; the results match the reference."""
    eng = _check([query], 10)
    assert any(op.kind == "window_extreme_join" for op in eng.ops), "the plan this test is about"
    name, cols, ts = next(p for p in _pushes(11, 3) if p[0] == "A")
    eng.push("A", dict(cols), ts + 10_000)
    (b,) = _source_batches(eng, "A")[-1:]
    for j, (c, _) in enumerate(SCHEMAS["A"]):
        assert (b.cols[j] is cols[c]) == (c not in unread), (c, unread)
