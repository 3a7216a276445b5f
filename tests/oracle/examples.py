"""The papers' worked examples as data: input, CQL, and the expected result derived by hand from the digests.

One source of truth for two tests: ``tests/oracle/test_reference.py`` checks the reference evaluator against these
expectations (so that the oracle is trustworthy) and ``tests/test_worked_examples.py`` checks the engine.
Expected values come from the digests or from hand derivation under SPEC section 3, never from program output.
Where a paper's example conflicts with SPEC, SPEC wins and the ``note`` says why.

Sources: digest-004 section 3 (E3-E6, E8.1), digest-002a sections 3.2, 3.4-3.6, 3.12, digest-003 section 3.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# ------------------------------------------------------------------------------------------------ helpers


@dataclass(frozen=True)
class Check:
    """One query over an example's input: the expected (ts, sign, row) list and the result kind."""

    query: str
    expected: list
    kind: str                       # "stream" | "relation"
    note: str = ""


@dataclass(frozen=True)
class Example:
    id: str
    source: str                     # digest and section
    statements: tuple               # catalog, views, named queries (registered before the checked query)
    actions: tuple                  # ("push", name, rows, ts) | ("update", name, ins, dels, ts) | ("heartbeat", h)
    until: int                      # final heartbeat: results for every instant below it
    checks: tuple = field(default_factory=tuple)
    note: str = ""


def stream(*elements):
    """Expected stream elements from (ts, row) pairs: every element has sign +1."""
    return [(ts, 1, dict(row)) for ts, row in elements]


def changes(snapshots: dict):
    """Expected relation changelog from its contents: ``{τ: [row, ...]}`` sets the relation from τ on (so list
    ``τ: []`` where it becomes empty). The changelog is the bag difference between successive contents."""
    out, prev = [], Counter()
    for tau in sorted(snapshots):
        cur = Counter(tuple(sorted(r.items())) for r in snapshots[tau])
        for key, n in (cur - prev).items():
            out.extend([(tau, 1, dict(key))] * n)
        for key, n in (prev - cur).items():
            out.extend([(tau, -1, dict(key))] * n)
        prev = cur
    return out


def col(name, values):
    """Rows of a one-column relation: ``col("e", "aab")`` or ``col("n", [3])``."""
    return [{name: v} for v in values]


def times(n, row):
    return [dict(row) for _ in range(n)]


def logical(name, triples, column="e"):
    """Push actions for a thesis logical stream {(e, t, n)}: n copies of e at instant t (digest-002a 3.4).

    With ``[NOW]`` the window relation is then the thesis's snapshot at t, and ``[RANGE w]`` is its time window
    ω^time_w (instants t̂-w+1..t̂, the same elements as SPEC's τ-w < ts <= τ)."""
    out = []
    for e, t, n in triples:
        out.append(("push", name, [{column: e}] * n, t))
    return out


def interleave(*action_lists):
    """Merge per-input action lists by timestamp (stable), a legal arrival order for the engine."""
    tagged = [(a[-1], i, k, a) for i, acts in enumerate(action_lists) for k, a in enumerate(acts)]
    return tuple(a for _, _, _, a in sorted(tagged, key=lambda x: (x[0], x[1], x[2])))


# ------------------------------------------------------------------------------------------------ digest-004

REQUESTS = "REGISTER STREAM Requests (client_id INT, domain STRING, URL STRING)"

_E31_DATA = [
    (1, 1, "stanford.edu", "http://cs.stanford.edu/a"),
    (5, 2, "berkeley.edu", "http://www.berkeley.edu/"),
    (10, 1, "stanford.edu", "http://www.stanford.edu/x"),
    (20, 3, "stanford.edu", "http://cs.stanford.edu/b"),
    (30, 2, "stanford.edu", "http://cs.stanford.edu/c"),
    (40, 4, "stanford.edu", "http://www.stanford.edu/y"),
]
_Q1 = "Select Count(*) From Requests S [Range 24 Preceding] Where S.domain = 'stanford.edu'"

E3_1 = Example(
    id="digest-004 E3.1 Q1 count over RANGE",
    source="digest-004 section 3 E3.1 (P1 section 2.1 Q1)",
    statements=(REQUESTS,),
    actions=tuple(("push", "Requests", [{"client_id": c, "domain": d, "URL": u}], ts) for ts, c, d, u in _E31_DATA),
    until=70,
    note=(
        "Timestamps are hours, so '1 Day' is written RANGE 24. The digest computes with the closed window "
        "[τ-24, τ]; SPEC's RANGE is half-open (τ-24 < ts <= τ), so the expiries are the digest's 'half-open' line: "
        "25, 34, 44, 54, 64. The digest's ⟨0,0⟩ and final ⟨65,0⟩ rows do not exist: SPEC says an aggregate "
        "without GROUP BY over an empty relation yields no row, so at 64 the count row is deleted, not set to 0."
    ),
    checks=(
        Check(_Q1, changes({1: col("count", [1]), 10: col("count", [2]), 20: col("count", [3]),
                            25: col("count", [2]), 30: col("count", [3]), 34: col("count", [2]),
                            40: col("count", [3]), 44: col("count", [2]), 54: col("count", [1]), 64: []}),
              "relation", "Q1 returns a singleton relation by default (aggregate: no implicit ISTREAM)"),
        Check(f"ISTREAM({_Q1})",
              stream(*[(t, {"count": n}) for t, n in
                       [(1, 1), (10, 2), (20, 3), (25, 2), (30, 3), (34, 2), (40, 3), (44, 2), (54, 1)]]),
              "stream", "no ⟨0,0⟩ and no ⟨64,0⟩: the empty window has no count row"),
        Check(f"DSTREAM({_Q1})",
              stream(*[(t, {"count": n}) for t, n in
                       [(10, 1), (20, 2), (25, 3), (30, 2), (34, 3), (40, 2), (44, 3), (54, 2), (64, 1)]]),
              "stream", "the digest's ⟨1,0⟩ does not exist (no count row before the first request)"),
    ),
)

_E32_DATA = [
    (1, 1, "stanford.edu", "http://cs.stanford.edu/1"),
    (2, 1, "stanford.edu", "http://cs.stanford.edu/2"),
    (3, 1, "google.com", "http://www.google.com/"),
    (4, 1, "stanford.edu", "http://www.stanford.edu/a"),
    (5, 1, "stanford.edu", "http://cs.stanford.edu/3"),
    (6, 1, "google.com", "http://www.google.com/"),
    (7, 1, "stanford.edu", "http://cs.stanford.edu/4"),
    (8, 1, "stanford.edu", "http://www.stanford.edu/b"),
    (9, 1, "stanford.edu", "http://cs.stanford.edu/5"),
    (10, 1, "stanford.edu", "http://cs.stanford.edu/6"),
    (11, 1, "stanford.edu", "http://www.stanford.edu/c"),
    (12, 1, "google.com", "http://www.google.com/"),
    (13, 1, "stanford.edu", "http://cs.stanford.edu/7"),
    (14, 2, "stanford.edu", "http://cs.stanford.edu/x"),
    (15, 1, "stanford.edu", "http://www.stanford.edu/d"),
]


def _count_series(values, first=1):
    """Changelog of a one-row COUNT relation whose value at τ = first + i is values[i]."""
    snaps, prev = {}, None
    for i, v in enumerate(values):
        if v != prev:
            snaps[first + i] = col("count", [v])
            prev = v
    return changes(snaps)


_Q2 = """Select Count(*)
From Requests S
[Partition By S.client_id
Rows 10 Preceding
Where S.domain = 'stanford.edu']
Where S.URL Like 'http://cs.stanford.edu/%'"""

