"""DISTINCT over one side of a join (issue 15: NEXMark q8): which join input's columns alone a DISTINCT reads.

``DISTINCT(π_X(L ⋈ R))`` with X among L's columns holds the X-values of the L rows that have a match; how many
matches each has does not change it. So the join below may output any part of its pairs that keeps, at every
instant, at least one pair of each L row with a match (``JoinOp.keep_support``), and a tumbling join then emits
one pair per such row instead of all of them. Exactness is argued in docs/architecture.md ("DISTINCT over one
side of a join").
"""

from __future__ import annotations

from dsms.cql import ast
from dsms.plan import logical as L


def support_side(node: L.Distinct) -> int | None:
    """The join input whose columns alone a DISTINCT reads, through a projection of plain columns right above
    an equi-join with no other condition: ``DISTINCT(π_X(L ⋈ R))`` for X within L's columns (or R's). Its rows
    are then the X-values of the L rows that have a match, whatever the number of matches, so the join may
    output any part of its pairs that keeps one pair of each such row (``JoinOp.keep_support``). None when the
    shape is not that (docs/architecture.md, "DISTINCT over one side of a join")."""
    project = node.child
    if not isinstance(project, L.Project) or not isinstance(project.child, L.Join):
        return None
    join = project.child
    if join.predicate is not None or not join.left_keys:
        return None
    cols = []
    for e in project.exprs:
        if not isinstance(e, ast.ColumnRef) or not e.name.startswith("$"):
            return None
        cols.append(int(e.name[1:]))
    n_left = len(join.left.types)
    if all(c < n_left for c in cols):
        return 0
    if all(c >= n_left for c in cols):
        return 1
    return None
