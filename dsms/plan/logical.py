"""Logical plan nodes: one frozen dataclass per operator of the CQL algebra (digest-004 section 2.D,
digest-002a sections 2.4-2.5).

A node's fields describe the computation only; output column names live in ``names``, which is excluded from
equality, so two queries that compute the same thing under different names get equal (hashable) subtrees and
the physical planner runs them once (digest-004 R-SHR-01). Expressions are ``dsms.cql.ast`` trees whose column
references are positional: ``ColumnRef("$3")`` is column 3 of the node's input (for a join, of left + right).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsms.cql.ast import Expr
from dsms.errors import SchemaError

STREAM = "stream"
RELATION = "relation"


def _names() -> tuple[str, ...]:
    return field(default=(), compare=False)


class _Leaf:
    """A node with no inputs."""

    @property
    def children(self) -> tuple:
        return ()


class _Unary:
    """A node with one input ``child``; by default it has its child's kind, types and monotonicity."""

    @property
    def children(self) -> tuple:
        return (self.child,)

    @property
    def kind(self) -> str:
        return self.child.kind

    @property
    def monotone(self) -> bool:
        return self.child.monotone


class _Binary:
    """A node with inputs ``left`` and ``right``; its result is a relation."""

    kind = RELATION

    @property
    def children(self) -> tuple:
        return (self.left, self.right)


@dataclass(frozen=True)
class StreamScan(_Leaf):
    """A registered input stream."""

    name: str
    types: tuple[str, ...]
    names: tuple[str, ...] = _names()
    kind = STREAM
    monotone = True


@dataclass(frozen=True)
class RelationScan(_Leaf):
    """A registered base relation, fed by timestamped inserts and deletes."""

    name: str
    types: tuple[str, ...]
    names: tuple[str, ...] = _names()
    kind = RELATION
    monotone = False


@dataclass(frozen=True)
class QueryOutput(_Leaf):
    """The result of a registered view or named query, read by later queries (its netted output)."""

    query_id: str
    kind: str
    types: tuple[str, ...]
    is_monotone: bool = False
    names: tuple[str, ...] = _names()

    @property
    def monotone(self) -> bool:
        return self.kind == STREAM or self.is_monotone


@dataclass(frozen=True)
class Sample(_Unary):
    """SAMPLE(p): keep each stream element with probability p/100 (digest-004 R-CQL-08)."""

    child: object
    percent: float
    names: tuple[str, ...] = _names()
    kind = STREAM
    monotone = True

    @property
    def types(self) -> tuple[str, ...]:
        return self.child.types


@dataclass(frozen=True)
class Window(_Unary):
    """A stream-to-relation window: RANGE (``range``, optional ``slide``), ROWS (``rows``, optional
    ``partition`` column positions), NOW, UNBOUNDED. SPEC section 3 defines each."""

    child: object
    wkind: str
    range: int | None = None
    slide: int | None = None
    rows: int | None = None
    partition: tuple[int, ...] = ()
    names: tuple[str, ...] = _names()
    kind = RELATION

    @property
    def types(self) -> tuple[str, ...]:
        return self.child.types

    @property
    def monotone(self) -> bool:
        return self.wkind == "UNBOUNDED" and self.child.monotone


@dataclass(frozen=True)
class Filter(_Unary):
    """Selection: the child's elements for which ``predicate`` (over the child's columns) holds. ``keep``: the
    child's columns it outputs, in order (None: all of them); set by projection pushdown, so a selection on a
    wide input copies only the columns read above it, with no projection after it."""

    child: object
    predicate: Expr
    names: tuple[str, ...] = _names()
    keep: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        keep, width = self.keep, len(self.child.types)
        if keep is not None and not all(type(k) is int and 0 <= k < width for k in keep):
            raise SchemaError(f"a selection keeps columns {list(keep)} of an input of {width}")

    @property
    def types(self) -> tuple[str, ...]:
        if self.keep is None:
            return self.child.types
        return tuple(self.child.types[k] for k in self.keep)


@dataclass(frozen=True)
class Project(_Unary):
    """Duplicate-preserving projection. ``pushed``: placed by projection pushdown to drop columns nobody above
    reads (EXPLAIN marks it); not part of equality, it computes the same as any equal projection."""

    child: object
    exprs: tuple[Expr, ...]
    types: tuple[str, ...]
    names: tuple[str, ...] = _names()
    pushed: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Join(_Binary):
    """Relation join; ``left_keys``/``right_keys`` are the equi-join columns (hashed), ``predicate`` the rest,
    over the concatenated schema left + right."""

    left: object
    right: object
    left_keys: tuple[int, ...] = ()
    right_keys: tuple[int, ...] = ()
    predicate: Expr | None = None
    names: tuple[str, ...] = _names()

    @property
    def types(self) -> tuple[str, ...]:
        return self.left.types + self.right.types

    @property
    def monotone(self) -> bool:
        return self.left.monotone and self.right.monotone


