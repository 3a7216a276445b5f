"""Compiled loops: the one place that decides how a per-row loop is compiled (numba).

SPEC section 2 lets an operator fall back to a per-row loop where vectorising does not pay, and the benchmarks
show it. In plain Python such a loop costs about a microsecond a row; a pass of numpy costs one to five
microseconds of fixed cost a call, so an operator that needs tens of passes per batch pays more in calls than in
work when its batches are small (issue 15: NEXMark at 1,000 events per push). A loop compiled by numba costs
about 0.3 us a call and nanoseconds a row, so one compiled pass can replace many numpy calls.

Every compiled loop in dsms goes through ``kernel`` so that they share one policy:

- ``cache=True``: the machine code is kept beside the module (``__pycache__``, or the user's cache directory when
  the package is read-only) and loaded in later processes, so only the first process after an install compiles
  (about 0.2-1 s per loop, paid on the loop's first call, never at import).
- ``nogil=True``: the server's pool threads can run a loop while the event loop runs.
- The default error model ("python"): an integer division by zero raises, as it would in Python.

A loop must give exactly what the numpy code it replaces gives (dtypes included), and keeps a property test
against that code or the reference evaluator. ``NUMBA_DISABLE_JIT=1`` in the environment runs every loop as plain
Python, for a debugger or a coverage run (docs/architecture.md, "Compiled loops").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from numba import njit

F = TypeVar("F", bound=Callable)


def kernel(fn: F) -> F:
    """``fn`` compiled with dsms's policy (see the module docstring); called like the function itself."""
    return njit(cache=True, nogil=True)(fn)
