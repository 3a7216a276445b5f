"""Project (π): computes each output column from the input row, keeps every element (duplicates, signs,
timestamps and order: it is duplicate-preserving, digest-004 R-PLAN-04) and holds nothing; a plain column copy
reuses the input's array. Expression values follow the contract (docs/contract-engine-api.md): INT / INT
truncates toward zero, % takes the dividend's sign, INT division or modulo by zero is 0."""

import numpy as np
from harness import Harness, batch, compiled

from dsms.operators.project import ProjectOp

SCHEMA = [("a", "INT"), ("b", "INT"), ("s", "STRING")]
TYPES = [t for _, t in SCHEMA]


def project(*exprs) -> Harness:
    """Each expression is a column number (a plain copy) or CQL text over SCHEMA."""
    return Harness(lambda inp, out: ProjectOp([e if isinstance(e, int) else compiled(e, SCHEMA) for e in exprs],
                                              inp, out))


def test_columns_are_computed_and_every_element_kept_with_its_sign_and_timestamp():
    h = project(2, "a + b", 0)
    h.push([1, 1, 4], [(1, 2, "x"), (1, 2, "x"), (3, -5, "y")], TYPES, sign=[1, 1, -1])
    assert h.run() == [(1, 1, ("x", 3, 1)), (1, 1, ("x", 3, 1)), (4, -1, ("y", -2, 3))]
    assert h.frontier == 4


def test_integer_division_and_modulo_follow_the_contract():
    h = project("a / b", "a % b", "a * 1.0 / b")
    h.push([1] * 5, [(7, 2, ""), (-7, 2, ""), (7, -2, ""), (7, 0, ""), (-7, 0, "")], TYPES)
    got = h.run()
    assert [r[:2] for _, _, r in got] == [(3, 1), (-3, -1), (-3, 1), (0, 0), (0, 0)]
    assert [r[2] for _, _, r in got] == [3.5, -3.5, -3.5, np.inf, -np.inf]


def test_string_functions():
    h = project("UPPER(s) || '!'", "LENGTH(s)")
    h.push([2, 3], [(0, 0, "ab"), (0, 0, "")], TYPES)
    assert h.run() == [(2, 1, ("AB!", 2)), (3, 1, ("!", 0))]


def test_a_plain_column_copy_reuses_the_input_array():
    inp_batch = batch([1, 2], [(1, 2, "x"), (3, 4, "y")], TYPES)
    h = project(1, "a")
    h.inputs[0].put(inp_batch)
    h.op.run()
    out = h.reader.get()
    assert out.cols[0] is inp_batch.cols[1]                   # no copy for a column passed through
    assert out.cols[1].tolist() == [1, 3] and out.ts is inp_batch.ts


def test_heartbeats_pass_and_nothing_is_held():
    h = project(0)
    h.heartbeat(7)
    assert h.run() == [] and h.frontier == 7
    assert h.op.held_stamps() == [] and h.op.synopses == []
