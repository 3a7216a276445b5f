"""Static approximation (digest-004 R-APX-02, P1 section 5.1): the query is rewritten once, when it is
registered, with smaller windows (R-APX-02a) and lower sampling rates (R-APX-02b), as the user asked with
``REGISTER QUERY q AS ... APPROXIMATE (WINDOW f, SAMPLE g)``.

- Window reduction: a RANGE window of T ticks becomes max(1, floor(T * f)) (its SLIDE, if longer than that,
  shrinks with it), a ROWS (or PARTITION BY ... ROWS) window of N rows max(1, floor(N * f)). NOW and
  UNBOUNDED windows are left alone (adding a window where none was given changes the query's meaning more
  than a user asking for "smaller" would expect). The exceptions of R-APX-02a (pitfall P-10), detected here
  and NOT reduced: a window under duplicate elimination (DISTINCT, the set forms of UNION, EXCEPT and
  INTERSECT, an aggregate with DISTINCT), since a smaller window can raise its output rate; and a window in
  the right-hand subtree of a negation (EXCEPT, NOT IN / NOT EXISTS / ALL: anti-semi-joins), since less
  output there means more output above.
- Sample-rate reduction: an existing ``SAMPLE(p)`` becomes ``SAMPLE(p * g)``. No sample is added: a sample
  pushed below a join biases it (R-APX-02b, pitfall P-9), and one on the input of an aggregate would change
  its meaning (COUNT), which the static path cannot scale back.
"""

from __future__ import annotations

from dataclasses import fields, replace

from dsms.plan import logical as L


def reduce_for_approximation(node, window: float = 1.0, sample: float = 1.0, _protected: bool = False):
    """``node`` with its windows scaled by ``window`` and its samples by ``sample`` (both in (0, 1]), except
    where R-APX-02a forbids it.

    >>> s = L.StreamScan("S", ("INT",))
    >>> plan = L.SetOp(L.Window(s, "RANGE", range=100), L.Window(L.Sample(s, 50.0), "ROWS", rows=10), "EXCEPT",
    ...                True)
    >>> r = reduce_for_approximation(plan, window=0.5, sample=0.5)
    >>> r.left.range, r.right.rows, r.right.child.percent
    (50, 10, 25.0)
    """
    if not (0 < window <= 1 and 0 < sample <= 1):
        raise ValueError("reduction factors must be in (0, 1]")
    protect_here = _protected or _eliminates_duplicates(node)
    changes = {}
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name == "child":
            changes[f.name] = reduce_for_approximation(v, window, sample, protect_here)
        elif f.name == "left":
            changes[f.name] = reduce_for_approximation(v, window, sample, protect_here)
        elif f.name == "right":
            negated = (isinstance(node, L.SetOp) and node.op == "EXCEPT") or \
                (isinstance(node, L.SemiJoin) and node.anti)
            changes[f.name] = reduce_for_approximation(v, window, sample, protect_here or negated)
        elif f.name == "ticks":
            changes[f.name] = tuple(reduce_for_approximation(t, window, sample, protect_here) for t in v)
    if changes:
        node = replace(node, **changes)
    if isinstance(node, L.Sample) and sample < 1:
        return replace(node, percent=node.percent * sample)
    if isinstance(node, L.Window) and window < 1 and not _protected:
        if node.wkind == "RANGE" and node.range is not None:
            size = max(1, int(node.range * window))
            slide = node.slide if node.slide is None or node.slide <= size else size
            return replace(node, range=size, slide=slide)
        if node.wkind == "ROWS" and node.rows is not None:
            return replace(node, rows=max(1, int(node.rows * window)))
    return node


def _eliminates_duplicates(node) -> bool:
    if isinstance(node, L.Distinct):
        return True
    if isinstance(node, L.SetOp) and not node.all:
        return True
    return isinstance(node, L.Aggregate) and any(d for _, _, d in node.aggs)