E3_2 = Example(
    id="digest-004 E3.2 Q2 partitioned ROWS with window-internal WHERE",
    source="digest-004 section 3 E3.2 (P1 section 2.1 Q2), pitfalls P-1 and P-2",
    statements=(REQUESTS,),
    actions=tuple(("push", "Requests", [{"client_id": c, "domain": d, "URL": u}], ts) for ts, c, d, u in _E32_DATA),
    until=20,
    note="The two wrong implementations of the digest are written as the CQL that means them, with their own "
         "expected values; the correct query must give 7 at τ=15, where both wrong readings give 6.",
    checks=(
        Check(_Q2, _count_series([1, 2, 2, 2, 3, 3, 4, 4, 5, 6, 6, 6, 7, 8, 7]), "relation",
              "correct: filter inside the window, last 10 per client, then the outer LIKE"),
        Check("Select Count(*) From Requests S [Partition By S.client_id Rows 10] "
              "Where S.domain = 'stanford.edu' And S.URL Like 'http://cs.stanford.edu/%'",
              _count_series([1, 2, 2, 2, 3, 3, 4, 4, 5, 6, 5, 4, 5, 6, 6]), "relation",
              "the digest's wrong answer 1 (domain filter after windowing) is what this other query means"),
        Check("Select Count(*) From Requests S [Rows 10 Where S.domain = 'stanford.edu'] "
              "Where S.URL Like 'http://cs.stanford.edu/%'",
              _count_series([1, 2, 2, 2, 3, 3, 4, 4, 5, 6, 6, 6, 7, 7, 6]), "relation",
              "the digest's wrong answer 2 (no partitioning) is what this other query means"),
    ),
)

_E33_REQ = [
    (1, 7, "amazon.com", "http://amazon.com/book"),
    (2, 1500, "amazon.com", "http://amazon.com/cd"),
    (3, 8, "newshop.com", "http://newshop.com/p"),
    (4, 9, "stanford.edu", "http://www.stanford.edu/"),
    (6, 7, "amazon.com", "http://amazon.com/book"),
    (8, 10, "amazon.com", "http://amazon.com/dvd"),
]
_Q3_INNER = ("Select client_id, URL From Requests S{w}, Domains R "
             "Where S.domain = R.domain And R.type = 'commerce'")
_Q3 = "Select T.URL From ({inner}) T Sample(100) Where T.client_id Between 1 And 1000"

E3_3 = Example(
    id="digest-004 E3.3 Q3 derived stream, Sample(100), relation updates",
    source="digest-004 section 3 E3.3 (P1 section 2.1 Q3), pitfalls P-4, P-5, P-9",
    statements=(REQUESTS, "REGISTER RELATION Domains (domain STRING, type STRING)"),
    actions=interleave(
        [("push", "Requests", [{"client_id": c, "domain": d, "URL": u}], ts) for ts, c, d, u in _E33_REQ],
        [("update", "Domains", [{"domain": "amazon.com", "type": "commerce"},
                                {"domain": "stanford.edu", "type": "education"}], [], 0),
         ("update", "Domains", [{"domain": "newshop.com", "type": "commerce"}], [], 5),
         ("update", "Domains", [], [{"domain": "amazon.com", "type": "commerce"}], 7)],
    ),
    until=12,
    note="Sample(100) keeps every element, so the result is deterministic (the digest's suggestion). The parser "
         "accepts SAMPLE percentages in (0, 100], so the digest's Sample(0) variant is not expressible.",
    checks=(
        Check(_Q3.format(inner=_Q3_INNER.format(w="")),
              stream((1, {"URL": "http://amazon.com/book"}), (5, {"URL": "http://newshop.com/p"}),
                     (6, {"URL": "http://amazon.com/book"})), "stream",
              "at 5 the old τ=3 request joins the new Domains row; at 6 the duplicate is emitted again (bag "
              "ISTREAM); the delete at 7 retracts nothing; client 1500 fails BETWEEN"),
        Check(_Q3_INNER.format(w=""),
              stream((1, {"client_id": 7, "URL": "http://amazon.com/book"}),
                     (2, {"client_id": 1500, "URL": "http://amazon.com/cd"}),
                     (5, {"client_id": 8, "URL": "http://newshop.com/p"}),
                     (6, {"client_id": 7, "URL": "http://amazon.com/book"})), "stream",
              "the inner query alone: the derived stream T"),
        Check(_Q3.format(inner=_Q3_INNER.format(w=" [Now]")),
              stream((1, {"URL": "http://amazon.com/book"}), (6, {"URL": "http://amazon.com/book"})), "stream",
              "the Unbounded->Now rewrite is wrong here because Domains is not static: ⟨5,...⟩ is lost"),
    ),
)

E4 = Example(
    id="digest-004 E4 SELECT * FROM S reproduces S",
    source="digest-004 section 3 E4 (R-CQL-15)",
    statements=("REGISTER STREAM S (v STRING)",),
    actions=(("push", "S", [{"v": "a"}], 1), ("push", "S", [{"v": "b"}, {"v": "b"}], 2),
             ("push", "S", [{"v": "a"}], 4)),
    until=6,
    checks=(Check("SELECT * FROM S", stream((1, {"v": "a"}), (2, {"v": "b"}), (2, {"v": "b"}), (4, {"v": "a"})),
                  "stream", "bag semantics: both b's, and a again at 4"),),
)

_E5_ACTIONS = tuple(("push", "S", [{"v": v}], t) for t, v in [(1, "a"), (2, "b"), (3, "c"), (4, "a")])
E5 = Example(
    id="digest-004 E5 ISTREAM/DSTREAM/RSTREAM over ROWS 2",
    source="digest-004 section 3 E5",
    statements=("REGISTER STREAM S (v STRING)",),
    actions=_E5_ACTIONS,
    until=10,
    note="SPEC: RSTREAM emits at the instants of input elements only (1..4), not at every instant up to 9 as "
         "STREAM would; the digest's list stops at 4 and so agrees.",
    checks=(
        Check("ISTREAM(SELECT * FROM S [ROWS 2])",
              stream((1, {"v": "a"}), (2, {"v": "b"}), (3, {"v": "c"}), (4, {"v": "a"})), "stream"),
        Check("DSTREAM(SELECT * FROM S [ROWS 2])", stream((3, {"v": "a"}), (4, {"v": "b"})), "stream",
              "a DSTREAM element carries sign +1 (it is a stream element)"),
        Check("RSTREAM(SELECT * FROM S [ROWS 2])",
              stream((1, {"v": "a"}), (2, {"v": "a"}), (2, {"v": "b"}), (3, {"v": "b"}), (3, {"v": "c"}),
                     (4, {"v": "c"}), (4, {"v": "a"})), "stream"),
        Check("SELECT RSTREAM(*) FROM S [ROWS 2]",
              stream((1, {"v": "a"}), (2, {"v": "a"}), (2, {"v": "b"}), (3, {"v": "b"}), (3, {"v": "c"}),
                     (4, {"v": "c"}), (4, {"v": "a"})), "stream", "the SELECT RSTREAM(...) form"),
        Check("SELECT * FROM S [ROWS 2]",
              stream((1, {"v": "a"}), (2, {"v": "b"}), (3, {"v": "c"}), (4, {"v": "a"})), "stream",
              "no explicit operator: implicit ISTREAM, the same as ISTREAM(...)"),
        Check("SELECT * FROM S",
              stream((1, {"v": "a"}), (2, {"v": "b"}), (3, {"v": "c"}), (4, {"v": "a"})), "stream",
              "default window UNBOUNDED, implicit ISTREAM"),
    ),
)

