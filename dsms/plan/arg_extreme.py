"""Joins of a relation with its own per-group MAX or MIN, on the group and on the extreme: the rows of each group
that hold its extreme (an arg max), computed from the relation alone.

NEXMark q9's ``Q9T`` joins the valid bids ``Q9AB`` with ``Q9M = SELECT id, MAX(price) FROM Q9AB GROUP BY id`` on
``X.id = M.id AND X.price = M.maxp``: at every instant that is exactly the bids of each auction at its highest
price, with ``M``'s columns equal to the bid's ``id`` and ``price``. When the relation never deletes, those rows
follow from its inserts alone (``dsms/operators/arg_extreme.py``): a row enters when it reaches its group's
extreme and leaves when a later instant beats it, so the join holds the current winners per group instead of
every bid, and reads nothing of ``M``'s changes but their timestamps.

The facts are checked on the plan, never assumed (``arg_extreme``): the right input is a view or subquery whose
plan is an aggregate (under its changelog) with one group column and one MAX or MIN, both INT or TIMESTAMP (equal
values are equal join codes, no NaN); its child and the join's left input reach the same plan node through
projections of plain columns, the join equates each of the aggregate's columns with the very column of that node
it was computed from (every column of the right input, so the right's columns are copies of the left's), the join
has no other predicate, and the left input never deletes (``monotone``: streams under ``[RANGE UNBOUNDED]`` and
views over them). Anything else keeps the general join.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from dsms.cql import ast
from dsms.plan import logical as L

ORDERED = ("INT", "TIMESTAMP")


class ArgExtreme(NamedTuple):
    """What the join computes instead: per value of the left's column ``group``, the rows whose column ``value``
    is the extreme (``fn``: MAX or MIN); ``right_from[i]`` is the left column the right's column ``i`` copies."""

    group: int
    value: int
    fn: str
    right_from: tuple[int, ...]


def _trace(node, col: int) -> tuple[object, int]:
    """The node and column that ``col`` of ``node`` copies, through projections of plain columns."""
    while isinstance(node, L.Project):
        e = node.exprs[col]
        if not (isinstance(e, ast.ColumnRef) and e.name.startswith("$")):
            break
        col, node = int(e.name[1:]), node.child
    return node, col


def arg_extreme(join: L.Join, view_root: Callable[[str], object | None]) -> ArgExtreme | None:
    """The arg-extreme form of ``join`` when the plan proves it (see the module), else None.

    >>> v = L.QueryOutput("q1", L.RELATION, ("INT", "INT", "INT"), is_monotone=True)
    >>> pick = lambda node, cols: L.Project(node, tuple(ast.ColumnRef(f"${c}") for c in cols), ("INT",) * len(cols))
    >>> m = L.Changelog(L.Aggregate(pick(v, (0, 2)), (0,), (("MAX", 1, False),), ("INT", "INT")))
    >>> j = L.Join(v, L.QueryOutput("q2", L.RELATION, ("INT", "INT")), (0, 2), (0, 1))
    >>> arg_extreme(j, {"q2": m}.get)
    ArgExtreme(group=0, value=2, fn='MAX', right_from=(0, 2))
    >>> arg_extreme(L.Join(v, j.right, (0, 1), (0, 1)), {"q2": m}.get) is None     # equated with another column
    True
    """
    if join.predicate is not None or not join.left.monotone:
        return None
    right = join.right
    if isinstance(right, L.QueryOutput):
        right = view_root(right.query_id) if right.kind == L.RELATION else None
    if isinstance(right, L.Changelog):
        right = right.child
    if not isinstance(right, L.Aggregate) or len(right.group) != 1 or len(right.aggs) != 1:
        return None
    fn, arg, distinct = right.aggs[0]
    if fn not in ("MAX", "MIN") or arg is None or len(right.types) != 2:
        return None
    if right.types[0] not in ORDERED or right.types[1] not in ORDERED:
        return None
    if sorted(join.right_keys) != [0, 1] or len(join.left_keys) != 2:
        return None
    source = (right.group[0], arg)                 # the aggregate child's columns behind the right's
    right_from = [0, 0]
    for lk, rk in zip(join.left_keys, join.right_keys):
        if _trace(join.left, lk) != _trace(right.child, source[rk]):
            return None
        if join.left.types[lk] not in ORDERED:
            return None
        right_from[rk] = lk
    if right_from[0] == right_from[1]:
        return None
    return ArgExtreme(right_from[0], right_from[1], fn, tuple(right_from))
