"""Scheduling never changes results (issue 4): under every policy, with runs cut into small slices and the
policy switched in the middle of a run, the engine still equals the reference evaluator on generated
workloads of every query family."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from oracle.generators import Workload, diff, run_reference, workloads
from oracle.reference import Ambiguous

from dsms import Engine
from dsms.system import POLICY_NAMES

FAMILIES = ("window", "join", "aggregate", "setop", "streamop", "subquery")


def run_with_policies(w: Workload, first: str, second: str, slice_steps: int) -> list:
    eng = Engine({"policy": first})
    for s in w.statements:
        eng.execute(s)
    q = eng.execute(w.query)
    for i, a in enumerate(w.actions):
        if a[0] == "push":
            eng.push(a[1], a[2], ts=a[3])
        elif a[0] == "update":
            eng.update(a[1], insert=a[2], delete=a[3], ts=a[4])
        elif a[0] == "heartbeat":
            eng.heartbeat(a[1])
        eng.run(max_steps=slice_steps)            # partial runs: work is left queued between actions
        if i == len(w.actions) // 2:
            eng.set("sys:0", "policy", second)
    eng.heartbeat(w.until)
    eng.run()
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()]


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
    actual = run_with_policies(w, first, second, steps)
    d = diff(expected, actual)
    assert not d, f"policy {first} -> {second}, {steps} steps per slice:\n{w!r}\n{d}"