@dataclass(frozen=True)
class FilteredJoin(_Binary):
    """A ``Filter`` directly over a ``Join`` of two inputs that never delete, run as one operator: the join
    evaluates ``predicate`` (over the join's columns, left + right) on the pairs it finds, reading only the
    columns the predicate reads, and gathers only the columns numbered in ``keep`` (None: all) of the pairs
    that pass (NEXMark q4's and q9's band ``B.dateTime BETWEEN A.dateTime AND A.expires``). Made only by the
    physical planner (``PhysicalPlanner._filtered_join``), never by the binder: a plain join stays shareable
    with other queries, and the planner fuses only a join that no other build reads."""

    join: Join
    predicate: Expr | None           # None: a projection folded into the join (``physical._projected_join``)
    keep: tuple[int, ...] | None = None

    @property
    def left(self):
        return self.join.left

    @property
    def right(self):
        return self.join.right

    @property
    def left_keys(self) -> tuple[int, ...]:
        return self.join.left_keys

    @property
    def right_keys(self) -> tuple[int, ...]:
        return self.join.right_keys

    @property
    def names(self) -> tuple[str, ...]:
        return self.join.names

    @property
    def types(self) -> tuple[str, ...]:
        both = self.join.types
        return both if self.keep is None else tuple(both[k] for k in self.keep)

    @property
    def monotone(self) -> bool:
        return self.join.monotone


@dataclass(frozen=True)
class SemiJoin(_Binary):
    """Left rows that have (``anti=False``) or have no (``anti=True``) matching right row: IN, EXISTS, ANY and
    ALL subqueries. Output is the left schema, with the left multiplicities."""

    left: object
    right: object
    left_keys: tuple[int, ...] = ()
    right_keys: tuple[int, ...] = ()
    predicate: Expr | None = None
    anti: bool = False
    names: tuple[str, ...] = _names()

    @property
    def types(self) -> tuple[str, ...]:
        return self.left.types

    @property
    def monotone(self) -> bool:
        return not self.anti and self.left.monotone and self.right.monotone


@dataclass(frozen=True)
class Aggregate(_Unary):
    """GROUP BY ``group`` columns with ``aggs`` = (func, arg column or None, distinct). Output: the group
    columns, then one column per aggregate."""

    child: object
    group: tuple[int, ...]
    aggs: tuple[tuple[str, int | None, bool], ...]
    types: tuple[str, ...]
    names: tuple[str, ...] = _names()
    kind = RELATION
    monotone = False


@dataclass(frozen=True)
class Distinct(_Unary):
    child: object
    names: tuple[str, ...] = _names()
    kind = RELATION

    @property
    def types(self) -> tuple[str, ...]:
        return self.child.types


@dataclass(frozen=True)
class SetOp(_Binary):
    """UNION / EXCEPT / INTERSECT, ``all`` for the bag forms."""

    left: object
    right: object
    op: str
    all: bool
    names: tuple[str, ...] = _names()

    @property
    def types(self) -> tuple[str, ...]:
        return self.left.types

    @property
    def monotone(self) -> bool:
        return self.op in ("UNION", "INTERSECT") and self.left.monotone and self.right.monotone


@dataclass(frozen=True)
class ToStream(_Unary):
    """ISTREAM, DSTREAM or RSTREAM. ``ticks`` are the query's inputs whose instants drive RSTREAM."""

    child: object
    op: str
    ticks: tuple = ()
    names: tuple[str, ...] = _names()
    kind = STREAM
    monotone = True

    @property
    def children(self) -> tuple:
        return (self.child, *self.ticks)

    @property
    def types(self) -> tuple[str, ...]:
        return self.child.types


@dataclass(frozen=True)
class Changelog(_Unary):
    """The sink of a relation-valued query: the net change of each instant, once the instant is final."""

    child: object
    names: tuple[str, ...] = _names()
    kind = RELATION

    @property
    def types(self) -> tuple[str, ...]:
        return self.child.types


def input_leaves(node, view_inputs: dict) -> tuple:
    """The inputs whose elements and updates are ``node``'s input instants (SPEC section 3, RSTREAM): the
    streams, relations and derived streams it reads, through views at any depth. A view (or relation-valued
    named query) is a name for its definition, so its ``QueryOutput`` stands for the inputs it reads,
    ``view_inputs[query_id]``; a derived stream is a stream, whose own elements are the instants.

    >>> s = StreamScan("s", ("INT",))
    >>> v = QueryOutput("q1", RELATION, ("INT",))
    >>> [n.name for n in input_leaves(Join(v, s), {"q1": (StreamScan("t", ("INT",)),)})]
    ['t', 's']
    """
    leaves: list = []
    for n in walk(node):
        if isinstance(n, QueryOutput) and n.kind == RELATION:
            found = view_inputs[n.query_id]
        elif isinstance(n, StreamScan | RelationScan | QueryOutput):
            found = (n,)
        else:
            continue
        leaves += [x for x in found if x not in leaves]
    return tuple(leaves)


def walk(node):
    """Every node of the tree, children before parents."""
    for c in node.children:
        yield from walk(c)
    yield node
