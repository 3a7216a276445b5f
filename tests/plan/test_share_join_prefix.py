"""Join order for sharing (``dsms/plan/rules/share_join_prefix.py``): a join chain whose join another query
already computes starts with that join and reads it, one JoinOp for both; the answers stay the reference
evaluator's (tests/oracle), also after one of the queries sharing it is dropped."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import apply, compare
from oracle.reference import Reference

from dsms import Engine
from dsms.operators.join import JoinOp

CATALOG = ("REGISTER STREAM S (a INT, b INT, c STRING)", "REGISTER STREAM T (a INT, d FLOAT)",
           "REGISTER STREAM U (a INT, b INT)", "REGISTER RELATION R (a INT, e STRING)")
PAIR = "SELECT x.a, x.b, y.d FROM S [RANGE 20] x, T [RANGE 20] y WHERE x.a = y.a"
# the same join (other aliases, the equality written the other way round) as the second and third FROM items
TRIPLE = ("SELECT u.b, s2.c, t2.d FROM U [RANGE 30] u, S [RANGE 20] s2, T [RANGE 20] t2 "
          "WHERE u.b = s2.b AND t2.a = s2.a")


def actions(seed: int, n: int = 60, until: int = 120) -> list:
    """Pushes to S, T and U and updates of R at increasing timestamps, small domains so that joins match."""
    rng = random.Random(seed)
    out, ts = [], 0
    for _ in range(n):
        ts += rng.randint(0, 3)
        if ts >= until - 1:
            break
        which = rng.choice("STUR")
        if which == "S":
            out.append(("push", "S", [{"a": rng.randint(0, 3), "b": rng.randint(0, 3), "c": rng.choice("xyz")}], [ts]))
        elif which == "T":
            out.append(("push", "T", [{"a": rng.randint(0, 3), "d": rng.choice([0.5, 1.0, 2.5])}], [ts]))
        elif which == "U":
            out.append(("push", "U", [{"a": rng.randint(0, 3), "b": rng.randint(0, 3)}], [ts]))
        else:
            out.append(("update", "R", [{"a": rng.randint(0, 3), "e": rng.choice("pq")}], [], ts))
        if rng.random() < 0.2:
            out.append(("run",))
    return out


def reference(statements: list[str], query: str, acts: list, until: int = 120) -> list:
    ref = Reference()
    for s in (*CATALOG, *statements):
        ref.execute(s)
    name = ref.execute(query)
    for a in acts:
        apply(ref, a)
    return ref.results(name, until)


def elements(q) -> list:
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()]


def engine() -> Engine:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    return eng


def joins(eng: Engine) -> list[JoinOp]:
    return [op for op in eng.ops if isinstance(op, JoinOp)]


def finish(eng: Engine, acts: list, until: int = 120) -> None:
    for a in acts:
        apply(eng, a)
    eng.heartbeat(until)
    eng.run()


def test_a_three_way_join_starts_with_the_join_another_query_has():
    eng = engine()
    pair = eng.execute(PAIR)
    triple = eng.execute(TRIPLE)
    assert len(joins(eng)) == 2, eng.explain(triple.id)          # 3 without sharing: S ⋈ T once
    shared = [op for op in joins(eng) if op.owners == {pair.id, triple.id}]
    assert len(shared) == 1 and shared[0].output._reader_count() == 2
    assert "[shared by" in eng.explain(triple.id)
    ids = [e["id"] for e in eng.entities()]
    assert ids.count(shared[0].id) == 1                            # one control table for the shared join
    acts = actions(1)
    finish(eng, acts)
    compare(reference([], PAIR, acts), elements(pair))
    compare(reference([], TRIPLE, acts), elements(triple))


def test_a_join_written_the_other_way_round_is_shared():
    eng = engine()
    pair = eng.execute(PAIR)
    text = "SELECT y2.d, x2.c FROM T [RANGE 20] y2, S [RANGE 20] x2 WHERE y2.a = x2.a AND x2.b > y2.d"
    mirrored = eng.execute(text)
    assert len(joins(eng)) == 1, eng.explain(mirrored.id)
    assert joins(eng)[0].owners == {pair.id, mirrored.id}
    acts = actions(7)
    finish(eng, acts)
    compare(reference([], PAIR, acts), elements(pair))
    compare(reference([], text, acts), elements(mirrored))


def test_without_a_shared_join_the_from_order_stays():
    eng = engine()
    q = eng.execute(TRIPLE)
    alone = joins(eng)
    assert len(alone) == 2
    assert alone[0].detail == "b#0 = b#2", eng.explain(q.id)       # U ⋈ S first, as written


def test_a_chain_whose_first_join_is_shared_is_left_alone():
    eng = engine()
    eng.execute("SELECT * FROM U [RANGE 30] u, S [RANGE 20] s WHERE u.b = s.b")
    q = eng.execute(TRIPLE)
    assert len(joins(eng)) == 2, eng.explain(q.id)                 # U ⋈ S shared, then T


def test_after_input_a_later_query_builds_its_own():
    """Sharing a stateful join needs no input since it was built (docs/architecture.md), so the order is
    not changed for a join that cannot be shared any more."""
    eng = engine()
    pair = eng.execute(PAIR)
    finish(eng, actions(2)[:5], until=3)
    triple = eng.execute(TRIPLE)
    assert len(joins(eng)) == 3
    assert all(op.owners in ({pair.id}, {triple.id}) for op in joins(eng))


def test_after_the_shared_join_each_next_item_has_a_key_to_what_is_joined():
    """R joins U alone: after S ⋈ T, FROM order would join R with no key; U comes first, then R."""
    eng = engine()
    pair = eng.execute(PAIR)
    text = ("SELECT r.e, u.b, s.c, t.d FROM R r, U [RANGE 30] u, S [RANGE 20] s, T [RANGE 20] t "
            "WHERE r.a = u.a AND u.b = s.b AND s.a = t.a")
    q = eng.execute(text)
    assert len(joins(eng)) == 3, eng.explain(q.id)                # 4 without sharing
    assert [op.owners for op in joins(eng)].count({pair.id, q.id}) == 1
    assert not [op for op in joins(eng) if "cross product" in op.detail]
    acts = actions(5)
    finish(eng, acts)
    compare(reference([], text, acts), elements(q))


def test_a_shared_prefix_of_three_items_is_read_whole():
    """The other query joins S, T and U: the chain starts with S ⋈ T, extends with U (also shared), then R."""
    eng = engine()
    three = ("SELECT x.a, y.d, z.b FROM S [RANGE 20] x, T [RANGE 20] y, U [RANGE 30] z "
             "WHERE x.a = y.a AND z.b = x.b")
    four = ("SELECT r.e, u.b, s.c, t.d FROM R r, U [RANGE 30] u, S [RANGE 20] s, T [RANGE 20] t "
            "WHERE r.a = u.a AND u.b = s.b AND s.a = t.a")
    a = eng.execute(three)
    q = eng.execute(four)
    assert len(joins(eng)) == 3, eng.explain(q.id)                # 5 without sharing
    assert [op.owners for op in joins(eng)].count({a.id, q.id}) == 2
    assert "$" not in eng.explain(q.id)                            # labels name the widened join's columns
    acts = actions(6)
    finish(eng, acts)
    compare(reference([], three, acts), elements(a))
    compare(reference([], four, acts), elements(q))


def test_explain_of_a_query_shows_the_order_it_would_get():
    eng = engine()
    written = eng.execute("EXPLAIN " + TRIPLE)["explain"]
    eng.execute(PAIR)
    shared = eng.execute("EXPLAIN " + TRIPLE)["explain"]

    def streams(text: str) -> list[str]:
        return [ln.split()[-1] for ln in text.splitlines() if ln.strip().startswith("stream:")]
    assert streams(written) == ["u", "s", "t"]
    assert streams(shared) == ["s", "t", "u"]


@pytest.mark.parametrize("drop", ["pair", "triple"])
def test_dropping_one_query_leaves_the_other_its_join(drop):
    eng = engine()
    pair = eng.execute(PAIR)
    triple = eng.execute(TRIPLE)
    shared = [op for op in joins(eng) if len(op.owners) == 2]
    assert len(shared) == 1
    acts = actions(3)
    half = len(acts) // 2
    for a in acts[:half]:
        apply(eng, a)
    eng.run()
    gone, kept, text = (pair, triple, TRIPLE) if drop == "pair" else (triple, pair, PAIR)
    eng.drop(gone.id)
    assert shared[0] in eng.ops and shared[0].owners == {kept.id}
    assert shared[0].id in [e["id"] for e in eng.entities()]
    finish(eng, acts[half:])
    compare(reference([], text, acts), elements(kept))
    eng.drop(kept.id)
    assert not joins(eng) and shared[0].id not in [e["id"] for e in eng.entities()]


Q9_VIEWS = [
    "REGISTER VIEW AB AS SELECT x.a AS id, x.b AS price, y.d AS t FROM S [RANGE 40] x, T [RANGE 40] y "
    "WHERE x.a = y.a",
    "REGISTER VIEW M AS SELECT id, MAX(price) AS maxp FROM AB GROUP BY id",
    "REGISTER VIEW W AS SELECT X.id AS id, MIN(X.t) AS t FROM AB X, M WHERE X.id = M.id AND X.price = M.maxp "
    "GROUP BY X.id",
]
Q9 = ("SELECT X.id, X.price, X.t FROM AB X, W, M "
      "WHERE X.id = W.id AND X.t = W.t AND X.id = M.id AND X.price = M.maxp")


def test_nexmark_q9_shape_computes_the_join_with_the_maximum_once():
    """NEXMark q9 (bench/nexmark_queries.py): the query joins the view with its per-id maximum as the view W
    does; it reads W's join and adds one join of its own."""
    eng = engine()
    for v in Q9_VIEWS:
        eng.execute(v)
    before = len(joins(eng))
    q = eng.execute(Q9)
    assert len(joins(eng)) == before + 1, eng.explain(q.id)        # +2 without sharing
    acts = actions(4, n=90)
    finish(eng, acts)
    compare(reference(Q9_VIEWS, Q9, acts), elements(q))


