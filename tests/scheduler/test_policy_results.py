"""Scheduling never changes results (issue 4): under every policy, with runs cut into small slices and the
policy switched in the middle of a run, the engine still equals the reference evaluator on generated
workloads of every query family."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from oracle.generators import diff, run_engine, run_reference, workloads
from oracle.reference import Ambiguous

from dsms.system import POLICY_NAMES

FAMILIES = ("window", "join", "aggregate", "setop", "streamop", "subquery")


@pytest.mark.parametrize("first", POLICY_NAMES)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_policy_matches_the_reference(first, data):
    family = data.draw(st.sampled_from(FAMILIES), label="family")
    w = data.draw(workloads(family), label="workload")
    second = data.draw(st.sampled_from(POLICY_NAMES), label="switch to")
    steps = data.draw(st.sampled_from([1, 2, 5]), label="steps per slice")
    try:
        expected = run_reference(w)
    except Ambiguous:
        reject()
    actual = run_engine(w, policy=first, switch_to=second, slice_steps=steps)
    d = diff(expected, actual)
    assert not d, f"policy {first} -> {second}, {steps} steps per slice:\n{w!r}\n{d}"
