"""Exactness is untouched when nothing is shed (issue 14): the generated workloads of the property suite
(tests/test_properties.py), run with the system's shedding on and the load shedder stepping between every
input action (idle: the load is far below capacity), and with the join's run budgets cut to a few pairs and
rows so that every release is applied in chunks, equal the reference evaluator, and no element says it is
approximate."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, reject, settings
from oracle.generators import Workload, apply, diff, run_reference, workloads
from oracle.reference import Ambiguous

import dsms.operators.join as join_module
from dsms import Engine
from dsms.batch import Element


def run_idle_shedder(w: Workload) -> list:
    eng = Engine()
    eng.set("sys:0", "shedding", True)
    for s in w.statements:
        eng.execute(s)
    q = eng.execute(w.query)
    for a in w.actions:
        apply(eng, a)
        eng.run(max_steps=3)
        eng.shedder.step(capacity=1e12)
    eng.heartbeat(w.until)
    eng.run()
    eng.shedder.step(capacity=1e12)
    out = q.drain()
    assert all(type(e) is Element and e.approx is None for e in out)
    assert not eng.registry.entities(kind="shedder")
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in out]


@pytest.mark.parametrize("family", ["window", "join", "aggregate", "setop", "streamop", "subquery"])
def test_engine_with_an_idle_shedder_and_chunked_joins_equals_reference(family, monkeypatch):
    monkeypatch.setattr(join_module, "PAIR_BUDGET", 3)
    monkeypatch.setattr(join_module, "RELEASE_ROWS", 5)

    @settings(deadline=None, max_examples=60, suppress_health_check=list(HealthCheck))
    @given(w=workloads(family))
    def inner(w):
        try:
            expected = run_reference(w)
        except Ambiguous:
            reject()
        d = diff(expected, run_idle_shedder(w))
        assert not d, f"{w!r}\n{d}"
    inner()
