"""The process's C allocator: freed buffers kept for reuse instead of handed back to the kernel (glibc).

Why: glibc serves allocations above its mmap threshold (128 KB, adapted upward as large blocks are freed)
with ``mmap`` and trims the heap's top once more than twice that is free, so memory freed a moment ago goes
back to the kernel and comes back as fresh zeroed pages on the next allocation. Two users meet that churn:

- the engine: numpy takes every array's buffer from ``malloc``, and batches of thousands of rows make and drop
  arrays of a megabyte or more at every operator step. A window's turnover of 92,000 rows (NEXMark q7) did so
  by the dozen: a cumulative sum of 184,000 int8 signs took 1.1 ms, of which 0.1 ms was the sum and the rest
  the kernel zeroing fresh pages, and q7's MAX spent 1.3 ms a turnover against 0.4 ms with the thresholds
  below (docs/benchmarks.md, issue 15: q7 20-35% faster at 10,000 events per push);
- the server: every result batch it encodes and writes allocates a few buffers of a few hundred KB (the JSON
  text, its bytes, the HTTP chunk), as does every request body's archive frame; under the end-to-end load of
  ``bench/http_ingest.py`` the page faults were about 45% of the JSON encoding's cost (``perf stat``: 140
  faults per 5,000-row batch) and a fifth of the server's CPU time per tuple.

Fixed thresholds (``MMAP_THRESHOLD``, ``TRIM_THRESHOLD``) keep up to that much freed memory in the process for
the next arrays. The memory held for data (queues, synopses, readers' buffers) is bounded elsewhere
(``memory_budget``, ``results.reader_memory``); this only stops the churn of transient buffers. ``Engine()``
and the server (``web/server.py``) call ``keep_freed_memory``; nothing in query semantics depends on it.

Only glibc has ``mallopt`` with these parameters; elsewhere (musl, macOS) nothing changes. The environment
variables ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` still win: they are left alone when set.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 16 << 20
"""Allocations below 16 MiB come from the heap (glibc's largest allowed value is 32 MiB on 64-bit)."""
TRIM_THRESHOLD = 64 << 20
"""Up to 64 MiB free at the top of the heap is kept rather than returned to the kernel."""

_set = False


def keep_freed_memory() -> bool:
    """Set glibc's thresholds so transient buffers are reused instead of unmapped and faulted in again (once a
    process); returns whether they are set (False: not glibc, or the environment already chose).

    >>> keep_freed_memory() in (True, False)
    True
    """
    global _set
    if _set:
        return True
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)       # the process's own symbols, libc's among them (no ldconfig lookup)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):     # glibc only: musl's mallopt ignores these parameters
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _set = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _set
