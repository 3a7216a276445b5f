"""Joins of an arg max (min) with the MIN or MAX of another of its columns per group, on the group and on that
extreme, and that aggregate itself: the rows of each group at a lexicographic extreme (the first value's
extreme, ties broken by the second's), and its second value, computed from the relation below alone.

NEXMark q9's answer joins the bids ``Q9AB X`` with ``Q9M M`` on ``X.id = M.id AND X.price = M.maxp`` (the bids of
each auction at its highest price: the arg max, ``dsms/plan/arg_extreme.py``) and with ``Q9T = SELECT X.id,
MIN(X.bidtime) AS t FROM <the arg max> GROUP BY X.id`` on ``X.id = T.id AND X.bidtime = T.t``. At every instant
that is exactly the rows of ``Q9AB`` whose (price, bidtime) is their auction's largest price and, at that price,
its earliest bidtime, and ``Q9T`` is that bidtime. When ``Q9AB`` never deletes both follow from its inserts
alone (``dsms/operators/lex_extreme_join.py``, ``dsms/operators/lex_extreme_agg.py``; the pairs ranked as one
code by ``dsms/operators/arg_extreme.py``): no operator holds the winners (which delete as the highest price
moves), and the join reads neither ``Q9M`` nor ``Q9T``.

The facts are checked on the plan, never assumed (``shape_of``; the conditions in its docstring and in
docs/architecture.md, "Lexicographic extremes"): the node is leaves joined through projections of plain columns
and joins with no predicate, one leaf a relation that never deletes, the others MIN or MAX aggregates of INT or
TIMESTAMP columns over it forming a chain of values, every join key equating copies of one column of it, each
aggregate equated with it on both columns. ``lex_extreme`` takes a join over a chain of two values or more,
``lex_aggregate`` an aggregate that extends a chain of one or more. Anything else keeps the general plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from dsms.cql import ast
from dsms.plan import logical as L
from dsms.plan.arg_extreme import ORDERED


class Shape(NamedTuple):
    """What a plan node is, proved from the plan: the rows of ``base`` (a relation that never deletes) at their
    group's lexicographic extreme ``values`` ((base column, MAX or MIN), first to last; per value of base
    column ``group``; no values: every row of ``base``), column ``i`` a copy of base column ``out[i]``."""

    base: object
    group: int | None
    values: tuple[tuple[int, str], ...]
    out: tuple[int, ...]


class LexExtreme(NamedTuple):
    """A join computed as the rows of ``source`` at their group's lexicographic extreme (``values``, per value
    of column ``group``); output column ``i`` copies ``source``'s column ``out_from[i]``."""

    source: object
    group: int
    values: tuple[tuple[int, str], ...]
    out_from: tuple[int, ...]


class LexAggregate(NamedTuple):
    """An aggregate computed from ``source``'s inserts alone: per value of its column ``group``, column
    ``values[-1][0]`` of the rows at the lexicographic extreme ``values``."""

    source: object
    group: int
    values: tuple[tuple[int, str], ...]


def _resolve(node, view_root: Callable[[str], object | None]):
    """The plan of a relation view read by ``node`` (else ``node``), below its changelog."""
    if isinstance(node, L.QueryOutput):
        node = view_root(node.query_id) if node.kind == L.RELATION else None
    if isinstance(node, L.Changelog):
        node = node.child
    return node