E6 = Example(
    id="digest-004 E6 NOW-window pitfall",
    source="digest-004 section 3 E6, pitfall P-5",
    statements=("REGISTER STREAM S (v STRING)",),
    actions=(("push", "S", [{"v": "a"}], 1), ("push", "S", [{"v": "a"}], 2)),
    until=5,
    checks=(
        Check("ISTREAM(SELECT * FROM S [RANGE UNBOUNDED])", stream((1, {"v": "a"}), (2, {"v": "a"})), "stream"),
        Check("ISTREAM(SELECT * FROM S [NOW])", stream((1, {"v": "a"})), "stream",
              "R(1) = R(2) = {a}: the second a is lost, so Unbounded->Now needs a key"),
        Check("RSTREAM(SELECT * FROM S [NOW])", stream((1, {"v": "a"}), (2, {"v": "a"})), "stream"),
        Check("SELECT * FROM S [NOW]", stream((1, {"v": "a"})), "stream", "implicit ISTREAM"),
    ),
)

E8_1 = Example(
    id="digest-004 E8.1 MAX over ROWS 3, the maximum expires",
    source="digest-004 section 3 E8.1",
    statements=("REGISTER STREAM R (A INT)",),
    actions=tuple(("push", "R", [{"A": v}], t) for t, v in enumerate([5, 3, 7, 2, 1, 0], start=1)),
    until=10,
    checks=(
        Check("SELECT MAX(A) FROM R [ROWS 3]",
              changes({1: col("max", [5]), 3: col("max", [7]), 6: col("max", [2])}), "relation"),
        Check("ISTREAM(SELECT MAX(A) FROM R [ROWS 3])",
              stream((1, {"max": 5}), (3, {"max": 7}), (6, {"max": 2})), "stream"),
    ),
)

# ------------------------------------------------------------------------------------------------ digest-002a

S1_TRIPLES = [("c", 1, 1), ("a", 2, 3), ("a", 3, 3), ("b", 3, 1), ("a", 4, 3), ("b", 4, 1), ("c", 4, 1),
              ("b", 5, 2), ("b", 6, 2)]
S2_TRIPLES = [("b", 2, 2), ("b", 3, 2), ("a", 4, 1), ("b", 4, 1), ("c", 4, 1), ("a", 5, 2), ("b", 5, 1),
              ("a", 6, 1), ("c", 6, 2)]
_S12 = ("REGISTER STREAM S1 (e STRING)", "REGISTER STREAM S2 (e STRING)")
_S12_ACTIONS = interleave(logical("S1", S1_TRIPLES), logical("S2", S2_TRIPLES))


def _e(table: dict, end: int | None = None):
    """Expected changelog of a one-column (e) relation from a thesis snapshot table {t: "aab"}."""
    snaps = {t: col("e", s) for t, s in table.items()}
    if end is not None:
        snaps[end] = []
    return changes(snaps)


def _view_checks(prefix, pairs):
    """Relation-valued checks through views: ``REGISTER VIEW`` bodies are always relations (SPEC section 3),
    so the thesis's snapshot tables can be compared with the view's changelog, ``SELECT * FROM view``."""
    stmts, checks = [], []
    for i, (body, expected, note) in enumerate(pairs, start=1):
        name = f"{prefix}{i}"
        stmts.append(f"REGISTER VIEW {name} AS {body}")
        checks.append(Check(f"SELECT * FROM {name}", expected, "relation", f"{body}  -- {note}"))
    return tuple(stmts), tuple(checks)


_THESIS_NOTE = (
    "A logical element (e, t, n) of the thesis is pushed as n copies of e at t, so S [NOW] is the thesis's snapshot "
    "at t and S [RANGE w] its ω^time_w: the thesis's window t̂-w+1 <= t <= t̂ is the same set of instants as SPEC's "
    "τ-w < ts <= τ, so no boundary conversion is needed. Non-aggregate queries over streams are implicit ISTREAMs "
    "under SPEC; to compare with the thesis's snapshot tables the bodies are registered as views (relations)."
)

_V_STMTS, _V_CHECKS = _view_checks("v", [
    ("SELECT * FROM S1 [NOW]", _e({1: "c", 2: "aaa", 3: "aaab", 4: "aaabc", 5: "bb", 6: "bb"}, 7),
     "Tab 8.1 snapshot of S1"),
    ("SELECT * FROM S2 [NOW]", _e({2: "bb", 3: "bb", 4: "abc", 5: "aab", 6: "acc"}, 7), "Tab 8.1 snapshot of S2"),
    ("SELECT * FROM S1 [NOW] WHERE e = 'a' OR e = 'c'", _e({1: "c", 2: "aaa", 3: "aaa", 4: "aaac"}, 5),
     "Tab 8.2 selection"),
    ("SELECT CASE WHEN e = 'b' THEN 'x' ELSE e END AS e FROM S1 [NOW]",
     _e({1: "c", 2: "aaa", 3: "aaax", 4: "aaaxc", 5: "xx", 6: "xx"}, 7), "Tab 8.3 map f(b)=x"),
    ("SELECT e FROM S1 [NOW] UNION ALL SELECT e FROM S2 [NOW]",
     _e({1: "c", 2: "aaabb", 3: "aaabbb", 4: "aaaabbcc", 5: "aabbb", 6: "abbcc"}, 7), "Tab 8.4 union"),
    ("SELECT DISTINCT e FROM S1 [NOW]", _e({1: "c", 2: "a", 3: "ab", 4: "abc", 5: "b", 6: "b"}, 7),
     "Tab 8.6 duplicate elimination"),
    ("SELECT e FROM S1 [NOW] EXCEPT ALL SELECT e FROM S2 [NOW]",
     _e({1: "c", 2: "aaa", 3: "aaa", 4: "aa", 5: "b", 6: "bb"}, 7), "Tab 8.7 difference (bag monus)"),
    ("SELECT e FROM S1 [RANGE 2]",
     _e({1: "c", 2: "aaac", 3: "aaaaaab", 4: "aaaaaabbc", 5: "aaabbbc", 6: "bbbb", 7: "bb"}, 8),
     "Tab 8.10 ω^time_2(S1); instant 7 exists although S1 ends at 6"),
    ("SELECT e FROM S1 [NOW] INTERSECT ALL SELECT e FROM S2 [NOW]", _e({3: "b", 4: "abc", 5: "b"}, 6),
     "3.6 intersection (bag min)"),
    ("(SELECT e FROM S1 [NOW] EXCEPT ALL SELECT e FROM S2 [NOW]) UNION ALL SELECT e FROM S2 [NOW]",
     _e({1: "c", 2: "aaabb", 3: "aaabb", 4: "aaabc", 5: "aabb", 6: "abbcc"}, 7),
     "3.6 max-union, as (S1 - S2) + S2 = max(m1, m2)"),
    ("SELECT e FROM S2 [NOW] EXCEPT ALL SELECT e FROM S1 [NOW]", _e({2: "bb", 3: "b", 4: "", 5: "aa", 6: "acc"}, 7),
     "3.6 S2 - S1"),
    ("SELECT e FROM S1 [NOW] WHERE e IN (SELECT e FROM S2 [NOW])", _e({3: "b", 4: "aaabc", 5: "bb"}, 6),
     "3.6 semi-join"),
    ("SELECT X.e FROM S1 [NOW] X WHERE EXISTS (SELECT * FROM S2 [NOW] Y WHERE Y.e = X.e)",
     _e({3: "b", 4: "aaabc", 5: "bb"}, 6), "3.6 semi-join as correlated EXISTS"),
    ("SELECT e FROM S1 [NOW] WHERE e NOT IN (SELECT e FROM S2 [NOW])",
     _e({1: "c", 2: "aaa", 3: "aaa", 4: "", 5: "", 6: "bb"}, 7), "3.6 anti-join (strict difference)"),
    ("SELECT X.e FROM S1 [NOW] X WHERE NOT EXISTS (SELECT * FROM S2 [NOW] Y WHERE Y.e = X.e)",
     _e({1: "c", 2: "aaa", 3: "aaa", 4: "", 5: "", 6: "bb"}, 7), "3.6 anti-join as correlated NOT EXISTS"),
    ("SELECT e FROM S1 [NOW] UNION SELECT e FROM S2 [NOW]",
     _e({1: "c", 2: "ab", 3: "ab", 4: "abc", 5: "ab", 6: "abc"}, 7), "3.6 δ(S1 ∪ S2): UNION removes duplicates"),
    ("SELECT e FROM S2 [RANGE 2]",
     _e({2: "bb", 3: "bbbb", 4: "abbbc", 5: "aaabbc", 6: "aaabcc", 7: "acc"}, 8), "3.6 ω^time_2(S2)"),
    ("SELECT e FROM S1 [RANGE 3]",
     _e({1: "c", 2: "aaac", 3: "a" * 6 + "bc", 4: "a" * 9 + "bbc", 5: "a" * 6 + "bbbbc", 6: "aaabbbbbc",
         7: "bbbb", 8: "bb"}, 9), "3.6 ω^time_3(S1)"),
    ("SELECT e FROM S1 [RANGE 2] WHERE e = 'a' OR e = 'c'",
     _e({1: "c", 2: "aaac", 3: "a" * 6, 4: "a" * 6 + "c", 5: "aaac"}, 6), "3.6 rule 10.8: σ(ω_2(S1))"),
    ("SELECT e FROM S1 [RANGE 2 WHERE e = 'a' OR e = 'c']",
     _e({1: "c", 2: "aaac", 3: "a" * 6, 4: "a" * 6 + "c", 5: "aaac"}, 6), "3.6 rule 10.8: ω_2(σ(S1)), equal"),
])

