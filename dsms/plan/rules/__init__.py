"""Rewrite rules on logical plans, applied in order after binding (sqlglot-style: one rule per module, named
after its one public function). Each rule returns an equivalent plan under SPEC section 3. Selections go
below windows first, so that the projections pushed next land above them. ``share_join_prefix`` is not in
``RULES``: it needs the joins the physical planner can share now, so the engine applies it before them."""

from dsms.plan.rules.push_filter_below_window import push_filter_below_window
from dsms.plan.rules.push_projection_down import push_projection_down

RULES = (push_filter_below_window, push_projection_down)


def optimize(node):
    for rule in RULES:
        node = rule(node)
    return node