ITEMS = {"u": "U [RANGE 30] u", "s": "S [RANGE 20] s", "t": "T [RANGE 20] t", "r": "R r"}
CONDS = ["u.b = s.b", "t.a = s.a", "s.a = t.a", "r.a = u.a", "t.d > 0.5", "s.c <> r.e"]


@settings(max_examples=12, deadline=None)
@given(order=st.permutations(list(ITEMS)), conds=st.permutations(CONDS), shared=st.sampled_from(
    ["SELECT * FROM S [RANGE 20] x, T [RANGE 20] y WHERE x.a = y.a",
     "SELECT * FROM T [RANGE 20] y, S [RANGE 20] x WHERE y.a = x.a",
     "SELECT * FROM U [RANGE 30] p, S [RANGE 20] q WHERE p.b = q.b",
     "SELECT * FROM R z, U [RANGE 30] w WHERE w.a = z.a"]), seed=st.integers(0, 10**6))
def test_any_from_order_gives_the_reference_answer(order, conds, shared, seed):
    """Four items in any FROM order, the conjuncts in any order, beside a query whose join is one of the
    chain's: the chain may be reordered to share it, and both answers are the reference evaluator's."""
    query = (f"SELECT u.b, s.c, t.d, r.e FROM {', '.join(ITEMS[k] for k in order)} "
             f"WHERE {' AND '.join(conds[:5])}")
    eng = engine()
    first = eng.execute(shared)
    q = eng.execute(query)
    acts = actions(seed)
    finish(eng, acts)
    compare(reference([], shared, acts), elements(first))
    compare(reference([], query, acts), elements(q))