_CROSS = changes({
    2: times(6, {"l": "a", "r": "b"}),
    3: times(6, {"l": "a", "r": "b"}) + times(2, {"l": "b", "r": "b"}),
    4: [{"l": x, "r": y} for x in "aaabc" for y in "abc"],
    5: times(4, {"l": "b", "r": "a"}) + times(2, {"l": "b", "r": "b"}),
    6: times(2, {"l": "b", "r": "a"}) + times(4, {"l": "b", "r": "c"}),
    7: [],
})
_GROUPS = changes({
    1: [{"e": "c", "n": 1}],
    2: [{"e": "a", "n": 3}],
    3: [{"e": "a", "n": 3}, {"e": "b", "n": 1}],
    4: [{"e": "a", "n": 3}, {"e": "b", "n": 1}, {"e": "c", "n": 1}],
    5: [{"e": "b", "n": 2}],
    7: [],
})

THESIS_S1_S2 = Example(
    id="digest-002a 3.4-3.6 logical operators on S1, S2",
    source="digest-002a sections 3.4 (Tab 8.1-8.10), 3.6",
    statements=_S12 + _V_STMTS + (
        "REGISTER VIEW cross AS SELECT S1.e AS l, S2.e AS r FROM S1 [NOW], S2 [NOW]",
    ),
    actions=_S12_ACTIONS,
    until=10,
    note=_THESIS_NOTE + " Tab 8.5 (product) uses the digest's corrected values at t=2 and t=3 (n1·n2 copies).",
    checks=_V_CHECKS + (
        Check("SELECT * FROM cross", _CROSS, "relation", "Tab 8.5 product, corrected at t=2,3"),
        Check("SELECT e, COUNT(*) AS n FROM S1 [NOW] GROUP BY e", _GROUPS, "relation",
              "3.6 γ_{identity, COUNT}(S1)"),
        Check("SELECT COUNT(*) AS n FROM S1 [NOW]",
              changes({1: col("n", [1]), 2: col("n", [3]), 3: col("n", [4]), 4: col("n", [5]), 5: col("n", [2]),
                       7: []}), "relation", "3.6 α_COUNT(S1): no zero counts at t=0 or t>=7"),
        Check("RSTREAM(SELECT * FROM S1 [NOW] WHERE e = 'a' OR e = 'c')",
              stream(*[(t, {"e": x}) for t, s in {1: "c", 2: "aaa", 3: "aaa", 4: "aaac"}.items() for x in s]),
              "stream", "Tab 8.2 as a stream of snapshots: S1 has input at every instant 1..6"),
    ),
)

S3_DATA = [("c", 1), ("a", 2), ("b", 3), ("b", 4), ("a", 5), ("c", 6)]
_S3_STMTS, _S3_CHECKS = _view_checks("w", [
    ("SELECT e FROM S3 [ROWS 3]", _e({1: "c", 2: "ac", 3: "abc", 4: "abb", 5: "abb", 6: "abc"}),
     "Tab 8.12 ω^count_3; ⟨a,b,c⟩ for every t >= 6"),
    ("SELECT e FROM S3 [PARTITION BY g ROWS 1]", _e({1: "c", 2: "a", 3: "ab", 4: "ab", 5: "ab", 6: "cb"}),
     "Tab 8.13 partitioned window, update semantics"),
    ("SELECT e FROM S3 [ROWS 3] WHERE e <> 'b'", _e({1: "c", 2: "ac", 3: "ac", 4: "a", 5: "a", 6: "ac"}),
     "3.6 σ(ω^count_3(S3)): ⟨a⟩ at 4"),
    ("SELECT e FROM S3 [ROWS 3 WHERE e <> 'b']", _e({1: "c", 2: "ac", 3: "ac", 4: "ac", 5: "aac", 6: "aac"}),
     "3.6 ω^count_3(σ(S3)): ⟨c,a⟩ at 4; σ does not commute with a count window"),
])
THESIS_S3 = Example(
    id="digest-002a 3.5 count and partitioned windows on S3",
    source="digest-002a sections 3.5 (Tab 8.12, 8.13), 3.6 (count-window counter-example)",
    statements=("REGISTER STREAM S3 (e STRING, g INT)",) + _S3_STMTS,
    actions=tuple(("push", "S3", [{"e": e, "g": 1 if e in "ac" else 2}], t) for e, t in S3_DATA),
    until=10,
    note="The partition function f(e) = 1 for e in {a, c}, else 2, is a column g (PARTITION BY takes columns). "
         "Count windows keep their last state for ever (no expiry by time).",
    checks=_S3_CHECKS,
)

# 3.12 mini scenarios. Chronon = 1 second, so the windows are written in bare ticks (RANGE 5 HOURS = 18000
# units), except Q5 whose 2-day windows are far larger than the scenario anyway.
AUCTION = (
    "REGISTER STREAM OpenAuction (itemID INT, sellerID INT, start_price FLOAT)",
    "REGISTER STREAM ClosedAuction (itemID INT, buyerID INT)",
    "REGISTER STREAM Bid (itemID INT, bid_price FLOAT, bidderID INT)",
)


def _bid(t, item, price, bidder=0):
    return ("push", "Bid", [{"itemID": item, "bid_price": price, "bidderID": bidder}], t)


def _open(t, item, seller, price):
    return ("push", "OpenAuction", [{"itemID": item, "sellerID": seller, "start_price": price}], t)


