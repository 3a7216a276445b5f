"""CQL scalar expressions compiled to numpy operations over columnar batches; never ``eval`` of text.

Source: SPEC section 2 ("expressions are compiled") and 4 (the expression dialect); the typing rules are those
of docs/contract-engine-api.md, "Types and expressions"; STREAM compiles expressions to an instruction array
over tuples (dsms/src/execution/internals/eval_context.cc), here each node becomes one closure over whole
columns.

A compiled expression is a tree of closures ``fn(cols, n) -> array``; each node type-checks its children once,
at compile time, and at run time does one numpy operation per node over the whole batch. Strings (STRING is a
numpy object array of Python ``str``) go through a comprehension where numpy has no vectorised form (LOWER,
UPPER, LENGTH, ``||``); LIKE is matched by :mod:`dsms.expr.like`, in time linear in the string. Sub-trees
that read no column are folded to a constant at compile time. An operator on a small batch pays for every
Python and numpy call as much as for the rows (issue 15), so a node's kernel is one closure with its constants
bound, and skips ``np.errstate`` where numpy cannot warn (``_lean``, ``_lean_arith``); ``x % d = 0`` and a
STRING compared with several constants have kernels of their own (``_divisibility``, ``_membership``).

Typing and run-time choices (dsms has no NULL, and a stream engine cannot stop on one bad row):

- arrays: INT and TIMESTAMP int64, FLOAT float64, BOOLEAN bool, STRING object;
- ``+ - * / %``: INT op INT is INT, with a FLOAT operand FLOAT (the INT side is converted). TIMESTAMP counts
  as INT and the result of arithmetic on it is INT. INT ``/`` truncates toward zero and INT ``%`` has the
  sign of the dividend (PostgreSQL: -7 / 2 = -3, -7 % 2 = -1); INT ``/`` or ``%`` by zero gives 0. INT
  overflow wraps around (two's complement int64), as numpy does. FLOAT ``/`` follows IEEE 754 (x / 0.0 is
  +-inf, 0.0 / 0.0 is nan) and FLOAT ``%`` is C ``fmod`` (sign of the dividend; by zero nan), silently;
- comparisons: numbers with numbers (an INT compared with a FLOAT is converted to FLOAT), STRING with STRING
  (Python ``str`` order), BOOLEAN with BOOLEAN (``=`` and ``<>`` only), a TIMESTAMP with a STRING constant
  read as an ISO 8601 date-time (also in IN and BETWEEN); anything else is a SchemaError;
- ``||`` concatenates two STRINGs (``+`` on strings is a SchemaError);
- ``CASE`` without ELSE yields the zero value of its type where no WHEN matches: 0, 0.0, ``''``, FALSE,
  0 for TIMESTAMP. The THEN/ELSE results must share one type, INT and FLOAT unify to FLOAT.

Every type error is a :class:`dsms.errors.SchemaError` whose message starts with "line L, column C: " when the
offending node carries a position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from dsms.cql.ast import (
    Aggregate,
    Between,
    BinaryOp,
    Case,
    ColumnRef,
    Exists,
    Expr,
    FuncCall,
    InList,
    InSubquery,
    Like,
    Literal,
    Quantified,
    ScalarSubquery,
    Star,
    UnaryOp,
)
from dsms.errors import SchemaError
from dsms.expr.like import like_column
from dsms.types import BOOLEAN, FLOAT, INT, STRING, TIMESTAMP, coerce_value, iso_ticks, numpy_dtype
from dsms.types import DTYPES as _DTYPES

__all__ = [
    "CompiledExpr", "Resolver", "coerce_value", "compile_expr", "compile_predicate", "infer_type",
    "iso_ticks", "numpy_dtype",
]

NUMERIC = frozenset({INT, FLOAT, TIMESTAMP})
_ZERO = {INT: 0, TIMESTAMP: 0, FLOAT: 0.0, BOOLEAN: False, STRING: ""}

Resolver = Callable[[ColumnRef], tuple[str, str]]
"""Maps a column reference to (column key in the batch, TYPE); raises SchemaError itself for unknown names."""

Kernel = Callable[[Mapping[str, np.ndarray], int], np.ndarray]


# ---------------------------------------------------------------- public API


@dataclass(frozen=True)
class CompiledExpr:
    """A type-checked expression, callable on a batch given as ``{column key: array}`` and its length.

    ``type`` is the CQL type of the result, ``columns`` the batch keys it reads, ``text`` a readable form for
    EXPLAIN. The result is an array of length ``n`` with ``numpy_dtype(type)``; for a bare column reference it
    is the input array itself (no copy), so callers must not write into it.
    """

    type: str
    columns: frozenset[str]
    text: str
    fn: Kernel = field(compare=False, repr=False)
    atomic: bool = field(default=True, compare=False, repr=False)   # text needs no parentheses when nested
    constant: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _DTYPES.get(self.type))      # looked up once, not per batch

    def __call__(self, cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        out = self.fn(cols, n)
        dtype = self.dtype
        if out.dtype != dtype:
            out = out.astype(dtype)
        if out.shape != (n,):
            raise ValueError(f"expression {self.text} gave shape {out.shape} for a batch of {n} rows "
                             "(do the batch's columns have the same length?)")
        return out

    def __str__(self) -> str:
        return self.text


def compile_expr(expr: Expr, resolve: Resolver) -> CompiledExpr:
    """Type-check ``expr`` and compile it to numpy operations.

    >>> from dsms.cql.ast import BinaryOp, ColumnRef, Literal
    >>> schema = {"a": "INT", "b": "FLOAT"}
    >>> resolve = lambda ref: (ref.name, schema[ref.name])
    >>> e = compile_expr(BinaryOp(">", BinaryOp("+", ColumnRef("a"), Literal(1, "INT")), ColumnRef("b")), resolve)
    >>> e.type, sorted(e.columns), e.text
    ('BOOLEAN', ['a', 'b'], '(a + 1) > b')
    >>> e({"a": np.array([1, 5]), "b": np.array([2.5, 2.5])}, 2)
    array([False,  True])
    """
    return _compile(expr, resolve)


def compile_predicate(expr: Expr, resolve: Resolver) -> CompiledExpr:
    """Compile a WHERE/HAVING/ON condition: like :func:`compile_expr`, but the result must be BOOLEAN.

    >>> from dsms.cql.ast import ColumnRef
    >>> compile_predicate(ColumnRef("a", pos=(1, 7)), lambda ref: ("a", "INT"))
    Traceback (most recent call last):
    ...
    dsms.errors.SchemaError: line 1, column 7: a condition must be BOOLEAN, but a is INT
    """
    compiled = _compile(expr, resolve)
    if compiled.type != BOOLEAN:
        raise SchemaError(f"{_at(expr)}a condition must be BOOLEAN, but {compiled.text} is {compiled.type}")
    return compiled


def infer_type(expr: Expr, resolve: Resolver) -> str:
    """The CQL type of ``expr`` (type-checking it entirely).

    >>> from dsms.cql.ast import BinaryOp, Literal
    >>> infer_type(BinaryOp("/", Literal(7, "INT"), Literal(2.0, "FLOAT")), lambda ref: ("", ""))
    'FLOAT'
    """
    return _compile(expr, resolve).type


# ---------------------------------------------------------------- helpers


def _at(node: object) -> str:
    """The "line L, column C: " prefix of error messages, or "" when the node has no position."""
    pos = getattr(node, "pos", None)
    return f"line {pos[0]}, column {pos[1]}: " if pos else ""


def _paren(c: CompiledExpr) -> str:
    return c.text if c.atomic else f"({c.text})"


def _const_fn(value: object, dtype: np.dtype) -> Kernel:
    def fn(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        return np.full(n, value, dtype=dtype)
    return fn


def _node(type_: str, children: tuple[CompiledExpr, ...], text: str, fn: Kernel, atomic: bool = False,
          ) -> CompiledExpr:
    """A compiled inner node; folded to a constant when it reads no column."""
    columns = frozenset().union(*(c.columns for c in children))
    node = CompiledExpr(type_, columns, text, fn, atomic)
    if columns:
        return node
    value = node(_NO_COLUMNS, 1)[0]
    return replace(node, fn=_const_fn(value, _DTYPES[type_]), constant=True)


_NO_COLUMNS: Mapping[str, np.ndarray] = {}


def _operand_fns(left: CompiledExpr, right: CompiledExpr) -> tuple[Kernel, Kernel]:
    """The operands' kernels, a constant one returning a numpy scalar instead of a full array: numpy
    broadcasts it, so ``k % 2`` or ``v > 10`` costs one pass over the column, not three. Both constant: full
    arrays, since the node is then folded by evaluating it on a batch of one row."""
    if left.constant == right.constant:
        return left.fn, right.fn
    if left.constant:
        return _scalar_fn(left), right.fn
    return left.fn, _scalar_fn(right)


def _scalar_fn(c: CompiledExpr) -> Kernel:
    value = _const_value(c)
    return lambda cols, n: value


def _const_value(c: CompiledExpr) -> np.generic:
    """A constant node's value, as a numpy scalar of its type (what its full array would hold)."""
    return c.fn(_NO_COLUMNS, 1)[0]


