"""Join order for sharing: a chain of joins whose first join (or first few) another registered query already
computes is reordered to start with that join, so that the physical planner builds it once (digest-004
R-SHR-01: common subexpressions run once; here a subexpression that a different join order would have
hidden).

The binder joins the FROM items left-deep in FROM order. A relation join over conjunctive predicates is
commutative and associative on bags (digest-002a section 3.6), so any order of the same items with every
conjunct applied once computes the same relation at every instant. NEXMark q9 joins X, T, M where the view T
already joins X with M on the same predicates: in FROM order the query builds (X ⋈ T) ⋈ M, two joins of its
own; in the order (X ⋈ M) ⋈ T it reads T's join and builds one.

The rule runs on the bound plan, before the other rules, with the joins that are shareable at this moment
(``existing``: each as ``unnarrow`` gives it, the computation before projection pushdown). A chain's steps are
compared by their origin (the same items, windows and filters under the rules; the same hash keys; the
existing join's predicate a subset of the chain's conjuncts between its two sides): output column names and
aliases play no part, nor does the order of the conjuncts or of the two sides. When the chain's own first
step is shareable, or no step is, or the new order would join two items with no key where FROM order did not,
the chain stays as it is. Otherwise the chain starts with the shared join, extended while its next step is
shared too, then the other items, each time the first in FROM order that has a key with what is joined so far
(the first left when none has), each conjunct placed at the first join that has its columns
(a hash key when it is an equality of key-compatible columns across the two sides, a filter above the join
otherwise, as the binder places them); the columns are put back in FROM order above, folded into the
projection or aggregate that reads them when there is one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields, replace

from dsms.cql import ast
from dsms.plan import logical as L
from dsms.plan.binder import Binder, and_all, conjuncts, map_expr, positional, refs
from dsms.plan.rules.push_projection_down import unnarrow


def share_join_prefix(node, existing: Collection):
    """The plan with each join chain reordered to start with a join in ``existing`` (origins of shareable
    builds), when it has one; the plan itself (the same object) when nothing changes.

    >>> s = L.StreamScan("s", ("INT",), names=("a",))
    >>> t = L.StreamScan("t", ("INT",), names=("b",))
    >>> u = L.StreamScan("u", ("INT",), names=("c",))
    >>> ws, wt, wu = (L.Window(x, "UNBOUNDED") for x in (s, t, u))
    >>> q = L.Join(L.Join(ws, wu, (0,), (0,)), wt, (0,), (0,))          # s, u, t with s.a = u.c = t.b
    >>> p = share_join_prefix(q, [L.Join(ws, wt, (0,), (0,))])          # s ⋈ t exists: it goes first
    >>> type(p).__name__, p.child.left.left.child.name, p.child.left.right.child.name, [e.name for e in p.exprs]
    ('Project', 's', 't', ['$0', '$2', '$1'])
    """
    index: dict[tuple, list] = {}
    for j in existing:
        index.setdefault((j.left, j.right), []).append(j)
    if not index:
        return node
    new = _chain(node, index) if _is_chain(node) else None
    return _walk(node, index) if new is None else _restore(node, *new)


def _restore(old, chain, where: dict):
    """``chain`` (the columns of ``old`` where ``where`` says) with the columns of ``old`` in their order."""
    return L.Project(chain, tuple(positional(where[k]) for k in range(len(old.types))), old.types, names=old.names)


def _walk(node, index: dict):
    """``node`` with the chains below it reordered; a reordered chain's columns are put back in the order its
    reader expects by the reader itself when it is a projection or an aggregate, by a projection otherwise."""
    changes = {}
    for f in fields(node):
        if f.name in ("child", "left", "right"):
            child = getattr(node, f.name)
            new = _chain(child, index) if _is_chain(child) else None
            if new is None:
                new = _walk(child, index)
                if new is not child:
                    changes[f.name] = new
                continue
            chain, where = new
            if isinstance(node, L.Project):
                return replace(node, child=chain, exprs=tuple(_move(e, where) for e in node.exprs))
            if isinstance(node, L.Aggregate):
                return replace(node, child=chain, group=tuple(where[g] for g in node.group),
                               aggs=tuple((fn, None if a is None else where[a], d) for fn, a, d in node.aggs))
            changes[f.name] = _restore(child, chain, where)
        elif f.name == "ticks":
            ticks = tuple(_walk(t, index) for t in node.ticks)
            if any(a is not b for a, b in zip(ticks, node.ticks)):
                changes["ticks"] = ticks
    return replace(node, **changes) if changes else node


def _below_filters(node):
    while isinstance(node, L.Filter):
        node = node.child
    return node


def _is_chain(node) -> bool:
    """Whether ``node`` (through filters) is a join: two items (which may be the other way round from a join
    that exists: ``T, S`` beside ``S, T``) or more."""
    return isinstance(_below_filters(node), L.Join)


def _flatten(top) -> tuple[list, list]:
    """(the chain's items in FROM order, its conjuncts over their concatenated columns). In a left-deep chain
    the columns of every step are a prefix of the whole chain's, so no conjunct needs shifting."""
    items: list = []
    conds: list = []
    node = top
    while True:
        while isinstance(node, L.Filter):
            conds += conjuncts(node.predicate)
            node = node.child
        width = len(node.left.types)
        conds += [_eq(a, width + b) for a, b in zip(node.left_keys, node.right_keys)]
        if node.predicate is not None:
            conds += conjuncts(node.predicate)
        items.append(node.right)
        if not isinstance(_below_filters(node.left), L.Join):
            items.append(node.left)          # a filter on the first item belongs to it
            break
        node = node.left
    items.reverse()
    return items, conds


def _chain(top, index: dict):
    """(the chain at ``top`` reordered to share, where each old column is now), or None to leave it."""
    items, conds = _flatten(top)
    items = [_walk(it, index) for it in items]
    offsets, at = [], 0
    for it in items:
        offsets.append(at)
        at += len(it.types)
    origins = [_origin(it) for it in items]
    if _step(origins[0], origins[1], [0], 1, offsets, items, conds, index) is not None:
        return None                     # FROM order already starts with a shared join
    order: list[int] = []
    steps: list = []
    for i in range(len(items)):
        for j in range(len(items)):
            found = None if i == j else _step(origins[i], origins[j], [i], j, offsets, items, conds, index)
            if found is not None:
                order, steps = [i, j], [found]
                break
        if order:
            break
    if not order:
        return None
    while len(order) < len(items):      # extend while the next join is shared too
        prefix = _origin(_build(items, order, conds, offsets, steps)[0])
        found = None
        for k in range(len(items)):
            if k not in order:
                found = _step(prefix, origins[k], order, k, offsets, items, conds, index)
                if found is not None:
                    order.append(k)
                    steps.append(found)
                    break
        if found is None:
            break
    while len(order) < len(items):      # then the first item in FROM order with a key to what is joined
        rest = [k for k in range(len(items)) if k not in order]
        order.append(next((k for k in rest if _linked(order, k, offsets, items, conds)), rest[0]))
    chain, where, keyless = _build(items, order, conds, offsets, steps)
    if keyless > _build(items, list(range(len(items))), conds, offsets, [])[2]:
        return None                     # it would join two items with no key where FROM order does not
    return chain, where


def _origin(node):
    """``node`` as the physical planner compares it: rewritten by the rules, without pushed projections.
    (Imported here: the rules' package imports this module.)"""
    from dsms.plan.rules import optimize
    return unnarrow(optimize(node))[0]


def _columns(order: list[int], offsets: list[int], items: list) -> dict[int, int]:
    """Old column -> position in the join of ``items`` in ``order``."""
    where, at = {}, 0
    for k in order:
        for c in range(len(items[k].types)):
            where[offsets[k] + c] = at + c
        at += len(items[k].types)
    return where


def _covers(j, width: int) -> set:
    """The conjuncts that join ``j`` applies (its keys as equalities), in canonical form."""
    out = {_eq(a, width + b) for a, b in zip(j.left_keys, j.right_keys)}
    return out | {_canon(c) for c in (conjuncts(j.predicate) if j.predicate is not None else ())}


def _linked(order: list[int], k: int, offsets, items, conds) -> bool:
    """Whether a conjunct is a key between the join of ``order`` and item ``k``."""
    where = _columns([*order, k], offsets, items)
    width = sum(len(items[i].types) for i in order)
    left = [t for i in order for t in items[i].types]
    return any(refs(c) <= where.keys() and _key(_move(c, where), width, left, items[k].types) is not None
               for c in conds)


def _step(left_origin, right_origin, order: list[int], k: int, offsets, items, conds, index):
    """The existing join of (the join of ``order``) with item ``k`` that has a key and whose keys and
    predicate are among the conjuncts between the two, or None."""
    where = _columns([*order, k], offsets, items)
    width = sum(len(items[i].types) for i in order)
    local = {_canon(_move(c, where)) for c in conds
             if refs(c) and refs(c) <= where.keys() and any(where[r] >= width for r in refs(c))}
    for j in index.get((left_origin, right_origin), ()):
        if j.left_keys and _covers(j, width) <= local:
            return j
    return None


def _build(items, order, conds, offsets, steps) -> tuple:
    """(the left-deep join of ``items`` in ``order``, where each old column is, how many joins have no key).
    The first ``len(steps)`` joins are the shared ones as they are, with the conjuncts they do not apply in a
    filter above; the others take each conjunct at the first join that has its columns."""
    node = items[order[0]]
    placed: set[int] = set()
    keyless = 0
    for s in range(1, len(order)):
        k = order[s]
        where = _columns(order[:s + 1], offsets, items)
        width = sum(len(items[i].types) for i in order[:s])
        names = node.names + items[k].names
        usable = [c for c in conds if id(c) not in placed and refs(c) <= where.keys()]
        placed |= {id(c) for c in usable}
        moved = [_move(c, where) for c in usable]
        if s - 1 < len(steps):
            j = steps[s - 1]
            covered = _covers(j, width)
            node = L.Join(node, items[k], j.left_keys, j.right_keys, j.predicate, names=names)
            residual = [c for c in moved if _canon(c) not in covered]
        else:
            lkeys, rkeys, residual = [], [], []
            for c in moved:
                pair = _key(c, width, node.types, items[k].types)
                if pair is None:
                    residual.append(c)
                else:
                    lkeys.append(pair[0])
                    rkeys.append(pair[1])
            keyless += not lkeys
            node = L.Join(node, items[k], tuple(lkeys), tuple(rkeys), None, names=names)
        if residual:
            node = L.Filter(node, and_all(residual), names=names)
    return node, _columns(order, offsets, items), keyless


def _key(c, width: int, ltypes, rtypes) -> tuple[int, int] | None:
    """(left, right) key positions when ``c`` is an equality of key-compatible columns across the join."""
    if not (isinstance(c, ast.BinaryOp) and c.op == "=" and isinstance(c.left, ast.ColumnRef)
            and isinstance(c.right, ast.ColumnRef)):
        return None
    a, b = sorted((int(c.left.name[1:]), int(c.right.name[1:])))
    if a < width <= b and Binder._key_compatible(ltypes[a], rtypes[b - width]):
        return a, b - width
    return None


def _eq(a: int, b: int) -> ast.BinaryOp:
    return ast.BinaryOp("=", positional(a), positional(b))


def _canon(c):
    """An equality of two columns with its sides in order, so that ``a = b`` and ``b = a`` compare equal."""
    if isinstance(c, ast.BinaryOp) and c.op == "=" and isinstance(c.left, ast.ColumnRef) \
            and isinstance(c.right, ast.ColumnRef):
        return _eq(*sorted((int(c.left.name[1:]), int(c.right.name[1:]))))
    return c


def _move(expr, where: dict):
    if isinstance(expr, ast.ColumnRef):
        return positional(where[int(expr.name[1:])]) if expr.name.startswith("$") else expr
    return map_expr(expr, lambda e: _move(e, where))
