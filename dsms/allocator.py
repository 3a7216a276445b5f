"""The C allocator's thresholds for the large numpy arrays that batches and operators make and drop: freed
memory is kept for the next array instead of going back to the system at each free (glibc, Linux).

Why: numpy takes each array's buffer from ``malloc``. glibc serves a request above its mmap threshold (128 KB
at start, then raised to the largest block freed so far, at most 32 MB) with a fresh ``mmap``, and gives the
top of its heap back to the system whenever more than its trim threshold (twice the mmap threshold) is free
there. A window's turnover of 92,000 rows (NEXMark q7) makes and drops arrays of 0.7-1.5 MB by the dozen, so
pages were handed back and faulted in again all the time: a cumulative sum of 184,000 int8 signs took 1.1 ms,
of which 0.1 ms was the sum and the rest the kernel zeroing fresh pages; q7's MAX over its window spent 1.3 ms
a turnover against 0.4 ms with the thresholds below (docs/benchmarks.md, issue 15). The cost is memory: up
to ``TRIM_THRESHOLD`` bytes freed at the top of the heap stay with the process, and blocks up to
``MMAP_THRESHOLD`` come from the heap, where a long-lived block can keep freed ones below it from going back.
``Engine()`` sets them once per process (``keep_freed_memory``); nothing in query semantics depends on them.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1          # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20      # blocks below this come from the heap (glibc's own upper bound for its dynamic one)
TRIM_THRESHOLD = 64 << 20      # free bytes at the heap's top beyond which it shrinks

_set = False


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (once per process). False where there is no glibc ``mallopt``
    (another C library or system), which changes nothing else.

    >>> keep_freed_memory() in (True, False)
    True
    """
    global _set
    if _set:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _set = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return _set
