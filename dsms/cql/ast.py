"""The CQL abstract syntax tree: what the parser produces and the binder and the reference evaluator consume.

Source: the CQL dialect of SPEC section 4; STREAM's CQL (digest-004 section 2.A) and the PIPES window syntax
(digest-002a section 3.2, ``WINDOW(RANGE 2 DAYS)``) are both accepted by the grammar and land in the same nodes.

Every node is a frozen dataclass, so trees compare and hash structurally (the planner uses that to find shared
subplans). ``pos`` is the (line, column) of the node's first token, 1-based, kept out of equality.
Durations are already converted to ticks (milliseconds) by the parser: ``RANGE 5 SECONDS`` is ``range=5000``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

Pos = tuple[int, int] | None


def _pos() -> Pos:
    return field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Literal:
    """A constant. ``type`` is one of INT, FLOAT, STRING, BOOLEAN."""

    value: object
    type: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class ColumnRef:
    """``name`` or ``qualifier.name``; names are kept as written, compared case-insensitively by the binder."""

    name: str
    qualifier: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Star:
    """``*`` or ``qualifier.*`` in a select list (and ``COUNT(*)`` is an Aggregate with ``arg=None``)."""

    qualifier: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class BinaryOp:
    """``op`` is one of + - * / % = <> < <= > >= AND OR (``!=`` is normalised to ``<>``)."""

    op: str
    left: Expr
    right: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class UnaryOp:
    """``op`` is ``-`` or ``NOT`` (a unary ``+`` is dropped by the parser)."""

    op: str
    operand: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class FuncCall:
    """A scalar function; ``name`` upper-case: LOWER, UPPER, LENGTH, ABS."""

    name: str
    args: tuple[Expr, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Aggregate:
    """COUNT, SUM, AVG, MIN, MAX and the APPROX_ aggregates (upper-case). ``arg`` is None for ``COUNT(*)``;
    ``param`` is APPROX_QUANTILE's fraction or APPROX_TOP_K's k."""

    func: str
    arg: Expr | None
    distinct: bool = False
    pos: Pos = _pos()
    param: float | int | None = None


@dataclass(frozen=True)
class InList:
    expr: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Between:
    expr: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Like:
    """SQL LIKE: ``%`` any run, ``_`` one character; the pattern is a string literal. ``escape`` (from
    ``ESCAPE 'c'``, SQL standard; none by default) makes the character after it literal."""

    expr: Expr
    pattern: Expr
    negated: bool = False
    pos: Pos = _pos()
    escape: str | None = None


@dataclass(frozen=True)
class Case:
    """``CASE [operand] WHEN w THEN r ... [ELSE e] END``; ``whens`` holds (w, r) pairs."""

    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class ScalarSubquery:
    """``(SELECT ...)`` used as a value; it must yield one column and at most one row."""

    query: Query
    pos: Pos = _pos()


@dataclass(frozen=True)
class InSubquery:
    expr: Expr
    query: Query
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Exists:
    query: Query
    negated: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Quantified:
    """``expr op ALL|ANY|SOME (subquery)``; ``quantifier`` is ALL or ANY (SOME is normalised to ANY)."""

    op: str
    expr: Expr
    quantifier: str
    query: Query
    pos: Pos = _pos()


Expr = Union[
    Literal, ColumnRef, BinaryOp, UnaryOp, FuncCall, Aggregate, InList, Between, Like, Case,
    ScalarSubquery, InSubquery, Exists, Quantified,
]


# ---------------------------------------------------------------- queries


@dataclass(frozen=True)
class Window:
    """A window spec after a stream in FROM (SPEC section 3).

    kind: RANGE (``range`` ticks, optional ``slide``), ROWS (``rows``), NOW, UNBOUNDED.
    ``partition_by`` is non-empty only with ROWS. ``where`` is the window-internal filter (STREAM's
    ``[... Where p]``), applied before the window cut-off (digest-004 R-CQL-07).
    """

    kind: str
    range: int | None = None
    slide: int | None = None
    rows: int | None = None
    partition_by: tuple[ColumnRef, ...] = ()
    where: Expr | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class FromItem:
    """One FROM entry: a catalog name or a subquery, with alias, window, sample and relation-to-stream op.

    ``ISTREAM(Person) P`` gives ``source='Person', stream_op='ISTREAM'``. ``sample`` is the percentage of
    ``SAMPLE(p)``. The order of application is stream_op, then sample, then window.
    """

    source: str | Query
    alias: str | None = None
    window: Window | None = None
    sample: float | None = None
    stream_op: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class SelectItem:
    expr: Expr | Star
    alias: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Select:
    """A SELECT block. ``stream_op`` is set for ``SELECT ISTREAM(a, b) ...`` (the op wraps the whole block)."""

    items: tuple[SelectItem, ...]
    from_: tuple[FromItem, ...]
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    distinct: bool = False
    stream_op: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class SetOp:
    """UNION / EXCEPT / INTERSECT, ``all`` for the bag forms. Left-associative as in SQL."""

    op: str
    all: bool
    left: Query
    right: Query
    pos: Pos = _pos()


@dataclass(frozen=True)
class StreamOp:
    """``ISTREAM(query)``, ``DSTREAM(query)`` or ``RSTREAM(query)`` around a whole query."""

    op: str
    query: Query
    pos: Pos = _pos()


Query = Union[Select, SetOp, StreamOp]


# ---------------------------------------------------------------- statements


@dataclass(frozen=True)
class ColumnDef:
    """``name TYPE``; type upper-case: INT, FLOAT, STRING, BOOLEAN, TIMESTAMP (INTEGER, REAL, DOUBLE, VARCHAR,
    CHAR(n), TEXT and BOOL are accepted and normalised)."""

    name: str
    type: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class MqttSource:
    """``FROM MQTT 'topic' FORMAT JSON|MSGPACK [TIMESTAMP field]``."""

    topic: str
    format: str = "JSON"
    timestamp_field: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class RegisterStream:
    """``REGISTER STREAM name (cols) [TIME EVENT|ARRIVAL] [FROM MQTT ...]``; ``time`` as written (None: not
    written; the engine's default is event time, or for MQTT what the TIMESTAMP clause says)."""

    name: str
    columns: tuple[ColumnDef, ...]
    source: MqttSource | None = None
    pos: Pos = _pos()
    time: str | None = None


@dataclass(frozen=True)
class RegisterRelation:
    name: str
    columns: tuple[ColumnDef, ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class RegisterQuery:
    """``REGISTER QUERY name AS query [APPROXIMATE (WINDOW f, SAMPLE g)] [PUBLISH TO MQTT 'topic']``;
    ``approximate`` maps WINDOW and SAMPLE to their reduction factors (dsms/plan/rules/reduce_for_approximation.py)."""

    name: str
    query: Query
    publish_topic: str | None = None
    pos: Pos = _pos()
    approximate: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class RegisterView:
    name: str
    query: Query
    pos: Pos = _pos()


@dataclass(frozen=True)
class Drop:
    """``DROP QUERY|STREAM|RELATION|VIEW name``."""

    kind: str
    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class QueryStatement:
    """A bare query, registered anonymously."""

    query: Query
    pos: Pos = _pos()


@dataclass(frozen=True)
class Show:
    """``SHOW STREAMS | RELATIONS | VIEWS | QUERIES``: list what the catalog holds (reads, changes nothing)."""

    what: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Describe:
    """``DESCRIBE name``: the columns of a stream, relation, view or query, and what it is."""

    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Explain:
    """``EXPLAIN query`` (the plan it would get, registering nothing) or ``EXPLAIN name`` (the plan of a
    registered query or view). Exactly one of ``query`` and ``name`` is set."""

    query: Query | None = None
    name: str | None = None
    pos: Pos = _pos()


Statement = Union[RegisterStream, RegisterRelation, RegisterQuery, RegisterView, Drop, QueryStatement, Show,
                  Describe, Explain]

#: The statements that only read the catalog: nothing to log, archive or undo.
READ_ONLY = (Show, Describe, Explain)
