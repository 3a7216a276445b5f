"""The kernels compile.py builds without ``np.errstate`` or an integer division (issue 15: an operator on a small
batch pays for every numpy call): ``x % d = 0`` as a multiplication, INT ``/ %`` by a constant, INT ``+ - *``,
FLOAT ``+ - *`` of an INT and a moderate constant. Each is checked row by row against plain Python integers and
floats on values that reach the edges of int64, and for the absence of any numpy warning."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.cql.ast import BinaryOp, ColumnRef, InList, Literal
from dsms.expr.compile import FLOAT_SAFE_HIGH, FLOAT_SAFE_LOW, compile_expr

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")     # no numpy warning may leak

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TYPES = {"x": "INT", "y": "INT", "t": "TIMESTAMP"}
EDGES = [0, 1, -1, 2, -2, INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 123, -123, 246, 2**62, -(2**62)]

ints = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.integers(-1000, 1000), st.sampled_from(EDGES))
divisors = st.one_of(st.integers(-300, 300), st.sampled_from([INT64_MIN, INT64_MAX, INT64_MAX - 2, 3**39, -(3**39),
                                                              2**61 + 1, 123, 0, 1, -1]),
                     st.integers(INT64_MIN, INT64_MAX))


def compiled(e):
    return compile_expr(e, lambda ref: (ref.name, TYPES[ref.name]))


def column(values: list[int]) -> dict[str, np.ndarray]:
    return {"x": np.array(values, dtype=np.int64), "t": np.array(values, dtype=np.int64)}


def py_mod(a: int, b: int) -> int:
    """INT % with the sign of the dividend, by zero 0 (docs/contract-engine-api.md)."""
    if b == 0:
        return 0
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def py_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return (q + 2**63) % 2**64 - 2**63          # INT64_MIN / -1 wraps


@settings(max_examples=300, deadline=None)
@given(st.lists(ints, min_size=0, max_size=40), divisors, st.sampled_from(["=", "<>"]), st.sampled_from("xt"))
def test_divisibility_matches_python(values: list[int], d: int, op: str, name: str) -> None:
    e = BinaryOp(op, BinaryOp("%", ColumnRef(name), Literal(d, "INT")), Literal(0, "INT"))
    c = compiled(e)
    got = c(column(values), len(values)).tolist()
    want = [(py_mod(v, d) == 0) == (op == "=") for v in values]
    assert got == want, f"{c.text}"


def test_divisibility_takes_the_multiplication_for_odd_divisors_only() -> None:
    """The fast kernel is the one under test above (an odd |d| >= 3), and every other divisor keeps fmod."""
    def kernel(d: int) -> str:
        e = BinaryOp("=", BinaryOp("%", ColumnRef("x"), Literal(d, "INT")), Literal(0, "INT"))
        return compiled(e).fn.__name__
    assert [kernel(d) for d in (123, -123, 3, 3**39)] == ["divisible"] * 4
    assert "divisible" not in [kernel(d) for d in (0, 1, -1, 2, 246, INT64_MIN)]
    # every value of a column against 123 and 7, exhaustively over a range crossing zero and both int64 ends
    for d in (123, 7, -9):
        for lo in (-5000, INT64_MIN, INT64_MAX - 5000):
            values = list(range(lo, lo + 5001))
            e = BinaryOp("=", BinaryOp("%", ColumnRef("x"), Literal(d, "INT")), Literal(0, "INT"))
            assert compiled(e)(column(values), len(values)).tolist() == [py_mod(v, d) == 0 for v in values]


@settings(max_examples=300, deadline=None)
@given(st.lists(ints, min_size=0, max_size=30), divisors, st.sampled_from(["/", "%"]))
def test_int_division_by_a_constant_matches_python(values: list[int], d: int, op: str) -> None:
    c = compiled(BinaryOp(op, ColumnRef("x"), Literal(d, "INT")))
    got = c(column(values), len(values)).tolist()
    assert got == [(py_div if op == "/" else py_mod)(v, d) for v in values]


@settings(max_examples=200, deadline=None)
@given(st.lists(ints, min_size=0, max_size=30), ints, st.sampled_from(["+", "-", "*"]), st.booleans())
def test_int_arithmetic_with_a_constant_wraps_like_int64(values: list[int], k: int, op: str, left: bool) -> None:
    x, lit = ColumnRef("x"), Literal(k, "INT")
    c = compiled(BinaryOp(op, lit, x) if left else BinaryOp(op, x, lit))
    f = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}[op]
    want = [((f(k, v) if left else f(v, k)) + 2**63) % 2**64 - 2**63 for v in values]
    assert c(column(values), len(values)).tolist() == want


consts = st.one_of(st.sampled_from([0.908, -0.0, 0.0, FLOAT_SAFE_HIGH, -FLOAT_SAFE_HIGH, FLOAT_SAFE_LOW, 1e300,
                                    1e-300, 2.5e-310, math.inf, -math.inf, math.nan]),
                   st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(ints, min_size=0, max_size=30), consts, st.sampled_from(["+", "-", "*"]), st.booleans())
def test_float_arithmetic_of_an_int_and_a_constant_matches_python(values: list[int], k: float, op: str,
                                                                  left: bool) -> None:
    """Inside the moderate range the kernel skips np.errstate; outside it (1e300, subnormals, inf, nan) the
    general kernel runs: both give Python's IEEE result, with no warning."""
    x, lit = ColumnRef("x"), Literal(k, "FLOAT")
    c = compiled(BinaryOp(op, lit, x) if left else BinaryOp(op, x, lit))
    f = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}[op]
    got = c(column(values), len(values)).tolist()
    for v, g in zip(values, got):
        a, b = (k, float(v)) if left else (float(v), k)
        try:
            want = f(a, b)
        except OverflowError:
            want = math.copysign(math.inf, a) * math.copysign(1.0, b)
        if math.isnan(want) or (op == "*" and (math.isinf(a) or math.isinf(b)) and 0.0 in (a, b)):
            assert math.isnan(g)
        else:
            assert g == want


