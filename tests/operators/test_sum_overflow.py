"""INT SUM outside int64 (SPEC section 4: an error naming the query and the column, never a wrapped value), in
the vectorised aggregate and the row-at-a-time one (dsms/operators/int_sums.py).

The expected result is the reference evaluator's exact changelog with the rows whose sum does not fit left
out: the engine must give exactly that (no wrapped value anywhere, no delete of a row never inserted), and
``drain`` must raise first, naming the query and the column.
"""

from __future__ import annotations

import pytest
from oracle.generators import Workload, compare, run_reference

from dsms import Engine
from dsms.errors import ResultOverflowError

M = 2**63 - 1
VALUES = [M, M, -5, 7, -M, -M, -M, 3, M, 1]


def workload(query: str) -> Workload:
    actions = tuple(("push", "S", [{"k": i % 2, "a": v}], [2 * i + 1]) for i, v in enumerate(VALUES))
    return Workload(("REGISTER STREAM S (k INT, a INT)",), query, actions, 60)


def fits(row: dict) -> bool:
    return all(not isinstance(v, int) or -(2**63) <= v < 2**63 for v in row.values())


@pytest.mark.parametrize("query", [
    "SELECT k, SUM(a) AS s FROM S [RANGE 6] GROUP BY k",                 # vectorised
    "SELECT SUM(a) AS s, COUNT(*) AS n FROM S [RANGE 6]",                # vectorised, no GROUP BY
    "SELECT k, SUM(a) AS s, MAX(a) AS m FROM S [RANGE 6] GROUP BY k",    # row-at-a-time (MAX)
    "SELECT SUM(DISTINCT a) AS s FROM S [ROWS 3]",                        # row-at-a-time (DISTINCT)
])
def test_int_sum_outside_int64_is_an_error_and_never_wrapped(query: str) -> None:
    w = workload(query)
    expected = [(t, s, row) for t, s, row in run_reference(w) if fits(row)]
    assert len(expected) < len(run_reference(w))          # the workload does overflow
    eng = Engine()
    eng.execute(w.statements[0])
    q = eng.execute(w.query)
    for _, name, rows, ts in w.actions:
        eng.push(name, rows, ts)
    eng.heartbeat(w.until)
    eng.run()
    with pytest.raises(ResultOverflowError, match=rf"query {q.id}, column SUM\(a\): the INT sum \d+ at ts \d+ "
                                                  "is outside int64"):
        q.drain()
    got = [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()]      # reported once; the rows follow
    compare(expected, got)
    (agg,) = [e for e in eng.entities(q.id) if e.get("kind") == "aggregate"]
    assert agg["int_overflows"] > 0
