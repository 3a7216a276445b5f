"""Generated views and the queries that read them, each with its inlined form: the view-naming property's input.

SPEC section 3: a view is a name for its definition and never changes an answer. ``view_cases()`` draws one or
two views (a view over a view) with bodies of every shape (select-project-join over a windowed stream or a
relation, DISTINCT, GROUP BY with an aggregate) and an outer query over the top view under every
relation-to-stream operator, with a relation-valued result, joined with a stream or a relation, aggregated, and
with ``op(v)`` as a FROM item under a window. ``inline`` writes the outer query with each view replaced by its
body, where CQL can say that: a select-project-join body is merged into the reader's block (its columns
substituted, its FROM items and WHERE conjuncts added); an aggregating body becomes a FROM subquery (relation
valued, as the view); a DISTINCT body is merged only under a reader that keeps every column and filters (a
projection does not commute with DISTINCT). A non-aggregate body over a stream cannot be a FROM subquery (it
would get the implicit ISTREAM), and a reader's result kind must not change by merging: the property test checks
the kind and skips the comparison when the inlined text means something else.

Queries are kept as small blocks (``Block``) so that inlining is a rewrite of structure, not of text; column
references are always qualified (``alias.col``) and every alias is unique across the views and the reader, so a
substitution cannot capture another item's column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from hypothesis import strategies as st

from oracle.generators import _SCHEMA, int_expr, pred, window

OPS = ("ISTREAM", "DSTREAM", "RSTREAM")


@dataclass(frozen=True)
class Item:
    """A FROM item: ``source`` is a catalog name or a ``Block`` (subquery); ``op`` wraps it in ISTREAM/DSTREAM/
    RSTREAM; ``window`` is the window text (with its leading space) or ''."""

    source: object
    alias: str
    window: str = ""
    op: str | None = None


@dataclass(frozen=True)
class Block:
    """A SELECT block. ``items`` (expression, name) pairs, or None for ``*``; ``op`` for ``SELECT op(...)``;
    ``around`` writes the op as ``op(SELECT ...)`` instead."""

    items: tuple | None
    from_: tuple
    where: tuple = ()
    group: tuple = ()
    having: str | None = None
    distinct: bool = False
    op: str | None = None
    around: bool = False

    @property
    def shape(self) -> str:
        if self.group or any(_is_agg(e) for e, _ in self.items or ()):
            return "aggregate"
        return "distinct" if self.distinct else "spj"


_AGG = re.compile(r"\b(COUNT|SUM|MIN|MAX|AVG)\(")


def _is_agg(text: str) -> bool:
    return _AGG.search(text) is not None


def render(b: Block) -> str:
    """CQL text of a block."""
    items = "*" if b.items is None else ", ".join(f"{e} AS {n}" for e, n in b.items)
    dist = "DISTINCT " if b.distinct else ""
    head = f"{b.op}({dist}{items})" if b.op and not b.around else f"{dist}{items}"
    text = f"SELECT {head} FROM " + ", ".join(_item(i) for i in b.from_)
    if b.where:
        text += " WHERE " + " AND ".join(f"({w})" for w in b.where)
    if b.group:
        text += " GROUP BY " + ", ".join(b.group)
    if b.having:
        text += f" HAVING {b.having}"
    return f"{b.op}({text})" if b.op and b.around else text


def _item(i: Item) -> str:
    src = i.source if isinstance(i.source, str) else f"({render(i.source)})"
    if i.op:
        src = f"{i.op}({i.source if isinstance(i.source, str) else render(i.source)})"
    return f"{src} {i.alias}{i.window}"


# ------------------------------------------------------------------------------------------------ inlining


def _subst(text: str, alias: str, cols: dict) -> str:
    """``alias.col`` replaced by the (parenthesised) expression ``cols[col]``."""
    return re.sub(rf"\b{re.escape(alias)}\.(\w+)\b", lambda m: f"({cols[m.group(1)]})", text)


def _map_block(b: Block, f) -> Block:
    """The block with ``f`` applied to every expression text of its own (not of its FROM subqueries)."""
    return replace(b, items=None if b.items is None else tuple((f(e), n) for e, n in b.items),
                   where=tuple(f(w) for w in b.where), group=tuple(f(g) for g in b.group),
                   having=None if b.having is None else f(b.having))


def inline(b: Block, views: dict) -> Block | None:
    """``b`` with every view it reads replaced by the view's body (see the module docstring); None when CQL
    cannot write that."""
    for k, it in enumerate(b.from_):
        if not (isinstance(it.source, str) and it.source in views):
            continue
        body = inline(views[it.source], views)
        if body is None:
            return None
        rest = b.from_[:k] + b.from_[k + 1:]
        if it.op:                                    # op(v) Z: op(body) Z, the body a relation as the view is
            return inline(replace(b, from_=rest[:k] + (replace(it, source=body),) + rest[k:]), views)
        if body.shape == "aggregate":                # a relation-valued FROM subquery
            return inline(replace(b, from_=rest[:k] + (replace(it, source=body),) + rest[k:]), views)
        cols = dict((n, e) for e, n in body.items)
        outer = _map_block(b, lambda t, alias=it.alias, cols=cols: _subst(t, alias, cols))
        if body.shape == "distinct":
            if b.items is not None or len(b.from_) > 1 or b.group or b.distinct:
                return None
            return replace(body, where=body.where + outer.where, op=b.op, around=b.around)
        if b.items is None:
            if len(b.from_) > 1:
                return None
            outer = replace(outer, items=body.items)
        merged = replace(outer, from_=rest[:k] + body.from_ + rest[k:], where=body.where + outer.where)
        return inline(merged, views)
    return b


# ------------------------------------------------------------------------------------------------ strategies

_AGGS = ("COUNT(*)", "SUM({x})", "MIN({x})", "MAX({x})", "COUNT(DISTINCT {x})")


def _body(draw, shape: str, over: str | None, level: int) -> Block:
    """A view body (columns a INT, n INT) over a base stream or relation, or over the view ``over``."""
    if over is not None:
        alias = f"V{level}"
        frm = (Item(over, alias),)
        env = [(f"{alias}.a", "INT"), (f"{alias}.n", "INT")]
        a, x, where = f"{alias}.a", f"{alias}.n", ()
    else:
        src = draw(st.sampled_from(["S", "S", "T", "R", "SR"]))
        alias = f"X{level}"
        if src == "R":
            frm = (Item("R", alias),)
            env = [(f"{alias}.a", "INT"), (f"{alias}.e", "STRING")]
        else:
            name = "T" if src == "T" else "S"
            frm = (Item(name, alias, window(draw, _SCHEMA[name])),)
            env = [(f"{alias}.{c}", t) for c, t in _SCHEMA[name]]
        where = ()
        if src == "SR":                                        # a stream joined with a relation
            frm += (Item("R", f"R{level}"),)
            env += [(f"R{level}.e", "STRING")]
            where = (f"{alias}.a = R{level}.a",)
        a = f"{alias}.a"
        x = f"{alias}.b" if src in ("S", "SR") else f"{alias}.a"
    if draw(st.booleans()):
        where += (pred(draw, env, 1),)
    if shape == "aggregate":
        key = draw(st.sampled_from([a, f"{a} % 2", x]))
        agg = draw(st.sampled_from(_AGGS)).format(x=x)
        having = f"COUNT(*) > {draw(st.integers(0, 1))}" if draw(st.integers(0, 3)) == 0 else None
        return Block(((key, "a"), (agg, "n")), frm, where, (key,), having)
    n = draw(st.sampled_from([x, int_expr(draw, env, 1)]))
    if re.fullmatch(r"\(?-?\d+\)?", n):       # a constant, substituted into GROUP BY, would be a position
        n = x
    return Block(((a, "a"), (n, "n")), frm, where, distinct=shape == "distinct")


def _outer(draw, top: str) -> Block:
    """A query over the view ``top`` (columns a, n)."""
    env = [(f"{top}.a", "INT"), (f"{top}.n", "INT")]
    op = draw(st.sampled_from(OPS + ("RSTREAM",)))           # RSTREAM's instants are where views went wrong
    opt = draw(st.sampled_from((None,) + OPS + ("RSTREAM",)))
    where = (pred(draw, env, 1),) if draw(st.booleans()) else ()
    k = draw(st.sampled_from(["star", "star", "around", "stream", "group", "relation", "rel_join", "item"]))
    v = Item(top, top)
    if k == "star":
        return Block(None, (v,), where, op=op)
    if k == "around":
        return Block(None, (v,), where, op=op, around=True)
    if k == "relation":
        return Block(None, (v,), where)
    if k == "stream":
        w = window(draw, _SCHEMA["T"])
        return Block(((f"{top}.a", "a"), (f"{top}.n", "n"), ("Y.d", "d")), (v, Item("T", "Y", w)),
                     (f"{top}.a = Y.a",) + where, op=opt)
    if k == "group":
        key = draw(st.sampled_from([f"{top}.n", f"{top}.a"]))
        return Block(((key, "g"), ("COUNT(*)", "k"), (f"SUM({top}.n)", "s")), (v,), where, (key,), op=opt)
    if k == "rel_join":
        return Block(((f"{top}.a", "a"), (f"{top}.n", "n"), ("R.e", "e")), (v, Item("R", "R")),
                     (f"{top}.a = R.a",) + where, op=opt)
    w = window(draw, [("a", "INT"), ("n", "INT")], draw(st.sampled_from(["RANGE", "NOW", "SLIDE", "UNBOUNDED",
                                                                        "ROWS"])), allow_where=False)
    z = Item(top, "Z", w, op=op)
    if draw(st.booleans()):
        return Block((("Z.a", "a"), ("COUNT(*)", "k")), (z,), group=("Z.a",))
    return Block((("Z.a", "a"), ("Z.n", "n")), (z,))


@st.composite
def view_cases(draw):
    """(setup statements, query text, inlined query text or None): one view, or a view over a view."""
    shapes = ("spj", "spj", "distinct", "aggregate")
    views: dict[str, Block] = {"v1": _body(draw, draw(st.sampled_from(shapes)), None, 1)}
    top = "v1"
    if draw(st.booleans()):
        views["v2"] = _body(draw, draw(st.sampled_from(shapes)), "v1", 2)
        top = "v2"
    outer = _outer(draw, top)
    setup = tuple(f"REGISTER VIEW {name} AS {render(body)}" for name, body in views.items())
    flat = inline(outer, views)
    return setup, render(outer), None if flat is None else render(flat)
