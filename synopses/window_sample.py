"""A bounded uniform sample of a window's rows, kept as rows leave the window as well as when they enter: the
state of one input of a join of kind ``reservoir`` (issue 14 item 3; digest-004 R-APX-04: keep a sample of the
synopsis contents).

A plain reservoir (``synopses.reservoir``) samples everything ever offered: over a sliding window its rows
that are still in the window shrink to k * window / offered, towards nothing. So the sample follows the window
by **random pairing** (Gemulla, Lehner, Haas, "A dip in the reservoir: maintaining sample synopses of evolving
datasets", VLDB 2006): a row that leaves is dropped from the sample if it was in it, and counted as an
uncompensated deletion (``c1`` if it was sampled, ``c2`` if not); the next c1 + c2 rows to enter are paired
with those deletions, and exactly c1 of them, chosen uniformly, enter the sample. With no deletion to
compensate, a row enters as in a reservoir over the rows in the window now: that stretch is Vitter's reservoir
with Algorithm L's skip distances (``ReservoirSample``, resumed by ``restart`` at the window's size after
deletions, so it costs O(rows accepted)). At every instant the sampled rows in the window are a uniform sample
of the window's rows given their number m, so each is in it with probability m / N (N: rows in the window):
``fraction`` is what COUNT and SUM above are scaled by (Horvitz-Thompson, conditionally unbiased), and m stays
at k once the window has held k rows (RP keeps m + c1 = k).

**Which copy leaves.** A delete names a row by its values; several copies of one row can be in the window,
sampled or not. The windows this sample runs over (a RANGE window of fixed size: ``RangeWindowOp.
retracts_in_order``) retract their rows first in, first out, so copies are numbered in the order they enter
and the d-th delete retracts copy d. A delete of a copy that is not sampled is dropped, whatever sampled
copies of the same values the sample holds.

``step`` takes a side's released deltas (deletes and inserts, each in time order) and returns what the join
applies: the inserts that entered the sample, the deletes of sampled copies, and the deletes of sampled rows
that a new row displaced (stamped with the displacing row's instant). ``drain`` stops sampling: rows entering
from then on are all kept, and the sampled ones leave as the window turns over.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from synopses.reservoir import ReservoirSample

_EMPTY = np.empty(0, dtype=np.int64)


class WindowSample:
    """A sample of at most ``k`` rows of a window whose deletes retract its copies first in, first out.

    >>> s = WindowSample(2, seed=1)
    >>> ins = (np.arange(5), [np.array([10, 11, 12, 13, 14])])
    >>> ts, sign, cols = s.step(None, ins)
    >>> s.held, s.window_rows, round(s.fraction(), 2)
    (2, 5, 0.4)
    """

    def __init__(self, k: int, seed: int | None = None, first_copy: int = 0) -> None:
        self.sampler = ReservoirSample(k, seed)
        self.rng = self.sampler.rng
        self.k = k
        self.copy = np.full(k, -1, dtype=np.int64)         # copy number held by each slot (-1: free)
        self.cols: list[np.ndarray] | None = None          # the sampled rows' columns, by slot
        self.free = list(range(k - 1, -1, -1))             # free slots (a stack)
        self.queue: deque[tuple[int, int]] = deque()       # (copy, slot) as they entered the sample, in order
        self.n_in = self.n_out = first_copy                # copies entered and left so far (numbers)
        self.held = 0
        self.c1 = self.c2 = 0                              # uncompensated deletions (sampled, not sampled)
        self.exact_from: int | None = None                 # draining: copies from this number on are kept

    # ---------------------------------------------------------------- what it says about itself

    @property
    def window_rows(self) -> int:
        return self.n_in - self.n_out

    def rows_held(self) -> int:
        """Rows passed on and still in the window: the sampled ones, and while draining the new ones."""
        if self.exact_from is None:
            return self.held
        return self.held + self.n_in - max(self.n_out, self.exact_from)

    def fraction(self) -> float:
        """Rows held over rows in the window: the probability that a row of the window is held (given m;
        while draining, the ratio of the two, no longer one probability for every row)."""
        n = self.window_rows
        return min(1.0, self.rows_held() / n) if n > 0 else 1.0

    def drained(self) -> bool:
        """Draining is over: every copy from before it has left (and with it every sampled one)."""
        return self.exact_from is not None and self.n_out >= self.exact_from

    def nbytes(self) -> int:
        cols = sum(c.nbytes for c in self.cols) if self.cols is not None else 0
        return cols + self.copy.nbytes + 64 * len(self.queue) + 8 * len(self.free)

    def seed(self, cols: list[np.ndarray]) -> np.ndarray:
        """Sample the rows a window holds now (copies ``n_in`` on, oldest first), as a reservoir would have;
        returns which of them are held. What an exact state switched to a sample keeps."""
        n = len(cols[0]) if cols else 0
        first = self.n_in
        if self.cols is None:
            self.cols = [np.empty(self.k, dtype=c.dtype) for c in cols]
        if n:
            self._out = _Out()
            self._ins = (np.zeros(n, dtype=np.int64), cols)
            self._enter(0, n)
        kept = np.zeros(n, dtype=bool)
        held = self.copy[self.copy >= 0]
        kept[held - first] = True
        return kept

    def drain(self) -> None:
        """Keep every row that enters from now on; sampled rows leave with the window."""
        self.exact_from = self.n_in

    # ---------------------------------------------------------------- one release

    def step(self, dels: tuple[np.ndarray, list[np.ndarray]] | None,
             ins: tuple[np.ndarray, list[np.ndarray]] | None) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """Apply a release: ``dels`` and ``ins`` are (timestamps, columns) in time order (or None). At one
        instant deletes go first (they are what new rows compensate). Returns the deltas for the join as
        (ts, sign, columns), in time order."""
        d_ts = dels[0] if dels is not None else _EMPTY
        i_ts = ins[0] if ins is not None else _EMPTY
        if self.cols is None:
            like = ins[1] if ins is not None and len(i_ts) else (dels[1] if dels is not None else None)
            if like is None:
                return _EMPTY, np.empty(0, np.int8), []
            self.cols = [np.empty(self.k, dtype=c.dtype) for c in like]
        out = self._out = _Out()
        self._ins = ins
        # runs of deletes and of inserts in time order, deletes first at an instant: each is a range of rows
        # of its own batch (both are in time order)
        nd, ni = len(d_ts), len(i_ts)
        if not ni:
            runs = [(0, 0, nd)] if nd else []
        elif not nd:
            runs = [(1, 0, ni)]
        else:
            d_end = np.searchsorted(i_ts, d_ts, side="left")      # inserts before each delete's instant
            i_end = np.searchsorted(d_ts, i_ts, side="right")     # deletes at or before each insert's instant
            runs = _runs(d_end, i_end, nd, ni)
        for kind, a, b in runs:
            if kind == 0:
                keep = self._leave(b - a)
                if len(keep):
                    out.dels.append(keep + a)
            else:
                self._enter(a, b)
        parts_ts, parts_sign, parts_cols = [], [], []
        if out.dels:
            idx = np.concatenate(out.dels)
            parts_ts.append(d_ts[idx])
            parts_sign.append(np.full(len(idx), -1, np.int8))
            parts_cols.append([c[idx] for c in dels[1]])
        if out.ins or out.ins_small:
            idx = np.concatenate([*out.ins, np.asarray(out.ins_small, dtype=np.int64)])
            parts_ts.append(i_ts[idx])
            parts_sign.append(np.ones(len(idx), np.int8))
            parts_cols.append([c[idx] for c in ins[1]])
        if out.gone_ts:
            parts_ts.append(np.concatenate(out.gone_ts))
            parts_sign.append(np.full(len(parts_ts[-1]), -1, np.int8))
            parts_cols.append([np.concatenate([g[j] for g in out.gone_cols]) for j in range(len(self.cols))])
        self._out = self._ins = None
        if not parts_ts:
            return _EMPTY, np.empty(0, np.int8), [c[:0] for c in self.cols]
        o_ts = np.concatenate(parts_ts)
        o = o_ts.argsort(kind="stable")
        sign = np.concatenate(parts_sign)[o]
        cols = [np.concatenate([pc[j] for pc in parts_cols])[o] for j in range(len(self.cols))]
        return o_ts[o], sign, cols

    def _leave(self, n: int) -> np.ndarray:
        """The next ``n`` copies leave the window: the offsets (within the n) of those that were held."""
        a, b = self.n_out, self.n_out + n
        self.n_out = b
        q, copy = self.queue, self.copy
        gone = []
        while q and q[0][0] < b:
            cid, slot = q.popleft()
            if copy[slot] == cid:                    # still held (not displaced since)
                gone.append(cid - a)
                copy[slot] = -1
                self.free.append(slot)
        self.held -= len(gone)
        keep = np.asarray(gone, dtype=np.int64)
        if self.exact_from is not None:               # draining: keep every copy from exact_from on too
            lo = max(a, self.exact_from)
            if lo < b:
                keep = np.concatenate([keep, np.arange(lo - a, b - a, dtype=np.int64)])
        else:
            self.c1 += len(gone)
            self.c2 += n - len(gone)
        if self.held == self.window_rows:         # the sample is the whole window: a valid reservoir as it is
            self.c1 = self.c2 = 0
        return keep

    def _enter(self, a: int, b: int) -> None:
        """Copies ``a`` to ``b`` of the inserts enter the window: those taken into the sample go out to the
        join (and the rows they displace, as deletes)."""
        n = b - a
        first = self.n_in
        self.n_in += n
        out = self._out
        if self.exact_from is not None:               # draining: every new copy is kept, in no slot
            out.ins.append(np.arange(a, b, dtype=np.int64))
            return
        takes: list[np.ndarray] = []
        take_slots: list[np.ndarray] = []
        comp = min(n, self.c1 + self.c2)
        if comp:                                      # random pairing: c1 of the next c1 + c2 copies enter
            c1, c2 = self.c1, self.c2
            if c1 == 0:
                x = 0
            elif c2 == 0:
                x = comp
            elif comp == 1:
                x = int(self.rng.random() * (c1 + c2) < c1)
            else:
                x = int(self.rng.hypergeometric(c1, c2, comp))
            if x:
                off = np.arange(comp) if x == comp else np.sort(self.rng.choice(comp, x, replace=False))
                takes.append(off)
                take_slots.append(np.array([self.free.pop() for _ in range(x)], dtype=np.int64))
            self.c1 -= x
            self.c2 -= comp - x
            self.held += x
        rest = n - comp
        if rest:                                      # nothing to compensate: a reservoir over the window
            s = self.sampler
            before = self.window_rows - rest
            if s.seen != before or s.size != self.held:
                s.restart(before, self.held)
            fills = self.k - self.held
            off, slots = s.offer(rest)
            if len(off):
                nf = min(fills, len(off))
                if nf:
                    slots[:nf] = [self.free.pop() for _ in range(nf)]
                    self.held += nf
                takes.append(off + comp)
                take_slots.append(slots)
        if not takes:
            return
        off = takes[0] if len(takes) == 1 else np.concatenate(takes)
        slots = take_slots[0] if len(take_slots) == 1 else np.concatenate(take_slots)
        i_ts, i_cols = self._ins
        rows = off + a
        if len(rows) == 1:                            # the usual case at fine-grained instants
            r, slot = int(rows[0]), int(slots[0])
            out.ins_small.append(r)
            if self.copy[slot] >= 0:
                out.gone_ts.append(i_ts[r:r + 1])
                out.gone_cols.append([c[slot:slot + 1].copy() for c in self.cols])
            for dst, src in zip(self.cols, i_cols):
                dst[slot] = src[r]
            cid = first + int(off[0])
            self.copy[slot] = cid
            self.queue.append((cid, slot))
            self._tidy()
            return
        out.ins.append(rows)
        # which copy each take displaces: the previous take into its slot, else the slot's occupant
        by_slot = np.lexsort((np.arange(len(slots)), slots))
        s_sorted = slots[by_slot]
        prev = np.full(len(slots), -1, dtype=np.int64)
        same = np.flatnonzero(s_sorted[1:] == s_sorted[:-1]) + 1
        prev[by_slot[same]] = by_slot[same - 1]
        from_slot = (prev < 0) & (self.copy[slots] >= 0)
        from_take = prev >= 0
        if from_slot.any():
            sl = slots[from_slot]
            out.gone_ts.append(i_ts[rows[from_slot]])
            out.gone_cols.append([c[sl] for c in self.cols])
        if from_take.any():
            out.gone_ts.append(i_ts[rows[from_take]])
            out.gone_cols.append([c[rows[prev[from_take]]] for c in i_cols])
        for dst, src in zip(self.cols, i_cols):
            dst[slots] = src[rows]                    # in order: the last take into a slot wins
        ids = first + off
        self.copy[slots] = ids
        self.queue.extend(zip(ids.tolist(), slots.tolist()))
        self._tidy()

    def _tidy(self) -> None:
        """Drop the queue entries of displaced copies once they outnumber the held ones (a window that never
        loses a row would otherwise keep every copy ever sampled in the queue)."""
        if len(self.queue) > 2 * self.k + 64:
            copy = self.copy
            self.queue = deque(e for e in self.queue if copy[e[1]] == e[0])


class _Out:
    """What one release passes on, gathered as row numbers of its batches and the values of displaced rows."""

    __slots__ = ("dels", "ins", "ins_small", "gone_ts", "gone_cols")

    def __init__(self) -> None:
        self.dels: list[np.ndarray] = []
        self.ins: list[np.ndarray] = []
        self.ins_small: list[int] = []
        self.gone_ts: list[np.ndarray] = []
        self.gone_cols: list[list[np.ndarray]] = []


def _runs(d_end: np.ndarray, i_end: np.ndarray, nd: int, ni: int) -> list[tuple[int, int, int]]:
    """The release as alternating runs (0: deletes, 1: inserts; from, to) in time order, deletes first at an
    instant: ``d_end[j]`` is how many inserts come before delete j, ``i_end[i]`` how many deletes before
    insert i."""
    runs = []
    # a delete run ends where the next insert comes before the next delete: boundaries where d_end changes
    d_cuts = np.flatnonzero(np.diff(d_end)) + 1
    d_starts = np.concatenate([[0], d_cuts]).tolist()
    d_stops = np.concatenate([d_cuts, [nd]]).tolist()
    i_cuts = np.flatnonzero(np.diff(i_end)) + 1
    i_starts = np.concatenate([[0], i_cuts]).tolist()
    i_stops = np.concatenate([i_cuts, [ni]]).tolist()
    d_before = d_end[d_starts].tolist()          # inserts before each delete run
    di = ii = 0
    while di < len(d_starts) or ii < len(i_starts):
        if di < len(d_starts) and (ii >= len(i_starts) or d_before[di] <= i_starts[ii]):
            runs.append((0, d_starts[di], d_stops[di]))
            di += 1
        else:
            runs.append((1, i_starts[ii], i_stops[ii]))
            ii += 1
    return runs
