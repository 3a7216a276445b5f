"""ISTREAM of an insert-only relation read as it is (issue 15: NEXMark q1 and q2 at 1,000 events per push).

``ISTREAM(R)`` emits, at each instant, R(τ) minus R(τ-1) (SPEC section 3). When R never deletes (``monotone``: a
stream under ``[RANGE UNBOUNDED]``, a selection or projection of one, a join of such inputs, ...) that
difference is exactly the rows inserted at τ, so ISTREAM is the identity on R's changes: the batches of
inserts that the plan below writes are already the result stream, element for element and in order. The
eager ``ToStreamOp`` only copied each of them to its own queue (a run, a queue and a scheduling step a push,
5-6 us of NEXMark q2's 36 us cycle), so the query's reader reads the queue below instead.

The rule fires when the node is an ISTREAM with no tick inputs over a ``monotone`` child, and that child is
not an input's own queue nor another query's (a stream or a named query's result read as it is, through
``[RANGE UNBOUNDED]`` or an identity projection: ``SELECT * FROM S`` keeps its operator, so that every query
has one, with the edge the load shedder drops on and the plan entities a client draws). EXPLAIN shows it on the query's first line (``ISTREAM: no operator``)
and in the plan a query would get (``[no operator (...)]``). Exactness is argued in docs/architecture.md,
"ISTREAM of an insert-only input".
"""

from __future__ import annotations

from dsms.cql import ast
from dsms.plan import logical as L

NOTE = "no operator (the insert-only rows below are the stream)"


def _identity(node: L.Project) -> bool:
    """Whether a projection outputs its child's columns as they are, in order (built as no operator)."""
    return [getattr(e, "name", None) if isinstance(e, ast.ColumnRef) else None for e in node.exprs] == [
        f"${i}" for i in range(len(node.child.types))]


def passes_through(node) -> bool:
    """Whether ``node`` is an ISTREAM that the planner builds as no operator: no ticks, a child that never
    deletes, and below it something other than an input or a named query's result read as it is.

    >>> s = L.StreamScan("s", ("INT",), names=("a",))
    >>> f = L.Filter(L.Window(s, "UNBOUNDED"), ast.BinaryOp(">", ast.ColumnRef("$0"), ast.Literal(2, "INT")))
    >>> passes_through(L.ToStream(f, "ISTREAM")), passes_through(L.ToStream(L.Window(s, "UNBOUNDED"), "ISTREAM"))
    (True, False)
    >>> passes_through(L.ToStream(f, "DSTREAM")), passes_through(L.ToStream(L.Window(f, "NOW"), "ISTREAM"))
    (False, False)
    """
    if not isinstance(node, L.ToStream) or node.op != "ISTREAM" or node.ticks or not node.child.monotone:
        return False
    below = node.child
    while (isinstance(below, L.Window) and below.wkind == "UNBOUNDED"
           or isinstance(below, L.Project) and _identity(below)):
        below = below.child
    return not isinstance(below, L.StreamScan | L.RelationScan | L.QueryOutput)
