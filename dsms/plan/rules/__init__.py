"""Rewrite rules on logical plans, applied in order after binding (sqlglot-style: one rule per module, named
after its one public function). Each rule returns an equivalent plan under SPEC section 3."""

from dsms.plan.rules.push_filter_below_window import push_filter_below_window

RULES = (push_filter_below_window,)


def optimize(node):
    for rule in RULES:
        node = rule(node)
    return node
