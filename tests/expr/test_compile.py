"""Tests of dsms/expr/compile.py: every operator and function against hand-computed values, the typing errors,
and a property comparing the vectorised result with an independent per-row Python evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsms.cql.ast import (
    Aggregate,
    Between,
    BinaryOp,
    Case,
    ColumnRef,
    Exists,
    FuncCall,
    InList,
    Like,
    Literal,
    ScalarSubquery,
    Select,
    SelectItem,
    Star,
    UnaryOp,
)
from dsms.cql.parser import like_pattern_ok
from dsms.errors import SchemaError
from dsms.expr.compile import (
    CompiledExpr,
    coerce_value,
    compile_expr,
    compile_predicate,
    infer_type,
    numpy_dtype,
)
from dsms.expr.like import like_matcher

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")     # no numpy warning may leak

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

SCHEMA = {
    "i": "INT", "j": "INT", "f": "FLOAT", "g": "FLOAT", "s": "STRING", "t": "STRING",
    "b": "BOOLEAN", "c": "BOOLEAN", "ts": "TIMESTAMP",
}


def resolve(ref: ColumnRef) -> tuple[str, str]:
    if ref.name not in SCHEMA:
        raise SchemaError(f"unknown column {ref.name}")
    return f"k_{ref.name}", SCHEMA[ref.name]


def col(name: str, pos: tuple[int, int] | None = None) -> ColumnRef:
    return ColumnRef(name, pos=pos)


def lit(value: object) -> Literal:
    kind = {bool: "BOOLEAN", int: "INT", float: "FLOAT", str: "STRING"}[type(value)]
    return Literal(value, kind)


def batch(**columns: list) -> tuple[dict[str, np.ndarray], int]:
    arrays = {f"k_{name}": np.array(values, dtype=numpy_dtype(SCHEMA[name])) for name, values in columns.items()}
    return arrays, len(next(iter(columns.values())))


def run(expr, **columns: list) -> np.ndarray:
    cols, n = batch(**columns)
    compiled = compile_expr(expr, resolve)
    out = compiled(cols, n)
    assert out.shape == (n,)
    assert out.dtype == numpy_dtype(compiled.type)
    return out


def binop(op: str, left, right, pos=None) -> BinaryOp:
    return BinaryOp(op, left, right, pos=pos)


# ---------------------------------------------------------------- arithmetic


def test_int_arithmetic() -> None:
    i, j = [7, -7, 3, 0], [2, 2, -4, 5]
    assert run(binop("+", col("i"), col("j")), i=i, j=j).tolist() == [9, -5, -1, 5]
    assert run(binop("-", col("i"), col("j")), i=i, j=j).tolist() == [5, -9, 7, -5]
    assert run(binop("*", col("i"), col("j")), i=i, j=j).tolist() == [14, -14, -12, 0]
    assert compile_expr(binop("*", col("i"), col("j")), resolve).type == "INT"


def test_int_division_truncates_toward_zero() -> None:
    i, j = [7, -7, 7, -7, 1, -1], [2, 2, -2, -2, 3, 3]
    assert run(binop("/", col("i"), col("j")), i=i, j=j).tolist() == [3, -3, -3, 3, 0, 0]


def test_int_modulo_has_sign_of_dividend() -> None:
    i, j = [7, -7, 7, -7, 6, -6], [2, 2, -2, -2, 3, 3]
    assert run(binop("%", col("i"), col("j")), i=i, j=j).tolist() == [1, -1, 1, -1, 0, 0]


def test_int_division_and_modulo_by_zero_give_zero() -> None:
    i, j = [7, -7, 0, INT64_MIN], [0, 0, 0, 0]
    assert run(binop("/", col("i"), col("j")), i=i, j=j).tolist() == [0, 0, 0, 0]
    assert run(binop("%", col("i"), col("j")), i=i, j=j).tolist() == [0, 0, 0, 0]
    assert run(binop("/", col("i"), lit(0)), i=i).tolist() == [0, 0, 0, 0]


def test_int_overflow_wraps() -> None:
    assert run(binop("/", col("i"), lit(-1)), i=[INT64_MIN]).tolist() == [INT64_MIN]
    assert run(binop("%", col("i"), lit(-1)), i=[INT64_MIN]).tolist() == [0]
    assert run(binop("+", col("i"), lit(1)), i=[INT64_MAX]).tolist() == [INT64_MIN]
    assert run(UnaryOp("-", col("i")), i=[INT64_MIN, 5]).tolist() == [INT64_MIN, -5]


def test_float_arithmetic_and_promotion() -> None:
    e = binop("/", col("i"), lit(2.0))
    assert compile_expr(e, resolve).type == "FLOAT"
    assert run(e, i=[7, -7]).tolist() == [3.5, -3.5]
    assert run(binop("+", col("f"), col("i")), f=[0.5, 1.25], i=[1, -2]).tolist() == [1.5, -0.75]
    assert run(binop("*", col("i"), col("f")), f=[0.5, 1.5], i=[3, 2]).tolist() == [1.5, 3.0]
    assert run(binop("-", col("f"), col("g")), f=[0.5], g=[2.0]).tolist() == [-1.5]
    # FLOAT % is fmod: sign of the dividend
    assert run(binop("%", col("f"), lit(2)), f=[-7.5, 7.5]).tolist() == [-1.5, 1.5]


def test_float_division_by_zero_is_ieee_and_silent() -> None:
    out = run(binop("/", col("f"), col("g")), f=[1.0, -1.0, 0.0, 1.0], g=[0.0, 0.0, 0.0, -0.0])
    assert out[0] == math.inf and out[1] == -math.inf and math.isnan(out[2]) and out[3] == -math.inf
    assert math.isnan(run(binop("%", col("f"), lit(0.0)), f=[1.0])[0])
    assert run(binop("/", col("i"), lit(0.0)), i=[3]).tolist() == [math.inf]


def test_timestamp_is_int_in_arithmetic_and_comparison() -> None:
    e = binop("-", col("ts"), col("i"))
    assert compile_expr(e, resolve).type == "INT"
    assert run(e, ts=[1000, 2000], i=[1, 5]).tolist() == [999, 1995]
    assert run(binop(">", col("ts"), lit(1500)), ts=[1000, 2000]).tolist() == [False, True]
    assert run(binop("<", col("ts"), col("f")), ts=[1, 2], f=[1.5, 1.5]).tolist() == [True, False]
    assert compile_expr(col("ts"), resolve).type == "TIMESTAMP"


def test_unary_minus() -> None:
    assert run(UnaryOp("-", col("i")), i=[3, -4]).tolist() == [-3, 4]
    assert run(UnaryOp("-", col("f")), f=[1.5]).tolist() == [-1.5]
    with pytest.raises(SchemaError, match=r"line 1, column 2: unary - needs a number, got STRING"):
        compile_expr(UnaryOp("-", col("s"), pos=(1, 2)), resolve)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%"])
def test_arithmetic_type_errors(op: str) -> None:
    with pytest.raises(SchemaError, match=rf"line 3, column 4: operator \{op} does not apply to STRING and INT"):
        compile_expr(binop(op, col("s"), lit(1), pos=(3, 4)), resolve)
    with pytest.raises(SchemaError, match="BOOLEAN"):
        compile_expr(binop(op, col("b"), col("i")), resolve)


def test_string_plus_is_an_error_but_concat_works() -> None:
    with pytest.raises(SchemaError, match=r"line 1, column 3: .*STRING and STRING.*\|\|"):
        compile_expr(binop("+", col("s"), col("t"), pos=(1, 3)), resolve)
    assert run(binop("||", col("s"), lit("!")), s=["a", ""]).tolist() == ["a!", "!"]


# ---------------------------------------------------------------- comparisons and logic


CMP_EXPECTED = {
    "=": [False, True, False], "<>": [True, False, True], "<": [True, False, False],
    "<=": [True, True, False], ">": [False, False, True], ">=": [False, True, True],
}


@pytest.mark.parametrize("op", CMP_EXPECTED)
def test_numeric_comparisons(op: str) -> None:
    expected = CMP_EXPECTED[op]
    assert run(binop(op, col("i"), col("j")), i=[1, 2, 3], j=[2, 2, 2]).tolist() == expected
    assert run(binop(op, col("i"), col("f")), i=[1, 2, 3], f=[2.0, 2.0, 2.0]).tolist() == expected
    assert run(binop(op, col("f"), col("i")), f=[1.5, 2.0, 2.5], i=[2, 2, 2]).tolist() == expected


@pytest.mark.parametrize("op", CMP_EXPECTED)
def test_string_comparisons(op: str) -> None:
    # Python str order: upper-case letters sort before lower-case ones
    assert run(binop(op, col("s"), col("t")), s=["B", "ab", "b"], t=["a", "ab", "a"]).tolist() == CMP_EXPECTED[op]


def test_boolean_equality_only() -> None:
    b, c = [True, True, False, False], [True, False, True, False]
    assert run(binop("=", col("b"), col("c")), b=b, c=c).tolist() == [True, False, False, True]
    assert run(binop("<>", col("b"), col("c")), b=b, c=c).tolist() == [False, True, True, False]
    with pytest.raises(SchemaError, match=r"line 2, column 5: operator < does not order BOOLEAN"):
        compile_expr(binop("<", col("b"), col("c"), pos=(2, 5)), resolve)


def test_not_equal_spelling_is_normalised() -> None:
    assert compile_expr(binop("!=", col("i"), lit(1)), resolve).text == "i <> 1"


@pytest.mark.parametrize("op", CMP_EXPECTED)
def test_comparing_string_with_number_names_operator_and_position(op: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_expr(binop(op, col("s"), col("i"), pos=(2, 9)), resolve)
    message = str(info.value)
    assert "line 2, column 9" in message and f"operator {op} " in message
    assert "STRING" in message and "INT" in message
    with pytest.raises(SchemaError, match="cannot compare BOOLEAN with INT"):
        compile_expr(binop(op, col("b"), lit(1)), resolve)


def test_and_or_not() -> None:
    b, c = [True, True, False, False], [True, False, True, False]
    assert run(binop("AND", col("b"), col("c")), b=b, c=c).tolist() == [True, False, False, False]
    assert run(binop("OR", col("b"), col("c")), b=b, c=c).tolist() == [True, True, True, False]
    assert run(UnaryOp("NOT", col("b")), b=b).tolist() == [False, False, True, True]


def test_logic_needs_booleans() -> None:
    with pytest.raises(SchemaError, match=r"line 1, column 1: AND needs BOOLEAN operands, got INT and BOOLEAN"):
        compile_expr(binop("AND", col("i"), col("b"), pos=(1, 1)), resolve)
    with pytest.raises(SchemaError, match="OR needs BOOLEAN"):
        compile_expr(binop("OR", col("b"), col("s")), resolve)
    with pytest.raises(SchemaError, match=r"line 4, column 2: NOT needs a BOOLEAN, got FLOAT"):
        compile_expr(UnaryOp("NOT", col("f"), pos=(4, 2)), resolve)


# ---------------------------------------------------------------- IN, BETWEEN, LIKE


def test_in_and_not_in() -> None:
    e = InList(col("i"), (lit(1), lit(3), lit(2.5)))
    assert run(e, i=[1, 2, 3, 4]).tolist() == [True, False, True, False]
    assert run(InList(col("i"), (lit(1), lit(3)), negated=True), i=[1, 2, 3]).tolist() == [False, True, False]
    assert run(InList(col("f"), (lit(2), col("i"))), f=[2.0, 5.0, 5.5], i=[0, 5, 5]).tolist() == [True, True, False]
    assert run(InList(col("s"), (lit("a"), lit("b"))), s=["a", "c", "b", "A"]).tolist() == [True, False, True, False]


def test_in_type_error() -> None:
    with pytest.raises(SchemaError, match=r"line 1, column 12: IN cannot compare INT with STRING"):
        compile_expr(InList(col("i"), (lit(1), Literal("x", "STRING", pos=(1, 12)))), resolve)


def test_between_is_inclusive() -> None:
    i = [0, 1, 2, 3, 4]
    assert run(Between(col("i"), lit(1), lit(3)), i=i).tolist() == [False, True, True, True, False]
    assert run(Between(col("i"), lit(1), lit(3), negated=True), i=i).tolist() == [True, False, False, False, True]
    assert run(Between(col("f"), lit(1), lit(2.5)), f=[0.5, 1.0, 2.5, 2.6]).tolist() == [False, True, True, False]
    assert run(Between(col("s"), lit("b"), lit("d")), s=["a", "b", "c", "d", "da"]).tolist() == [
        False, True, True, True, False]
    assert run(Between(col("i"), col("j"), lit(10)), i=[5, 5], j=[5, 6]).tolist() == [True, False]


def test_between_type_error() -> None:
    with pytest.raises(SchemaError, match=r"line 5, column 1: BETWEEN cannot compare STRING with INT"):
        compile_expr(Between(col("s"), lit(1), lit(2), pos=(5, 1)), resolve)
    with pytest.raises(SchemaError, match="NOT BETWEEN does not order BOOLEAN"):
        compile_expr(Between(col("b"), lit(False), lit(True), negated=True), resolve)


LIKE_DATA = ["abc", "a.c", "ac", "abbc", "ABC", "50%", "500", "5", "x+y", "xxy", "(a)", "a\nc", "[b]", "a\\c", ""]


@pytest.mark.parametrize(("pattern", "matches"), [
    ("abc", {"abc"}),
    ("a%c", {"abc", "a.c", "ac", "abbc", "a\nc", "a\\c"}),
    ("a_c", {"abc", "a.c", "a\nc", "a\\c"}),
    ("a.c", {"a.c"}),                       # '.' is literal, not a regex wildcard
    ("50%", {"50%", "500"}),
    ("%0%", {"50%", "500"}),
    ("x+y", {"x+y"}),
    ("(a)", {"(a)"}),
    ("[b]", {"[b]"}),
    ("a\\c", {"a\\c"}),
    ("%", set(LIKE_DATA)),
    ("_", {"5"}),
    ("", {""}),
    ("A%", {"ABC"}),                        # case-sensitive
])
def test_like(pattern: str, matches: set[str]) -> None:
    got = run(Like(col("s"), lit(pattern)), s=LIKE_DATA)
    assert {s for s, m in zip(LIKE_DATA, got) if m} == matches
    got_not = run(Like(col("s"), lit(pattern), negated=True), s=LIKE_DATA)
    assert got_not.tolist() == (~got).tolist()


def test_like_matcher_keeps_regex_specials_literal() -> None:
    assert not like_matcher("a.c")("abc")
    assert like_matcher("$^|?*")("$^|?*")
    assert like_matcher("%$^|?*_")("x$^|?*y")


_LIKE_ALPHABET = "ab%_!"


@settings(max_examples=400)
@given(st.text(_LIKE_ALPHABET, max_size=8), st.lists(st.text("ab%_!\n", max_size=10), min_size=1, max_size=8),
       st.sampled_from([None, "!"]))
def test_like_matches_the_reference(pattern: str, strings: list[str], escape: str | None) -> None:
    """The linear matcher agrees with the reference evaluator's regular-expression translation of LIKE
    (tests/oracle/reference.py), on every pattern over % _ and an escape, on the row and column paths."""
    from oracle.reference import _like
    if escape is not None and not like_pattern_ok(pattern, escape):
        pattern += "a"                        # the parser refuses a pattern that ends with its escape
    expected = [_like(s, pattern, escape) for s in strings]
    assert [like_matcher(pattern, escape)(s) for s in strings] == expected
    got = run(Like(col("s"), lit(pattern), escape=escape), s=strings)
    assert got.tolist() == expected


def test_like_errors() -> None:
    with pytest.raises(SchemaError, match=r"line 1, column 9: the pattern of LIKE must be a string literal"):
        compile_expr(Like(col("s"), ColumnRef("t", pos=(1, 9)), pos=(1, 1)), resolve)
    with pytest.raises(SchemaError, match="pattern of NOT LIKE must be a string literal"):
        compile_expr(Like(col("s"), lit(5), negated=True), resolve)
    with pytest.raises(SchemaError, match=r"line 2, column 2: LIKE needs a STRING on its left, got INT"):
        compile_expr(Like(col("i"), lit("1%"), pos=(2, 2)), resolve)


# ---------------------------------------------------------------- functions


def test_string_functions() -> None:
    s = ["Hello", "", "ÄbC"]
    assert run(FuncCall("LOWER", (col("s"),)), s=s).tolist() == ["hello", "", "äbc"]
    assert run(FuncCall("UPPER", (col("s"),)), s=s).tolist() == ["HELLO", "", "ÄBC"]
    length = FuncCall("LENGTH", (col("s"),))
    assert compile_expr(length, resolve).type == "INT"
    assert run(length, s=s).tolist() == [5, 0, 3]


def test_abs_keeps_type() -> None:
    assert compile_expr(FuncCall("ABS", (col("i"),)), resolve).type == "INT"
    assert run(FuncCall("ABS", (col("i"),)), i=[-3, 0, 4]).tolist() == [3, 0, 4]
    assert compile_expr(FuncCall("ABS", (col("f"),)), resolve).type == "FLOAT"
    assert run(FuncCall("ABS", (col("f"),)), f=[-1.5, 2.0]).tolist() == [1.5, 2.0]


def test_function_errors() -> None:
    with pytest.raises(SchemaError, match=r"line 1, column 8: LOWER takes 1 argument, got 2"):
        compile_expr(FuncCall("LOWER", (col("s"), col("t")), pos=(1, 8)), resolve)
    with pytest.raises(SchemaError, match=r"line 1, column 8: ABS takes 1 argument, got 0"):
        compile_expr(FuncCall("ABS", (), pos=(1, 8)), resolve)
    with pytest.raises(SchemaError, match=r"line 3, column 1: LENGTH needs STRING, got INT"):
        compile_expr(FuncCall("LENGTH", (col("i"),), pos=(3, 1)), resolve)
    with pytest.raises(SchemaError, match=r"ABS needs FLOAT or INT or TIMESTAMP, got STRING"):
        compile_expr(FuncCall("ABS", (col("s"),)), resolve)
    with pytest.raises(SchemaError, match=r"line 1, column 1: unknown function SQRT"):
        compile_expr(FuncCall("SQRT", (col("f"),), pos=(1, 1)), resolve)


# ---------------------------------------------------------------- CASE


def test_searched_case_with_else_first_match_wins() -> None:
    e = Case(None, ((binop(">", col("i"), lit(10)), lit("big")), (binop(">", col("i"), lit(0)), lit("pos"))),
             lit("other"))
    assert run(e, i=[20, 5, -1, 11]).tolist() == ["big", "pos", "other", "big"]


def test_simple_case() -> None:
    e = Case(col("s"), ((lit("a"), lit(1)), (lit("b"), lit(2))), lit(0))
    assert run(e, s=["a", "b", "c"]).tolist() == [1, 2, 0]
    e = Case(col("i"), ((lit(1), lit("one")), (lit(2.0), lit("two"))))
    assert run(e, i=[1, 2, 3]).tolist() == ["one", "two", ""]


@pytest.mark.parametrize(("then", "zero"), [(lit(7), 0), (lit(1.5), 0.0), (lit("x"), ""), (lit(True), False)])
def test_case_without_else_gives_zero_value(then: Literal, zero: object) -> None:
    e = Case(None, ((col("b"), then),))
    out = run(e, b=[True, False])
    assert out.tolist() == [then.value, zero]
    assert type(out.tolist()[1]) is type(zero)


def test_case_promotes_int_and_float() -> None:
    e = Case(None, ((col("b"), col("i")),), col("f"))
    assert compile_expr(e, resolve).type == "FLOAT"
    assert run(e, b=[True, False], i=[3, 3], f=[0.5, 0.5]).tolist() == [3.0, 0.5]
    e = Case(None, ((col("b"), lit(2.5)), (col("c"), lit(1))))
    assert run(e, b=[True, False, False], c=[True, True, False]).tolist() == [2.5, 1.0, 0.0]


def test_case_errors() -> None:
    with pytest.raises(SchemaError, match=r"line 1, column 1: CASE results have incompatible types INT, STRING"):
        compile_expr(Case(None, ((col("b"), lit(1)),), lit("x"), pos=(1, 1)), resolve)
    with pytest.raises(SchemaError, match=r"line 2, column 6: a WHEN condition must be BOOLEAN, got INT"):
        compile_expr(Case(None, ((ColumnRef("i", pos=(2, 6)), lit(1)),)), resolve)
    with pytest.raises(SchemaError, match=r"CASE cannot compare STRING with INT"):
        compile_expr(Case(col("s"), ((lit(1), lit(1)),)), resolve)


# ---------------------------------------------------------------- literals, empty batches, folding, text


def test_literals_broadcast() -> None:
    cols, n = batch(i=[1, 2, 3])
    for value in (5, 2.5, "x", True):
        out = compile_expr(lit(value), resolve)(cols, n)
        assert out.tolist() == [value] * 3
    assert compile_expr(lit("x"), resolve)(cols, n).dtype == object
    assert compile_expr(lit("x"), resolve)(cols, 0).shape == (0,)


EMPTY_CASES = [
    col("i"), col("s"), lit(1), lit("x"), binop("/", col("i"), col("j")), binop("%", col("i"), lit(0)),
    binop("/", col("f"), col("g")), binop("+", col("i"), col("f")), binop("<", col("s"), col("t")),
    binop("AND", col("b"), col("c")), UnaryOp("NOT", col("b")), UnaryOp("-", col("i")),
    InList(col("i"), (lit(1), lit(2))), Between(col("f"), lit(0), lit(1)), Like(col("s"), lit("a%")),
    FuncCall("LOWER", (col("s"),)), FuncCall("LENGTH", (col("s"),)), FuncCall("ABS", (col("f"),)),
    Case(None, ((col("b"), col("s")),)), Case(col("i"), ((lit(1), lit(2.0)),), col("j")),
    binop("||", col("s"), col("t")),
]


@pytest.mark.parametrize("expr", EMPTY_CASES, ids=lambda e: compile_expr(e, resolve).text)
def test_empty_batch(expr) -> None:
    cols = {f"k_{name}": np.array([], dtype=numpy_dtype(t)) for name, t in SCHEMA.items()}
    compiled = compile_expr(expr, resolve)
    out = compiled(cols, 0)
    assert out.shape == (0,) and out.dtype == numpy_dtype(compiled.type)


def test_constant_folding() -> None:
    e = compile_expr(binop("+", lit(1), binop("/", lit(7), lit(0))), resolve)
    assert e.columns == frozenset() and e.type == "INT"
    assert e({}, 3).tolist() == [1, 1, 1]
    assert e.text == "1 + (7 / 0)"
    assert compile_expr(Like(lit("abc"), lit("a%")), resolve)({}, 2).tolist() == [True, True]


def test_columns_and_text() -> None:
    e = compile_expr(binop(">", binop("+", col("i"), lit(1)), col("f")), resolve)
    assert isinstance(e, CompiledExpr)
    assert e.columns == frozenset({"k_i", "k_f"})
    assert e.text == "(i + 1) > f" == str(e)
    assert compile_expr(ColumnRef("price", "B"), lambda r: ("B.price", "FLOAT")).text == "B.price"
    assert compile_expr(lit("it's"), resolve).text == "'it''s'"
    assert compile_expr(UnaryOp("NOT", binop("AND", col("b"), col("c"))), resolve).text == "NOT (b AND c)"
    assert compile_expr(InList(col("i"), (lit(1), lit(2)), negated=True), resolve).text == "i NOT IN (1, 2)"
    assert compile_expr(Between(col("i"), lit(1), lit(2)), resolve).text == "i BETWEEN 1 AND 2"
    assert compile_expr(Like(col("s"), lit("a%")), resolve).text == "s LIKE 'a%'"
    assert compile_expr(FuncCall("ABS", (binop("-", col("i"), col("j")),)), resolve).text == "ABS(i - j)"
    case = Case(None, ((binop(">", col("i"), lit(0)), lit(1.5)),), lit(0))
    assert compile_expr(binop("*", case, lit(2)), resolve).text == "CASE WHEN i > 0 THEN 1.5 ELSE 0 END * 2"
    assert compile_expr(Case(col("i"), ((lit(1), lit(True)),)), resolve).text == "CASE i WHEN 1 THEN TRUE END"


def test_column_input_is_converted_to_the_declared_dtype() -> None:
    e = compile_expr(binop("+", col("f"), lit(1)), resolve)
    assert e({"k_f": [1, 2]}, 2).tolist() == [2.0, 3.0]


def test_unknown_column_error_comes_from_resolver() -> None:
    with pytest.raises(SchemaError, match="unknown column nope"):
        compile_expr(binop("+", col("nope"), lit(1)), resolve)


@pytest.mark.parametrize(("node", "name"), [
    (Aggregate("SUM", col("i"), pos=(1, 8)), "aggregate SUM"),
    (Aggregate("COUNT", None, pos=(1, 8)), r"aggregate COUNT\(\*\)"),
    (ScalarSubquery(Select((SelectItem(col("i")),), ()), pos=(1, 8)), "scalar subquery"),
    (Exists(Select((SelectItem(col("i")),), ()), pos=(1, 8)), "EXISTS"),
    (Star(pos=(1, 8)), r"\*"),
])
def test_uncompilable_nodes(node, name: str) -> None:
    with pytest.raises(SchemaError, match=rf"line 1, column 8: {name}"):
        compile_expr(node, resolve)
    with pytest.raises(SchemaError, match=rf"line 1, column 8: {name}"):
        compile_expr(binop("+", lit(1), node), resolve)


def test_compile_predicate_and_infer_type() -> None:
    p = compile_predicate(binop("<", col("i"), lit(2)), resolve)
    cols, n = batch(i=[1, 2])
    assert p(cols, n).tolist() == [True, False]
    with pytest.raises(SchemaError, match=r"line 1, column 7: a condition must be BOOLEAN, but i \+ 1 is INT"):
        compile_predicate(binop("+", col("i"), lit(1), pos=(1, 7)), resolve)
    assert infer_type(binop("+", col("i"), col("j")), resolve) == "INT"
    assert infer_type(binop("%", col("i"), col("f")), resolve) == "FLOAT"
    assert infer_type(FuncCall("UPPER", (col("s"),)), resolve) == "STRING"
    assert infer_type(Between(col("ts"), lit(1), lit(2)), resolve) == "BOOLEAN"


def test_bad_literal_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="line 1, column 2: bad literal"):
        compile_expr(Literal(2**64, "INT", pos=(1, 2)), resolve)


# ---------------------------------------------------------------- numpy_dtype, coerce_value


def test_numpy_dtype() -> None:
    assert numpy_dtype("INT") == np.int64 and numpy_dtype("TIMESTAMP") == np.int64
    assert numpy_dtype("FLOAT") == np.float64 and numpy_dtype("BOOLEAN") == np.bool_
    assert numpy_dtype("STRING") == np.dtype(object)
    with pytest.raises(SchemaError, match="unknown type 'DATE'"):
        numpy_dtype("DATE")


def test_coerce_value_accepts() -> None:
    assert coerce_value(3, "INT") == 3 and type(coerce_value(np.int32(3), "INT")) is int
    assert coerce_value(-5, "TIMESTAMP") == -5
    assert coerce_value(3, "FLOAT") == 3.0 and type(coerce_value(3, "FLOAT")) is float
    assert coerce_value(2.5, "FLOAT") == 2.5
    assert coerce_value(True, "BOOLEAN") is True and coerce_value(np.bool_(False), "BOOLEAN") is False
    assert coerce_value("x", "STRING") == "x"
    assert coerce_value(INT64_MIN, "INT") == INT64_MIN
    # JSON has one number type: a whole float is the integer (2.0 from an encoder that writes every number so)
    assert coerce_value(2.0, "INT") == 2 and type(coerce_value(2.0, "INT")) is int
    assert coerce_value(np.float64(-7.0), "TIMESTAMP") == -7


@pytest.mark.parametrize(("value", "type_"), [
    (True, "INT"), (False, "TIMESTAMP"), (True, "FLOAT"), (2.5, "INT"), (float("nan"), "TIMESTAMP"),
    (float("inf"), "INT"), ("3", "INT"), (None, "INT"),
    ("1.5", "FLOAT"), (1, "BOOLEAN"), ("true", "BOOLEAN"), (3, "STRING"), (None, "STRING"),
])
def test_coerce_value_type_errors(value: object, type_: str) -> None:
    with pytest.raises(TypeError, match=f"expected {type_}, got {type(value).__name__}"):
        coerce_value(value, type_)


def test_coerce_value_value_errors() -> None:
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        coerce_value(2**63, "INT")
    with pytest.raises(ValueError, match="too large"):
        coerce_value(10**400, "FLOAT")
    with pytest.raises(ValueError, match="unknown type"):
        coerce_value(1, "DATE")


# ---------------------------------------------------------------- property: numpy result == per-row Python


NUM_COLS = {"i": "INT", "j": "INT", "ts": "TIMESTAMP", "f": "FLOAT", "g": "FLOAT"}


def wrap(v: int) -> int:
    """Two's-complement int64 wraparound."""
    return (v + 2**63) % 2**64 - 2**63


