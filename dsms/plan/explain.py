"""EXPLAIN: a query's physical plan as text, JSON or XML — its operators, queues and the edges between them,
with what is shared between queries (digest-004 E7/E8: the plan shows one operator where queries share it) —
and a logical plan as indented text (``logical_text``), the form the rewrite rules' fixtures are written in
(tests/fixtures/rules/).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dsms.agg_spec import agg_label
from dsms.expr.compile import compile_expr
from dsms.formats.xml_codec import visible
from dsms.operators.select import keeps_label
from dsms.plan import logical as L
from dsms.plan.binder import type_resolver
from dsms.plan.istream_pass import NOTE as ISTREAM_NOTE
from dsms.plan.xml_plan import to_element


def _inputs(op) -> list[tuple[str, object]]:
    """(id, queue or None) of what feeds ``op``: its input queues, or the windows or selections fused into
    it, or for a fused window the projection fused below it."""
    if getattr(op, "fed_by", None) is not None:
        return [(op.fed_by.id, None)]
    windows = getattr(op, "windows", None) or [None] * len(op.input_queues)
    selects = getattr(op, "selects", None) or [None] * len(op.input_queues)
    return [(w.id, None) if w is not None else (s.id, None) if s is not None else (q.id, q)
            for q, w, s in zip(op.input_queues, windows, selects)]


def _output(op) -> tuple[str, object]:
    """(id, queue or None) of where ``op``'s output goes: its queue, or the join it is fused into (the
    window, for a projection fused below one)."""
    if op.fused is None:
        return op.output.id, op.output
    projects = getattr(op.fused, "projects", ())
    if op in projects:
        return op.fused.windows[projects.index(op)].id, None
    return op.fused.id, None


def plan_entities(engine, query_id: str) -> dict:
    """The entities of one query's plan and the edges between them, producers first. A window fused into a
    join (``JoinOp.fuse_window``) has no output queue: its edge goes straight to the join."""
    ops = [op for op in engine.ops if query_id in op.owners]
    queue_ids = {}
    for s in engine.sources.values():
        queue_ids[id(s.queue)] = (s.queue, f"source:{s.obj.name}")
    used = set()
    for op in ops:
        for q in [q for _, q in _inputs(op)] + [_output(op)[1]]:
            if q is not None:
                queue_ids.setdefault(id(q), (q, None))
                used.add(id(q))
    query = engine.query_list[query_id]
    used.add(id(query.reader.queue))
    queues = []
    for key, (q, src) in queue_ids.items():
        if key not in used:
            continue
        queues.append({"id": q.id, "kind": "queue", "source": src, "readers": q._reader_count(), "tuples": q.tuples,
                       "bytes": q.bytes, "shared": q._reader_count() > 1})
    operators = []
    edges = []
    synopses = _synopses(ops)
    for op in ops:
        inputs, output = [i for i, _ in _inputs(op)], _output(op)[0]
        entry = {"id": op.id, "kind": op.kind, "label": op.detail, "owners": sorted(op.owners),
                 "positions": getattr(op, "detail_positions", None),
                 "shared": len(op.owners) > 1, "inputs": inputs, "output": output}
        if op.fused is not None:
            entry["fused_into"] = output
        operators.append(entry)
        edges += [{"from": i, "to": op.id} for i in inputs if not i.startswith("op:")]
        edges.append({"from": op.id, "to": output})
    plan = {"query": query_id, "kind": query.kind, "output": query.reader.queue.id, "operators": operators,
            "queues": queues, "synopses": synopses, "edges": edges}
    built = engine.planner.memo.get(query.node) if isinstance(query.node, L.ToStream) else None
    if built is not None and built.op is None:           # its ISTREAM reads the queue below (istream_pass.py)
        plan["note"] = f"ISTREAM: {ISTREAM_NOTE}"
    if query.deferred:            # a view built when first read (dsms/plan/view_demand.py)
        plan["deferred"] = True
    return plan


def _synopses(ops: list) -> list[dict]:
    """The synopses (operator state) of the plan's operators, each with the operator that holds it. A window
    whose tuples are views of a shared store names that store in ``store`` (its own ``bytes`` are what it would
    cost alone, the store counts the arrays once), and the store is listed with every window of the plan that
    uses it."""
    out: dict[str, dict] = {}
    for op in ops:
        store = getattr(op, "shared_store", None)
        for syn in [*op.synopses, *([store] if store is not None and store not in op.synopses else [])]:
            if syn.id in out:
                out[syn.id]["operators"].append(op.id)
                continue
            owners = sorted(getattr(syn, "owners", ()) or op.owners)
            entry = {"id": syn.id, "kind": syn.kind, "operators": [op.id], "owners": owners,
                     "shared": len(owners) > 1}
            if store is not None and syn is getattr(op, "store", None):
                entry["store"] = store.id
            out[syn.id] = entry
    return list(out.values())


def explain_text(engine, query_id: str) -> str:
    plan = plan_entities(engine, query_id)
    note = f"  [{plan['note']}]" if "note" in plan else ""
    lines = [f"query {query_id} ({plan['kind']}) -> {plan['output']}{note}"]
    if plan.get("deferred"):
        lines.append("  [view computed when read: no operator runs until a query's plan or a reader reads it]")
    for op in plan["operators"]:
        shared = f"  [shared by {', '.join(op['owners'])}]" if op["shared"] else ""
        fused = ", fused" if "fused_into" in op else ""
        lines.append(f"  {op['id']} {op['kind']}{': ' + op['label'] if op['label'] else ''}"
                     f"  ({', '.join(op['inputs'])} -> {op['output']}{fused}){shared}")
    return "\n".join(lines)


def explain_xml(engine, query_id: str) -> str:
    plan = plan_entities(engine, query_id)
    doc = ET.Element("plan", query=query_id, kind=plan["kind"], output=plan["output"])
    if plan.get("deferred"):
        doc.set("deferred", "true")
    for q in plan["queues"]:
        el = ET.SubElement(doc, "queue", id=q["id"], readers=str(q["readers"]))
        if q["source"]:
            el.set("source", q["source"])
    for op in plan["operators"]:
        el = ET.SubElement(doc, "operator", id=op["id"], kind=op["kind"], label=visible(op["label"]),
                           owners=" ".join(op["owners"]))
        if op["positions"] is not None:       # the label with column positions ($0) instead of names
            el.set("positions", visible(op["positions"]))
        for q in op["inputs"]:
            ET.SubElement(el, "input", **({"operator": q} if q.startswith("op:") else {"queue": q}))
        if "fused_into" in op:
            ET.SubElement(el, "output", operator=op["output"], fused="true")
        else:
            ET.SubElement(el, "output", queue=op["output"])
    logical = ET.SubElement(doc, "logical")
    logical.append(to_element(engine.query_list[query_id].node))
    return ET.tostring(doc, encoding="unicode")


def logical_text(node) -> str:
    """A logical plan as text: one node a line, its class name and what it computes, children indented below
    it. Columns are positional (``$3``; a join's predicate sees ``L$i``/``R$j`` for its keys and ``$k`` over
    left + right), expressions are written as EXPLAIN writes them, and output names are left out, as plan
    equality leaves them out. RSTREAM's tick inputs are listed after its child, marked ``tick:``.

    >>> from dsms.cql.ast import BinaryOp, Literal
    >>> from dsms.plan.binder import positional
    >>> s = L.StreamScan("S", ("INT", "INT"))
    >>> f = L.Filter(L.Window(s, "RANGE", range=10), BinaryOp(">=", positional(1), Literal(3, "INT")))
    >>> print(logical_text(L.ToStream(f, "ISTREAM")))
    ToStream ISTREAM
      Filter $1 >= 3
        Window RANGE 10
          StreamScan S
    """
    lines: list[str] = []

    def visit(n, depth: int, mark: str = "") -> None:
        detail = _logical_detail(n)
        lines.append(f"{'  ' * depth}{mark}{type(n).__name__}{' ' + detail if detail else ''}")
        kids = (n.child,) if isinstance(n, L.ToStream) else n.children
        for c in kids:
            visit(c, depth + 1)
        for t in n.ticks if isinstance(n, L.ToStream) else ():
            visit(t, depth + 1, "tick: ")

    visit(node, 0)
    return "\n".join(lines)


def _expr(expr, types) -> str:
    return compile_expr(expr, type_resolver(list(types))).text


def _keys(left: tuple[int, ...], right: tuple[int, ...]) -> str:
    return " AND ".join(f"L${a} = R${b}" for a, b in zip(left, right))


def _logical_detail(n) -> str:
    """What ``logical_text`` writes after a node's class name."""
    if isinstance(n, L.StreamScan | L.RelationScan):
        return n.name
    if isinstance(n, L.QueryOutput):
        return f"{n.query_id} ({n.kind})"
    if isinstance(n, L.Sample):
        return f"{n.percent}%"
    if isinstance(n, L.Window):
        if n.wkind == "RANGE":
            return f"RANGE {n.range}" + (f" SLIDE {n.slide}" if n.slide else "")
        if n.wkind == "ROWS":
            part = f"PARTITION BY {', '.join(f'${p}' for p in n.partition)} " if n.partition else ""
            return f"{part}ROWS {n.rows}"
        return n.wkind
    if isinstance(n, L.Filter):
        return _expr(n.predicate, n.child.types) + keeps_label(n.keep)
    if isinstance(n, L.Project):
        return ", ".join(_expr(e, n.child.types) for e in n.exprs) + (" [pushed]" if n.pushed else "")
    if isinstance(n, L.Join | L.SemiJoin):
        parts = [_keys(n.left_keys, n.right_keys)] if n.left_keys else []
        if n.predicate is not None:
            parts.append(_expr(n.predicate, n.left.types + n.right.types))
        on = " AND ".join(parts)
        if isinstance(n, L.SemiJoin):
            return ("anti" if n.anti else "semi") + (f" on {on}" if on else "")
        return on or "cross product"
    if isinstance(n, L.Aggregate):
        aggs = ", ".join(agg_label(f, a, d) for f, a, d in n.aggs)
        return (f"GROUP BY {', '.join(f'${g}' for g in n.group)}: " if n.group else "") + aggs
    if isinstance(n, L.SetOp):
        return n.op + (" ALL" if n.all else "")
    if isinstance(n, L.ToStream):
        return n.op
    return ""
