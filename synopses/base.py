"""The synopsis base: a control table with size, bytes and a memory budget (SPEC section 8; digest-004
R-PLAN-08: create/changeMem/insert/delete/query, with any operator paired with any synopsis).

Bytes are counted from what is really held: numpy buffers by ``nbytes``, and for object columns (strings)
the pointer array plus each distinct object's ``sys.getsizeof``. The count is computed when read, so keeping
state costs nothing extra per tuple.
"""

from __future__ import annotations

import sys

import numpy as np

from control_tables import Entity, Knob, Stat


def array_bytes(a: np.ndarray) -> int:
    """Bytes held by one column: the buffer, plus the Python objects an object array points to."""
    total = a.nbytes
    if a.dtype.kind == "O" and len(a):
        seen: set[int] = set()
        for x in a.tolist():
            if id(x) not in seen:
                seen.add(id(x))
                total += sys.getsizeof(x)
    return total


def deep_bytes(obj, _seen: set[int] | None = None) -> int:
    """Bytes of a Python structure of dicts, lists, tuples, deques and scalars, each object counted once."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    total = sys.getsizeof(obj)
    if isinstance(obj, dict):
        for k, v in obj.items():
            total += deep_bytes(k, seen) + deep_bytes(v, seen)
    elif isinstance(obj, list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        for x in obj:
            total += deep_bytes(x, seen)
    elif isinstance(obj, np.ndarray):
        total = array_bytes(obj)
    elif callable(getattr(obj, "nbytes", None)):
        total += obj.nbytes()           # an object that counts its own bytes (a sketch held by a library)
    elif hasattr(obj, "__slots__"):
        for name in obj.__slots__:
            total += deep_bytes(getattr(obj, name, None), seen)
    return total


def rows_bytes(ts: np.ndarray | None, sign: np.ndarray | None, cols: list[np.ndarray]) -> int:
    total = (ts.nbytes if ts is not None else 0) + (sign.nbytes if sign is not None else 0)
    return total + sum(array_bytes(c) for c in cols)


class Synopsis(Entity):
    """Base of every synopsis. Subclasses implement ``rows()`` and ``nbytes()``."""

    prefix = "syn"
    kind = "synopsis"
    size_rows = Stat(int, compute="rows", name="size", unit="tuples", doc="tuples (or entries) held")
    bytes_held = Stat(int, compute="nbytes", name="bytes", unit="bytes",
                      doc="bytes held, counted from the arrays and objects really kept")
    memory = Knob(int | None, default=None, ge=0, unit="bytes",
                  doc="memory budget; None is unbounded (what exceeding it does depends on the synopsis)")

    def rows(self) -> int:
        return 0

    def nbytes(self) -> int:
        return 0

    def over_budget(self) -> bool:
        m = self.memory
        return m is not None and self.nbytes() > m
