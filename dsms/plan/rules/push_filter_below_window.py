"""Select below a time-based window: σ_p(W_T(S)) = W_T(σ_p(S)) for RANGE (with or without SLIDE) and
UNBOUNDED windows, since whether an element is in such a window depends on its timestamp alone (digest-002a
section 3.6, rule 10.8; digest-003 section 3.13). It does not hold for ROWS or PARTITION BY windows, whose
contents depend on which other elements arrived (the counter-example of digest-003 section 3.13), so those are
left alone. Filtering first keeps fewer tuples in the window's synopsis.
"""

from __future__ import annotations

from dataclasses import fields, replace

from dsms.plan import logical as L


def push_filter_below_window(node):
    """The plan with every Filter directly above a RANGE or UNBOUNDED window moved below it."""
    changes = {}
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name in ("child", "left", "right"):
            changes[f.name] = push_filter_below_window(v)
        elif f.name == "ticks":
            changes[f.name] = tuple(push_filter_below_window(t) for t in v)
    if changes:
        node = replace(node, **changes)
    if isinstance(node, L.Filter) and isinstance(node.child, L.Window) and node.child.wkind in ("RANGE",
                                                                                                "UNBOUNDED"):
        w = node.child          # a RANGE or UNBOUNDED window has no PARTITION BY: no column to remap
        return replace(w, child=L.Filter(w.child, node.predicate, names=node.names, keep=node.keep),
                       names=node.names)
    return node
