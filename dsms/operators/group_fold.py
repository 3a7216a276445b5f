"""The live rows of a lexicographic-extreme join's changelog: per group, the inserts after the group's last delete.

Source: SPEC section 3 and the contract's "Registration time" (a relation's contents, stamped with the instants
the rows entered); docs/architecture.md, "Lexicographic extremes". ``LexExtremeJoinOp`` holds, per group, the
rows at the group's extreme so far; they all leave together, at the instant a row raises the extreme, and the
rows entering at that instant come after those deletes in its output (deletes first within an instant, whole
instants in time order). So at every point of the log a group's live rows are exactly its inserts after its
last delete, and the sink above the join (passing its changes through, ``PhysicalPlanner._net_lex``) folds
its log by the group column alone: no row hashing, no count per distinct row (``fold_changelog``).
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch


def fold_by_group(b: Batch, group: int) -> Batch:
    """The live rows of changelog ``b`` (time order; per group, every live row deleted at once, and any insert
    of that instant after the deletes) as inserts stamped with the instants they entered, in log order.

    >>> b = Batch(np.array([1, 1, 2, 3, 3, 3]), np.array([1, 1, 1, -1, -1, 1], dtype=np.int8),
    ...           [np.array([7, 7, 8, 7, 7, 7]), np.array([10, 11, 20, 10, 11, 12])])
    >>> out = fold_by_group(b, 0)
    >>> out.ts.tolist(), [c.tolist() for c in out.cols], out.sign.tolist()
    ([2, 3], [[8, 7], [20, 12]], [1, 1])
    >>> b.cols[0][b.cols[0] == 8] = 10**12                # groups too far apart for a table: the same by a sort
    >>> out = fold_by_group(b, 0)
    >>> out.ts.tolist(), [c.tolist() for c in out.cols]
    ([2, 3], [[1000000000000, 7], [20, 12]])
    """
    n = len(b)
    dels = (b.sign < 0).nonzero()[0]
    if not len(dels):
        return b
    g = b.cols[group].astype(np.int64, copy=False)
    lo = int(g.min())
    span = int(g.max()) - lo + 1
    last = np.full(span if span <= 4 * n + 64 else 0, -1, dtype=np.int64)
    if len(last):
        np.maximum.at(last, g[dels] - lo, dels)      # each group's last delete (-1: none)
        after = last[g - lo]
    else:                                             # groups too sparse for a table: by one sort
        order = np.argsort(g, kind="stable")
        gs = g[order]
        start = np.ones(n, dtype=bool)
        start[1:] = gs[1:] != gs[:-1]
        pos = np.where(b.sign[order] < 0, order, -1)
        starts = start.nonzero()[0]
        per_run = np.maximum.reduceat(pos, starts)
        after = np.empty(n, dtype=np.int64)
        after[order] = per_run[np.cumsum(start) - 1]
    keep = ((b.sign > 0) & (np.arange(n) > after)).nonzero()[0]
    out = b.take(keep)
    out.sign = np.ones(len(out), dtype=np.int8)
    return out
