"""The budget an operator run gets: the ``budget`` knob for every operator (``Policy.budget``), read by the
engine once per ``run`` (``Policy.same_budget``), or what a policy that overrides ``budget`` says for each
operator, asked before each of its runs."""

from __future__ import annotations

import numpy as np

from dsms import Engine
from scheduler import POLICIES, FifoPolicy


class _Ones(FifoPolicy):
    """One item a run for the selection, the knob's budget for the others; records what it was asked."""

    asked: list

    def budget(self, op) -> int:
        self.asked.append(op.kind)
        return 1 if op.kind == "select" else self.budget_items


def _runs(eng: Engine) -> dict[str, int]:
    for _ in range(3):
        eng.push("S", {"a": np.arange(4, dtype=np.int64)}, np.arange(4, dtype=np.int64) + eng.input_epoch * 10)
    eng.heartbeat(100)
    return {op.kind: op.batches_in for op in eng.ops}


def test_the_knob_is_every_operators_budget_and_an_override_is_asked_per_run() -> None:
    assert all(cls.same_budget for cls in POLICIES.values()) and not _Ones.same_budget
    plain, own = Engine({"policy": "fifo"}), Engine({"policy": "fifo"})
    for eng in (plain, own):
        eng.execute("REGISTER STREAM S (a INT)")
        eng.execute("SELECT a + 1 AS b FROM S WHERE a > 0")      # two operators: a selection, a projection
    own.policy = _Ones(budget=64)
    own.policy.asked = []
    own._plan_changed()
    plain.system.set("policy", "fifo")
    plain.policy.set("budget", 64)
    _runs(plain), _runs(own)
    assert plain.run() == 2                                   # each operator reads its three batches at once
    steps = own.run()
    assert steps == len(own.policy.asked) and own.policy.asked.count("select") == 4   # 3 batches, a heartbeat
    assert {op.kind: op.tuples_in for op in own.ops} == {op.kind: op.tuples_in for op in plain.ops}