def _lean(kernel: ArrayOp, left: CompiledExpr, right: CompiledExpr) -> Kernel:
    """``kernel(left, right)`` as one closure, a constant operand bound as its numpy scalar: no call per batch
    for it (an operator on a small batch pays for every Python call; issue 15)."""
    if right.constant and not left.constant:
        lf, rv = left.fn, _const_value(right)
        return lambda cols, n: kernel(lf(cols, n), rv)
    if left.constant and not right.constant:
        lv, rf = _const_value(left), right.fn
        return lambda cols, n: kernel(lv, rf(cols, n))
    lf, rf = left.fn, right.fn
    return lambda cols, n: kernel(lf(cols, n), rf(cols, n))


def _int_by_constant(op: str, d: int) -> ArrayOp | None:
    """INT ``/`` or ``%`` by the constant ``d``, with every case that numpy would warn about decided here, so
    that the kernel needs no ``np.errstate`` (0.65 us a call): by zero 0, by -1 the negation (which wraps
    INT64_MIN as ``/`` does) or 0; any other divisor neither overflows nor divides by zero."""
    if d == 0:
        return lambda a, b: np.zeros(len(a), dtype=np.int64)
    if op == "%":
        return (lambda a, b: np.zeros(len(a), dtype=np.int64)) if d == -1 else np.fmod
    if d == -1:
        return lambda a, b: np.negative(a)
    return lambda a, b: (a - np.fmod(a, b)) // b       # exact, so floor and truncation agree


