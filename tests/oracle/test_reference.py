"""The reference evaluator checked against the papers' worked examples (hand-derived expectations in
``oracle/examples.py``) and against itself: change-point evaluation equals evaluating every instant."""

from __future__ import annotations

import pytest

from oracle.examples import cases
from oracle.generators import Workload, compare, run_reference
from oracle.reference import Reference


@pytest.mark.parametrize("ex,check", [(e, c) for _, e, c in cases()], ids=[i for i, _, _ in cases()])
def test_worked_example(ex, check):
    w = Workload(ex.statements, check.query, ex.actions, ex.until)
    compare(check.expected, run_reference(w))
    ref = Reference()
    for s in ex.statements:
        ref.execute(s)
    assert ref.kind(check.query) == check.kind


@pytest.mark.parametrize("ex,check", [(e, c) for _, e, c in cases()], ids=[i for i, _, _ in cases()])
def test_worked_example_dense(ex, check):
    w = Workload(ex.statements, check.query, ex.actions, min(ex.until, 2000))
    compare([x for x in check.expected if x[0] < w.until], run_reference(w, dense=True))
