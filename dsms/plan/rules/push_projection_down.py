"""Projection pushdown: after the selections, keep only the columns the rest of the query reads, as early as
possible, so that queues, windows, join state and shared stores hold narrower rows (digest-004 R-PLAN-04: a
projection that keeps duplicates needs no synopsis; digest-002a section 3.6, rule 10.8 for its companion on
selections).

A window never reads a value except its PARTITION BY columns, and a duplicate-preserving projection keeps
every element, so π_A(W(S)) = W(π_A(S)) for every window (RANGE, SLIDE, ROWS, PARTITION BY with its columns
in A, NOW, UNBOUNDED): ROWS and PARTITION BY count elements, not distinct rows. A narrowing projection
(``Project.pushed``) goes directly below each window (above its filter and sample) and on each input of a
join, semi-join and UNION ALL; a selection outputs only the columns read above it (``Filter.keep``: it copies
the rows it keeps anyway, so a projection after it would be one more operator after a copy of columns nobody
reads); existing projections drop what nobody above reads, one left doing nothing disappears, and one that
computes over an UNBOUNDED window (no operator) reads through the pushed projection below it. Where it
stops: DISTINCT, UNION, EXCEPT, INTERSECT (with or without ALL, but for UNION ALL) and ISTREAM, DSTREAM,
RSTREAM compare whole rows, so they keep every column of their input; an aggregate keeps its output whole and
needs its group and argument columns. Correlated subqueries are joins and semi-joins by now, so they need
what their predicates read like any join.
"""

from __future__ import annotations

from dataclasses import replace

from dsms.cql import ast
from dsms.plan import logical as L
from dsms.plan.binder import map_expr, positional, refs


def push_projection_down(node):
    """The plan with every column nobody reads dropped as early as possible.

    >>> s = L.StreamScan("s", ("INT", "INT", "INT"), names=("a", "b", "c"))
    >>> q = L.Project(L.Window(s, "RANGE", range=10), (positional(2),), ("INT",))
    >>> p = push_projection_down(q)        # the window now holds column c alone
    >>> type(p).__name__, type(p.child).__name__, [e.name for e in p.child.exprs], p.child.pushed
    ('Window', 'Project', ['$2'], True)
    """
    return _prune(node, frozenset(range(len(node.types))))[0]


def _prune(node, need: frozenset):
    """(``node`` rewritten to output at least the columns ``need``, where each old column it still outputs
    now is). Columns keep their order; nothing is ever reordered."""
    if isinstance(node, L.Window):
        keep = need | set(node.partition)
        child, m = _narrow(*_prune(node.child, keep), keep)
        return replace(node, child=child, partition=tuple(m[p] for p in node.partition),
                       names=_names(node, m)), m
    if isinstance(node, L.Filter):
        return _filter(node, need)
    if isinstance(node, L.Sample):
        child, m = _prune(node.child, need)
        return replace(node, child=child, names=_names(node, m)), m
    if isinstance(node, L.Project):
        keep = sorted(need)
        child, m = _prune(node.child, frozenset().union(*(refs(node.exprs[k]) for k in keep)))
        exprs = tuple(_remap(node.exprs[k], m) for k in keep)
        out = {k: j for j, k in enumerate(keep)}
        if exprs == tuple(positional(j) for j in range(len(child.types))):
            return child, out                                   # it does nothing any more
        child, m = _through_unbounded(child, m)
        exprs = tuple(_remap(node.exprs[k], m) for k in keep)
        return replace(node, child=child, exprs=exprs, types=tuple(node.types[k] for k in keep),
                       names=_names(node, out)), out
    if isinstance(node, L.Join | L.SemiJoin):
        return _join(node, need)
    if isinstance(node, L.SetOp) and node.op == "UNION" and node.all:
        keep = need             # a bag union: column i of the result is column i of either side
        left, _ = _narrow(*_prune(node.left, keep), keep)
        right, _ = _narrow(*_prune(node.right, keep), keep)
        out = {k: j for j, k in enumerate(sorted(keep))}
        return replace(node, left=left, right=right, names=_names(node, out)), out
    if isinstance(node, L.Aggregate):
        keep = frozenset(node.group) | {a for _, a, _ in node.aggs if a is not None}
        child, m = _narrow(*_prune(node.child, keep), keep)
        aggs = tuple((f, None if a is None else m[a], d) for f, a, d in node.aggs)
        return replace(node, child=child, group=tuple(m[g] for g in node.group), aggs=aggs), _ident(node)
    # whole rows from here on: DISTINCT, the other set operations, ISTREAM/DSTREAM/RSTREAM, the sink; leaves
    changes = {f: _prune(getattr(node, f), _all(getattr(node, f)))[0]
               for f in ("child", "left", "right") if hasattr(node, f)}
    return (replace(node, **changes) if changes else node), _ident(node)


def _through_unbounded(child, m: dict):
    """A projection reading an UNBOUNDED window (no operator) over a pushed projection reads through both:
    the pushed one would be a second projection in a row, one more operator run per batch for nothing."""
    if not (isinstance(child, L.Window) and child.wkind == "UNBOUNDED" and isinstance(child.child, L.Project)
            and child.child.pushed and all(isinstance(e, ast.ColumnRef) and e.name.startswith("$")
                                           for e in child.child.exprs)):
        return child, m
    inner = child.child
    src = [int(e.name[1:]) for e in inner.exprs]
    return replace(child, child=inner.child, names=inner.child.names), {k: src[j] for k, j in m.items()}