def _literal_text(value: object, type_: str) -> str:
    if type_ == STRING:
        return "'" + str(value).replace("'", "''") + "'"
    if type_ == BOOLEAN:
        return "TRUE" if value else "FALSE"
    return repr(value)


# ---------------------------------------------------------------- kernels


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """INT / INT truncated toward zero; by zero 0; INT64_MIN / -1 wraps."""
    if type(b) is not np.ndarray:                       # a constant divisor (see _operand_fns)
        if b == 0:
            return np.zeros(np.shape(a), dtype=np.int64)
        with np.errstate(all="ignore"):
            return (a - np.fmod(a, b)) // b
    zero = b == 0
    safe = np.where(zero, 1, b)
    with np.errstate(all="ignore"):
        q = (a - np.fmod(a, safe)) // safe          # exact, so floor and truncation agree
    q[zero] = 0
    return q


def _int_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """INT % INT with the sign of the dividend; by zero 0."""
    if type(b) is not np.ndarray:                       # a constant divisor (see _operand_fns)
        return np.fmod(a, b) if b != 0 else np.zeros(np.shape(a), dtype=np.int64)
    zero = b == 0
    r = np.fmod(a, np.where(zero, 1, b))
    r[zero] = 0
    return r


_INT_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": _int_div, "%": _int_mod}
_FLOAT_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "%": np.fmod}
_CMP_OPS = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
            ">=": np.greater_equal}