def _close(t, item, buyer=0):
    return ("push", "ClosedAuction", [{"itemID": item, "buyerID": buyer}], t)


Q3_SHORT = Example(
    id="digest-002a 3.12 Q3 short auctions, window boundary",
    source="digest-002a sections 3.2 (Q3), 3.12",
    statements=AUCTION,
    actions=(_open(0, 1, 9, 5.0), _open(0, 2, 9, 6.0), _close(17999, 1), _close(18000, 2)),
    until=18005,
    note="PIPES gives ClosedAuction the now-window by default; SPEC's default is UNBOUNDED, so [NOW] is written. "
         "The thesis's O.* (it writes OpenAuction.*) names itemID O.itemID: the contract qualifies a name that "
         "occurs in more than one FROM item (ClosedAuction has itemID too). The result is a "
         "stream (implicit ISTREAM): the thesis's validity [17999, 18000) is the element at 17999.",
    checks=(
        Check("SELECT O.* FROM OpenAuction O [RANGE 18000], ClosedAuction C [NOW] WHERE O.itemID = C.itemID",
              stream((17999, {"O.itemID": 1, "sellerID": 9, "start_price": 5.0})), "stream",
              "item 2 closes exactly 5 h after opening: half-open, it does not qualify"),
    ),
)

_Q4_TEXT = ("SELECT itemID, bid_price FROM Bid [RANGE 600] "
            "WHERE bid_price = (SELECT MAX(bid_price) FROM BID [RANGE 600])")
Q4_HIGHEST = Example(
    id="digest-002a 3.12 Q4 highest bid, scalar subquery",
    source="digest-002a sections 3.2 (Q4), 3.12",
    statements=AUCTION + (f"REGISTER VIEW highest AS {_Q4_TEXT}",),
    actions=(_bid(0, 1, 10.0), _bid(1, 2, 30.0), _bid(2, 3, 20.0)),
    until=700,
    note="Under SPEC the query is an implicit ISTREAM (outer FROM has a stream, the outer block has no aggregate): "
         "it emits each new highest bid. The thesis's validity intervals are the relation, read through a view.",
    checks=(
        Check(_Q4_TEXT, stream((0, {"itemID": 1, "bid_price": 10.0}), (1, {"itemID": 2, "bid_price": 30.0}),
                               (601, {"itemID": 3, "bid_price": 20.0})), "stream"),
        Check("SELECT * FROM highest", changes({
            0: [{"itemID": 1, "bid_price": 10.0}], 1: [{"itemID": 2, "bid_price": 30.0}],
            601: [{"itemID": 3, "bid_price": 20.0}], 602: []}), "relation",
            "(1,10) on [0,1), (2,30) on [1,601), (3,20) on [601,602)"),
    ),
)

_CURRENT_PRICE = """REGISTER QUERY CurrentPrice AS
    SELECT P.itemID, P.price, O.sellerID AS sellerID
    FROM ((SELECT itemID, bid_price AS price FROM Bid WINDOW(RANGE 2 DAYS))
          UNION ALL
          (SELECT itemID, start_price AS price FROM OpenAuction WINDOW(RANGE 2 DAYS))) P,
         ClosedAuction C [NOW],
         OpenAuction O WINDOW(RANGE 2 DAYS)
    WHERE P.itemID = C.itemID AND C.itemID = O.itemID"""
Q5_CLOSING = Example(
    id="digest-002a 3.12 Q5 closing price, derived stream over UNION ALL",
    source="digest-002a sections 3.2 (Q5), 3.12",
    statements=AUCTION + (_CURRENT_PRICE,),
    actions=interleave([_open(0, 7, 3, 10.0), _open(1, 8, 4, 50.0)], [_bid(5, 7, 12.0, 100), _bid(8, 7, 15.0, 101)],
                       [_close(20, 7), _close(30, 8)]),
    until=40,
    note="Under SPEC the UNION ALL subquery P is a derived stream (implicit ISTREAM) read with the default "
         "UNBOUNDED window; every price here is within the 2 days, so this changes nothing. ClosedAuction gets "
         "[NOW] explicitly (PIPES's default), and so does CurrentPrice in ClosingPriceStream: with SPEC's default "
         "UNBOUNDED window the closing price would stay in the relation for ever instead of being valid at 20 only.",
    checks=(
        Check("SELECT * FROM CurrentPrice",
              stream((20, {"itemID": 7, "price": 12.0, "sellerID": 3}), (20, {"itemID": 7, "price": 15.0, "sellerID": 3}),
                     (20, {"itemID": 7, "price": 10.0, "sellerID": 3}), (30, {"itemID": 8, "price": 50.0, "sellerID": 4})),
              "stream"),
        Check("SELECT itemID, sellerID, MAX(P.price) AS price FROM CurrentPrice P [NOW] "
              "GROUP BY P.itemID, P.sellerID",
              changes({20: [{"itemID": 7, "sellerID": 3, "price": 15.0}], 21: [],
                       30: [{"itemID": 8, "sellerID": 4, "price": 50.0}], 31: []}), "relation",
              "ClosingPriceStream: (7,3,15) valid at 20 only, (8,4,50) at 30 only"),
    ),
)

Q6_HOT = Example(
    id="digest-002a 3.12 Q6 hot item, >= ALL",
    source="digest-002a sections 3.2 (Q6), 3.12",
    statements=AUCTION,
    actions=(_bid(0, 1, 1.0), _bid(1, 2, 1.0), _bid(2, 1, 1.0)),
    until=3700,
    note="RANGE 60 MINUTES is 3600 units with chronon = 1 s. The outer FROM reads an aggregate subquery, a "
         "relation, so the result is a relation.",
    checks=(
        Check("""SELECT itemID
FROM  (SELECT    B1.itemID AS itemID, COUNT(*) AS num
       FROM      Bid [RANGE 3600] B1
       GROUP BY B1.itemID)
WHERE num >= ALL(SELECT COUNT(*)
                  FROM Bid [RANGE 3600] B2
                  GROUP BY B2.itemID)""",
              changes({0: col("itemID", [1]), 1: col("itemID", [1, 2]), 2: col("itemID", [1]),
                       3600: col("itemID", [1, 2]), 3601: col("itemID", [1]), 3602: []}), "relation",
              "t=0 {1}; t=1 {1,2}; 2..3599 {1}; 3600 {1,2}; 3601 {1}; from 3602 nothing"),
    ),
)

_TUMBLE = ("SELECT itemID, bid_price FROM Bid WINDOW(RANGE 600 SLIDE 600) "
           "WHERE bid_price = (SELECT MAX(bid_price) FROM Bid WINDOW(RANGE 600 SLIDE 600))")
TUMBLING = Example(
    id="digest-002a 3.12 tumbling window (Example 17.1)",
    source="digest-002a sections 3.2 (Example 17.1), 2.5 R-W4, 3.12",
    statements=AUCTION + (f"REGISTER VIEW tumbling AS {_TUMBLE}",),
    actions=(_bid(5, 1, 10.0), _bid(700, 2, 20.0)),
    until=2000,
    note="The thesis's advance window changes at a-1, 2a-1, ... (ws(t̂) = ⌊(t̂+1)/a⌋·a - 1), so it gives [599,1199) "
         "and [1199,1799). SPEC evaluates RANGE T SLIDE S at the last multiple of S <= τ, so the window "
         "(0, 600] is visible on [600, 1200) and (600, 1200] on [1200, 1800): SPEC wins.",
    checks=(
        Check(_TUMBLE, stream((600, {"itemID": 1, "bid_price": 10.0}), (1200, {"itemID": 2, "bid_price": 20.0})),
              "stream"),
        Check("SELECT * FROM tumbling", changes({600: [{"itemID": 1, "bid_price": 10.0}],
                                                 1200: [{"itemID": 2, "bid_price": 20.0}], 1800: []}), "relation",
              "nothing before 600"),
    ),
)

