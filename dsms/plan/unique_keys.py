"""Unique keys of logical plans: columns on which a relation holds at most one row per value at every instant,
so that a join on them can hold that input as a map from key to row (``synopses/keyed_index.py``).

Where keys come from (SQL's functional dependencies, the part a stream engine meets): a GROUP BY's output has
one row per group (one row at most without GROUP BY: the empty key); DISTINCT and the set forms of UNION,
EXCEPT and INTERSECT keep one copy of each row (every column together is a key). Selections and the changelog
of a relation keep their input's keys; a projection keeps a key whose columns it passes on unchanged; a view
has its definition's keys. A join of two keyed inputs is keyed on both keys together, and on one side's key
alone when the other side's key is among its join columns (each row then finds one partner at most). Windows
over streams, and base relations, have no known key.

The answer is a promise the keyed index checks at every release rather than trusts (it falls back to the
general index when broken), so a key missed here costs speed, never an answer.
"""

from __future__ import annotations

from collections.abc import Callable

from dsms.cql import ast
from dsms.plan import logical as L


def unique_key(node, view_root: Callable[[str], object | None] | None = None) -> frozenset[int] | None:
    """Column positions of ``node``'s output that hold at most one row per value at every instant, or None
    when no such key is known; ``view_root(query_id)`` gives a registered view's logical plan (or None;
    without it a view's key is unknown).

    >>> from dsms.plan.logical import Aggregate, Project, RelationScan
    >>> r = RelationScan("r", ("INT", "INT"))
    >>> agg = Aggregate(r, (1,), (("MAX", 0, False),), ("INT", "INT"))
    >>> sorted(unique_key(Project(agg, (ast.ColumnRef("$1"), ast.ColumnRef("$0")), ("INT", "INT")), {}.get))
    [1]
    >>> unique_key(r, {}.get) is None
    True
    """
    if isinstance(node, L.Aggregate):
        return frozenset(range(len(node.group)))
    if isinstance(node, L.Distinct) or (isinstance(node, L.SetOp) and not node.all):
        return frozenset(range(len(node.types)))
    if isinstance(node, L.Changelog):
        return unique_key(node.child, view_root)
    if isinstance(node, L.Filter):
        key = unique_key(node.child, view_root)
        if key is None or node.keep is None:
            return key
        if not key <= set(node.keep):
            return None
        return frozenset(node.keep.index(k) for k in key)
    if isinstance(node, L.Project):
        key = unique_key(node.child, view_root)
        if key is None:
            return None
        out = {}
        for i, e in enumerate(node.exprs):
            if isinstance(e, ast.ColumnRef) and e.name.startswith("$"):
                out.setdefault(int(e.name[1:]), i)
        if not key <= out.keys():
            return None
        return frozenset(out[k] for k in key)
    if isinstance(node, L.QueryOutput):
        root = view_root(node.query_id) if node.kind == L.RELATION and view_root is not None else None
        return unique_key(root, view_root) if root is not None else None
    if isinstance(node, L.Join):
        left, right = unique_key(node.left, view_root), unique_key(node.right, view_root)
        width = len(node.left.types)
        if left is not None and right is not None and right <= set(node.right_keys):
            return left
        if right is not None and left is not None and left <= set(node.left_keys):
            return frozenset(width + k for k in right)
        if left is None or right is None:
            return None
        return left | frozenset(width + k for k in right)
    return None


def keyed_on(node, keys: tuple[int, ...], view_root: Callable[[str], object | None]) -> bool:
    """Whether ``node`` holds at most one row per value of the columns ``keys`` (a join's key columns on
    that input): some unique key of it lies among them.

    >>> from dsms.plan.logical import Aggregate, RelationScan
    >>> agg = Aggregate(RelationScan("r", ("INT", "INT")), (1,), (("MAX", 0, False),), ("INT", "INT"))
    >>> keyed_on(agg, (0, 1), {}.get), keyed_on(agg, (1,), {}.get)
    (True, False)
    """
    key = unique_key(node, view_root)
    return key is not None and key <= set(keys)


def group_column(key: frozenset[int], types: tuple[str, ...], keys: tuple[int, ...],
                 other: tuple[int, ...]) -> tuple[int, ...] | None:
    """How a keyed join input numbers its rows (``KeyedIndexSynopsis.group``): ``()`` for the empty key (one
    row at most), ``(column, the other input's column equated with it)`` for a key of one INT or TIMESTAMP
    column, None for any other key (its rows are then numbered by join key code).

    >>> group_column(frozenset({0}), ("INT", "INT"), (0, 1), (3, 5)), group_column(frozenset(), ("INT",), (0,), (1,))
    ((0, 3), ())
    """
    if not key:
        return ()
    if len(key) == 1:
        (k,) = key
        if types[k] in ("INT", "TIMESTAMP"):
            return (k, other[keys.index(k)])
    return None
