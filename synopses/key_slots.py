"""Dense slots for the key codes of an insert-only join's two inputs (``synopses/append_index.py``): equal codes
get equal slots, and slots are small nonnegative integers, so that per-key state lives in arrays indexed by slot.

While the codes stay within a span of at most ``max(DIRECT_SPAN, 4 x rows held)`` above the smallest code of the
first batch (ids that grow with time: NEXMark's auctions and people), a code's slot is the code minus that
base: three numpy passes a batch, no table. Once a code falls outside, the slots are numbered by an
``IntGroupIds`` (a lookup table while dense, a hash table otherwise) for good; it is first given the codes of
the slots handed out so far, in ascending order, so it numbers them as they were (new keys of a batch get the
next ids in ascending order), and no per-slot state has to move.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synopses.group_ids import IntGroupIds

DIRECT_SPAN = 1 << 16        # slots the direct form may always span


class KeySlots:
    """Slot numbers for int64 key codes, persistent across batches.

    >>> ks = KeySlots()
    >>> ks.of(np.array([105, 100, 107])).tolist(), ks.n
    ([5, 0, 7], 8)
    >>> ks.of(np.array([99, 105])).tolist(), ks.hashed is not None    # below the base: numbered from now on
    ([8, 5], True)
    >>> ks = KeySlots(margin=4)         # the base 4 below the first batch's smallest code
    >>> ks.of(np.array([105, 100])).tolist(), ks.of(np.array([97])).tolist(), ks.hashed is None
    ([9, 4], [1], True)
    """

    def __init__(self, margin: int = 0) -> None:
        """``margin``: how far below the first batch's smallest code the direct form's base is set, so that
        codes a little below it (a join's first batch from one input, its other input's keys a few ids
        lower: NEXMark q3's first people picked by state, the sellers of its auctions) stay direct."""
        self.margin = margin
        self.base: int | None = None        # direct form: slot = code - base
        self.n = 0                          # slots handed out so far (per-slot arrays need this many)
        self.hashed: IntGroupIds | None = None
        self.rows: Callable[[], int] = lambda: 0       # rows the indexes hold (set by their owner)

    def of(self, codes: np.ndarray, ascending: bool = False) -> np.ndarray:
        """The slot of every code (codes not seen before get slots). ``ascending``: the caller knows the codes
        are in ascending order (their ends are then their bounds)."""
        if self.hashed is not None:
            out = self.hashed.ids(codes)
            self.n = self.hashed.n
            return out
        if not len(codes):
            return np.empty(0, dtype=np.int64)
        if ascending:
            lo, hi = int(codes[0]), int(codes[-1])
        else:
            lo, hi = int(codes.min()), int(codes.max())
        if self.base is None:
            self.base = lo - self.margin
        base = self.base
        if lo >= base and hi - base < max(DIRECT_SPAN, 4 * self.rows()):
            if hi - base >= self.n:
                self.n = hi - base + 1
            return codes - base
        self._to_hashed()
        return self.of(codes)

    def _to_hashed(self) -> None:
        """Number the slots by a table from now on, the slots handed out so far keeping their numbers."""
        self.hashed = IntGroupIds()
        if self.n:
            same = self.hashed.ids(np.arange(self.n, dtype=np.int64) + self.base)
            if not (same == np.arange(self.n)).all():
                raise AssertionError("the slot table renumbered the slots handed out")
