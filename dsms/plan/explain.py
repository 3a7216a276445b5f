"""EXPLAIN: a query's physical plan as text, JSON or XML — its operators, queues and the edges between them,
with what is shared between queries (digest-004 E7/E8: the plan shows one operator where queries share it).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dsms.plan.xml_plan import to_element


def plan_entities(engine, query_id: str) -> dict:
    """The entities of one query's plan and the edges between them, producers first."""
    ops = [op for op in engine.ops if query_id in op.owners]
    queue_ids = {}
    for s in engine.sources.values():
        queue_ids[id(s.queue)] = (s.queue, f"source:{s.obj.name}")
    for op in ops:
        for q in op.input_queues:
            queue_ids.setdefault(id(q), (q, None))
        queue_ids.setdefault(id(op.output), (op.output, None))
    used = set()
    for op in ops:
        used |= {id(q) for q in op.input_queues} | {id(op.output)}
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
    for op in ops:
        operators.append({"id": op.id, "kind": op.kind, "label": op.detail, "owners": sorted(op.owners),
                          "shared": len(op.owners) > 1, "inputs": [q.id for q in op.input_queues],
                          "output": op.output.id})
        for q in op.input_queues:
            edges.append({"from": q.id, "to": op.id})
        edges.append({"from": op.id, "to": op.output.id})
    return {"query": query_id, "kind": query.kind, "output": query.reader.queue.id, "operators": operators,
            "queues": queues, "edges": edges}


def explain_text(engine, query_id: str) -> str:
    plan = plan_entities(engine, query_id)
    lines = [f"query {query_id} ({plan['kind']}) -> {plan['output']}"]
    for op in plan["operators"]:
        shared = f"  [shared by {', '.join(op['owners'])}]" if op["shared"] else ""
        lines.append(f"  {op['id']} {op['kind']}{': ' + op['label'] if op['label'] else ''}"
                     f"  ({', '.join(op['inputs'])} -> {op['output']}){shared}")
    return "\n".join(lines)


def explain_xml(engine, query_id: str) -> str:
    plan = plan_entities(engine, query_id)
    doc = ET.Element("plan", query=query_id, kind=plan["kind"], output=plan["output"])
    for q in plan["queues"]:
        el = ET.SubElement(doc, "queue", id=q["id"], readers=str(q["readers"]))
        if q["source"]:
            el.set("source", q["source"])
    for op in plan["operators"]:
        el = ET.SubElement(doc, "operator", id=op["id"], kind=op["kind"], label=op["label"],
                           owners=" ".join(op["owners"]))
        for q in op["inputs"]:
            ET.SubElement(el, "input", queue=q)
        ET.SubElement(el, "output", queue=op["output"])
    logical = ET.SubElement(doc, "logical")
    logical.append(to_element(engine.query_list[query_id].node))
    return ET.tostring(doc, encoding="unicode")
