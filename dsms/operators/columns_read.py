"""Which columns of an input queue the operators reading it read, so that an input stream's batch need not
carry (and count the bytes of) a column no reader looks at (issue 15: Bid's three strings cost NEXMark q2 a
fifth of its time per push though no query read them).

Only operators whose reads are plain to see are narrowed: a selection that keeps some columns (its
predicate's columns and those it keeps), a projection (the columns its expressions and copies read), a
join running a projection fused below a window on that input (the columns the projection copies) and a
tumbling window joined with its own extreme (``WindowExtremeJoinOp``: the columns it picks, which hold the
compared one; its other conjuncts read the joined row, made of those and the extreme). Any other
reader, an operator of another kind or a query's own reader, reads every column: when in doubt, all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dsms.operators.join import JoinOp
from dsms.operators.project import ProjectOp
from dsms.operators.select import SelectOp
from dsms.operators.window_extreme_join import WindowExtremeJoinOp

_POSITION = re.compile(r"\$(\d+)")


def _positions(keys: Iterable[str] | None) -> set[int] | None:
    """The column positions of an expression's batch keys (``$0``, ``$3``), or None when a key is not one (or
    the expression does not say which it reads)."""
    if keys is None:
        return None
    out = set()
    for k in keys:
        m = _POSITION.fullmatch(k) if isinstance(k, str) else None
        if m is None:
            return None
        out.add(int(m.group(1)))
    return out


def _exprs_read(exprs) -> set[int] | None:
    """The input columns a list of projection items (an int: a plain copy; else a compiled expression) reads."""
    out: set[int] = set()
    for e in exprs:
        if isinstance(e, int):
            out.add(e)
        else:
            got = _positions(getattr(e, "columns", None))
            if got is None:
                return None
            out |= got
    return out


def columns_read(op, side: int) -> set[int] | None:
    """The positions of the columns ``op`` reads from its input ``side`` (None: it may read any of them).
    Exact types only: a subclass may read more."""
    t = type(op)
    if t is SelectOp:
        if op.columns is None:
            return None
        got = _positions(getattr(op.predicate, "columns", None))
        return None if got is None else got | set(op.columns)
    if t is ProjectOp:
        return _exprs_read(op.exprs)
    if t is JoinOp:
        if op.selects[side] is not None:      # a fused selection reads the input for the join
            return columns_read(op.selects[side], 0)
        p = op.projects[side]
        if p is not None and type(p) is ProjectOp and all(isinstance(e, int) for e in p.exprs):
            return set(p.exprs)
    if t is WindowExtremeJoinOp:
        return set(op.picks)
    return None


def unread_columns(queue, ops, width: int) -> tuple[int, ...]:
    """The positions (below ``width``) of the columns of ``queue`` that none of its readers reads: each reader
    is an input cursor of one of ``ops`` (that operator reads what ``columns_read`` says) or something else (a
    query's results, which read everything). Empty when some reader may read every column."""
    owner = {}
    for op in ops:
        for side, r in enumerate(op.readers):
            owner[id(r)] = (op, side)
    read: set[int] = set()
    for r in queue._readers:
        got = owner.get(id(r))
        cols = None if got is None else columns_read(*got)
        if cols is None:
            return ()
        read |= cols
    if not queue._readers:
        return ()
    return tuple(j for j in range(width) if j not in read)
