"""``FROM a JOIN b ON c`` (and INNER JOIN, CROSS JOIN) means the comma join ``FROM a, b WHERE c``: the engine
runs the JOIN form and the reference evaluator the comma form, over the same random input, and they agree.

The parser reads the JOIN form as the comma form (docs/cql.md, "Joins"); giving the oracle the comma form
written by hand checks that reading, not only the join itself."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle.generators import CATALOG, Workload, compare, inputs, run_engine, run_reference

from dsms import CQLError, Engine

PAIRS = [
    ("SELECT S.a, S.b, T.d FROM S [RANGE 5] JOIN T [ROWS 3] ON S.a = T.a",
     "SELECT S.a, S.b, T.d FROM S [RANGE 5], T [ROWS 3] WHERE S.a = T.a"),
    ("SELECT s.a, R.e FROM S [RANGE 10] s INNER JOIN R ON s.a = R.a WHERE s.b > 0",
     "SELECT s.a, R.e FROM S [RANGE 10] s, R WHERE s.a = R.a AND s.b > 0"),
    ("SELECT R.e, P.g, COUNT(*) AS n FROM S [NOW] JOIN R ON S.a = R.a JOIN P ON R.e = P.e AND P.g > 0 "
     "GROUP BY R.e, P.g",
     "SELECT R.e, P.g, COUNT(*) AS n FROM S [NOW], R, P WHERE S.a = R.a AND R.e = P.e AND P.g > 0 "
     "GROUP BY R.e, P.g"),
    ("SELECT T.a, R.e FROM T [ROWS 2] CROSS JOIN R WHERE T.d > 0.5",
     "SELECT T.a, R.e FROM T [ROWS 2], R WHERE T.d > 0.5"),
]


@pytest.mark.parametrize("join_form, comma_form", PAIRS, ids=["range-rows", "inner-where", "three-way", "cross"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_join_syntax_agrees_with_the_reference_on_the_comma_join(join_form: str, comma_form: str, data) -> None:
    actions, until = data.draw(inputs(max_events=12, max_ts=30))
    engine_result = run_engine(Workload(CATALOG, join_form, actions, until))
    compare(run_reference(Workload(CATALOG, comma_form, actions, until)), engine_result)


@pytest.mark.parametrize("text, message, column", [
    ("SELECT * FROM S LEFT JOIN T ON S.a = T.a", "LEFT JOIN is not supported", 17),
    ("SELECT * FROM S s FULL OUTER JOIN T ON s.a = T.a", "FULL OUTER JOIN is not supported", 19),
    ("SELECT * FROM S NATURAL JOIN T", "NATURAL JOIN is not supported", 17),
    ("SELECT * FROM S JOIN T", "JOIN needs ON", 17),
    ("SELECT * FROM S CROSS JOIN T ON S.a = T.a", "CROSS JOIN takes no ON", 33),
])
def test_other_joins_are_refused_where_they_stand(text: str, message: str, column: int) -> None:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    with pytest.raises(CQLError) as e:
        eng.execute(text)
    assert message in str(e.value) and (e.value.line, e.value.column) == (1, column)


def test_join_words_still_name_things_elsewhere() -> None:
    """The join words are keywords only after a FROM item: a view may be called ``cross``, a column ``left``."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (left INT, right INT)")
    eng.execute("REGISTER VIEW cross AS SELECT left, right FROM S [ROWS 2]")
    q = eng.execute("SELECT c.left FROM cross AS c JOIN S [NOW] ON c.right = S.right")
    eng.push("S", [{"left": 1, "right": 2}], ts=[1])
    eng.heartbeat(5)
    eng.run()
    assert [(e.ts, e.row) for e in q.drain()] == [(1, {"left": 1})]
