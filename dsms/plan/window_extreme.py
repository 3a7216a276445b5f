"""Joins of a tumbling window with its own MAX (or MIN): the facts under which the planner builds such a join as
one operator, ``WindowExtremeJoinOp`` (``dsms/operators/window_extreme_join.py``; issue 15, NEXMark q7).

Source: SPEC section 3 (``[RANGE T SLIDE T]`` at instant τ holds the elements of the one period ending at the
last multiple of T at or before τ; an aggregate without GROUP BY over an empty relation yields no row).

The shape: ``W [RANGE T SLIDE T] B, (SELECT MAX(c) FROM W [RANGE T SLIDE T]) M WHERE B.c = M.max`` (either side
first; other conjuncts may follow). When both windows are tumbling with one size over the same stream (the same
logical node below them once projection pushdown's projections are taken out: the same stream, filters and
samples), the aggregate is a bare ``MAX`` (or ``MIN``) with no GROUP BY, no DISTINCT and nothing above it, over
the very column the window's side joins on, and that column is INT or TIMESTAMP (exact equality and a total
order: no NaN, no -0.0), then at every instant the join holds exactly the rows of the current period whose value
equals the period's extreme, each paired with that extreme: the aggregate's relation is one row (the period's
extreme) or none (an empty period), and both windows hold the same period. So the rows of a period that are
below (above, for MIN) a value already seen in it can never match, and the join need not keep them; the MAX side
need not be computed apart either, since the same rows give it. Anything else (a sliding or hopping window, two
sizes, another input or filter on one side, a GROUP BY, HAVING or a second aggregate, a FLOAT or STRING column)
is planned the general way.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsms.cql import ast
from dsms.plan import logical as L
from dsms.plan.rules.push_projection_down import unnarrow

EXTREMES = ("MAX", "MIN")
TYPES = ("INT", "TIMESTAMP")


@dataclass(frozen=True)
class WindowExtreme:
    """A join the planner builds as ``WindowExtremeJoinOp``: ``side`` is the window's side of the join (0 left),
    ``source`` the node the operator reads (below the window and its pushed projections), ``picks`` the
    ``source`` columns the window's side outputs (in order), ``key`` the position among them of the column
    compared with the extreme, ``func`` MAX or MIN, ``size`` the period (RANGE = SLIDE)."""

    side: int
    source: object
    picks: tuple[int, ...]
    key: int
    func: str
    size: int


def window_extreme(node) -> WindowExtreme | None:
    """The ``WindowExtreme`` of a join of that shape (module docstring), or None: then the join is built the
    general way.

    >>> s = L.StreamScan("bid", ("INT", "INT"), names=("a", "p"))
    >>> w = L.Window(s, "RANGE", 10, 10, names=s.names)
    >>> m = L.Aggregate(w, (), (("MAX", 1, False),), ("INT",), names=("m",))
    >>> x = window_extreme(L.Join(w, m, (1,), (0,)))
    >>> x.source is s, x.side, x.picks, x.key, x.func, x.size
    (True, 0, (0, 1), 1, 'MAX', 10)
    >>> window_extreme(L.Join(w, m, (0,), (0,))) is None          # joined on another column than the MAX's
    True
    >>> window_extreme(L.Join(L.Window(s, "RANGE", 10, 5), m, (1,), (0,))) is None   # another window
    True
    """
    if not isinstance(node, L.Join) or len(node.left_keys) != 1:
        return None
    for side, win, agg, wkey, akey in ((0, node.left, node.right, node.left_keys[0], node.right_keys[0]),
                                       (1, node.right, node.left, node.right_keys[0], node.left_keys[0])):
        if not (_tumbling(win) and isinstance(agg, L.Aggregate) and not agg.group and len(agg.aggs) == 1
                and akey == 0 and _tumbling(agg.child)):
            continue
        func, arg, distinct = agg.aggs[0]
        if func not in EXTREMES or distinct or arg is None or win.child.kind != L.STREAM:
            continue
        (origin, kept), (agg_origin, agg_kept) = unnarrow(win), unnarrow(agg.child)
        if origin != agg_origin or kept[wkey] != agg_kept[arg] or win.types[wkey] not in TYPES:
            continue
        source, picks = _below_pushed(win.child)
        return WindowExtreme(side, source, picks, wkey, func, win.range)
    return None


def _tumbling(node) -> bool:
    """A RANGE window whose slide is its range (``[NOW]`` is ``RANGE 1``)."""
    return (isinstance(node, L.Window) and node.wkind == "RANGE" and node.range is not None
            and node.range == (node.slide or 1))


def _below_pushed(node) -> tuple[object, tuple[int, ...]]:
    """The node below the pushed projections of plain columns at the top of ``node``, and which of its columns
    ``node`` outputs: the operator reads that node and picks the columns itself (no projection run a push)."""
    picks = tuple(range(len(node.types)))
    while isinstance(node, L.Project) and node.pushed and all(
            isinstance(e, ast.ColumnRef) and e.name.startswith("$") for e in node.exprs):
        picks = tuple(int(node.exprs[k].name[1:]) for k in picks)
        node = node.child
    return node, picks