def _flatten(node) -> tuple[list, list[tuple[int, int]], list[tuple[tuple[int, int], tuple[int, int]]]]:
    """``node`` as leaves joined: (leaves, per output column its (leaf, column), the equalities of the join
    keys as pairs of (leaf, column)), through projections of plain columns and joins with no predicate."""
    if isinstance(node, L.Project):
        leaves, cols, eqs = _flatten(node.child)
        picked = []
        for e in node.exprs:
            if not (isinstance(e, ast.ColumnRef) and e.name.startswith("$")):
                return [node], [(0, c) for c in range(len(node.types))], []
            picked.append(cols[int(e.name[1:])])
        return leaves, picked, eqs
    if isinstance(node, L.Join) and node.predicate is None:
        ll, lc, le = _flatten(node.left)
        rl, rc, re_ = _flatten(node.right)
        k = len(ll)
        rc = [(i + k, c) for i, c in rc]
        re_ = [((a + k, b), (c + k, d)) for (a, b), (c, d) in re_]
        eqs = le + re_ + [(lc[a], rc[b]) for a, b in zip(node.left_keys, node.right_keys)]
        return ll + rl, lc + rc, eqs
    return [node], [(0, c) for c in range(len(node.types))], []


def _aggregate(agg, view_root, depth: int) -> tuple[object, int, tuple[tuple[int, str], ...]] | None:
    """(base, group column, values) of a MIN or MAX per group that is a lexicographic extreme's next value:
    one group column and one MIN or MAX, both INT or TIMESTAMP, over a ``Shape`` whose group it groups by
    (any column when the shape is every row of its base)."""
    if not isinstance(agg, L.Aggregate) or len(agg.group) != 1 or len(agg.aggs) != 1 or len(agg.types) != 2:
        return None
    fn, arg, _distinct = agg.aggs[0]
    if fn not in ("MAX", "MIN") or arg is None or agg.types[0] not in ORDERED or agg.types[1] not in ORDERED:
        return None
    shape = shape_of(agg.child, view_root, depth + 1)
    if shape is None:
        return None
    g, v = shape.out[agg.group[0]], shape.out[arg]
    if shape.values and g != shape.group:
        return None
    return shape.base, g, (*shape.values, (v, fn))


def shape_of(node, view_root: Callable[[str], object | None], depth: int = 0) -> Shape | None:
    """The ``Shape`` of ``node`` when the plan proves it, else None. The facts checked: ``node`` is leaves joined
    through projections of plain columns and joins with no predicate (``_flatten``); exactly one leaf is not
    a view or subquery of a MIN or MAX per group, and it never deletes (the base); every other leaf is such an
    aggregate over the base (``_aggregate``), their values a chain (the k-th extends the (k-1)-th by one
    value, one aggregate per length, one group column), all base columns INT or TIMESTAMP (equal values are
    equal join codes); every join key equates two columns that copy the same base column (an aggregate's
    group column copies the base's group column, its value column the column it aggregates), and each
    aggregate's two columns are equated, through the keys, with their base columns. Then the join's rows are
    exactly the base's rows whose values equal their group's extremes one after another: the lexicographic
    extreme.
    """
    if depth > 8:
        return None
    leaves, cols, eqs = _flatten(node)
    aggs: dict[int, tuple] = {}
    base = None
    for i, leaf in enumerate(leaves):
        found = _aggregate(_resolve(leaf, view_root), view_root, depth)
        if found is None:
            if base is not None:
                return None
            base = i
        else:
            aggs[i] = found
    if base is None or not leaves[base].monotone:
        return None
    b = leaves[base]
    chain = sorted(aggs.values(), key=lambda a: len(a[2]))
    group = chain[0][1] if chain else None
    for k, (ab, g, vals) in enumerate(chain):
        if ab != b or g != group or len(vals) != k + 1 or vals[:k] != (chain[k - 1][2] if k else ()):
            return None
    if any(b.types[c] not in ORDERED for c, _ in (chain[-1][2] if chain else ())):
        return None
    if group is not None and b.types[group] not in ORDERED:
        return None

    def base_col(leaf: int, col: int) -> int:
        if leaf == base:
            return col
        return aggs[leaf][1] if col == 0 else aggs[leaf][2][-1][0]

    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x
    for x, y in eqs:
        if base_col(*x) != base_col(*y):
            return None
        parent[find(x)] = find(y)
    for leaf in aggs:
        for col in (0, 1):
            if find((leaf, col)) not in {find((base, c)) for c in range(len(b.types))}:
                return None
    values = chain[-1][2] if chain else ()
    return Shape(b, group, values, tuple(base_col(*c) for c in cols))