def py_int(op: str, a: int, b: int) -> int:
    if op == "+":
        return wrap(a + b)
    if op == "-":
        return wrap(a - b)
    if op == "*":
        return wrap(a * b)
    if b == 0:
        return 0
    if op == "/":
        q = abs(a) // abs(b)
        return wrap(q if (a < 0) == (b < 0) else -q)
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def py_float(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0.0:
            if a == 0.0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    if b == 0.0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return math.fmod(a, b)


def py_cmp(op: str, a, b) -> bool:
    return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def py_eval(e, row: dict[str, object]) -> tuple[object, str]:
    """Evaluate one row with plain Python; returns (value, 'I' | 'F' | 'B')."""
    if isinstance(e, Literal):
        return e.value, {"INT": "I", "FLOAT": "F", "BOOLEAN": "B"}[e.type]
    if isinstance(e, ColumnRef):
        return row[e.name], "F" if NUM_COLS[e.name] == "FLOAT" else "I"
    if isinstance(e, UnaryOp):
        v, t = py_eval(e.operand, row)
        if e.op == "NOT":
            return not v, "B"
        return (wrap(-v) if t == "I" else -v), t
    if isinstance(e, FuncCall):
        v, t = py_eval(e.args[0], row)
        return (wrap(abs(v)) if t == "I" else abs(v)), t
    if isinstance(e, BinaryOp):
        a, ta = py_eval(e.left, row)
        b, tb = py_eval(e.right, row)
        if e.op == "AND":
            return a and b, "B"
        if e.op == "OR":
            return a or b, "B"
        if ta != tb:            # INT with FLOAT: the INT side becomes a float
            a, b = float(a), float(b)
        if e.op in ("+", "-", "*", "/", "%"):
            return (py_int(e.op, a, b), "I") if ta == tb == "I" else (py_float(e.op, a, b), "F")
        return py_cmp(e.op, a, b), "B"
    if isinstance(e, Between):
        x, tx = py_eval(e.expr, row)
        lo, tl = py_eval(e.low, row)
        hi, th = py_eval(e.high, row)
        ok = (float(lo) <= float(x) if "F" in (tx, tl) else lo <= x) and \
             (float(x) <= float(hi) if "F" in (tx, th) else x <= hi)
        return ok != e.negated, "B"
    if isinstance(e, InList):
        x, tx = py_eval(e.expr, row)
        found = False
        for item in e.items:
            v, tv = py_eval(item, row)
            found = found or (float(x) == float(v) if "F" in (tx, tv) else x == v)
        return found != e.negated, "B"
    if isinstance(e, Case):
        results = [py_eval(r, row) for _, r in e.whens] + [py_eval(e.else_, row)]
        kinds = {t for _, t in results}
        for (w, _), (value, t) in zip(e.whens, results):
            if py_eval(w, row)[0]:
                return (float(value) if kinds == {"I", "F"} else value), ("F" if "F" in kinds else t)
        value, t = results[-1]
        return (float(value) if kinds == {"I", "F"} else value), ("F" if "F" in kinds else t)
    raise AssertionError(e)


int_values = st.one_of(st.integers(-50, 50), st.integers(INT64_MIN, INT64_MAX),
                       st.sampled_from([0, -1, 1, INT64_MIN, INT64_MAX]))
float_values = st.one_of(st.floats(-1e6, 1e6), st.floats(allow_nan=True, allow_infinity=True),
                         st.sampled_from([0.0, -0.0, 1.0, -1.0]))

num_leaves = st.one_of(
    st.sampled_from([ColumnRef(name) for name in NUM_COLS]),
    st.builds(lambda v: Literal(v, "INT"), st.integers(-20, 20)),
    st.builds(lambda v: Literal(v, "FLOAT"), st.floats(-100, 100, allow_nan=False)),
)
num_trees = st.recursive(num_leaves, lambda kids: st.one_of(
    st.builds(BinaryOp, st.sampled_from(["+", "-", "*", "/", "%"]), kids, kids),
    st.builds(lambda k: UnaryOp("-", k), kids),
    st.builds(lambda k: FuncCall("ABS", (k,)), kids),
), max_leaves=10)
comparisons = st.one_of(
    st.builds(BinaryOp, st.sampled_from(list(CMP_EXPECTED)), num_trees, num_trees),
    st.builds(Between, num_trees, num_trees, num_trees, st.booleans()),
    st.builds(InList, num_trees, st.lists(num_trees, min_size=1, max_size=3).map(tuple), st.booleans()),
)
bool_trees = st.recursive(comparisons, lambda kids: st.one_of(
    st.builds(BinaryOp, st.sampled_from(["AND", "OR", "=", "<>"]), kids, kids),
    st.builds(lambda k: UnaryOp("NOT", k), kids),
), max_leaves=4)
case_trees = st.builds(
    lambda whens, else_: Case(None, tuple(whens), else_),
    st.lists(st.tuples(bool_trees, num_trees), min_size=1, max_size=3), num_trees,
)
any_trees = st.one_of(num_trees, bool_trees, case_trees)


@st.composite
def numeric_batches(draw) -> tuple[dict[str, list], int]:
    n = draw(st.integers(0, 12))
    data = {name: draw(st.lists(float_values if t == "FLOAT" else int_values, min_size=n, max_size=n))
            for name, t in NUM_COLS.items()}
    return data, n


def same(got: object, want: object) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return got == want and type(got) is type(want)


@settings(max_examples=400, deadline=None)
@given(expr=any_trees, data=numeric_batches())
def test_vectorised_equals_per_row_python(expr, data) -> None:
    columns, n = data
    compiled = compile_expr(expr, lambda ref: (ref.name, NUM_COLS[ref.name]))
    cols = {name: np.array(values, dtype=numpy_dtype(NUM_COLS[name])) for name, values in columns.items()}
    out = compiled(cols, n)
    assert out.shape == (n,) and out.dtype == numpy_dtype(compiled.type)
    for k, got in enumerate(out.tolist()):
        want, kind = py_eval(expr, {name: values[k] for name, values in columns.items()})
        assert {"INT": "I", "TIMESTAMP": "I", "FLOAT": "F", "BOOLEAN": "B"}[compiled.type] == kind
        assert same(got, want), f"row {k}: {compiled.text} gave {got!r}, Python says {want!r}"
