"""The server process's C allocator settings: ``dsms/allocator.py`` owns them (``Engine()`` sets them too, for
the engine's numpy arrays); the server calls ``keep_freed_memory`` from here as before."""

from __future__ import annotations

from dsms.allocator import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, MMAP_THRESHOLD, TRIM_THRESHOLD, keep_freed_memory

__all__ = ["M_MMAP_THRESHOLD", "M_TRIM_THRESHOLD", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]