def _filter(node, need: frozenset):
    """A selection outputs only the columns ``need`` (``Filter.keep``) and its input what it and they read:
    it copies the rows it keeps anyway, so narrowing there costs no operator, where a projection after it
    would be one more, after a copy of columns nobody reads."""
    base = node.keep if node.keep is not None else range(len(node.child.types))
    child, m = _prune(node.child, frozenset(base[i] for i in need) | refs(node.predicate))
    kept = sorted(need)
    keep = tuple(m[base[i]] for i in kept)
    out = {i: j for j, i in enumerate(kept)}
    return replace(node, child=child, predicate=_remap(node.predicate, m),
                   keep=None if keep == tuple(range(len(child.types))) else keep, names=_names(node, out)), out


def _join(node, need: frozenset):
    """A join or semi-join: each input keeps what is needed above, its keys and what the predicate reads."""
    lw = len(node.left.types)
    pred = refs(node.predicate) if node.predicate is not None else set()
    above = need | pred if isinstance(node, L.Join) else pred       # a semi-join passes its left side only
    left_need = frozenset({i for i in above if i < lw} | set(node.left_keys)
                          | (need if isinstance(node, L.SemiJoin) else set()))
    right_need = frozenset({i - lw for i in above if i >= lw} | set(node.right_keys))
    left, lm = _narrow(*_prune(node.left, left_need), left_need)
    right, rm = _narrow(*_prune(node.right, right_need), right_need)
    m = {**lm, **{i + lw: len(left.types) + j for i, j in rm.items()}}
    new = replace(node, left=left, right=right, left_keys=tuple(lm[k] for k in node.left_keys),
                  right_keys=tuple(rm[k] for k in node.right_keys),
                  predicate=None if node.predicate is None else _remap(node.predicate, m))
    if isinstance(node, L.SemiJoin):
        return replace(new, names=_names(node, lm)), lm
    return replace(new, names=_names(node, m)), m


def _narrow(node, m: dict, need: frozenset):
    """``node`` (whose old columns are where ``m`` says) with only the columns ``need``: a pushed projection on
    top when it outputs more."""
    if len(node.types) == len(need):
        return node, m
    keep = sorted(need)
    names = tuple(node.names[m[i]] for i in keep) if len(node.names) == len(node.types) else ()
    project = L.Project(node, tuple(positional(m[i]) for i in keep), tuple(node.types[m[i]] for i in keep),
                        names=names, pushed=True)
    return project, {i: j for j, i in enumerate(keep)}


def _remap(expr, m: dict):
    if isinstance(expr, ast.ColumnRef):
        return positional(m[int(expr.name[1:])]) if expr.name.startswith("$") else expr
    return map_expr(expr, lambda e: _remap(e, m))


def _names(node, m: dict) -> tuple:
    """The node's output names for its columns that remain (``m``: old position -> new)."""
    if len(node.names) != len(node.types):
        return ()
    return tuple(node.names[i] for i, _ in sorted(m.items(), key=lambda p: p[1]))


def _all(node) -> frozenset:
    return frozenset(range(len(node.types)))


def _ident(node) -> dict:
    return {i: i for i in range(len(node.types))}


def narrow(origin, columns) -> tuple:
    """(``origin`` keeping at least ``columns``, as projection pushdown narrows it; which columns it keeps)."""
    node, where = _prune(origin, frozenset(columns))
    return node, tuple(sorted(where, key=where.get))


def unnarrow(node) -> tuple:
    """(``node`` without the projections that projection pushdown put into it, which columns of that
    ``node`` outputs): through windows, filters, joins, semi-joins and pushed projections; any other node is
    its own origin. Two builds with one origin compute the same thing, each keeping some columns of it. The
    origin's column names are its inputs' (EXPLAIN labels of a widened build read them)."""
    if isinstance(node, L.Project) and node.pushed:
        origin, kept = unnarrow(node.child)
        return origin, tuple(kept[int(e.name[1:])] for e in node.exprs)
    if isinstance(node, L.Window):
        origin, kept = unnarrow(node.child)
        return replace(node, child=origin, partition=tuple(kept[p] for p in node.partition),
                       names=origin.names), kept
    if isinstance(node, L.Filter):
        origin, kept = unnarrow(node.child)
        return replace(node, child=origin, predicate=_remap(node.predicate, dict(enumerate(kept))), keep=None,
                       names=origin.names), kept if node.keep is None else tuple(kept[k] for k in node.keep)
    if isinstance(node, L.Join | L.SemiJoin):
        (left, lk), (right, rk) = unnarrow(node.left), unnarrow(node.right)
        both = lk + tuple(len(left.types) + k for k in rk)
        origin = replace(node, left=left, right=right, left_keys=tuple(lk[k] for k in node.left_keys),
                         right_keys=tuple(rk[k] for k in node.right_keys),
                         predicate=None if node.predicate is None else _remap(node.predicate, dict(enumerate(both))),
                         names=left.names + right.names if isinstance(node, L.Join) else left.names)
        return origin, both if isinstance(node, L.Join) else lk
    return node, tuple(range(len(node.types)))
