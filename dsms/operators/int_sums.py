"""INT SUM results outside int64: left out of the result symmetrically and reported as an error naming the
query and the column, never wrapped (SPEC section 4; issue 18, "INT SUM wraps silently").

The aggregates keep INT sums exactly (Python integers once a sum may leave 64 bits), so the state is always
right. A row whose INT SUM does not fit in int64 cannot be written to an int64 column, and a wrapped value
(two values of 2**63-1 summing to -2) is what SPEC forbids. Such a row is left out of the output: its
insert is not emitted and, since a group's old row is its previous new row, neither is its delete, so the
result downstream stays a consistent changelog of the rows that fit. Each occurrence counts in the
operator's ``int_overflows`` statistic; the first is logged as a WARNING, and ``Query.drain`` raises
:class:`dsms.errors.ResultOverflowError` with the messages (the engine itself never stops on one: a shared
operator, the server's pump and its recovery all keep running).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_PENDING = 16
"""Messages kept per operator until a ``drain`` reports them; later ones are only counted."""


def fits(v: Any) -> bool:
    """Whether an exact integer fits in int64 (anything not an int, e.g. a float, always does here)."""
    return not isinstance(v, int) or INT64_MIN <= v <= INT64_MAX


def report(op: Any, j: int, value: int, ts: int) -> None:
    """Count one INT SUM of aggregate ``j`` of ``op`` outside int64 at ``ts``, and keep its message."""
    f, a, _ = op.aggs[j]
    arg = op.arg_names[j] if getattr(op, "arg_names", None) else f"${a}"
    queries = ", ".join(sorted(op.owners)) or "(no query)"
    message = (f"query {queries}, column {f}({arg}): the INT sum {value} at ts {ts} is outside int64; "
               "the row is left out of the result (SPEC section 4: never a wrapped value)")
    op.int_overflows += 1
    if len(op.overflow_errors) < MAX_PENDING:
        op.overflow_errors.append(message)
    if op.int_overflows == 1:
        log.warning("%s (%s)", message, op.id)