ArrayOp = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _cmp_kernel(op: str, lt: str, rt: str, at: str, label: str) -> ArrayOp:
    """Type-check ``left op right`` and return the array comparison (numeric promotion included).

    ``at`` is the position prefix of error messages, ``label`` names the construct in them.
    """
    ufunc = _CMP_OPS[op]
    if lt in NUMERIC and rt in NUMERIC:
        lconv = lt != FLOAT and rt == FLOAT
        rconv = rt != FLOAT and lt == FLOAT
        if not lconv and not rconv:
            return ufunc

        def numeric(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if lconv:
                a = a.astype(np.float64)
            if rconv:
                b = b.astype(np.float64)
            return ufunc(a, b)
        return numeric
    if lt == rt == STRING or (lt == rt == BOOLEAN and op in ("=", "<>")):
        return lambda a, b: ufunc(a, b).astype(np.bool_, copy=False)
    if lt == rt == BOOLEAN:
        raise SchemaError(f"{at}{label} does not order BOOLEAN values (only = and <> apply)")
    raise SchemaError(f"{at}{label} cannot compare {lt} with {rt}")


# ---------------------------------------------------------------- compilation, one function per node


def _compile(expr: Expr, resolve: Resolver) -> CompiledExpr:
    compiler = _COMPILERS.get(type(expr))
    if compiler is None:
        raise SchemaError(f"{_at(expr)}{_describe(expr)} cannot be compiled as a scalar expression here "
                          "(the planner replaces it by a column first)")
    return compiler(expr, resolve)


def _describe(expr: object) -> str:
    if isinstance(expr, Aggregate):
        return f"aggregate {expr.func}(" + ("*" if expr.arg is None else "...") + ")"
    return {
        ScalarSubquery: "scalar subquery", InSubquery: "IN (subquery)", Exists: "EXISTS (subquery)",
        Quantified: f"{getattr(expr, 'quantifier', '')} (subquery)", Star: "*",
    }.get(type(expr), f"{type(expr).__name__} node")


def _literal(e: Literal, resolve: Resolver) -> CompiledExpr:
    t = e.type.upper()
    try:
        value = coerce_value(e.value, t)
    except (TypeError, ValueError) as err:
        raise SchemaError(f"{_at(e)}bad literal: {err}") from None
    return CompiledExpr(t, frozenset(), _literal_text(value, t), _const_fn(value, _DTYPES[t]), constant=True)


def _column(e: ColumnRef, resolve: Resolver) -> CompiledExpr:
    key, t = resolve(e)
    t = t.upper()
    if t not in _DTYPES:
        raise SchemaError(f"{_at(e)}column {e.name} has unknown type {t!r}")
    dtype = _DTYPES[t]

    def fn(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        arr = cols[key]
        if not isinstance(arr, np.ndarray) or arr.dtype != dtype:
            arr = np.asarray(arr, dtype=dtype)
        return arr
    text = f"{e.qualifier}.{e.name}" if e.qualifier else e.name
    return CompiledExpr(t, frozenset({key}), text, fn)


def _timestamp_literal(c: CompiledExpr, other: CompiledExpr, at: str) -> CompiledExpr:
    """A STRING constant compared with a TIMESTAMP, read as an ISO 8601 date-time (as TIMESTAMP input is):
    ``t >= '2024-01-01T00:00:00Z'``. Anything else unchanged."""
    if not (c.constant and c.type == STRING and other.type == TIMESTAMP):
        return c
    text = c.fn(_NO_COLUMNS, 1)[0]
    try:
        ticks = iso_ticks(text)
    except ValueError:
        raise SchemaError(f"{at}{c.text} is compared with a TIMESTAMP but is no ISO 8601 date-time") from None
    return CompiledExpr(TIMESTAMP, frozenset(), str(ticks), _const_fn(ticks, _DTYPES[TIMESTAMP]), constant=True)


# A FLOAT constant c with FLOAT_SAFE_LOW <= |c| <= FLOAT_SAFE_HIGH (or 0) times, plus or minus an INT converted
# to FLOAT (finite, |x| <= 2**63) gives a finite, normal result: no numpy warning, so no ``np.errstate``.
FLOAT_SAFE_LOW, FLOAT_SAFE_HIGH = 1e-200, 1e200


def _lean_arith(op: str, t: str, left: CompiledExpr, right: CompiledExpr) -> Kernel | None:
    """The kernel of ``left op right`` without ``np.errstate`` where numpy cannot warn, else None (the general
    kernel below). INT ``+ - *`` over arrays wrap silently; INT ``/ %`` by a constant are decided by
    ``_int_by_constant``; FLOAT ``+ - *`` of an INT column and a moderate constant stay finite."""
    if left.constant and right.constant:
        return None                       # folded at compile time anyway
    if t == INT:
        if op in ("+", "-", "*"):
            return _lean(_INT_OPS[op], left, right)
        if right.constant:
            return _lean(_int_by_constant(op, int(_const_value(right))), left, right)
        return None
    if op not in ("+", "-", "*"):
        return None
    col, const = (left, right) if right.constant else (right, left) if left.constant else (None, None)
    if col is None or col.type == FLOAT or const.type != FLOAT:
        return None
    c = float(_const_value(const))
    if not (c == 0.0 or FLOAT_SAFE_LOW <= abs(c) <= FLOAT_SAFE_HIGH):
        return None
    cf, cv, ufunc = col.fn, np.float64(c), _FLOAT_OPS[op]
    if const is right:
        return lambda cols, n: ufunc(cf(cols, n).astype(np.float64), cv)
    return lambda cols, n: ufunc(cv, cf(cols, n).astype(np.float64))


def _divisibility(e: BinaryOp, op: str, right: CompiledExpr, resolve: Resolver) -> Kernel | None:
    """``x % d = 0`` (or ``<> 0``) for a constant odd ``d`` (|d| >= 3) as a multiplication, else None.

    ``x % d = 0`` exactly when d divides x, whatever the sign convention of ``%``. For odd d, with ``inv`` its
    inverse modulo 2**64 and M = floor(2**63 / |d|), d divides the int64 x exactly when
    ``u = (x * inv + M) mod 2**64 <= 2M`` (x = d*m with |m| <= M maps to u = m + M; a non-multiple cannot, as
    d*m and x would then be two int64 values equal modulo 2**64). Shifted by 2**63 that is a signed test, as
    numpy's int64 arithmetic wraps: ``x * inv + (M - 2**63) <= 2M - 2**63``. One multiply, one add and one
    compare instead of an integer division per row (NEXMark q2's ``auction % 123 = 0``: 1.7 us against 2.7 us
    for 920 rows)."""
    if op not in ("=", "<>") or not (right.constant and int(_const_value(right)) == 0):
        return None
    mod = e.left
    if not (isinstance(mod, BinaryOp) and mod.op == "%"):
        return None
    x, d = _compile(mod.left, resolve), _compile(mod.right, resolve)
    if x.constant or not d.constant or FLOAT in (x.type, d.type):
        return None
    a = abs(int(_const_value(d)))
    if a < 3 or a % 2 == 0:
        return None
    inv, m = pow(a, -1, 2**64), 2**63 // a
    inv = np.int64(inv - 2**64 if inv >= 2**63 else inv)      # the same bits, as int64
    add, top = np.int64(m - 2**63), np.int64(2 * m - 2**63)
    xf, test = x.fn, np.less_equal if op == "=" else np.greater

    def divisible(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        q = np.multiply(xf(cols, n), inv)       # wraps modulo 2**64 (numpy never warns over arrays)
        q += add
        return test(q, top)
    return divisible


def _string_choices(e: BinaryOp, resolve: Resolver) -> tuple[CompiledExpr, list[str]] | None:
    """The STRING column and the constants of ``c = 'a' OR c = 'b' OR ..`` (any nesting of OR, either side of
    each ``=``), or None for any other condition (NEXMark q3's ``state = 'OR' OR state = 'ID' OR ..``)."""
    leaves, todo = [], [e]
    while todo:
        node = todo.pop()
        if not isinstance(node, BinaryOp):
            return None
        if node.op.upper() == "OR":
            todo += [node.left, node.right]
        elif node.op == "=":
            leaves.append(node)
        else:
            return None
    column, values = None, []
    for leaf in leaves:
        ref, lit = (leaf.left, leaf.right) if isinstance(leaf.right, Literal) else (leaf.right, leaf.left)
        if not (isinstance(ref, ColumnRef) and isinstance(lit, Literal)):
            return None
        c, v = _compile(ref, resolve), _compile(lit, resolve)
        if c.type != STRING or v.type != STRING or (column is not None and c.columns != column.columns):
            return None
        column = c
        values.append(_const_value(v))
    return column, values


def _membership(x: CompiledExpr, values: list[str], negated: bool = False) -> Kernel:
    """Whether each string of ``x`` is one of ``values`` (or none of them): one set lookup per row, not one
    object comparison per row and value plus an OR per value (q3's three states over 20 Person rows: 1.5 us
    against 4 us). Equal as ``=`` is, since STRING values are Python ``str``."""
    xf, look = x.fn, frozenset(values).__contains__

    def member(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        out = np.fromiter(map(look, xf(cols, n)), dtype=np.bool_, count=n)
        return ~out if negated else out
    return member


def _binary(e: BinaryOp, resolve: Resolver) -> CompiledExpr:
    op = "<>" if e.op == "!=" else e.op.upper()
    left, right = _compile(e.left, resolve), _compile(e.right, resolve)
    if op in _CMP_OPS:
        left, right = _timestamp_literal(left, right, _at(e)), _timestamp_literal(right, left, _at(e))
    lt, rt = left.type, right.type
    lf, rf = _operand_fns(left, right)
    text = f"{_paren(left)} {op} {_paren(right)}"
    if op in _INT_OPS:
        if lt not in NUMERIC or rt not in NUMERIC:
            hint = " (use || to concatenate strings)" if op == "+" and lt == rt == STRING else ""
            raise SchemaError(f"{_at(e)}operator {op} does not apply to {lt} and {rt}{hint}")
        if FLOAT in (lt, rt):
            kernel, lconv, rconv, t = _FLOAT_OPS[op], lt != FLOAT, rt != FLOAT, FLOAT
        else:
            kernel, lconv, rconv, t = _INT_OPS[op], False, False, INT
        lean = _lean_arith(op, t, left, right)
        if lean is not None:
            return _node(t, (left, right), text, lean)

        def arith(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
            a, b = lf(cols, n), rf(cols, n)
            if lconv:
                a = a.astype(np.float64)
            if rconv:
                b = b.astype(np.float64)
            with np.errstate(all="ignore"):
                return kernel(a, b)
        return _node(t, (left, right), text, arith)
    if op in _CMP_OPS:
        cmp = _cmp_kernel(op, lt, rt, _at(e), f"operator {op}")
        divisible = _divisibility(e, op, right, resolve) if lt == rt == INT else None
        if divisible is not None:
            return _node(BOOLEAN, (left, right), text, divisible)
        return _node(BOOLEAN, (left, right), text, _lean(cmp, left, right))
    if op in ("AND", "OR"):
        if lt != BOOLEAN or rt != BOOLEAN:
            raise SchemaError(f"{_at(e)}{op} needs BOOLEAN operands, got {lt} and {rt}")
        ufunc = np.logical_and if op == "AND" else np.logical_or
        members = _string_choices(e, resolve) if op == "OR" else None
        if members is not None:
            return _node(BOOLEAN, (left, right), text, _membership(*members))
        return _node(BOOLEAN, (left, right), text, _lean(ufunc, left, right))
    if op == "||":
        if lt != STRING or rt != STRING:
            raise SchemaError(f"{_at(e)}operator || needs STRING operands, got {lt} and {rt}")

        def concat(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
            return np.fromiter(map(str.__add__, left.fn(cols, n), right.fn(cols, n)), dtype=object, count=n)
        return _node(STRING, (left, right), text, concat)
    raise SchemaError(f"{_at(e)}unknown operator {e.op}")


def _unary(e: UnaryOp, resolve: Resolver) -> CompiledExpr:
    op = e.op.upper()
    arg = _compile(e.operand, resolve)
    f = arg.fn
    if op == "-":
        if arg.type not in NUMERIC:
            raise SchemaError(f"{_at(e)}unary - needs a number, got {arg.type}")

        def neg(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
            with np.errstate(all="ignore"):
                return np.negative(f(cols, n))
        return _node(FLOAT if arg.type == FLOAT else INT, (arg,), f"-{_paren(arg)}", neg)
    if op == "NOT":
        if arg.type != BOOLEAN:
            raise SchemaError(f"{_at(e)}NOT needs a BOOLEAN, got {arg.type}")
        return _node(BOOLEAN, (arg,), f"NOT {_paren(arg)}", lambda cols, n: np.logical_not(f(cols, n)))
    raise SchemaError(f"{_at(e)}unknown unary operator {e.op}")


def _strings(fn: Callable[[str], object], dtype: object) -> Callable[[np.ndarray, int], np.ndarray]:
    return lambda a, n: np.fromiter(map(fn, a), dtype=dtype, count=n)


_FUNCS: dict[str, tuple[frozenset[str], Callable[[str], str], Callable[[np.ndarray, int], np.ndarray]]] = {
    # name: (accepted argument types, result type from argument type, array kernel)
    "LOWER": (frozenset({STRING}), lambda t: STRING, _strings(str.lower, object)),
    "UPPER": (frozenset({STRING}), lambda t: STRING, _strings(str.upper, object)),
    "LENGTH": (frozenset({STRING}), lambda t: INT, _strings(len, np.int64)),
    "ABS": (NUMERIC, lambda t: FLOAT if t == FLOAT else INT, lambda a, n: np.abs(a)),
}


def _func(e: FuncCall, resolve: Resolver) -> CompiledExpr:
    name = e.name.upper()
    if name not in _FUNCS:
        raise SchemaError(f"{_at(e)}unknown function {e.name} (known: {', '.join(_FUNCS)})")
    accepted, result, kernel = _FUNCS[name]
    if len(e.args) != 1:
        raise SchemaError(f"{_at(e)}{name} takes 1 argument, got {len(e.args)}")
    arg = _compile(e.args[0], resolve)
    if arg.type not in accepted:
        raise SchemaError(f"{_at(e)}{name} needs {' or '.join(sorted(accepted))}, got {arg.type}")
    f = arg.fn

    def call(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        with np.errstate(all="ignore"):
            return kernel(f(cols, n), n)
    return _node(result(arg.type), (arg,), f"{name}({arg.text})", call, atomic=True)


def _in_list(e: InList, resolve: Resolver) -> CompiledExpr:
    x = _compile(e.expr, resolve)
    items = tuple(_timestamp_literal(_compile(i, resolve), x, _at(e)) for i in e.items)
    label = "NOT IN" if e.negated else "IN"
    tests = [(_cmp_kernel("=", x.type, i.type, _at(node) or _at(e), label), i.fn)
             for node, i in zip(e.items, items)]
    xf, negated = x.fn, e.negated
    text = f"{_paren(x)} {label} ({', '.join(i.text for i in items)})"
    if x.type == STRING and not x.constant and all(i.constant for i in items):
        return _node(BOOLEAN, (x, *items), text, _membership(x, [_const_value(i) for i in items], negated))

    def member(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        a = xf(cols, n)
        out = np.zeros(n, dtype=np.bool_)
        for cmp, f in tests:
            out |= cmp(a, f(cols, n))
        return ~out if negated else out
    return _node(BOOLEAN, (x, *items), text, member)


def _between(e: Between, resolve: Resolver) -> CompiledExpr:
    x, lo, hi = (_compile(c, resolve) for c in (e.expr, e.low, e.high))
    lo, hi = _timestamp_literal(lo, x, _at(e)), _timestamp_literal(hi, x, _at(e))
    label = "NOT BETWEEN" if e.negated else "BETWEEN"
    ge = _cmp_kernel(">=", x.type, lo.type, _at(e), label)
    le = _cmp_kernel("<=", x.type, hi.type, _at(e), label)
    xf, lof, hif, negated = x.fn, lo.fn, hi.fn, e.negated

    def between(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        a = xf(cols, n)
        out = ge(a, lof(cols, n)) & le(a, hif(cols, n))
        return ~out if negated else out
    text = f"{_paren(x)} {label} {_paren(lo)} AND {_paren(hi)}"
    return _node(BOOLEAN, (x, lo, hi), text, between)


def _like(e: Like, resolve: Resolver) -> CompiledExpr:
    x = _compile(e.expr, resolve)
    label = "NOT LIKE" if e.negated else "LIKE"
    if x.type != STRING:
        raise SchemaError(f"{_at(e)}{label} needs a STRING on its left, got {x.type}")
    if not (isinstance(e.pattern, Literal) and e.pattern.type.upper() == STRING):
        raise SchemaError(f"{_at(e.pattern) or _at(e)}the pattern of {label} must be a string literal")
    pattern = _literal(e.pattern, resolve)
    escape = getattr(e, "escape", None)
    match = like_column(str(e.pattern.value), escape)
    xf, negated = x.fn, e.negated

    def like(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        out = match(xf(cols, n))
        return ~out if negated else out
    esc = f" ESCAPE {_literal_text(escape, STRING)}" if escape else ""
    return _node(BOOLEAN, (x,), f"{_paren(x)} {label} {pattern.text}{esc}", like)


def _case(e: Case, resolve: Resolver) -> CompiledExpr:
    if not e.whens:
        raise SchemaError(f"{_at(e)}CASE needs at least one WHEN")
    operand = _compile(e.operand, resolve) if e.operand is not None else None
    conds = [_compile(w, resolve) for w, _ in e.whens]
    results = [_compile(r, resolve) for _, r in e.whens]
    else_ = _compile(e.else_, resolve) if e.else_ is not None else None
    branches = results + ([else_] if else_ is not None else [])

    types = {r.type for r in branches}
    if len(types) == 1:
        t = types.pop()
    elif types <= NUMERIC:
        t = FLOAT if FLOAT in types else INT
    else:
        raise SchemaError(f"{_at(e)}CASE results have incompatible types {', '.join(sorted(types))}")

    if operand is None:
        for w, c in zip((w for w, _ in e.whens), conds):
            if c.type != BOOLEAN:
                raise SchemaError(f"{_at(w) or _at(e)}a WHEN condition must be BOOLEAN, got {c.type}")
        tests = [(None, c.fn) for c in conds]
    else:
        tests = [(_cmp_kernel("=", operand.type, c.type, _at(w) or _at(e), "CASE"), c.fn)
                 for (w, _), c in zip(e.whens, conds)]
    of = operand.fn if operand is not None else None
    dtype = _DTYPES[t]
    values = [(r.fn, r.type != t and t == FLOAT) for r in results]
    default = else_.fn if else_ is not None else _const_fn(_ZERO[t], dtype)
    default_conv = else_ is not None and else_.type != t and t == FLOAT

    def case(cols: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        key = of(cols, n) if of is not None else None
        out = default(cols, n)
        if default_conv:
            out = out.astype(dtype)
        # the first matching WHEN wins: apply them from last to first
        for (cmp, cf), (vf, conv) in reversed(list(zip(tests, values))):
            cond = cf(cols, n) if cmp is None else cmp(key, cf(cols, n))
            value = vf(cols, n)
            out = np.where(cond, value.astype(dtype) if conv else value, out)
        return out

    parts = ["CASE"] + ([operand.text] if operand is not None else [])
    parts += [f"WHEN {c.text} THEN {r.text}" for c, r in zip(conds, results)]
    parts += [f"ELSE {else_.text}"] if else_ is not None else []
    children = tuple(x for x in (operand, *conds, *branches) if x is not None)
    return _node(t, children, " ".join(parts) + " END", case, atomic=True)


_COMPILERS: dict[type, Callable[[Expr, Resolver], CompiledExpr]] = {
    Literal: _literal, ColumnRef: _column, BinaryOp: _binary, UnaryOp: _unary, FuncCall: _func,
    InList: _in_list, Between: _between, Like: _like, Case: _case,
}
