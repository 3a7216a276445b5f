"""A grouped MAX or MIN straight over a join whose inputs never delete: the facts under which the planner builds
the join and the aggregate as one operator, ``JoinExtremeOp`` (``dsms/operators/join_extreme.py``; issue 15,
NEXMark q4's ``Q4Win``: ``SELECT A.id, A.category, MAX(B.price) FROM Auction [RANGE UNBOUNDED] A, Bid [RANGE
UNBOUNDED] B WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires GROUP BY A.id, A.category``).

Source: SPEC section 3 (an aggregate over the instantaneous relation; a relation's changes per instant, net) and
digest-002a section 2.15 (with inserts only, Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR holds no negative tuple).

Why it is exact. When both inputs of the join never delete (``monotone``: streams under ``[RANGE UNBOUNDED]``,
views over such joins), neither does the join: its relation at an instant is every pair whose two rows have
arrived by then, and a pair, once in, stays. The aggregate's relation at instant t is then, per group, the
extreme over the pairs in by t; it changes at t exactly when a pair entering at t founds its group or beats its
extreme before t. When every group column is a column of one input (the group side), a pair's group is a
function of its group-side row alone, so it can be numbered when that row arrives; a pair needs nothing but that
number and the aggregated values. A pair that does not beat its group's extreme as committed so far (the
extreme over the instants before every pair still held) cannot beat the extreme at its own instant, which is at
least as large: dropping it changes no instant's result. The fold of the pairs kept then gives, per (instant,
group), the same old and new row the aggregate over the join's output gives (``extreme_inserts.py``), and they
are emitted only once the instant is final (the join has forwarded its frontier past it), so each instant's
output is net, as an aggregate's is.

What is checked on the plan, never assumed (``join_extreme``): the node is an ``Aggregate`` with a GROUP BY,
every aggregate a MAX or MIN without DISTINCT over an INT or TIMESTAMP column (a total order with exact
equality: no NaN, no -0.0), every group column INT or TIMESTAMP; its child is a ``Join`` with at least one equi-
join key, or a ``Filter`` (projection pushdown's ``keep`` included) directly over one, either of them under
projections of plain columns only (a reordering); both join inputs are ``monotone``; every group column comes
from one input. The aggregated columns may come from either input. The
planner also leaves a join alone that another query's build already holds (``PhysicalPlanner._join_extreme``):
that build is shared as it is. Anything else is planned as a join and an aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsms.cql import ast
from dsms.plan import logical as L

TYPES = ("INT", "TIMESTAMP")


@dataclass(frozen=True)
class JoinExtreme(L._Binary):
    """The join and the aggregate above it, as one node of the physical plan (made by the planner alone, like
    ``L.FilteredJoin``). ``predicate``: the join's and the filter's conditions, over left + right; ``group``: the
    group columns, positions in the ``group_side`` input; ``aggs``: (MAX or MIN, joined position) each."""

    join: L.Join
    predicate: ast.Expr | None
    group_side: int
    group: tuple[int, ...]
    aggs: tuple[tuple[str, int], ...]
    types: tuple[str, ...]
    names: tuple[str, ...] = field(default=(), compare=False)

    @property
    def left(self):
        return self.join.left

    @property
    def right(self):
        return self.join.right

    @property
    def monotone(self) -> bool:
        return False


def join_extreme(node) -> JoinExtreme | None:
    """The ``JoinExtreme`` of an aggregate of that shape (module docstring), or None.

    >>> a = L.StreamScan("a", ("INT", "INT"), names=("id", "cat"))
    >>> b = L.StreamScan("b", ("INT", "INT"), names=("auction", "price"))
    >>> j = L.Join(L.Window(a, "UNBOUNDED"), L.Window(b, "UNBOUNDED"), (0,), (0,))
    >>> x = join_extreme(L.Aggregate(j, (0, 1), (("MAX", 3, False),), ("INT",) * 3))
    >>> x.group_side, x.group, x.aggs
    (0, (0, 1), (('MAX', 3),))
    >>> join_extreme(L.Aggregate(j, (0, 3), (("MAX", 3, False),), ("INT",) * 3)) is None   # groups of both
    True
    >>> join_extreme(L.Aggregate(j, (0,), (("SUM", 3, False),), ("INT",) * 2)) is None
    True
    >>> w = L.Join(L.Window(a, "RANGE", 10), L.Window(b, "UNBOUNDED"), (0,), (0,))    # a window deletes
    >>> join_extreme(L.Aggregate(w, (0,), (("MAX", 3, False),), ("INT",) * 2)) is None
    True
    """
    if not isinstance(node, L.Aggregate) or not node.group:
        return None
    child, keep, pred = node.child, None, None
    picks = list(range(len(child.types)))           # the aggregate's input columns, as columns of ``child``
    while isinstance(child, L.Project):             # projections of plain columns: followed through
        refs = [e.name for e in child.exprs if isinstance(e, ast.ColumnRef) and e.name.startswith("$")]
        if len(refs) != len(child.exprs):
            return None
        picks = [int(refs[c][1:]) for c in picks]
        child = child.child
    if isinstance(child, L.Filter) and isinstance(child.child, L.Join):
        keep, pred, child = child.keep, child.predicate, child.child
    if not isinstance(child, L.Join) or not child.left_keys or not child.monotone:
        return None
    if child.predicate is not None:
        pred = child.predicate if pred is None else ast.BinaryOp("AND", child.predicate, pred)

    def joined(c: int) -> int:
        c = picks[c]
        return c if keep is None else keep[c]
    types = child.types
    width = len(child.left.types)
    cols = [joined(g) for g in node.group]
    if any(types[c] not in TYPES for c in cols):
        return None
    sides = {int(c >= width) for c in cols}
    if len(sides) != 1:
        return None
    side = sides.pop()
    aggs = []
    for fn, arg, distinct in node.aggs:
        if fn not in ("MAX", "MIN") or distinct or arg is None or types[joined(arg)] not in TYPES:
            return None
        aggs.append((fn, joined(arg)))
    group = tuple(c - width * side for c in cols)
    return JoinExtreme(child, pred, side, group, tuple(aggs), node.types, node.names)

