"""Time-based window ``[RANGE T [SLIDE S]]`` (and ``[NOW]`` = ``[RANGE 1]``) over a stream.

Source: SPEC section 3; digest-003 section 3.2 (scope function), digest-004 R-PLAN-05 (a window emits the
inserts and deletes of its relation). An element with timestamp ts is in the window at instants τ whose
evaluation point s = S*floor(τ/S) satisfies s - T < ts <= s, so it is inserted at ceil(ts/S)*S and deleted at
ceil((ts+T)/S)*S (never inserted when those are equal, as in a hopping window). With S = 1 that is the plain
sliding window: insert at ts, delete at ts + T. Events are released in time order once the input frontier
reaches them, so the output stays sorted and expiry happens on heartbeats alone (digest-004 P-7).
"""

from __future__ import annotations

import numpy as np

from control_tables import Knob, Stat
from dsms.batch import Batch, concat, take_until
from dsms.operators.base import NEG_INF, Operator, merge_by_ts
from dsms.queues import Queue
from synopses.window import WindowSynopsis


def _ceil_to(x: np.ndarray, s: int) -> np.ndarray:
    return -((-x) // s) * s


# Timestamps and heartbeats are at most 2**62 in absolute value (docs/contract-engine-api.md), so no frontier
# reaches NEVER: a delete stamped NEVER is one that never happens. Window ends saturate at NEVER, so that a size
# beyond 2**62 (`RANGE 100000000000 DAYS` is 8.64e18 ticks) cannot wrap around int64.
NEVER = 2**62 + 1
MAX_TS = 2**62           # the largest timestamp or heartbeat (docs/contract-engine-api.md)
PASS_ROWS = 1 << 16     # a release of this many rows in time order goes out as its batches, not merged into one


def _unsaturated(ts: np.ndarray, size) -> bool:
    """Whether ``ts + size`` stays below NEVER for every element (one size for all): then it is the end as it
    is, with no overflow (``ts`` >= -2**62, ``size`` >= 1) and nothing to saturate."""
    return type(size) is int and len(ts) > 0 and int(ts.max()) + size < NEVER


def _end(ts: np.ndarray, size) -> np.ndarray:
    """min(ts + size, NEVER), without int64 overflow, for |ts| <= 2**62 and 1 <= size <= 2**63 - 1."""
    if _unsaturated(ts, size):
        return ts + size
    pos = np.maximum(ts, 1)                                   # where ts > 0: NEVER - ts cannot overflow
    return np.where(ts > 0, pos + np.minimum(size, NEVER - pos),
                    np.minimum(np.minimum(ts, 0) + size, NEVER))   # where ts <= 0: ts + size cannot overflow


def _end_to(end: np.ndarray, s: int) -> np.ndarray:
    """The first multiple of the slide at or after ``end``, or NEVER when ``end`` is NEVER."""
    never = end >= NEVER
    return np.where(never, NEVER, _ceil_to(np.where(never, 0, end), s))


def _interleaved(a: list[Batch], b: list[Batch], most: int) -> list[Batch] | None:
    """The rows of two lists of batches, each list in time order, as one list in time order, ``a``'s rows
    first at equal timestamps (the order ``merge_by_ts(a + b)`` gives), cut into slices of the batches, not
    copied; None when that takes more than ``most`` pieces (instants that alternate finely).

    >>> def bt(ts): return Batch(np.array(ts), np.ones(len(ts), dtype=np.int8), [np.array(ts) * 10])
    >>> [p.ts.tolist() for p in _interleaved([bt([1, 3]), bt([3, 5])], [bt([3, 4]), bt([9])], 10)]
    [[1, 3], [3], [3, 4], [5], [9]]
    >>> _interleaved([bt([1, 3, 5])], [bt([2, 4, 6])], 4) is None
    True
    """
    a, b = list(a), list(b)
    out: list[Batch] = []
    while a and b:
        x, y = a[0], b[0]
        if x.ts[0] <= y.ts[0]:
            src, head, k = a, x, int(x.ts.searchsorted(y.ts[0], side="right"))
        else:
            src, head, k = b, y, int(y.ts.searchsorted(x.ts[0], side="left"))
        if k == len(head):
            out.append(src.pop(0))
        else:
            out.append(head.slice(0, k))
            src[0] = head.slice(k, len(head))
        if len(out) > most:
            return None
    out += a + b
    return out if len(out) <= most else None


class RangeWindowOp(Operator):
    """Changing the ``range`` knob follows PIPES (digest-002b Q-3, W7 and pitfall P-5/P-7): the new size applies
    to elements whose timestamp is at or after a future instant — the instant after everything the input has
    already delivered — and elements before it keep the old size. Deletes are then no longer produced in
    timestamp order, so pending deletes are merged rather than appended."""

    kind = "range_window"
    range = Knob(int, default=1, ge=1, unit="ticks", doc="window size T; a change applies to elements from "
                 "the instant after the input's frontier on (see range_from)")
    range_from = Stat(int | None, default=None, unit="ticks",
                      doc="first element timestamp that the current range applies to (after a change)")
    window_rows = Stat(int, default=0, name="size", unit="tuples", doc="tuples in the window now")
    fused_into = Stat(str | None, compute="_fused_id", doc="the join that runs this window inside its own runs "
                      "(it reads the window's input and takes its tuples with no queue between; the window "
                      "keeps its knobs, synopsis and statistics); None: the window runs as an operator")

    def __init__(self, range_: int, slide: int | None, inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"RANGE {range_}" + (f" SLIDE {slide}" if slide else ""))
        self.range = range_
        self._ranges: list[tuple[int, int]] = [(NEG_INF, range_)]   # (from ts, size), ascending
        self.slide = slide or 1
        self.store = WindowSynopsis()
        self.synopses = [self.store]
        self.pending_ins: list[Batch] = self.store.pending     # future inserts, times ascending
        self.pending_del: list[Batch] = self.store.batches     # the window: future deletes, times ascending
        # fused into a join (``dsms.operators.join``): released tuples wait here for the join, which feeds
        # this window the input it reads and keeps its statistics; there is then no output queue
        self.fused = None
        self.out_dels: list[Batch] = []
        self.out_ins: list[Batch] = []
        self.fused_items = self.fused_rows_in = self.fused_rows_out = self.fused_ns = 0   # this join run's
        self.sampled_by: set[str] = set()       # joins of kind reservoir that number this window's copies
        self.fed_by = None                      # the projection fused below it, inside the same join (display)
        self.promised = NEG_INF                 # the largest output frontier announced (``output_frontier``)

    def _fused_id(self) -> str | None:
        return self.fused.id if self.fused is not None else None

    def on_set_range(self, old: int, new: int) -> None:
        if self.sampled_by:
            raise ValueError(f"join {', '.join(sorted(self.sampled_by))} samples this window by the order its "
                             "rows leave, which a new size would change; switch the join's kind to exact first")
        f = self.frontier()
        start = (f + 1) if f > NEG_INF else NEG_INF
        self._ranges = [r for r in self._ranges if r[0] < start] + [(start, new)]
        self.range_from = None if start == NEG_INF else start
        self.detail = f"RANGE {new}" + (f" SLIDE {self.slide}" if self.slide != 1 else "")

    def _sizes(self, ts: np.ndarray) -> np.ndarray | int:
        if len(self._ranges) == 1:
            return self._ranges[0][1]
        starts = np.array([r[0] for r in self._ranges], dtype=np.int64)
        sizes = np.array([r[1] for r in self._ranges], dtype=np.int64)
        return sizes[np.searchsorted(starts, ts, side="right") - 1]

    def on_batch(self, i: int, batch: Batch) -> None:
        ts = batch.ts
        size = self._sizes(ts)
        if self.slide == 1:
            ins_t, del_t = ts, _end(ts, size)
            keep = slice(None)
            ins = Batch(ins_t, batch.sign, batch.cols)
            dele = Batch(del_t, -batch.sign, batch.cols)
        elif type(size) is int and size % self.slide == 0 and len(ts) and int(ts[-1]) + size < NEVER:
            # a tumbling or hopping window (its range a multiple of its slide): the first window end at or
            # after ts + size is the one at or after ts, plus size, and every element enters (size >= 1);
            # timestamps ascend, so the last is the largest, and a batch within one period (most pushes) has
            # one end for all
            s = self.slide
            first, last = -(-int(ts[0]) // s) * s, -(-int(ts[-1]) // s) * s
            if first == last:                 # np.empty + fill: np.full is a Python function around them
                ins_t = np.empty(len(ts), dtype=np.int64)
                ins_t.fill(first)
                del_t = np.empty(len(ts), dtype=np.int64)
                del_t.fill(first + size)
            else:
                ins_t = _ceil_to(ts, s)
                del_t = ins_t + size
            ins = Batch(ins_t, batch.sign, batch.cols)
            dele = Batch(del_t, -batch.sign, batch.cols)
        else:
            ins_t = _ceil_to(ts, self.slide)
            del_t = _end_to(_end(ts, size), self.slide)
            keep = ins_t < del_t
            if keep.all():                  # a tumbling or sliding window: every element enters it
                ins = Batch(ins_t, batch.sign, batch.cols)
                dele = Batch(del_t, -batch.sign, batch.cols)
            else:
                ins = Batch(ins_t[keep], batch.sign[keep], [c[keep] for c in batch.cols])
                dele = Batch(del_t[keep], -batch.sign[keep], [c[keep] for c in batch.cols])
        if len(ins.ts):
            self.pending_ins.append(ins)
            if self.pending_del and len(dele.ts) and dele.ts[0] < self.pending_del[-1].ts[-1]:
                self.pending_del[:] = [merge_by_ts([*self.pending_del, dele])]    # after a size change
            elif not isinstance(size, int) and not np.all(np.diff(dele.ts) >= 0):    # sizes differ
                self.pending_del.append(dele.take(np.argsort(dele.ts, kind="stable")))
            else:
                self.pending_del.append(dele)
        if self.fused is None or self.store._knob_memory is not None:
            # fused, the join releases once its run has read its input; but a window over its memory budget
            # evicts as each batch arrives, fused or not (evictions depend on when the budget is checked)
            self.on_frontier(self.frontier())

    def release(self, f: int) -> tuple[list[Batch], list[Batch], Batch | None]:
        """Take what is final at ``f`` out of the window: its deletes and its inserts with timestamps up to
        ``f`` (each list in time order), and the tuples evicted now to fit the memory budget (or None)."""
        dels, ins = take_until(self.pending_del, f), take_until(self.pending_ins, f)
        evicted = None
        if self.store.memory is not None and self.store.over_budget():
            evicted = self._evict_to_budget(f)
            if not len(evicted):
                evicted = None
        return dels, ins, evicted

    def _nothing_due(self, f: int) -> bool:
        """Whether a release at ``f`` would take nothing: no delete or insert is due and no memory budget may
        evict (most runs between two ends of a tumbling window; ``release`` and its two ``take_until`` calls
        cost about 2 us of a 920-row run, issue 15)."""
        if self.store._knob_memory is not None:
            return False
        dels, ins = self.pending_del, self.pending_ins
        return (not dels or dels[0].ts[0] > f) and (not ins or ins[0].ts[0] > f)

    def on_frontier(self, f: int) -> None:
        if self._nothing_due(f):
            return
        if self.fused is not None:          # run inside a join: the released tuples go straight to it
            dels, ins, evicted = self.release(f)
            if evicted is not None:
                dels.append(evicted)
            released = dels + ins
            if not released:
                return
            signs = [b.sign for b in released]     # one sum: a tumbling window's end releases every push's batch
            self.window_rows += int((np.concatenate(signs) if len(signs) > 1 else signs[0]).sum())
            rows = sum(len(s) for s in signs)
            self.out_dels += dels
            self.out_ins += ins
            self.fused_rows_out += rows
            return
        dels, ins, evicted = self.release(f)
        if (evicted is None and len(dels) + len(ins) > 1
                and sum(len(b) for b in dels) + sum(len(b) for b in ins) >= PASS_ROWS):
            # a large release (a tumbling window's turnover, or the deletes and inserts of several instants):
            # its batches are passed on as they are, or cut where the two lists interleave, not copied into one
            pieces = _interleaved(dels, ins, 2 * (len(dels) + len(ins)) + 4)
            if pieces is not None:
                for b in pieces:
                    self.window_rows += int(b.sign.sum())
                    self.emit(b)
                return
        out = dels + ins + ([evicted] if evicted is not None else [])
        if out:
            merged = merge_by_ts(out) if len(out) > 1 else out[0]
            self.window_rows += int(merged.sign.sum())
            self.emit(merged)

    def output_frontier(self, f: int) -> int:
        """The smallest timestamp the window may still output once everything up to its input frontier ``f``
        is released: with a SLIDE every insert and delete falls on a multiple of it, so that is the first
        multiple at or after ``f`` (capped at 2**62, the largest timestamp). A heartbeat that far lets the
        operators above a tumbling or hopping window skip every run between two window ends (issue 15: NEXMark
        q8 ran four operators per push for nothing). Not while the window evicts to fit a memory budget: an
        eviction happens at the frontier; one set later is stamped at what was promised (``_evict_to_budget``).
        """
        s = self.slide
        if s == 1 or f <= NEG_INF or self.store._knob_memory is not None:     # the knob's value (every run)
            return f
        c = max(f, min(-(-f // s) * s, MAX_TS))
        if c > self.promised:
            self.promised = c
        return c

    def forward_heartbeat(self, f: int | None = None) -> None:
        super().forward_heartbeat(self.output_frontier(self.frontier() if f is None else f))

    def retracts_in_order(self) -> bool:
        """Whether every delete this window releases retracts its oldest tuple still in the window, with the
        same values (first in, first out): so while its size has never changed (after a change, tuples of the
        new size can leave before older ones), except when a window with a SLIDE evicts to fit its memory
        budget (it may evict a tuple whose insert waits for the next slide)."""
        return len(self._ranges) == 1 and (self.slide == 1 or self.store.memory is None)

    def _evict_to_budget(self, f: int) -> Batch:
        """Delete the oldest tuples now (at the frontier) until the store fits its memory budget."""
        per_row = self.store.row_bytes() or 1.0
        keep = int(self.store.memory // per_row)
        excess = max(0, sum(len(b) for b in self.pending_del) - keep)
        gone = []
        while excess and self.pending_del:
            b = self.pending_del[0]
            k = min(excess, len(b))
            gone.append(b.slice(0, k))
            if k == len(b):
                self.pending_del.pop(0)
            else:
                self.pending_del[0] = b.slice(k, len(b))
            excess -= k
        evicted = concat(gone) if gone else Batch(np.empty(0, np.int64), np.empty(0, np.int8), [])
        self.store.evicted += len(evicted)
        if len(evicted):
            self.store.approximate = True
            at = max(f, 0, self.promised)        # never below a heartbeat already sent (``output_frontier``)
            evicted = Batch(np.full(len(evicted), at, dtype=np.int64), evicted.sign, evicted.cols)
        return evicted


assert WindowSynopsis.memory.slot == "_knob_memory"      # where ``_nothing_due`` reads the knob

__all__ = ["RangeWindowOp", "concat"]
