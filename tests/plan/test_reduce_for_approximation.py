"""Static approximation (digest-004 R-APX-02; issue 14 item 5): ``APPROXIMATE (WINDOW f, SAMPLE g)`` on
REGISTER QUERY shrinks windows and lowers sample rates, except where R-APX-02a forbids it (under duplicate
elimination, on the right of a negation); the reduced query answers exactly as the same query written with
the smaller windows."""

from __future__ import annotations

import random

import pytest

from dsms import Engine
from dsms.errors import CQLError
from dsms.plan import logical as L


def _windows(node) -> list[tuple]:
    out = []
    if isinstance(node, L.Window):
        out.append((node.wkind, node.range, node.rows, node.slide))
    if isinstance(node, L.Sample):
        out.append(("SAMPLE", node.percent))
    for c in node.children:
        out += _windows(c)
    return out


def _plan(cql: str) -> list[tuple]:
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT); REGISTER STREAM T (a INT, b INT)")
    return _windows(eng.execute(cql).node)


@pytest.mark.parametrize("reduced, expected", [
    ("SELECT a FROM S [RANGE 100] APPROXIMATE (WINDOW 0.5)", [("RANGE", 50, None, None)]),
    ("SELECT a FROM S [RANGE 100 SLIDE 80] APPROXIMATE (WINDOW 0.5)", [("RANGE", 50, None, 50)]),
    ("SELECT a FROM S [ROWS 10] APPROXIMATE (WINDOW 0.25)", [("ROWS", None, 2, None)]),
    ("SELECT a FROM S [PARTITION BY a ROWS 9] APPROXIMATE (WINDOW 0.5)", [("ROWS", None, 4, None)]),
    ("SELECT a FROM S [NOW] APPROXIMATE (WINDOW 0.5)", [("RANGE", 1, None, None)]),
    ("SELECT COUNT(*) FROM S SAMPLE(40) APPROXIMATE (SAMPLE 0.5)", [("UNBOUNDED", None, None, None),
                                                                   ("SAMPLE", 20.0)]),
    # exceptions: duplicate elimination above the window ...
    ("SELECT DISTINCT a FROM S [RANGE 100] APPROXIMATE (WINDOW 0.5)", [("RANGE", 100, None, None)]),
    ("SELECT COUNT(DISTINCT a) FROM S [RANGE 100] APPROXIMATE (WINDOW 0.5)", [("RANGE", 100, None, None)]),
    ("SELECT a FROM S [RANGE 100] UNION SELECT a FROM T [RANGE 10] APPROXIMATE (WINDOW 0.5)",
     [("RANGE", 100, None, None), ("RANGE", 10, None, None)]),
    # ... and the right of a negation (the left side is reduced)
    ("SELECT a FROM S [RANGE 100] EXCEPT ALL SELECT a FROM T [RANGE 10] APPROXIMATE (WINDOW 0.5)",
     [("RANGE", 50, None, None), ("RANGE", 10, None, None)]),
    ("SELECT a FROM S [RANGE 100] WHERE a NOT IN (SELECT a FROM T [RANGE 10]) APPROXIMATE (WINDOW 0.5)",
     [("RANGE", 50, None, None), ("RANGE", 10, None, None)]),
    ("SELECT a FROM S [RANGE 100] WHERE a IN (SELECT a FROM T [RANGE 10]) APPROXIMATE (WINDOW 0.5)",
     [("RANGE", 50, None, None), ("RANGE", 5, None, None)]),
])
def test_what_is_reduced_and_what_is_not(reduced, expected):
    assert _plan(f"REGISTER QUERY q AS {reduced}") == expected


def test_a_reduced_query_answers_as_the_smaller_query_written_out():
    rng = random.Random(4)
    rows = [{"a": rng.randrange(10), "b": rng.randrange(100)} for _ in range(600)]
    ts = sorted(rng.randrange(2000) for _ in rows)
    outs = []
    for cql in ("REGISTER QUERY q AS SELECT a, SUM(b) AS s FROM S [RANGE 400] GROUP BY a "
                "APPROXIMATE (WINDOW 0.25)",
                "REGISTER QUERY q AS SELECT a, SUM(b) AS s FROM S [RANGE 100] GROUP BY a"):
        eng = Engine()
        eng.execute("REGISTER STREAM S (a INT, b INT)")
        q = eng.execute(cql)
        eng.push("S", rows, ts=ts)
        eng.heartbeat(10_000)
        eng.run()
        outs.append(q.drain())
    assert outs[0] == outs[1] and len(outs[0]) > 100


def test_the_query_records_its_reduction():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    q = eng.execute("REGISTER QUERY q AS SELECT a FROM S [RANGE 8] APPROXIMATE (WINDOW 0.5, SAMPLE 0.1)")
    assert q.reduction == {"window": 0.5, "sample": 0.1}
    assert eng.execute("SELECT a FROM S [RANGE 8]").reduction == {}


@pytest.mark.parametrize("clause, words", [
    ("APPROXIMATE (WINDOW 0)", r"must be in \(0, 1\]"),
    ("APPROXIMATE (WINDOW 1.5)", r"must be in \(0, 1\]"),
    ("APPROXIMATE (SAMPLE 0.5, SAMPLE 0.2)", "SAMPLE twice"),
    ("APPROXIMATE (ROWS 0.5)", "not 'ROWS'"),
])
def test_bad_reductions_are_refused(clause, words):
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    with pytest.raises(CQLError, match=words):
        eng.execute(f"REGISTER QUERY q AS SELECT a FROM S [RANGE 8] {clause}")
    assert eng.catalog.get("q") is None
