"""Property tests: the engine equals the reference evaluator (tests/oracle/reference.py) on generated workloads.

One test per query family (tests/oracle/generators.py): every window kind with select/project, joins,
aggregates, set operations, relation-to-stream operators (with views and derived streams), subqueries. A test
compares the result per instant as bags (values typed), the result kind (stream or relation) and the schema.

Hypothesis' own shrinking of these workloads is slow (minutes), so it is skipped: a failing workload is reduced
by ``minimize`` (drop actions and rows while the mismatch persists) and the report shows the reduced workload and
the first differing instant. Profiles (tests/conftest.py): "ci" is derandomized (the default), "dev" random (DSMS_RANDOM_TESTS=1).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from oracle.generators import Workload, check_workload, run_reference, workloads
from oracle.reference import Ambiguous

# examples per family: sized so that the whole file takes about 2-3 minutes on the project's machine
EXAMPLES = {"window": 1100, "join": 1000, "aggregate": 1000, "setop": 850, "streamop": 900, "subquery": 850}

_settings = settings(
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


def _family_test(family: str):
    @settings(_settings, max_examples=EXAMPLES[family])
    @given(w=workloads(family))
    def test(w):
        check_workload(w)

    test.__name__ = f"test_engine_equals_reference_{family}"
    test.__doc__ = f"engine == reference for the {family!r} query family"
    return test


test_engine_equals_reference_window = _family_test("window")
test_engine_equals_reference_join = _family_test("join")
test_engine_equals_reference_aggregate = _family_test("aggregate")
test_engine_equals_reference_setop = _family_test("setop")
test_engine_equals_reference_streamop = _family_test("streamop")
test_engine_equals_reference_subquery = _family_test("subquery")


@pytest.mark.parametrize("family", sorted(EXAMPLES))
def test_generated_queries_bind(family):
    """The generator only makes queries the reference accepts (a SchemaError here is a generator bug)."""
    @settings(_settings, max_examples=20)
    @given(w=workloads(family))
    def inner(w):
        try:
            run_reference(Workload(w.statements, w.query, (), 1))
        except Ambiguous:
            pass
    inner()
