"""``Engine.run``'s first step when one operator alone has input waiting (``Engine._one_step``, issue 15: the
usual push cycle at 1,000 events a push): it makes the runs ``_steps`` would have made, in the same order, with
the same budget, and stops where ``_steps`` stops (an output queue at its capacity, ``max_steps``)."""

from __future__ import annotations

import numpy as np
import pytest

from dsms import Engine


def _engine(policy: str) -> tuple[Engine, object]:
    eng = Engine({"policy": policy})
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    q = eng.execute("SELECT a + b AS s FROM S WHERE a > 1")      # a selection, then a projection
    return eng, q


def _push(eng: Engine, t: int, n: int = 6) -> None:
    a = np.arange(n, dtype=np.int64)
    eng.push("S", {"a": a, "b": 10 * a}, np.full(n, t, dtype=np.int64))


@pytest.mark.parametrize("policy", ["fifo", "chain", "round_robin", "greedy", "chain_flush"])
def test_a_push_cycle_runs_each_operator_once_and_the_answers_are_the_rows_kept(policy: str) -> None:
    eng, q = _engine(policy)
    sel, proj = eng.ops
    for t in range(1, 4):
        _push(eng, t)
        eng.heartbeat(t)
        assert eng.run() == 2                      # the selection (one step alone), then the projection
        assert (sel.batches_in, proj.batches_in) == (t, t)
    assert [(e.ts, e.row["s"]) for e in q.drain()] == [(t, 11 * a) for t in range(1, 4) for a in range(2, 6)]


def test_an_output_at_its_capacity_stops_the_step_until_it_is_read() -> None:
    eng, q = _engine("chain")
    sel, proj = eng.ops
    eng.set(sel.output.id, "capacity", 1)
    _push(eng, 1)
    assert eng.run() == 2
    eng.set(proj.output.id, "capacity", 1)
    _push(eng, 2)
    assert eng.run() == 1                          # the selection ran; the projection's output is full
    assert proj.output.tuples >= 1 and proj.ready()
    q.drain()
    assert eng.run() == 1 and not proj.ready()     # read: the projection runs
    assert [e.row["s"] for e in q.drain()] == [22, 33, 44, 55]


def test_max_steps_and_a_deadline_keep_their_limits() -> None:
    eng, q = _engine("chain")
    _push(eng, 1)
    assert eng.run(max_steps=1) == 1 and q.drain() == []
    assert eng.run(max_steps=1) == 1 and len(q.drain()) == 4
    _push(eng, 2)
    assert eng.run(deadline=0.0) == 1              # a deadline already passed: one step, as before
    assert eng.run() == 1 and len(q.drain()) == 4


def test_a_query_that_has_not_read_its_results_holds_its_only_operator_at_the_capacity() -> None:
    """A selection read by its query alone (its ISTREAM is no operator): with the query's results unread and
    the queue at its capacity, the one operator with input is not run."""
    eng = Engine({"policy": "chain"})
    eng.execute("REGISTER STREAM S (a INT, b INT)")
    q = eng.execute("SELECT a FROM S WHERE a > 1")
    (sel,) = eng.ops
    eng.set(sel.output.id, "capacity", 2)
    _push(eng, 1)
    assert eng.run() == 1
    _push(eng, 2)
    assert eng.run() == 0 and sel.ready()
    assert [e.ts for e in q.drain()] == [1] * 4
    assert eng.run() == 1 and [e.ts for e in q.drain()] == [2] * 4
