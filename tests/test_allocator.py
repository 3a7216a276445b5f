"""``dsms/allocator.py``: once ``Engine()`` has run, making and dropping a few large arrays again and again takes
no fresh pages from the system (counted as minor page faults, not timed): freed memory stays for the next
arrays. With glibc's own thresholds the top of the heap went back to the system after each round (four 2 MB
arrays are more than twice the largest block freed), and every array faulted in its 512 pages anew."""

from __future__ import annotations

import resource

import numpy as np

from dsms import Engine, allocator


def _faults_per_array(rounds: int = 40) -> float:
    [np.ones(1 << 18) for _ in range(4)]                # warm: the heap grows once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        arrays = [np.ones(1 << 18) for _ in range(4)]   # 2 MB each, written whole, then dropped
        del arrays
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / (4 * rounds)


def test_an_engine_keeps_freed_memory_for_the_next_arrays():
    Engine()
    assert allocator.keep_freed_memory()                # glibc on Linux (CI's Debian)
    assert _faults_per_array() < 16                     # 512 pages of 4 KB per array otherwise
