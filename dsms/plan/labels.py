"""Plan labels with column names: EXPLAIN shows ``GROUP BY item: COUNT(*), MAX(price)`` where the plan itself
holds positions (``$0``), and the text plan of a query that is not registered (``EXPLAIN SELECT ...``).

Logical nodes keep positional column references so that equal subplans of different queries compare equal
(dsms/plan/logical.py); their ``names`` ride along outside equality. A label is made positional first, as the
operators make it (compiled expression text), then each ``$k`` outside a string literal is replaced by the name
of column k of the node's input. A name that two input columns share is written ``name#k`` so the label stays
unambiguous. The XML plan keeps the positions (dsms/plan/xml_plan.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from dsms.expr.compile import compile_expr
from dsms.operators.select import keeps_label
from dsms.plan import logical as L

# a string literal (skipped), or a positional reference: $k, or L$k / R$k (a join's left and right inputs)
_REF = re.compile(r"'(?:[^']|'')*'|(?<![\w$])([LR]?)\$(\d+)\b")


def display_names(names: Sequence[str]) -> list[str]:
    """The names to show for a node's columns: ``name``, or ``name#k`` where two columns share a name.

    >>> display_names(["a", "b", "a"])
    ['a#0', 'b', 'a#2']
    """
    seen = Counter(n.lower() for n in names)
    return [n if seen[n.lower()] == 1 else f"{n}#{k}" for k, n in enumerate(names)]


def with_names(label: str, names: Sequence[str], left: Sequence[str] = (), right: Sequence[str] = ()) -> str:
    """``label`` with ``$k`` replaced by ``names[k]`` (``L$k`` and ``R$k`` by ``left[k]`` and ``right[k]``, a
    join's inputs, numbered together when a name is on both sides); a reference with no name is left as it is.

    >>> with_names("$1 > 10 AND $0 = 'x$0'", ["item", "n"])
    "n > 10 AND item = 'x$0'"
    >>> with_names("L$0 = R$1", [], ["a"], ["b", "c"])
    'a = c'
    >>> with_names("L$0 = R$0", [], ["a", "b"], ["a", "d"])
    'a#0 = a#2'
    """
    both = display_names([*left, *right])          # a name on both sides of a join is written name#k
    shown = {"": display_names(names), "L": both[: len(left)], "R": both[len(left):]}

    def sub(m: re.Match) -> str:
        if m.group(2) is None:
            return m.group(0)
        cols = shown[m.group(1)]
        k = int(m.group(2))
        return cols[k] if k < len(cols) and cols[k] else m.group(0)
    return _REF.sub(sub, label)


def input_names(node) -> tuple[list[str], list[str], list[str]]:
    """(names, left names, right names) of the columns ``node``'s expressions read: its child's columns, or
    for a join the left's then the right's."""
    if isinstance(node, L.Join | L.SemiJoin | L.FilteredJoin):
        left, right = list(node.left.names), list(node.right.names)
        return left + right, left, right
    child = getattr(node, "child", None)
    return (list(child.names) if child is not None else []), [], []


def named_label(node, label: str, via=None) -> str:
    """An operator's positional ``label`` with the names of ``node``'s input columns (of ``via`` when the
    operator reads another node's output instead: a view of a shared window or join)."""
    if via is not None:
        return with_names(label, list(via.names))
    names, left, right = input_names(node)
    return with_names(label, names, left, right)


def expr_label(expr, types: Sequence[str], names: Sequence[str]) -> str:
    """A bound (positional) expression over columns of ``types`` as text with the columns' ``names``."""
    return with_names(_expr(expr, types), names)


# ---------------------------------------------------------------- the logical plan as text


def _expr(expr, types) -> str:
    """A bound expression as the operators write it: its columns are positions (``$0``) typed by ``types``."""
    def resolve(ref):
        return ref.name, types[int(ref.name[1:])]
    return compile_expr(expr, resolve).text


def logical_label(node) -> tuple[str, str]:
    """(kind, positional label) of a logical node, in the words the operators use in EXPLAIN."""
    if isinstance(node, L.StreamScan):
        return "stream", node.name
    if isinstance(node, L.RelationScan):
        return "relation", node.name
    if isinstance(node, L.QueryOutput):
        return "query_output", node.query_id
    if isinstance(node, L.Sample):
        return "sample", f"{node.percent}%"
    if isinstance(node, L.Window):
        if node.wkind == "RANGE":
            return "range_window", f"RANGE {node.range}" + (f" SLIDE {node.slide}" if node.slide else "")
        if node.wkind == "ROWS" and node.partition:
            return "partition_window", (f"PARTITION BY {', '.join(f'${p}' for p in node.partition)} "
                                        f"ROWS {node.rows}")
        if node.wkind == "ROWS":
            return "row_window", f"ROWS {node.rows}"
        return "window", node.wkind
    if isinstance(node, L.Filter):
        return "select", _expr(node.predicate, node.child.types) + keeps_label(node.keep)
    if isinstance(node, L.Project):
        text = ", ".join(_expr(e, node.child.types) for e in node.exprs)
        return "project", text + (" [pushed]" if node.pushed else "")
    if isinstance(node, L.Aggregate):
        aggs = ", ".join(f"{f}({'DISTINCT ' if d else ''}{'*' if a is None else f'${a}'})"
                         for f, a, d in node.aggs)
        group = f"GROUP BY {', '.join(f'${g}' for g in node.group)}: " if node.group else ""
        return "aggregate", group + aggs
    if isinstance(node, L.Distinct):
        return "distinct", ""
    if isinstance(node, L.Join | L.SemiJoin):
        keys = " AND ".join(f"L${a} = R${b}" for a, b in zip(node.left_keys, node.right_keys))
        if node.predicate is not None:
            keys = (keys + " AND " if keys else "") + _expr(node.predicate, node.left.types + node.right.types)
        if isinstance(node, L.SemiJoin):
            return "semi_join", ("anti" if node.anti else "semi") + (f" on {keys}" if keys else "")
        return "join", keys or "cross product"
    if isinstance(node, L.SetOp):
        return "set_op", f"{node.op}{' ALL' if node.all else ''}"
    if isinstance(node, L.ToStream):
        return "to_stream", node.op
    if isinstance(node, L.Changelog):
        return "changelog", ""
    return type(node).__name__.lower(), ""


def explain_logical(root, kind: str, columns: Sequence[tuple[str, str]], note=None) -> str:
    """The plan a query would get, as an indented tree (root first), with column names; what registering it
    would build before sharing with the queries already registered. ``note(node)``, if given, is text to add
    to a node's line (how the planner will build it, when that is not the node's own operator).

    >>> from dsms.cql import ast
    >>> s = L.StreamScan("s", ("INT", "FLOAT"), names=("a", "b"))
    >>> f = L.Filter(s, ast.BinaryOp(">", ast.ColumnRef("$1"), ast.Literal(2.5, "FLOAT")), names=s.names)
    >>> print(explain_logical(L.ToStream(f, "ISTREAM", names=s.names), "stream", [("a", "INT"), ("b", "FLOAT")]))
    stream result (a INT, b FLOAT)
      to_stream: ISTREAM
        select: b > 2.5
          stream: s
    """
    lines = [f"{kind} result ({', '.join(f'{n} {t}' for n, t in columns)})"]

    def walk(node, depth: int) -> None:
        what, label = logical_label(node)
        if not isinstance(node, L.StreamScan | L.RelationScan | L.QueryOutput):
            label = named_label(node, label)
        if note is not None:
            label = (label + note(node)).lstrip()
        lines.append("  " * depth + what + (f": {label}" if label else ""))
        for child in node.children:
            walk(child, depth + 1)
    walk(root, 1)
    return "\n".join(lines)