AVG_SELLER = Example(
    id="digest-002a 3.12 average selling price, PARTITION BY .. ROWS 10 (Example 12.2)",
    source="digest-002a sections 3.2 (Example 12.2), 3.12",
    statements=("REGISTER STREAM ClosingPriceStream (sellerID INT, price FLOAT)",),
    actions=tuple(("push", "ClosingPriceStream", [{"sellerID": 1, "price": float(p)}], t)
                  for t, p in enumerate([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], start=1))
    + (("push", "ClosingPriceStream", [{"sellerID": 2, "price": 100.0}], 13),),
    until=20,
    checks=(
        Check("SELECT sellerID, AVG(price) FROM ClosingPriceStream WINDOW(PARTITION BY sellerID ROWS 10) "
              "GROUP BY sellerID",
              changes({**{t: [{"sellerID": 1, "avg": sum(range(max(1, t - 9), t + 1)) / min(t, 10)}]
                          for t in range(1, 13)},
                       13: [{"sellerID": 1, "avg": 7.5}, {"sellerID": 2, "avg": 100.0}]}), "relation",
              "after t12 seller 1's average is AVG(p3..p12) = 7.5; seller 2's partition is separate"),
    ),
)

# ------------------------------------------------------------------------------------------------ digest-003


def _scope_series(until, slide, size, last_ts):
    """COUNT/MIN/MAX over one element per instant 0..last_ts (value = ts): the scope bounds, from the digest's
    closed form scope(τ) = [max(0, e - ω + 1), e] with e the last slide instant (digest-003 R-LW-1)."""
    snaps = {}
    for tau in range(until):
        e = (tau // slide) * slide
        lo, hi = max(0, e - size + 1), min(e, last_ts)
        snaps[tau] = [{"n": hi - lo + 1, "lo": lo, "hi": hi}] if lo <= hi else []
    return changes(snaps)


_SCOPE_Q = "SELECT COUNT(*) AS n, MIN(v) AS lo, MAX(v) AS hi FROM Sc [{w}]"
SCOPE = Example(
    id="digest-003 3.2 scope function of sliding, tumbling and hopping windows",
    source="digest-003 section 3.2",
    statements=("REGISTER STREAM Sc (v INT)",),
    actions=tuple(("push", "Sc", [{"v": t}], t) for t in range(46)),
    until=46,
    note="One element per instant with value = ts, so MIN and MAX are the scope bounds and COUNT its extent. "
         "The digest's table values are spelled out in the first checks; they agree with SPEC's SLIDE rule.",
    checks=(
        Check(_SCOPE_Q.format(w="RANGE 10 SLIDE 5"),
              changes({0: [{"n": 1, "lo": 0, "hi": 0}], 5: [{"n": 6, "lo": 0, "hi": 5}],
                       10: [{"n": 10, "lo": 1, "hi": 10}], 15: [{"n": 10, "lo": 6, "hi": 15}],
                       20: [{"n": 10, "lo": 11, "hi": 20}], 25: [{"n": 10, "lo": 16, "hi": 25}],
                       30: [{"n": 10, "lo": 21, "hi": 30}], 35: [{"n": 10, "lo": 26, "hi": 35}],
                       40: [{"n": 10, "lo": 31, "hi": 40}], 45: [{"n": 10, "lo": 36, "hi": 45}]}), "relation",
              "ω=10, β=5: [0,0] [0,5] [1,10] [6,15] [11,20]; ts=3 visible from 5, gone at 15"),
        Check(_SCOPE_Q.format(w="RANGE 10 SLIDE 10"),
              changes({0: [{"n": 1, "lo": 0, "hi": 0}], 10: [{"n": 10, "lo": 1, "hi": 10}],
                       20: [{"n": 10, "lo": 11, "hi": 20}], 30: [{"n": 10, "lo": 21, "hi": 30}],
                       40: [{"n": 10, "lo": 31, "hi": 40}]}), "relation",
              "tumbling: [0,0] on 0..9, [1,10] on 10..19, [11,20] on 20..29, [21,30] at 30"),
        Check(_SCOPE_Q.format(w="RANGE 10 SLIDE 15"),
              changes({0: [{"n": 1, "lo": 0, "hi": 0}], 15: [{"n": 10, "lo": 6, "hi": 15}],
                       30: [{"n": 10, "lo": 21, "hi": 30}], 45: [{"n": 10, "lo": 36, "hi": 45}]}), "relation",
              "hopping: ts 1..5 and 16..20 are never in any state"),
        Check(_SCOPE_Q.format(w="RANGE 10"), _scope_series(46, 1, 10, 45), "relation",
              "ω=10, β=1: scope(5)=[0,5], scope(9)=[0,9], scope(10)=[1,10], scope(20)=[11,20]"),
    ),
)

READINGS = Example(
    id="digest-003 3.4 monotonic vs windowed selection",
    source="digest-003 section 3.4",
    statements=("REGISTER STREAM Readings (temp INT)",),
    actions=tuple(("push", "Readings", [{"temp": v}], t) for t, v in [(0, 31), (10, 25), (30, 35), (70, 40)]),
    until=140,
    checks=(
        Check("SELECT * FROM Readings WHERE temp >= 30",
              stream((0, {"temp": 31}), (30, {"temp": 35}), (70, {"temp": 40})), "stream", "Q2, append-only"),
        Check("SELECT * FROM Readings [RANGE 60 SLIDE 1] WHERE temp >= 30",
              stream((0, {"temp": 31}), (30, {"temp": 35}), (70, {"temp": 40})), "stream",
              "Q2' with implicit ISTREAM: the same insertions"),
        Check("DSTREAM(SELECT * FROM Readings [RANGE 60 SLIDE 1] WHERE temp >= 30)",
              stream((60, {"temp": 31}), (90, {"temp": 35}), (130, {"temp": 40})), "stream",
              "Q2' expirations, FIFO at ts + 60"),
    ),
)

TIES = Example(
    id="digest-003 3.5 ROWS tie-breaking by arrival order",
    source="digest-003 section 3.5",
    statements=("REGISTER STREAM S (v STRING)",
                "REGISTER VIEW rows4 AS SELECT * FROM S [ROWS 4]",
                "REGISTER VIEW rows3 AS SELECT * FROM S [ROWS 3]"),
    actions=(("push", "S", [{"v": "a"}, {"v": "b"}], 1), ("push", "S", [{"v": "c"}], 2),
             ("push", "S", [{"v": "d"}], 3), ("push", "S", [{"v": "e"}], 3)),
    until=6,
    note="SPEC breaks ties at one timestamp by arrival order, so ROWS 4 at τ=3 is {b,c,d,e} (the paper's formal "
         "formula would give only 3 tuples).",
    checks=(
        Check("SELECT * FROM rows4", changes({1: col("v", "ab"), 2: col("v", "abc"), 3: col("v", "bcde")}),
              "relation"),
        Check("SELECT * FROM rows3", changes({1: col("v", "ab"), 2: col("v", "abc"), 3: col("v", "cde")}),
              "relation"),
    ),
)

AGG_ROWS5 = Example(
    id="digest-003 3.8 SUM, MAX, AVG over ROWS 5",
    source="digest-003 section 3.8",
    statements=("REGISTER STREAM S (v INT)",),
    actions=tuple(("push", "S", [{"v": v}], t) for t, v in enumerate([3, 9, 2, 7, 5, 4, 1], start=1)),
    until=10,
    checks=(
        Check("SELECT SUM(v) AS s, MAX(v) AS m, AVG(v) AS a FROM S [ROWS 5]",
              changes({1: [{"s": 3, "m": 3, "a": 3.0}], 2: [{"s": 12, "m": 9, "a": 6.0}],
                       3: [{"s": 14, "m": 9, "a": 14 / 3}], 4: [{"s": 21, "m": 9, "a": 5.25}],
                       5: [{"s": 26, "m": 9, "a": 5.2}], 6: [{"s": 27, "m": 9, "a": 5.4}],
                       7: [{"s": 19, "m": 7, "a": 3.8}]}), "relation",
              "at 7 the maximum 9 is evicted: MAX must rescan; SUM stays INT, AVG is FLOAT"),
    ),
)


def _g(g, n, s, hi, lo):
    return {"g": g, "n": n, "s": s, "hi": hi, "lo": lo}


VANISHING = Example(
    id="digest-003 3.9 grouped aggregation with a vanishing group",
    source="digest-003 section 3.9",
    statements=("REGISTER STREAM S (g STRING, v INT)",),
    actions=(("push", "S", [{"g": "x", "v": 5}], 0), ("push", "S", [{"g": "y", "v": 2}], 1),
             ("push", "S", [{"g": "x", "v": 8}], 2), ("push", "S", [{"g": "x", "v": 1}], 3),
             ("heartbeat", 5)),
    until=8,
    note="Nothing arrives after τ=3; the rows at τ >= 4 are driven by heartbeats only.",
    checks=(
        Check("SELECT g, COUNT(*) AS n, SUM(v) AS s, MAX(v) AS hi, MIN(v) AS lo FROM S [RANGE 3] GROUP BY g",
              changes({0: [_g("x", 1, 5, 5, 5)], 1: [_g("x", 1, 5, 5, 5), _g("y", 1, 2, 2, 2)],
                       2: [_g("x", 2, 13, 8, 5), _g("y", 1, 2, 2, 2)], 3: [_g("x", 2, 9, 8, 1), _g("y", 1, 2, 2, 2)],
                       4: [_g("x", 2, 9, 8, 1)], 5: [_g("x", 1, 1, 1, 1)], 6: []}), "relation",
              "y vanishes at 4, x at 6"),
    ),
)

_SECTORS = [(1, "bank", 10), (2, "tel", 20), (3, "bank", 11), (4, "bank", 12), (5, "tel", 21), (6, "tel", 22),
            (7, "bank", 13), (8, "tel", 23)]
PARTITIONED = Example(
    id="digest-003 3.10 partitioned window, non-FIFO expiry",
    source="digest-003 section 3.10",
    statements=("REGISTER STREAM S (sector STRING, value INT)",
                "REGISTER VIEW p2 AS SELECT * FROM S [PARTITION BY sector ROWS 2]"),
    actions=tuple(("push", "S", [{"sector": s, "value": v}], t) for t, s, v in _SECTORS),
    until=12,
    checks=(
        Check("SELECT * FROM p2", changes({
            1: [{"sector": "bank", "value": 10}],
            2: [{"sector": "bank", "value": 10}, {"sector": "tel", "value": 20}],
            3: [{"sector": "bank", "value": v} for v in (10, 11)] + [{"sector": "tel", "value": 20}],
            4: [{"sector": "bank", "value": v} for v in (11, 12)] + [{"sector": "tel", "value": 20}],
            5: [{"sector": "bank", "value": v} for v in (11, 12)] + [{"sector": "tel", "value": v} for v in (20, 21)],
            6: [{"sector": "bank", "value": v} for v in (11, 12)] + [{"sector": "tel", "value": v} for v in (21, 22)],
            7: [{"sector": "bank", "value": v} for v in (12, 13)] + [{"sector": "tel", "value": v} for v in (21, 22)],
            8: [{"sector": "bank", "value": v} for v in (12, 13)] + [{"sector": "tel", "value": v} for v in (22, 23)],
        }), "relation", "final state bank {12, 13}, tel {22, 23}"),
        Check("DSTREAM(SELECT * FROM S [PARTITION BY sector ROWS 2])",
              stream((4, {"sector": "bank", "value": 10}), (6, {"sector": "tel", "value": 20}),
                     (7, {"sector": "bank", "value": 11}), (8, {"sector": "tel", "value": 21})), "stream",
              "eviction order ρ1, ρ2, ρ3, ρ5: ρ5 goes while the older ρ4 stays"),
    ),
)

_J = "SELECT S1.n AS l, S2.n AS r FROM S1 [RANGE 10], S2 [RANGE 20] WHERE S1.k = S2.k"
JOIN = Example(
    id="digest-003 3.11 windowed join over time-based windows",
    source="digest-003 section 3.11",
    statements=("REGISTER STREAM S1 (n STRING, k INT)", "REGISTER STREAM S2 (n STRING, k INT)"),
    actions=interleave([("push", "S1", [{"n": "a", "k": 1}], 1), ("push", "S1", [{"n": "e", "k": 1}], 5)],
                       [("push", "S2", [{"n": "b", "k": 1}], 2), ("push", "S2", [{"n": "d", "k": 2}], 3),
                        ("push", "S2", [{"n": "f", "k": 1}], 8)]),
    until=30,
    note="Output elements carry the instant at which the result appears (SPEC), not the paper's min timestamp.",
    checks=(
        Check(_J, stream((2, {"l": "a", "r": "b"}), (5, {"l": "e", "r": "b"}), (8, {"l": "a", "r": "f"}),
                         (8, {"l": "e", "r": "f"})), "stream"),
        Check(f"DSTREAM({_J})", stream((11, {"l": "a", "r": "b"}), (11, {"l": "a", "r": "f"}),
                                       (15, {"l": "e", "r": "b"}), (15, {"l": "e", "r": "f"})), "stream",
              "a expires at 11 (a∘f although emitted after e∘b), e at 15"),
    ),
)

_X = [{"x": v} for v in ("x1", "x2", "x3")]
_Y = [{"x": v} for v in ("y1", "y2")]
EQUIVALENCES = Example(
    id="digest-003 3.13 equivalence counter-examples",
    source="digest-003 section 3.13",
    statements=(
        "REGISTER STREAM S (id INT, temp INT)",
        "REGISTER STREAM S1 (x STRING)", "REGISTER STREAM S2 (x STRING)",
        "REGISTER VIEW sel_rows AS SELECT * FROM S [ROWS 2] WHERE temp >= 30",
        "REGISTER VIEW rows_sel AS SELECT * FROM S [ROWS 2 WHERE temp >= 30]",
        "REGISTER VIEW sel_range AS SELECT * FROM S [RANGE 2] WHERE temp >= 30",
        "REGISTER VIEW range_sel AS SELECT * FROM S [RANGE 2 WHERE temp >= 30]",
        "REGISTER VIEW union_rows AS SELECT x FROM S1 [ROWS 2] UNION ALL SELECT x FROM S2 [ROWS 2]",
        "REGISTER VIEW rows_union AS SELECT x FROM (SELECT x FROM S1 UNION ALL SELECT x FROM S2) U [ROWS 2]",
    ),
    actions=interleave(
        [("push", "S", [{"id": i, "temp": t}], i) for i, t in [(1, 35), (2, 20), (3, 31), (4, 10)]],
        [("push", "S1", [_X[0]], 1), ("push", "S1", [_X[1]], 3), ("push", "S1", [_X[2]], 5)],
        [("push", "S2", [_Y[0]], 2), ("push", "S2", [_Y[1]], 4)],
    ),
    until=8,
    note="Timestamps = ids; the union case uses the global arrival order x1, y1, x2, y2, x3 as timestamps 1..5, so "
         "the derived union stream has one element per instant and ROWS 2 over it is well defined.",
    checks=(
        Check("SELECT * FROM sel_rows", changes({1: [{"id": 1, "temp": 35}], 3: [{"id": 3, "temp": 31}]}),
              "relation", "σ(W_2(S)) = {(3,31)} at 4"),
        Check("SELECT * FROM rows_sel",
              changes({1: [{"id": 1, "temp": 35}], 3: [{"id": 1, "temp": 35}, {"id": 3, "temp": 31}]}),
              "relation", "W_2(σ(S)) = {(1,35), (3,31)} at 4: they differ"),
        Check("SELECT * FROM sel_range",
              changes({1: [{"id": 1, "temp": 35}], 3: [{"id": 3, "temp": 31}], 5: []}), "relation",
              "time window: σ and W commute, {(3,31)} at 4"),
        Check("SELECT * FROM range_sel",
              changes({1: [{"id": 1, "temp": 35}], 3: [{"id": 3, "temp": 31}], 5: []}), "relation"),
        Check("SELECT * FROM union_rows",
              changes({1: _X[:1], 2: _X[:1] + _Y[:1], 3: _X[:2] + _Y[:1], 4: _X[:2] + _Y, 5: _X[1:] + _Y}),
              "relation", "W_2(S1) ∪ W_2(S2) = {x2, x3, y1, y2}: 2n tuples"),
        Check("SELECT * FROM rows_union",
              changes({1: _X[:1], 2: _X[:1] + _Y[:1], 3: _Y[:1] + _X[1:2], 4: _X[1:2] + _Y[1:],
                       5: _Y[1:] + _X[2:]}), "relation", "W_2(S1 ∪ S2) = {y2, x3}: n tuples"),
    ),
)

UNION_MULT = Example(
    id="digest-003 3.14 windowed union multiplicities",
    source="digest-003 section 3.14",
    statements=("REGISTER STREAM S1 (x STRING)", "REGISTER STREAM S2 (x STRING)",
                "REGISTER VIEW u AS SELECT x FROM S1 [RANGE 2] UNION ALL SELECT x FROM S2 [RANGE 2]"),
    actions=(("push", "S1", [{"x": "x"}, {"x": "x"}], 1), ("push", "S2", [{"x": "x"}], 1),
             ("push", "S2", [{"x": "y"}], 2)),
    until=6,
    note="The paper keeps entries per (tuple, timestamp); a CQL relation has no timestamp column, so ⟨x,1,3⟩ is "
         "simply three copies of x.",
    checks=(Check("SELECT * FROM u", changes({1: col("x", "xxx"), 2: col("x", "xxxy"), 3: col("x", "y"), 4: []}),
                  "relation", "⟨x,3⟩ and ⟨y,1⟩ while both windows cover [1,2]"),),
)

UNION_MULT_B = Example(
    id="digest-003 3.14 windowed union multiplicities, S2's x at t=2",
    source="digest-003 section 3.14",
    statements=UNION_MULT.statements,
    actions=(("push", "S1", [{"x": "x"}, {"x": "x"}], 1), ("push", "S2", [{"x": "x"}, {"x": "y"}], 2)),
    until=6,
    checks=(Check("SELECT * FROM u", changes({1: col("x", "xx"), 2: col("x", "xxxy"), 3: col("x", "xy"), 4: []}),
                  "relation", "three x at τ=2, whatever their timestamps"),),
)

_DIFF_STMTS = ("REGISTER STREAM S1 (v STRING)", "REGISTER STREAM S2 (v STRING)",
               "REGISTER VIEW landmark AS SELECT v FROM S1 EXCEPT ALL SELECT v FROM S2",
               "REGISTER VIEW sliding AS SELECT v FROM S1 [RANGE 10] EXCEPT ALL SELECT v FROM S2 [RANGE 3]")
DIFFERENCE = Example(
    id="digest-003 3.15 windowed difference, landmark",
    source="digest-003 section 3.15",
    statements=_DIFF_STMTS,
    actions=(("push", "S1", [{"v": "c"}], 1), ("push", "S1", [{"v": "m"}], 2), ("push", "S2", [{"v": "m"}], 3),
             ("push", "S2", [{"v": "c"}], 4)),
    until=8,
    note="Landmark windows from 0 are UNBOUNDED windows (the default).",
    checks=(
        Check("SELECT * FROM landmark", changes({1: col("v", "c"), 2: col("v", "cm"), 3: col("v", "c"), 4: []}),
              "relation", "m⁻ at 3, c⁻ at 4: c inserted before m but removed after it"),
        Check("DSTREAM(SELECT v FROM S1 EXCEPT ALL SELECT v FROM S2)", stream((3, {"v": "m"}), (4, {"v": "c"})),
              "stream"),
    ),
)

DIFFERENCE_BAG = Example(
    id="digest-003 3.15 windowed difference, multiset case",
    source="digest-003 section 3.15",
    statements=_DIFF_STMTS,
    actions=(("push", "S1", [{"v": "x"}], 1), ("push", "S1", [{"v": "x"}], 2), ("push", "S2", [{"v": "x"}], 3),
             ("push", "S2", [{"v": "x"}], 4), ("push", "S1", [{"v": "x"}], 5)),
    until=8,
    checks=(Check("SELECT * FROM landmark",
                  changes({1: col("v", "x"), 2: col("v", "xx"), 3: col("v", "x"), 4: [], 5: col("v", "x")}),
                  "relation", "k = max(0, k1 - k2): 1, 2, 1, 0, 1"),),
)

DIFFERENCE_SLIDING = Example(
    id="digest-003 3.15 windowed difference, sliding windows revive a result",
    source="digest-003 section 3.15",
    statements=_DIFF_STMTS,
    actions=(("push", "S1", [{"v": "v"}], 1), ("push", "S2", [{"v": "v"}], 2)),
    until=15,
    checks=(
        Check("SELECT * FROM sliding", changes({1: col("v", "v"), 2: [], 5: col("v", "v"), 11: []}), "relation",
              "v⁻ at 2, v again at 5 when W2's v expires (2+3), gone at 11"),
        Check("SELECT v FROM S1 [RANGE 10] EXCEPT ALL SELECT v FROM S2 [RANGE 3]",
              stream((1, {"v": "v"}), (5, {"v": "v"})), "stream", "implicit ISTREAM of the set operation"),
    ),
)

ALL_EXAMPLES = [
    E3_1, E3_2, E3_3, E4, E5, E6, E8_1,
    THESIS_S1_S2, THESIS_S3, Q3_SHORT, Q4_HIGHEST, Q5_CLOSING, Q6_HOT, TUMBLING, AVG_SELLER,
    SCOPE, READINGS, TIES, AGG_ROWS5, VANISHING, PARTITIONED, JOIN, EQUIVALENCES, UNION_MULT, UNION_MULT_B,
    DIFFERENCE, DIFFERENCE_BAG, DIFFERENCE_SLIDING,
]


def cases():
    """(test id, example, check) for every check of every example."""
    out = []
    for ex in ALL_EXAMPLES:
        for i, ch in enumerate(ex.checks, start=1):
            out.append((f"{ex.id} [{i}] {ch.query.split(chr(10))[0][:60]}", ex, ch))
    return out
