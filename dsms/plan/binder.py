"""The binder: resolves a CQL syntax tree against the catalog and builds the logical plan.

It applies CQL's defaults (digest-004 R-CQL-13/14, SPEC section 3): a stream without a window gets
``[RANGE UNBOUNDED]``; a non-aggregate query whose outermost FROM holds a stream gets an implicit ISTREAM;
a view's body is always a relation. WHERE conjuncts over one FROM item are pushed below the joins; equality
conjuncts between items become hash-join keys; subqueries in WHERE become semi-, anti- or scalar joins
(digest-002a section 3.3, Q4 and Q6).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields, replace

from dsms.agg_spec import APPROX_RESULT_TYPES
from dsms.catalog import Catalog, QueryDef, RelationDef, StreamDef
from dsms.cql import ast
from dsms.errors import SchemaError
from dsms.expr.compile import infer_type
from dsms.plan import logical as L
from dsms.plan.labels import expr_label

NUMERIC = ("INT", "FLOAT", "TIMESTAMP")


def _at(pos) -> str:
    return f"line {pos[0]}, column {pos[1]}: " if pos else ""


# ------------------------------------------------------------------ generic expression helpers

def map_expr(expr, fn):
    """Rebuild ``expr`` with ``fn`` applied to each direct child expression (not into subqueries)."""
    changes = {}
    for f in fields(expr):
        v = getattr(expr, f.name)
        if f.name == "pos" or f.name == "query":
            continue
        if isinstance(v, tuple) and v and isinstance(v[0], tuple):       # Case.whens
            changes[f.name] = tuple((fn(w), fn(r)) for w, r in v)
        elif isinstance(v, tuple):
            changes[f.name] = tuple(fn(x) if _is_expr(x) else x for x in v)
        elif _is_expr(v):
            changes[f.name] = fn(v)
    return replace(expr, **changes) if changes else expr


def _is_expr(v) -> bool:
    return isinstance(v, (ast.Literal, ast.ColumnRef, ast.BinaryOp, ast.UnaryOp, ast.FuncCall, ast.Aggregate,
                          ast.InList, ast.Between, ast.Like, ast.Case, ast.ScalarSubquery, ast.InSubquery,
                          ast.Exists, ast.Quantified))


def iter_expr(expr):
    """``expr`` and its sub-expressions (not into subqueries)."""
    yield expr
    for f in fields(expr):
        if f.name in ("pos", "query"):
            continue
        v = getattr(expr, f.name)
        if isinstance(v, tuple):
            for x in v:
                if isinstance(x, tuple):
                    for y in x:
                        yield from iter_expr(y)
                elif _is_expr(x):
                    yield from iter_expr(x)
        elif _is_expr(v):
            yield from iter_expr(v)


def conjuncts(expr) -> list:
    if isinstance(expr, ast.BinaryOp) and expr.op == "AND":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def and_all(exprs: list):
    out = None
    for e in exprs:
        out = e if out is None else ast.BinaryOp("AND", out, e)
    return out


def positional(i: int) -> ast.ColumnRef:
    return ast.ColumnRef(f"${i}")


def shift(expr, offset: int):
    """Add ``offset`` to every positional column reference."""
    if isinstance(expr, ast.ColumnRef):
        return positional(int(expr.name[1:]) + offset) if expr.name.startswith("$") else expr
    return map_expr(expr, lambda e: shift(e, offset))


def refs(expr) -> set[int]:
    return {int(e.name[1:]) for e in iter_expr(expr) if isinstance(e, ast.ColumnRef) and e.name.startswith("$")}


def type_resolver(types):
    def resolve(ref: ast.ColumnRef):
        return ref.name, types[int(ref.name[1:])]
    return resolve


def has_subquery(expr) -> bool:
    return any(isinstance(e, (ast.ScalarSubquery, ast.InSubquery, ast.Exists, ast.Quantified))
               for e in iter_expr(expr))


def has_aggregate(expr) -> bool:
    return any(isinstance(e, ast.Aggregate) for e in iter_expr(expr))


# ------------------------------------------------------------------ scopes

@dataclass
class Item:
    """One FROM item as seen by name resolution."""

    alias: str           # as written (for output names)
    names: list[str]
    types: list[str]
    offset: int          # first column in the combined FROM schema
    is_stream: bool      # before windowing: did the item name a stream?


class Scope:
    def __init__(self, items: list[Item], outer: Scope | None = None) -> None:
        self.items = items
        self.outer = outer

    @property
    def width(self) -> int:
        return sum(len(i.names) for i in self.items)

    def types(self) -> list[str]:
        return [t for i in self.items for t in i.types]

    def find(self, ref: ast.ColumnRef) -> tuple[int, str] | None:
        """(combined position, type) of ``ref`` in this scope only, or None."""
        name = ref.name.lower()
        if ref.qualifier is not None:
            q = ref.qualifier.lower()
            matches = [i for i in self.items if i.alias.lower() == q]
            if not matches:
                return None
            item = matches[0]
            for j, n in enumerate(item.names):
                if n.lower() == name:
                    return item.offset + j, item.types[j]
            close = difflib.get_close_matches(name, [n.lower() for n in item.names], n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise SchemaError(f"{_at(ref.pos)}'{item.alias}' has no column '{ref.name}'; expected "
                              f"{_known(item.names)}{hint}")
        found = []
        for item in self.items:
            for j, n in enumerate(item.names):
                if n.lower() == name:
                    found.append((item.offset + j, item.types[j], item.alias))
        if len(found) > 1:
            raise SchemaError(f"{_at(ref.pos)}column '{ref.name}' is ambiguous: it is in "
                              + " and ".join(sorted({f[2] for f in found})) + "; qualify it")
        if found:
            return found[0][0], found[0][1]
        return None

    def all_names(self) -> list[str]:
        return [n for i in self.items for n in i.names]


def _known(names) -> str:
    """What a column reference could have named (SPEC 4: a bind error names what was expected)."""
    shown = list(dict.fromkeys(names))
    if not shown:
        return "no column here"
    return "one of the columns " + ", ".join(shown[:20]) + (", ..." if len(shown) > 20 else "")


# ------------------------------------------------------------------ the binder

@dataclass
class Bound:
    node: object
    kind: str
    names: tuple[str, ...]
    types: tuple[str, ...]
    aggregate: bool = False
    from_has_stream: bool = False


class Binder:
    def __init__(self, catalog: Catalog, query_nodes: dict[str, object]) -> None:
        self.catalog = catalog
        self.query_nodes = query_nodes     # registered query id -> its QueryOutput node
        self.depends: set[str] = set()
        self.view_inputs: dict[str, tuple] = {}    # id of a view read -> the inputs it stands for

    # ---------------- entry points

    def bind_statement_query(self, q, as_view: bool = False) -> Bound:
        b = self.bind(q, context="view" if as_view else "top")
        if b.kind == L.STREAM and not isinstance(b.node, L.ToStream | L.StreamScan | L.QueryOutput | L.Sample):
            raise SchemaError("internal: stream result without a stream operator")
        return b

    def bind(self, q, context: str, outer: Scope | None = None) -> Bound:
        if isinstance(q, ast.StreamOp):
            inner = self.bind(q.query, context="inner", outer=outer)
            node = self._as_relation(inner)
            ticks = self._ticks(node) if q.op == "RSTREAM" else ()
            if context == "view":
                raise SchemaError(f"{_at(q.pos)}a view is a relation: {q.op} is not allowed in its body")
            return Bound(L.ToStream(node, q.op, ticks, names=inner.names), L.STREAM, inner.names, inner.types,
                         inner.aggregate, inner.from_has_stream)
        if isinstance(q, ast.SetOp):
            return self._bind_setop(q, context, outer)
        return self._bind_select(q, context, outer)

    # ---------------- set operations

    def _bind_setop(self, q: ast.SetOp, context: str, outer) -> Bound:
        left = self.bind(q.left, "inner", outer)
        right = self.bind(q.right, "inner", outer)
        if len(left.types) != len(right.types):
            raise SchemaError(f"{_at(q.pos)}{q.op} needs the same number of columns on both sides "
                              f"({len(left.types)} and {len(right.types)})")
        lnode, rnode = self._as_relation(left), self._as_relation(right)
        types = []
        lfix, rfix = [], []
        for i, (a, b) in enumerate(zip(left.types, right.types)):
            if a == b:
                types.append(a)
            elif {a, b} == {"INT", "TIMESTAMP"}:     # both int64: INT, as CASE unifies them (no conversion)
                types.append("INT")
            elif a in NUMERIC and b in NUMERIC:
                types.append("FLOAT")
                lfix.append(i) if a != "FLOAT" else rfix.append(i)
            else:
                raise SchemaError(f"{_at(q.pos)}{q.op}: column {i + 1} is {a} on the left and {b} on the right")
        lnode = self._cast_float(lnode, lfix, left.names)
        rnode = self._cast_float(rnode, rfix, right.names)
        node = L.SetOp(lnode, rnode, q.op, q.all, names=left.names)
        # a stream-valued branch is read through [RANGE UNBOUNDED] like a stream in FROM: it is a stream input,
        # not an aggregate, whatever made it (so the union of two streams is their merge, a stream)
        aggregate = any(b.aggregate and b.kind == L.RELATION for b in (left, right))
        has_stream = left.from_has_stream or right.from_has_stream
        b = Bound(node, L.RELATION, left.names, tuple(types), aggregate, has_stream)
        return self._implicit_istream(b, context)

    def _cast_float(self, node, cols: list[int], names):
        if not cols:
            return node
        exprs = tuple(ast.FuncCall("FLOAT", (positional(i),)) if i in cols else positional(i)
                      for i in range(len(node.types)))
        types = tuple("FLOAT" if i in cols else t for i, t in enumerate(node.types))
        return L.Project(node, exprs, types, names=tuple(names))

    def _implicit_istream(self, b: Bound, context: str) -> Bound:
        if context in ("top", "from") and not b.aggregate and b.from_has_stream and b.kind == L.RELATION:
            node = L.ToStream(b.node, "ISTREAM", (), names=b.names)
            return Bound(node, L.STREAM, b.names, b.types, b.aggregate, b.from_has_stream)
        return b

    def _as_relation(self, b: Bound):
        """A stream used where a relation is needed gets the default unbounded window."""
        if b.kind == L.STREAM:
            return L.Window(b.node, "UNBOUNDED", names=b.names)
        return b.node

    def _ticks(self, node) -> tuple:
        """RSTREAM's instants: those of the inputs ``node`` reads, through views at any depth (SPEC 3)."""
        return L.input_leaves(node, self.view_inputs)

    # ---------------- FROM items

    def _bind_from_item(self, f: ast.FromItem, offset: int, outer) -> tuple[object, Item]:
        if isinstance(f.source, str):
            obj = self.catalog.lookup(f.source, f.pos)
            self.depends.add(f.source.lower())
            names = tuple(c for c, _ in obj.columns)
            types = tuple(t for _, t in obj.columns)
            if isinstance(obj, StreamDef):
                node, kind = L.StreamScan(obj.name.lower(), types, names=names), L.STREAM
            elif isinstance(obj, RelationDef):
                node, kind = L.RelationScan(obj.name.lower(), types, names=names), L.RELATION
            else:
                assert isinstance(obj, QueryDef)
                node = L.QueryOutput(obj.id, obj.kind, types, obj.monotone, names=names)
                kind = obj.kind
                self.view_inputs[obj.id] = obj.inputs
                self.depends |= obj.depends_on
            alias = f.alias or f.source
        else:
            sub = self.bind(f.source, context="from", outer=None)
            node, kind, names, types = sub.node, sub.kind, sub.names, sub.types
            alias = f.alias or f"subquery{offset}"
        if f.stream_op:
            rel = L.Window(node, "UNBOUNDED", names=names) if kind == L.STREAM else node
            ticks = self._ticks(rel) if f.stream_op == "RSTREAM" else ()
            node, kind = L.ToStream(rel, f.stream_op, ticks, names=names), L.STREAM
        is_stream = kind == L.STREAM
        if f.sample is not None:
            if not is_stream:
                raise SchemaError(f"{_at(f.pos)}SAMPLE applies to a stream, and '{alias}' is a relation")
            if not 0 <= f.sample <= 100:
                raise SchemaError(f"{_at(f.pos)}SAMPLE takes a percentage from 0 to 100, not {f.sample}")
            node = L.Sample(node, float(f.sample), names=names)
        if f.window is not None:
            if not is_stream:
                raise SchemaError(f"{_at(f.window.pos or f.pos)}a window applies to a stream, and "
                                  f"'{alias}' is a relation")
            node = self._window(node, f.window, alias, list(names), list(types))
        elif is_stream:
            node = L.Window(node, "UNBOUNDED", names=names)
        item = Item(alias, list(names), list(types), offset, is_stream)
        return node, item

    def _window(self, node, w: ast.Window, alias, names, types):
        if w.where is not None:
            scope = Scope([Item(alias, names, types, 0, True)])
            pred = self.bind_expr(w.where, scope)
            self._check_bool(pred, types, w.where)
            node = L.Filter(node, pred, names=node.names)
        if w.kind == "RANGE":
            if w.range is None or w.range <= 0:
                raise SchemaError(f"{_at(w.pos)}RANGE must be positive")
            if w.slide is not None and w.slide <= 0:
                raise SchemaError(f"{_at(w.pos)}SLIDE must be positive")
            slide = None if w.slide in (None, 1) else w.slide
            return L.Window(node, "RANGE", range=w.range, slide=slide, names=node.names)
        if w.kind == "ROWS":
            if w.rows is None or w.rows <= 0:
                raise SchemaError(f"{_at(w.pos)}ROWS must be a positive number of rows")
            part = []
            scope = Scope([Item(alias, names, types, 0, True)])
            for ref in w.partition_by:
                found = scope.find(ref)
                if found is None:
                    raise SchemaError(f"{_at(ref.pos)}PARTITION BY: '{alias}' has no column '{ref.name}'; "
                                      f"expected {_known(names)}")
                part.append(found[0])
            return L.Window(node, "ROWS", rows=w.rows, partition=tuple(part), names=node.names)
        if w.kind == "NOW":
            return L.Window(node, "RANGE", range=1, names=node.names)
        if w.kind == "UNBOUNDED":
            return L.Window(node, "UNBOUNDED", names=node.names)
        raise SchemaError(f"{_at(w.pos)}unknown window kind {w.kind}")

    # ---------------- expressions

    def bind_expr(self, expr, scope: Scope, allow_outer: bool = False):
        """Positional form of ``expr``; names resolve in ``scope`` (then, if allowed, as outer references
        ``$o<i>`` into ``scope.outer``)."""
        if isinstance(expr, ast.ColumnRef):
            found = scope.find(expr)
            if found is not None:
                return positional(found[0])
            if allow_outer and scope.outer is not None:
                o = scope.outer.find(expr)
                if o is not None:
                    return ast.ColumnRef(f"$o{o[0]}")
            self._unknown_column(expr, scope)
        if isinstance(expr, ast.Aggregate):
            raise SchemaError(f"{_at(expr.pos)}aggregate {expr.func} is not allowed here")
        if isinstance(expr, ast.ScalarSubquery | ast.InSubquery | ast.Exists | ast.Quantified):
            raise SchemaError(f"{_at(expr.pos)}a subquery is only supported in FROM and as a condition in WHERE "
                              "(not in the select list, HAVING or inside an expression)")
        return map_expr(expr, lambda e: self.bind_expr(e, scope, allow_outer))

    def _unknown_column(self, ref: ast.ColumnRef, scope: Scope):
        if ref.qualifier is not None and not _has_alias(scope, ref.qualifier):
            aliases = [i.alias for i in scope.items]
            close = difflib.get_close_matches(ref.qualifier, aliases, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise SchemaError(f"{_at(ref.pos)}unknown table or alias '{ref.qualifier}'{hint}")
        names = scope.all_names()
        close = difflib.get_close_matches(ref.name.lower(), [n.lower() for n in names], n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise SchemaError(f"{_at(ref.pos)}unknown column '{ref.name}'; expected {_known(names)}{hint}")

    def _type(self, bound, types) -> str:
        return infer_type(bound, type_resolver(list(types)))

    def _check_bool(self, bound, types, orig):
        t = self._type(bound, types)
        if t != "BOOLEAN":
            raise SchemaError(f"{_at(getattr(orig, 'pos', None))}a condition must be BOOLEAN, not {t}")

    # ---------------- SELECT

    def _bind_select(self, q: ast.Select, context: str, outer: Scope | None) -> Bound:
        if not q.from_:
            raise SchemaError(f"{_at(q.pos)}a query needs a FROM clause")
        nodes, items = [], []
        offset = 0
        for f in q.from_:
            node, item = self._bind_from_item(f, offset, outer)
            nodes.append(node)
            items.append(item)
            offset += len(item.names)
        aliases = [i.alias.lower() for i in items]
        for a in aliases:
            if aliases.count(a) > 1:
                raise SchemaError(f"{_at(q.pos)}'{a}' appears twice in FROM; give each an alias")
        scope = Scope(items, outer)
        from_has_stream = any(i.is_stream for i in items)

        where = conjuncts(q.where) if q.where is not None else []
        plain = [c for c in where if not has_subquery(c)]
        subs = [c for c in where if has_subquery(c)]
        for c in plain:
            if has_aggregate(c):
                raise SchemaError(f"{_at(c.pos)}aggregates are not allowed in WHERE; use HAVING")
        node = self._join_items(nodes, items, [self.bind_expr(c, scope) for c in plain], scope, plain)
        for c in subs:
            node = self._bind_condition(node, c, scope)

        is_agg = bool(q.group_by) or any(
            not isinstance(it.expr, ast.Star) and has_aggregate(it.expr) for it in q.items
        ) or (q.having is not None)
        if is_agg:
            node, names, types = self._bind_aggregate(node, q, scope)
        else:
            node, names, types = self._bind_projection(node, q, scope)
        if q.distinct:
            node = L.Distinct(node, names=names)
        b = Bound(node, L.RELATION, names, types, is_agg, from_has_stream)
        if q.stream_op:
            if context == "view":
                raise SchemaError(f"{_at(q.pos)}a view is a relation: {q.stream_op} is not allowed in its body")
            ticks = self._ticks(node) if q.stream_op == "RSTREAM" else ()
            return Bound(L.ToStream(node, q.stream_op, ticks, names=names), L.STREAM, names, types, is_agg,
                         from_has_stream)
        return self._implicit_istream(b, context)

    def _join_items(self, nodes, items, preds, scope, orig_preds):
        """Left-deep joins in FROM order; each predicate is applied as early as its columns allow."""
        types = scope.types()
        for p, o in zip(preds, orig_preds):
            self._check_bool(p, types, o)
        remaining = list(zip(preds, orig_preds))

        def item_of(col: int) -> int:
            for k, it in enumerate(items):
                if it.offset <= col < it.offset + len(it.names):
                    return k
            raise AssertionError(col)

        # single-item conjuncts: filter the item itself (valid after its window)
        per_item: dict[int, list] = {}
        rest = []
        for p, _o in remaining:
            used = {item_of(c) for c in refs(p)}
            if len(used) == 1 and len(items) > 1:
                k = used.pop()
                per_item.setdefault(k, []).append(shift(p, -items[k].offset))
            else:
                rest.append(p)
        nodes = list(nodes)
        for k, ps in per_item.items():
            nodes[k] = L.Filter(nodes[k], and_all(ps), names=nodes[k].names)

        node = nodes[0]
        width = len(items[0].names)
        for k in range(1, len(items)):
            right = nodes[k]
            rw = len(items[k].names)
            usable = [p for p in rest if refs(p) and max(refs(p)) < width + rw]
            rest = [p for p in rest if p not in usable]
            lkeys, rkeys, residual = [], [], []
            for p in usable:
                if isinstance(p, ast.BinaryOp) and p.op == "=" and isinstance(p.left, ast.ColumnRef) \
                        and isinstance(p.right, ast.ColumnRef):
                    a, b = int(p.left.name[1:]), int(p.right.name[1:])
                    if a >= width > b:
                        a, b = b, a
                    if a < width <= b and self._key_compatible(types[a], types[b]):
                        lkeys.append(a)
                        rkeys.append(b - width)
                        continue
                residual.append(p)
            names = node.names + right.names
            node = L.Join(node, right, tuple(lkeys), tuple(rkeys), None, names=names)
            if residual:       # above the join, so that a join shared with another query stays equal
                node = L.Filter(node, and_all(residual), names=names)
            width += rw
        if rest:
            node = L.Filter(node, and_all(rest), names=node.names)
        return node

    @staticmethod
    def _key_compatible(a: str, b: str) -> bool:
        return a == b or (a in ("INT", "TIMESTAMP") and b in ("INT", "TIMESTAMP"))

    # ---------------- subqueries in WHERE

    def _bind_condition(self, node, c, scope: Scope):
        """``node`` (the FROM items, columns as in ``scope``) filtered by WHERE condition ``c``, which reads a
        subquery. NOT is pushed inward (De Morgan, and each subquery form has its negation, all valid in SQL's
        three-valued logic); ``A OR B`` becomes the bag union of ``A`` and ``NOT A AND B``, disjoint, so each
        row passes once (A must then be two-valued: at most one side may compare with a scalar subquery, whose
        empty result is unknown, and that side goes second)."""
        c = _push_not(c)
        if isinstance(c, ast.BinaryOp) and c.op == "AND":
            for part in conjuncts(c):
                node = self._bind_condition(node, part, scope)
            return node
        if not has_subquery(c):
            pred = self.bind_expr(c, scope)
            self._check_bool(pred, scope.types(), c)
            return L.Filter(node, pred, names=node.names)
        if isinstance(c, ast.BinaryOp) and c.op == "OR":
            a, b = c.left, c.right
            if _maybe_unknown(a):
                if _maybe_unknown(b):
                    raise SchemaError(f"{_at(c.pos)}OR between two comparisons with scalar subqueries is not "
                                      "supported")
                a, b = b, a
            first = self._bind_condition(node, a, scope)
            second = self._bind_condition(node, ast.BinaryOp("AND", ast.UnaryOp("NOT", a), b), scope)
            return L.SetOp(first, second, "UNION", True, names=node.names)
        return self._bind_subquery_conjunct(node, c, scope)

    def _bind_subquery_conjunct(self, node, c, scope: Scope):
        neg = False
        if isinstance(c, ast.UnaryOp) and c.op == "NOT" and isinstance(c.operand, ast.Exists | ast.InSubquery):
            neg, c = True, c.operand
        width = len(node.types)
        types = list(node.types)
        if isinstance(c, ast.Exists):
            right, rtypes, corr = self._bind_sub(c.query, scope, need_columns=0)
            return self._semi(node, right, width, corr, anti=(c.negated != neg))
        if isinstance(c, ast.InSubquery):
            left_expr = self.bind_expr(c.expr, scope)
            right, rtypes, corr = self._bind_sub(c.query, scope, need_columns=1)
            self._comparable(self._type(left_expr, types), rtypes[0], c.pos, "IN")
            pred = ast.BinaryOp("=", left_expr, positional(width))
            return self._semi(node, right, width, [pred, *corr], anti=(c.negated != neg))
        if isinstance(c, ast.Quantified):
            left_expr = self.bind_expr(c.expr, scope)
            right, rtypes, corr = self._bind_sub(c.query, scope, need_columns=1)
            self._comparable(self._type(left_expr, types), rtypes[0], c.pos, c.op)
            cmp = ast.BinaryOp(c.op, left_expr, positional(width))
            if c.quantifier == "ALL":       # no right row violates the comparison
                return self._semi(node, right, width, [ast.UnaryOp("NOT", cmp), *corr], anti=True)
            return self._semi(node, right, width, [cmp, *corr], anti=False)
        if isinstance(c, ast.BinaryOp) and c.op in ("=", "<>", "<", "<=", ">", ">="):
            if isinstance(c.right, ast.ScalarSubquery) and not has_subquery(c.left):
                expr, sub, op = c.left, c.right, c.op
            elif isinstance(c.left, ast.ScalarSubquery) and not has_subquery(c.right):
                flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
                expr, sub, op = c.right, c.left, flip.get(c.op, c.op)
            else:
                raise SchemaError(f"{_at(c.pos)}unsupported use of a subquery in WHERE")
            left_expr = self.bind_expr(expr, scope)
            single = self._at_most_one_row(sub.query, scope)
            right, rtypes, corr = self._bind_sub(sub.query, scope, need_columns=1, scalar=True)
            self._comparable(self._type(left_expr, types), rtypes[0], c.pos, op)
            cmp = ast.BinaryOp(op, left_expr, positional(width))
            if not single:
                # a subquery that may yield several rows (an error in SQL, which a stream cannot stop on) acts
                # as op ANY: a semi-join, so that the row passes once
                return self._semi(node, right, width, [cmp, *corr], anti=False)
            # at most one row (per outer row): a join finds it, no row drops the outer row (unknown)
            joined = self._make_join(node, right, width, and_all([cmp, *corr]))
            return L.Project(joined, tuple(positional(i) for i in range(width)), node.types, names=node.names)
        raise SchemaError(f"{_at(c.pos)}a subquery in WHERE must be EXISTS, IN, a comparison with ALL/ANY, or "
                          "a comparison with a scalar subquery, combined with AND, OR and NOT")

    def _at_most_one_row(self, q, scope: Scope) -> bool:
        """Whether scalar subquery ``q`` yields at most one row for each outer row: an aggregate without GROUP
        BY, or a correlated one (grouped by its correlation and joined on it, one row per outer row)."""
        if not isinstance(q, ast.Select) or q.stream_op:
            return False
        if isinstance(q, ast.Select) and self._is_correlated(q, scope):
            return True
        return not q.group_by and any(not isinstance(it.expr, ast.Star) and has_aggregate(it.expr)
                                      for it in q.items)

    def _comparable(self, a: str, b: str, pos, op: str):
        if a == b or (a in NUMERIC and b in NUMERIC):
            return
        raise SchemaError(f"{_at(pos)}cannot compare {a} with {b} ({op} subquery)")

    def _make_join(self, left, right, width, pred):
        lkeys, rkeys, residual = [], [], []
        for p in conjuncts(pred) if pred is not None else []:
            if isinstance(p, ast.BinaryOp) and p.op == "=" and isinstance(p.left, ast.ColumnRef) \
                    and isinstance(p.right, ast.ColumnRef):
                a, b = int(p.left.name[1:]), int(p.right.name[1:])
                if a >= width > b:
                    a, b = b, a
                # a hash key compares values exactly; INT = FLOAT compares as FLOAT (as in WHERE and in a
                # join), so such an equality stays in the predicate
                if a < width <= b and self._key_compatible(left.types[a], right.types[b - width]):
                    lkeys.append(a)
                    rkeys.append(b - width)
                    continue
            residual.append(p)
        return L.Join(left, right, tuple(lkeys), tuple(rkeys), and_all(residual),
                      names=left.names + right.names)

    def _semi(self, left, right, width, preds, anti):
        j = self._make_join(left, right, width, and_all(preds))
        return L.SemiJoin(left, right, j.left_keys, j.right_keys, j.predicate, anti, names=left.names)

    def _bind_sub(self, q, scope: Scope, need_columns: int, scalar: bool = False):
        """Bind a WHERE subquery. Uncorrelated: its result relation. Correlated (a plain SELECT whose WHERE
        reads outer columns): its FROM joined and filtered, with the correlated conjuncts returned as
        predicates over (outer + inner) columns."""
        width = scope.width
        correlated = isinstance(q, ast.Select) and self._is_correlated(q, scope)
        if not correlated:
            b = self.bind(q, context="where", outer=None)
            node = self._as_relation(b)
            if need_columns and len(b.types) != need_columns:
                raise SchemaError(f"{_at(getattr(q, 'pos', None))}the subquery must return exactly one column, "
                                  f"not {len(b.types)}")
            return node, list(b.types), []
        if q.group_by or q.having is not None or q.distinct or q.stream_op:
            raise SchemaError(f"{_at(q.pos)}a correlated subquery must be a plain SELECT ... FROM ... WHERE")
        nodes, items, offset = [], [], 0
        for f in q.from_:
            n, item = self._bind_from_item(f, offset, None)
            nodes.append(n)
            items.append(item)
            offset += len(item.names)
        inner = Scope(items, scope)
        local, corr = [], []
        for c in conjuncts(q.where) if q.where is not None else []:
            if has_subquery(c):
                raise SchemaError(f"{_at(c.pos)}nested subqueries inside a correlated subquery are not supported")
            b = self.bind_expr(c, inner, allow_outer=True)
            if any(isinstance(e, ast.ColumnRef) and e.name.startswith("$o") for e in iter_expr(b)):
                corr.append(b)
            else:
                local.append((b, c))
        node = self._join_items(nodes, items, [b for b, _ in local], inner, [c for _, c in local])
        itypes = inner.types()
        sel = [it for it in q.items if not isinstance(it.expr, ast.Star)]
        agg_items = [it for it in sel if has_aggregate(it.expr)]
        if scalar or agg_items:
            return self._correlated_aggregate(q, node, inner, corr, width)
        rtypes: list[str] = []
        out_exprs = []
        if need_columns:
            if len(q.items) != 1 or isinstance(q.items[0].expr, ast.Star):
                raise SchemaError(f"{_at(q.pos)}the subquery must return exactly one column")
            e = self.bind_expr(q.items[0].expr, inner, allow_outer=True)
            out_exprs.append(e)
            rtypes.append(self._type(e, itypes))
        # the inner node is placed after the outer columns: inner $j -> $(width+j); outer $o<i> -> $i
        def fix(e):
            if isinstance(e, ast.ColumnRef):
                if e.name.startswith("$o"):
                    return positional(int(e.name[2:]))
                return positional(int(e.name[1:]) + width)
            return map_expr(e, fix)
        if out_exprs:
            # expose the selected expression as the inner node's first column
            proj = tuple([out_exprs[0]] + [positional(i) for i in range(len(itypes))])
            if any(isinstance(x, ast.ColumnRef) and x.name.startswith("$o") for x in iter_expr(out_exprs[0])):
                raise SchemaError(f"{_at(q.pos)}the subquery's selected expression may not read outer columns")
            node = L.Project(node, proj, tuple(rtypes + itypes), names=("col",) + tuple(node.names))
            def fix2(e):
                if isinstance(e, ast.ColumnRef):
                    if e.name.startswith("$o"):
                        return positional(int(e.name[2:]))
                    return positional(int(e.name[1:]) + width + 1)
                return map_expr(e, fix2)
            return node, rtypes, [fix2(c) for c in corr]
        return node, rtypes, [fix(c) for c in corr]

    def _is_correlated(self, q: ast.Select, scope: Scope) -> bool:
        if q.where is None:
            return False
        inner = None
        try:
            nodes_items = []
            offset = 0
            for f in q.from_:
                if not isinstance(f.source, str):
                    continue
                obj = self.catalog.lookup(f.source, f.pos)
                names = [c for c, _ in obj.columns]
                types = [t for _, t in obj.columns]
                nodes_items.append(Item(f.alias or f.source, names, types, offset, False))
                offset += len(names)
            if len(nodes_items) != len(q.from_):
                return False
            inner = Scope(nodes_items, scope)
            for c in conjuncts(q.where):
                if has_subquery(c):
                    continue
                b = self.bind_expr(c, inner, allow_outer=True)
                if any(isinstance(e, ast.ColumnRef) and e.name.startswith("$o") for e in iter_expr(b)):
                    return True
        except SchemaError:
            # a reference qualified by an enclosing query's alias is correlated, so its error is the user's
            # ("'S' has no column 'q'"), not a sign that the subquery stands alone
            if inner is not None and any(
                    isinstance(e, ast.ColumnRef) and e.qualifier is not None and not _has_alias(inner, e.qualifier)
                    and _has_alias(scope, e.qualifier) for c in conjuncts(q.where) for e in iter_expr(c)):
                raise
            return False
        return False

    def _correlated_aggregate(self, q: ast.Select, node, inner: Scope, corr, width):
        """``x op (SELECT agg(..) FROM .. WHERE inner.k = outer.k ..)``: group the subquery by the inner side
        of its correlated equalities and join on them (classic decorrelation)."""
        if len(q.items) != 1 or isinstance(q.items[0].expr, ast.Star):
            raise SchemaError(f"{_at(q.pos)}the subquery must return exactly one column")
        keys_inner, keys_outer = [], []
        for c in corr:
            ok = isinstance(c, ast.BinaryOp) and c.op == "=" and all(
                isinstance(s, ast.ColumnRef) for s in (c.left, c.right))
            if not ok:
                raise SchemaError(f"{_at(q.pos)}a correlated aggregate subquery may only correlate by equality "
                                  "of columns")
            a, b = c.left.name, c.right.name
            if a.startswith("$o") and not b.startswith("$o"):
                keys_outer.append(int(a[2:]))
                keys_inner.append(int(b[1:]))
            elif b.startswith("$o") and not a.startswith("$o"):
                keys_outer.append(int(b[2:]))
                keys_inner.append(int(a[1:]))
            else:
                raise SchemaError(f"{_at(q.pos)}unsupported correlation predicate")
        itypes = inner.types()
        group_exprs = [positional(k) for k in keys_inner]
        node, names, types = self._aggregate_core(node, itypes, group_exprs, [q.items[0]], None, inner,
                                                  extra_group_out=True)
        # the aggregate gives (inner keys..., value); put the value first, as column 0 of the right side
        nk = len(keys_inner)
        value_t = types[-1]
        proj = tuple([positional(nk)] + [positional(j) for j in range(nk)])
        node = L.Project(node, proj, (value_t,) + tuple(types[:nk]), names=("value",) + tuple(names[:nk]))
        corr_preds = [ast.BinaryOp("=", positional(o), positional(width + 1 + j)) for j, o in enumerate(keys_outer)]
        return node, [value_t], corr_preds

    # ---------------- projection and aggregation

    def _bind_projection(self, node, q: ast.Select, scope: Scope):
        types = scope.types()
        exprs, names, out_types = [], [], []
        star_names = self._star_names(scope)
        for k, it in enumerate(q.items):
            if isinstance(it.expr, ast.Star):
                for item in self._star_items(scope, it.expr):
                    for j, _n in enumerate(item.names):
                        exprs.append(positional(item.offset + j))
                        names.append(star_names[item.offset + j])
                        out_types.append(item.types[j])
                continue
            e = self.bind_expr(it.expr, scope)
            exprs.append(e)
            out_types.append(self._type(e, types))
            names.append(self._name(it, k, scope))
        names = dedupe(names)
        return L.Project(node, tuple(exprs), tuple(out_types), names=tuple(names)), tuple(names), tuple(out_types)

    def _star_items(self, scope: Scope, star: ast.Star):
        if star.qualifier is None:
            return scope.items
        items = [i for i in scope.items if i.alias.lower() == star.qualifier.lower()]
        if not items:
            raise SchemaError(f"{_at(star.pos)}unknown table or alias '{star.qualifier}' in {star.qualifier}.*")
        return items

    def _star_names(self, scope: Scope) -> list[str]:
        counts: dict[str, int] = {}
        for item in scope.items:
            for n in item.names:
                counts[n.lower()] = counts.get(n.lower(), 0) + 1
        out = []
        for item in scope.items:
            for n in item.names:
                out.append(f"{item.alias}.{n}" if counts[n.lower()] > 1 else n)
        return out

    def _name(self, it: ast.SelectItem, k: int, scope: Scope) -> str:
        if it.alias:
            return it.alias
        e = it.expr
        if isinstance(e, ast.ColumnRef):
            return self._column_name(e, scope)
        if isinstance(e, ast.Aggregate):
            return e.func.lower()
        if isinstance(e, ast.FuncCall):
            return e.name.lower()
        return f"col{k + 1}"

    def _column_name(self, e: ast.ColumnRef, scope: Scope) -> str:
        found = scope.find(e)
        if found is None:
            return e.name
        pos = found[0]
        for item in scope.items:
            if item.offset <= pos < item.offset + len(item.names):
                return item.names[pos - item.offset]
        return e.name

    def _bind_aggregate(self, node, q: ast.Select, scope: Scope):
        types = scope.types()
        group_exprs = [self.bind_expr(self._group_key(g, q, scope), scope) for g in q.group_by]
        return self._aggregate_core(node, types, group_exprs, list(q.items), q.having, scope)

    def _group_key(self, g, q: ast.Select, scope: Scope):
        """A GROUP BY item as PostgreSQL reads it: an integer is the position of a select item, a bare name that
        is no input column is the select item of that alias, anything else an expression over the input."""
        if isinstance(g, ast.Literal) and g.type == "INT":
            k = g.value
            if not 1 <= k <= len(q.items):
                raise SchemaError(f"{_at(g.pos)}GROUP BY position {k} is not in the select list "
                                  f"(1 to {len(q.items)})")
            e = q.items[k - 1].expr
        elif isinstance(g, ast.ColumnRef) and g.qualifier is None and scope.find(g) is None:
            named = [it.expr for it in q.items if it.alias and it.alias.lower() == g.name.lower()]
            if len(named) != 1:
                return g                     # unknown (or ambiguous): bind_expr says so
            e = named[0]
        else:
            return g
        if isinstance(e, ast.Star) or has_aggregate(e):
            raise SchemaError(f"{_at(g.pos)}GROUP BY cannot use a select item that is * or an aggregate")
        return e

    def _aggregate_core(self, node, types, group_exprs, items, having, scope, extra_group_out=False):
        pre_exprs = list(group_exprs)
        pre_types = [self._type(g, types) for g in group_exprs]
        aggs: list[tuple[str, int | None, bool]] = []
        agg_types: list[str] = []

        def agg_ref(a: ast.Aggregate) -> ast.ColumnRef:
            if a.arg is None:
                spec = (a.func, None, False)
                t = "INT"
            else:
                if has_aggregate(a.arg):
                    raise SchemaError(f"{_at(a.pos)}aggregates cannot be nested")
                arg = self.bind_expr(a.arg, scope)
                at = self._type(arg, types)
                if a.func in ("SUM", "AVG", "APPROX_QUANTILE") and at not in NUMERIC:
                    raise SchemaError(f"{_at(a.pos)}{a.func} needs a number, not {at}")
                if arg in pre_exprs[len(group_exprs):]:
                    col = pre_exprs.index(arg, len(group_exprs))
                else:
                    pre_exprs.append(arg)
                    pre_types.append(at)
                    col = len(pre_exprs) - 1
                func = a.func if a.param is None else f"{a.func}:{a.param}"
                spec = (func, col, a.distinct)
                t = {"COUNT": "INT", "AVG": "FLOAT"}.get(a.func, at)     # SUM keeps its input's type (SPEC 4)
                if a.func in APPROX_RESULT_TYPES:
                    t = APPROX_RESULT_TYPES[a.func] or at                # a quantile is one of the values
            if spec not in aggs:
                aggs.append(spec)
                agg_types.append(t)
            return positional(len(group_exprs) + aggs.index(spec))

        def post(e):
            """Rewrite an expression over the aggregate's output: group expressions and aggregates."""
            if isinstance(e, ast.Aggregate):
                return agg_ref(e)
            if _is_expr(e) and not isinstance(e, ast.Literal):
                try:
                    b = self.bind_expr(e, scope)
                except SchemaError:
                    b = None
                if b is not None and b in group_exprs:
                    return positional(group_exprs.index(b))
            if isinstance(e, ast.ColumnRef):
                b = self.bind_expr(e, scope)     # raises for unknown columns
                raise SchemaError(f"{_at(e.pos)}column '{e.name}' must appear in GROUP BY or be used in an "
                                  "aggregate")
            if isinstance(e, ast.ScalarSubquery | ast.InSubquery | ast.Exists | ast.Quantified):
                raise SchemaError(f"{_at(e.pos)}subqueries are not supported in the select list or HAVING")
            return map_expr(e, post)

        outs, names = [], []
        for k, it in enumerate(items):
            if isinstance(it.expr, ast.Star):
                raise SchemaError(f"{_at(it.pos)}SELECT * cannot be used with GROUP BY or aggregates")
            outs.append(post(it.expr))
            names.append(self._name(it, k, scope))
        having_b = post(having) if having is not None else None

        # names for EXPLAIN (outside equality): the expressions as written over the input's names, and the
        # aggregates as calls on them, so that a plan reads GROUP BY item: COUNT(*), MAX(price)
        pre_names = tuple(expr_label(e, types, node.names) for e in pre_exprs)
        pre = L.Project(node, tuple(pre_exprs), tuple(pre_types), names=pre_names)
        agg_node_types = tuple(pre_types[: len(group_exprs)]) + tuple(agg_types)
        agg_names = pre_names[: len(group_exprs)] + tuple(
            f"{f}({'DISTINCT ' if d else ''}{'*' if a is None else pre_names[a]})" for f, a, d in aggs)
        agg = L.Aggregate(pre, tuple(range(len(group_exprs))), tuple(aggs), agg_node_types, names=agg_names)
        cur = agg
        if having_b is not None:
            self._check_bool(having_b, agg_node_types, having)
            cur = L.Filter(cur, having_b, names=cur.names)
        out_types = tuple(self._type(o, agg_node_types) for o in outs)
        if extra_group_out:
            outs = [positional(i) for i in range(len(group_exprs))] + outs
            out_types = tuple(pre_types[: len(group_exprs)]) + out_types
            names = [f"k{i}" for i in range(len(group_exprs))] + names
        names = dedupe(names)
        return L.Project(cur, tuple(outs), out_types, names=tuple(names)), tuple(names), out_types


_NEGATED = {"=": "<>", "<>": "=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def _push_not(c):
    """``c`` with a leading NOT moved inward as far as subqueries need (plain parts keep their NOT)."""
    if not (isinstance(c, ast.UnaryOp) and c.op == "NOT") or not has_subquery(c.operand):
        return c
    e = c.operand
    if isinstance(e, ast.UnaryOp) and e.op == "NOT":
        return _push_not(e.operand)
    if isinstance(e, ast.BinaryOp) and e.op in ("AND", "OR"):
        return ast.BinaryOp("OR" if e.op == "AND" else "AND", ast.UnaryOp("NOT", e.left),
                            ast.UnaryOp("NOT", e.right), pos=e.pos)
    if isinstance(e, ast.Exists | ast.InSubquery):
        return replace(e, negated=not e.negated)
    if isinstance(e, ast.Quantified):
        return replace(e, op=_NEGATED[e.op], quantifier="ANY" if e.quantifier == "ALL" else "ALL")
    if isinstance(e, ast.BinaryOp) and e.op in _NEGATED:
        return replace(e, op=_NEGATED[e.op])
    return c


def _maybe_unknown(c) -> bool:
    """Whether condition ``c`` can be unknown: it compares with a scalar subquery, which may yield no row."""
    return any(isinstance(e, ast.ScalarSubquery) for e in iter_expr(c))


def dedupe(names: list[str]) -> list[str]:
    """The k-th repeat of a name (k >= 2) becomes ``name_k`` (docs/contract-engine-api.md)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n.lower(), 0) + 1
        seen[n.lower()] = k
        out.append(n if k == 1 else f"{n}_{k}")
    return out


def _has_alias(scope: Scope, alias: str) -> bool:
    return any(i.alias.lower() == alias.lower() for i in scope.items)
