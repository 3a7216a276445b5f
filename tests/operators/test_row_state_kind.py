"""The ``kind`` knob of DISTINCT's and the set operations' row state (issue 14 item 3): a switch to a Bloom
filter under load, at a future instant, loses nothing that was exact (with a filter too large to collide,
the output equals the exact run's, element for element); the switch back waits for the filter to empty;
bad knob values are refused and change nothing; a small filter does err, and says so in approximation()."""

from __future__ import annotations

import random

import pytest

from control_tables import ControlTableError
from dsms import Engine

SCHEMA = "REGISTER STREAM S (a INT, s STRING); REGISTER STREAM T (a INT, s STRING)"


def _rows(seed: int, n: int, keys: int = 40) -> list[dict]:
    rng = random.Random(seed)
    return [{"a": rng.randrange(keys), "s": rng.choice("xyz")} for _ in range(n)]


def _run(cql: str, switches: dict[int, dict], seed: int = 1, n: int = 3000, batch: int = 50, entity="distinct"):
    """Run ``cql`` over S and T fed in batches; before batch i, write the knobs ``switches[i]``."""
    eng = Engine()
    eng.execute(SCHEMA)
    q = eng.execute(cql)
    syn = eng.registry.entities(entity)[0].synopses[0]
    rs, rt = _rows(seed, n), _rows(seed + 100, n)
    seen = []
    for i in range(0, n, batch):
        for k, v in switches.get(i // batch, {}).items():
            eng.registry.set(syn.id, k, v)
        eng.push("S", rs[i:i + batch], ts=list(range(i, i + batch)))
        eng.push("T", rt[i:i + batch], ts=list(range(i, i + batch)))
        eng.run()
        seen.append(syn.get("in_effect"))
    eng.heartbeat(n + 10**4)
    eng.run()
    return q.drain(), seen, eng.registry.entities(entity)[0]


@pytest.mark.parametrize("cql, entity", [
    ("SELECT DISTINCT a, s FROM S [RANGE 300]", "distinct"),
    ("SELECT a, s FROM S [RANGE 300] EXCEPT SELECT a, s FROM T [RANGE 100]", "set_op"),
    ("SELECT a, s FROM S [RANGE 300] INTERSECT SELECT a, s FROM T [RANGE 100]", "set_op"),
    ("SELECT a, s FROM S [RANGE 300] EXCEPT ALL SELECT a, s FROM T [RANGE 100]", "set_op"),
])
def test_switching_to_bloom_and_back_under_load_loses_nothing(cql, entity):
    exact, _, _ = _run(cql, {}, entity=entity)
    big = {"fp_rate": 1e-9, "bloom_rows": 100_000}                  # no collisions among 120 distinct rows
    got, seen, op = _run(cql, {10: {**big, "kind": "bloom"}, 30: {"kind": "exact"}}, entity=entity)
    assert got == exact
    assert seen[9] == "exact" and seen[10] == "bloom"
    assert "exact" in seen[30:]                                      # back once the filter emptied
    assert op.approximation() is None


def test_the_switch_waits_for_the_next_instant():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, s STRING)")
    eng.execute("SELECT DISTINCT a FROM S [RANGE 100]")
    op = eng.registry.entities("distinct")[0]
    eng.push("S", [{"a": 1, "s": "x"}], ts=[5])
    eng.run()
    op.switch_kind("bloom")                                          # what a memory-budget enforcer calls
    assert op.synopses[0].get("kind") == "bloom" and op.synopses[0].get("in_effect") == "exact"
    eng.push("S", [{"a": 1, "s": "x"}], ts=[5])                      # the same instant: still exact
    eng.run()
    assert op.kind_in_effect() == "exact"
    eng.push("S", [{"a": 2, "s": "x"}], ts=[6])
    eng.run()
    assert op.kind_in_effect() == "bloom"


def test_a_small_filter_errs_and_says_so():
    exact, _, _ = _run("SELECT DISTINCT a, s FROM S [RANGE 300]", {})
    got, _, op = _run("SELECT DISTINCT a, s FROM S [RANGE 300]",
                      {0: {"fp_rate": 0.5, "bloom_rows": 4, "kind": "bloom"}})
    assert got != exact
    a = op.approximation()
    assert a is not None and a.rel_error > 0.3


@pytest.mark.parametrize("attr, value", [("kind", "reservoir"), ("kind", "sketch"), ("kind", 3),
                                         ("fp_rate", 0.0), ("fp_rate", 1.0), ("fp_rate", -0.1),
                                         ("bloom_rows", 0), ("memory", -1)])
