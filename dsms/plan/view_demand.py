"""Views computed when read: which leaves a plan's operators read, and whether a view's results can be built
later from its inputs' kept contents with the same answer as if it had run since it was registered.

A view is a name for its definition (SPEC section 3): a view that no query's plan reads and no reader has asked
for (NEXMark q9's ``Q9M`` and ``Q9T``, whose answer is computed from ``Q9AB`` alone, docs/architecture.md,
"Lexicographic extremes") need not run. It can wait, exactly, when every input its operators read is a
relation-valued query that never deletes: such a query's sink keeps every row it ever emitted with its
instant (its changelog's log, ``dsms/operators/netting.py``), so a plan built later over that snapshot sees
the very changes, at the very instants, that it would have seen live, and produces the same results. A view
that reads a stream, a base relation or a relation that deletes must run from its registration: what it saw
is not kept anywhere. The engine's side: ``Engine._install`` and ``Engine.materialise`` (docs/architecture.md,
"Views computed when read").
"""

from __future__ import annotations

from collections.abc import Callable

from dsms.plan import logical as L
from dsms.plan.lex_extreme import lex_aggregate, lex_extreme


def plan_leaves(node, view_root: Callable[[str], object | None]) -> list:
    """The leaves (stream, relation and query scans) whose queues the physical planner reads for ``node``:
    every leaf, except below a join or aggregate that the lexicographic-extreme rules compute from one input,
    which reads only that input's leaves (``PhysicalPlanner.build`` checks them in the same way).

    >>> v = L.QueryOutput("q1", L.RELATION, ("INT", "INT"), is_monotone=True)
    >>> [n.query_id for n in plan_leaves(L.Join(v, L.QueryOutput("q2", L.RELATION, ("INT",)), (0,), (0,)),
    ...                                  {}.get)]
    ['q1', 'q2']
    """
    if isinstance(node, L.Join) and (lex := lex_extreme(node, view_root)) is not None:
        return plan_leaves(lex.source, view_root)
    if isinstance(node, L.Aggregate) and (agg := lex_aggregate(node, view_root)) is not None:
        return plan_leaves(agg.source, view_root)
    if not node.children:
        return [node]
    return [leaf for c in node.children for leaf in plan_leaves(c, view_root)]


def replayable(root, view_root: Callable[[str], object | None]) -> bool:
    """Whether the plan ``root`` reads only relation-valued queries that never delete (at least one): built
    at any later time over their kept contents, it computes what it would have computed live.

    >>> v = L.QueryOutput("q1", L.RELATION, ("INT",), is_monotone=True)
    >>> replayable(L.Changelog(L.Aggregate(v, (0,), (("MAX", 0, False),), ("INT", "INT"))), {}.get)
    True
    >>> replayable(L.Changelog(L.Aggregate(L.QueryOutput("q1", L.RELATION, ("INT",)), (0,),
    ...                                    (("MAX", 0, False),), ("INT", "INT"))), {}.get)  # it deletes
    False
    >>> replayable(L.Changelog(L.StreamScan("s", ("INT",))), {}.get)       # a stream is not kept
    False
    """
    leaves = plan_leaves(root, view_root)
    return bool(leaves) and all(isinstance(n, L.QueryOutput) and n.kind == L.RELATION and n.is_monotone
                                for n in leaves)