STATES = ["OR", "ID", "CA", "or", "", "O", "ORE", "WA", "é"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(STATES) | st.text(max_size=3), max_size=30),
       st.lists(st.sampled_from(STATES), min_size=1, max_size=4), st.booleans(), st.booleans())
def test_string_choices_match_python(values: list[str], choices: list[str], flip: bool, negated: bool) -> None:
    """``s = 'a' OR 'b' = s OR ..`` and ``s [NOT] IN ('a', 'b', ..)`` as set lookups give what ``==`` gives."""
    types = {"s": "STRING", "u": "STRING"}
    resolve = lambda ref: (ref.name, types[ref.name])       # noqa: E731
    leaves = [BinaryOp("=", Literal(c, "STRING"), ColumnRef("s")) if flip and k % 2 else
              BinaryOp("=", ColumnRef("s"), Literal(c, "STRING")) for k, c in enumerate(choices)]
    tree = leaves[0]
    for leaf in leaves[1:]:
        tree = BinaryOp("OR", tree, leaf) if flip else BinaryOp("OR", leaf, tree)
    cols = {"s": np.array(values, dtype=object), "u": np.array(values[::-1], dtype=object)}
    want = [v in choices for v in values]
    c = compile_expr(tree, resolve)
    if len(choices) > 1:
        assert c.fn.__name__ == "member"              # the set lookup is the kernel under test
    assert c(cols, len(values)).tolist() == want
    listed = compile_expr(InList(ColumnRef("s"), tuple(Literal(x, "STRING") for x in choices), negated), resolve)
    assert listed(cols, len(values)).tolist() == [w != negated for w in want]
    # another column in one of the comparisons: the general kernel, same answer as Python
    mixed = BinaryOp("OR", tree, BinaryOp("=", ColumnRef("u"), Literal("CA", "STRING")))
    got = compile_expr(mixed, resolve)(cols, len(values)).tolist()
    assert got == [w or u == "CA" for w, u in zip(want, values[::-1])]