def test_bad_knob_values_are_refused_and_change_nothing(attr, value):
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, s STRING)")
    eng.execute("SELECT DISTINCT a FROM S [RANGE 10]")
    op = eng.registry.entities("distinct")[0]
    syn = op.synopses[0]
    before = syn.get()
    with pytest.raises(ControlTableError, match=attr):
        eng.registry.set(syn.id, attr, value)
    assert syn.get() == before and op.pending_kind is None


def test_unknown_kind_through_switch_kind_is_refused():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, s STRING)")
    eng.execute("SELECT DISTINCT a FROM S [RANGE 10]")
    op = eng.registry.entities("distinct")[0]
    with pytest.raises(ValueError, match="unknown synopsis kind 'reservoir'"):
        op.switch_kind("reservoir")
    assert op.synopses[0].get("kind") == "exact"


def test_insert_only_input_gets_a_plain_filter_that_cannot_switch_back():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, s STRING)")
    q = eng.execute("SELECT DISTINCT a FROM S")
    op = eng.registry.entities("distinct")[0]
    eng.push("S", [{"a": i % 7, "s": "x"} for i in range(20)], ts=list(range(20)))
    eng.run()
    op.switch_kind("bloom")
    eng.push("S", [{"a": i % 11, "s": "x"} for i in range(20)], ts=list(range(20, 40)))
    eng.heartbeat(100)
    eng.run()
    assert sorted(e.row["a"] for e in q.drain()) == list(range(11))
    assert not op.table.counting
    with pytest.raises(ValueError, match="never empties"):
        op.switch_kind("exact")
    assert op.synopses[0].get("kind") == "bloom"


def test_the_filter_holds_the_same_rows_in_less_memory():
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, s STRING)")
    q = eng.execute("SELECT DISTINCT a FROM S [RANGE 1000000]")
    op = eng.registry.entities("distinct")[0]
    syn = op.synopses[0]
    n = 50_000
    eng.push("S", [{"a": i, "s": "x"} for i in range(n)], ts=list(range(n)))
    eng.run()
    exact_bytes = syn.get("bytes")
    eng.registry.set(syn.id, "bloom_rows", n)
    op.switch_kind("bloom")
    eng.push("S", [{"a": i, "s": "x"} for i in range(n - 10, n + 10)], ts=[n] * 20)   # 10 old rows, 10 new
    eng.heartbeat(n + 1)
    eng.run()
    assert syn.get("in_effect") == "bloom"
    assert syn.get("bytes") * 2.5 < exact_bytes      # 2-byte counters, 9.6 per row at 1%, against ~58 bytes
    assert sorted(e.row["a"] for e in q.drain() if e.ts == n) == list(range(n, n + 10))


def _turnover_run(switches: dict[int, str], periods: int = 30) -> tuple[list, list]:
    """DISTINCT over a join of tumbling windows whose periods hold distinct rows (NEXMark q8's shape): at each
    end the join deletes a period's pairs as the arrays it inserted them with, and inserts the next period's,
    so the exact table holds them uncoded (``RowCounts.turnover``); the kind is switched before the periods
    in ``switches``. Returns the output, and per period whether rows were held uncoded just before."""
    eng = Engine()
    eng.execute(SCHEMA)
    q = eng.execute("SELECT DISTINCT P.a, P.s FROM S [RANGE 100 SLIDE 100] P, T [RANGE 100 SLIDE 100] Q "
                    "WHERE P.a = Q.a")
    op = eng.registry.entities("distinct")[0]
    eng.registry.set(op.synopses[0].id, "fp_rate", 1e-9)
    eng.registry.set(op.synopses[0].id, "bloom_rows", 100_000)
    held = []
    for p in range(periods):
        held.append(getattr(op.table, "uncoded", None) is not None)
        if p in switches:
            op.switch_kind(switches[p])
        rows = [{"a": p * 150 + i, "s": "xyz"[i % 3]} for i in range(160)]    # a row twice in no period
        eng.push("S", rows, ts=[100 * p + 1 + i // 2 for i in range(160)])
        eng.push("T", rows[::2] + rows[::4], ts=[100 * p + 1 + i // 2 for i in range(120)])
        eng.heartbeat(100 * p + 99)
        eng.run()
    eng.heartbeat(100 * periods + 1000)
    eng.run()
    return q.drain(), held


def test_a_switch_while_rows_are_held_uncoded_loses_none():
    """The rows an exact table holds uncoded go into the filter at a switch to Bloom (``RowCounts.settle``); the
    filter drains back to exact at the next window end: the output equals the run with no switch."""
    exact, held = _turnover_run({})
    assert held[5] and held[20]                     # the path this test is about is taken
    got, held = _turnover_run({8: "bloom", 16: "exact"})
    assert held[8]                                  # the switch to bloom finds rows held uncoded
    assert got == exact