def lex_aggregate(agg: L.Aggregate, view_root: Callable[[str], object | None]) -> LexAggregate | None:
    """The lexicographic form of ``agg`` when the plan proves it (a MIN or MAX per group over an arg max, at
    least: ``_aggregate`` over a ``Shape`` with a value), else None.

    >>> v = L.QueryOutput("q1", L.RELATION, ("INT", "INT", "INT"), is_monotone=True)
    >>> pick = lambda node, cols: L.Project(node, tuple(ast.ColumnRef(f"${c}") for c in cols), ("INT",) * len(cols))
    >>> m = L.Changelog(L.Aggregate(pick(v, (0, 2)), (0,), (("MAX", 1, False),), ("INT", "INT")))
    >>> w = L.Join(v, L.QueryOutput("q2", L.RELATION, ("INT", "INT")), (0, 2), (0, 1))
    >>> lex_aggregate(L.Aggregate(pick(w, (0, 1)), (0,), (("MIN", 1, False),), ("INT", "INT")), {"q2": m}.get)[1:]
    (0, ((2, 'MAX'), (1, 'MIN')))
    >>> lex_aggregate(L.Aggregate(pick(w, (1, 0)), (0,), (("MIN", 1, False),), ("INT", "INT")), {"q2": m}.get)
    """
    found = _aggregate(agg, view_root, 0)
    if found is None or len(found[2]) < 2:
        return None
    return LexAggregate(*found)


def lex_extreme(join: L.Join, view_root: Callable[[str], object | None]) -> LexExtreme | None:
    """The lexicographic arg-extreme form of ``join`` when the plan proves it (a ``Shape`` of two values or
    more; one value is ``arg_extreme``'s), else None.

    >>> v = L.QueryOutput("q1", L.RELATION, ("INT", "INT", "INT"), is_monotone=True)
    >>> pick = lambda node, cols: L.Project(node, tuple(ast.ColumnRef(f"${c}") for c in cols), ("INT",) * len(cols))
    >>> m = L.Changelog(L.Aggregate(pick(v, (0, 2)), (0,), (("MAX", 1, False),), ("INT", "INT")))
    >>> w = L.Join(v, L.QueryOutput("q2", L.RELATION, ("INT", "INT")), (0, 2), (0, 1))
    >>> t = L.Changelog(L.Aggregate(pick(w, (0, 1)), (0,), (("MIN", 1, False),), ("INT", "INT")))
    >>> roots = {"q2": m, "q3": t}.get
    >>> j = L.Join(pick(w, (0, 1, 2)), L.QueryOutput("q3", L.RELATION, ("INT", "INT")), (0, 1), (0, 1))
    >>> lex_extreme(j, roots)[1:]
    (0, ((2, 'MAX'), (1, 'MIN')), (0, 1, 2, 0, 1))
    >>> lex_extreme(L.Join(pick(w, (0, 1, 2)), j.right, (0, 2), (0, 1)), roots) is None    # not the MIN's column
    True
    >>> lex_extreme(L.Join(v, j.right, (0, 1), (0, 1)), roots) is None      # no MAX: not the extreme
    True
    >>> t_first = L.Join(v, j.right, (0, 1), (0, 1))             # the other order: (v with q3) with q2
    >>> lex_extreme(L.Join(t_first, w.right, (0, 2), (0, 1)), roots)[1:]
    (0, ((2, 'MAX'), (1, 'MIN')), (0, 1, 2, 0, 1, 0, 2))
    """
    if join.predicate is not None:
        return None
    shape = shape_of(join, view_root)
    if shape is None or len(shape.values) < 2:
        return None
    return LexExtreme(shape.base, shape.group, shape.values, shape.out)
