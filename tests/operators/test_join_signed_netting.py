"""A join side held in the signed form (relations updated at random, a view's changes) nets each delete against
a held row with the very same values as it comes (``_Signed.claim``), the release's own inserts included,
instead of storing it and compacting later; and its keys of several INT columns are their packed int64 itself
when they fit, else dense ids (``JoinOp._int_codes``). Checked against the reference evaluator (tests/oracle)
on deletes on both sides, duplicate rows, a row inserted and deleted at one instant or within one release,
zeros of both signs, and keys at the int64 limits (which do not pack) mixed with keys that do."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.generators import check_query
from oracle.relation_updates import random_updates

from dsms import Engine
from dsms.operators.join import JoinOp

CATALOG = ("REGISTER RELATION R (a INT, b INT, v FLOAT)", "REGISTER RELATION Q (a INT, b INT, w STRING)")
QUERIES = [
    "SELECT X.a, X.b, X.v, Y.w FROM R X, Q Y WHERE X.a = Y.a AND X.b = Y.b",
    "SELECT X.a, X.v, Y.w FROM R X, Q Y WHERE X.a = Y.a AND X.b = Y.b AND X.v < 2.0",
    "SELECT X.a, X.b, Y.w FROM R X, Q Y WHERE X.a = Y.a",
]
# a MAX per key joined back on (key, max): the view's changes delete its old row at every change (NEXMark q9)
VIEWED = (["REGISTER VIEW M AS SELECT a, MAX(b) AS mb FROM R GROUP BY a"],
          "SELECT X.a, X.b, X.v, M.mb FROM R X, M WHERE X.a = M.a AND X.b = M.mb")

SMALL_KEYS = [0, 1, 3]
WIDE_KEYS = [0, 1, 3, 2**40, 2**63 - 1, -2**63, -1]     # the limits and negatives do not pack


def actions(seed: int, wide: bool, n: int = 50) -> tuple[list, int]:
    """Random updates of R and Q (``random_updates``)."""
    return random_updates(seed, WIDE_KEYS if wide else SMALL_KEYS, n)


def check(statements: list[str], query: str, acts: list, until: int) -> Engine:
    return check_query((*CATALOG, *statements), query, acts, until)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUERIES), st.integers(0, 2**32 - 1), st.booleans())
def test_relations_updated_at_random_join_as_the_reference_says(query, seed, wide):
    acts, until = actions(seed, wide)
    check([], query, acts, until)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_a_max_per_key_joined_back_joins_as_the_reference_says(seed, wide):
    acts, until = actions(seed, wide, n=70)
    check(*VIEWED, acts, until)


def test_netted_deletes_keep_the_signed_table_the_size_of_the_relation():
    """A relation whose rows are replaced at random many times: every delete finds its row, so the join's
    signed table holds the live rows only (no stored deletes waiting for a compaction) and the answer is
    the reference's."""
    rng = random.Random(7)
    live: list[dict] = []
    acts, ts = [], 0
    for i in range(400):
        ts += 1
        row = {"a": rng.randrange(50), "b": rng.randrange(3), "v": float(i)}
        gone = [live.pop(rng.randrange(len(live)))] if len(live) > 40 else []
        live.append(row)
        acts.append(("update", "R", [row], gone, ts))
        if i % 3 == 0:
            acts.append(("update", "Q", [{"a": rng.randrange(50), "b": rng.randrange(3), "w": "x"}], [], ts))
        if i % 7 == 0:
            acts.append(("run",))
    eng = check([], QUERIES[0], acts, ts + 2)
    join = next(op for op in eng.ops if isinstance(op, JoinOp))
    side = join.sides[0]
    assert side.signed() and side.table.negatives == 0
    assert len(side) == len(live)
