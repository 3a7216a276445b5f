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
        self.q_ids = _EMPTY                                # copies that entered the sample, in order (some
        self.q_slots = _EMPTY                              # displaced since: their slot holds another copy)
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

    def sampled_left(self) -> int:
        """Sampled copies (entered before draining began) still held."""
        if self.exact_from is None:
            return self.held
        lo = int(self.q_ids.searchsorted(self.exact_from))
        ids, slots = self.q_ids[:lo], self.q_slots[:lo]
        return int((self.copy[slots] == ids).sum())

    def drained(self) -> bool:
        return self.exact_from is not None and self.n_out >= self.exact_from and not self.sampled_left()

    def nbytes(self) -> int:
        cols = sum(c.nbytes for c in self.cols) if self.cols is not None else 0
        return cols + self.copy.nbytes + self.q_ids.nbytes + self.q_slots.nbytes + 8 * len(self.free)

    def seed(self, cols: list[np.ndarray]) -> np.ndarray:
        """Sample the rows a window holds now (copies ``n_in`` on, oldest first), as a reservoir would have;
        returns which of them are held. What an exact state switched to a sample keeps."""
        n = len(cols[0]) if cols else 0
        first = self.n_in
        if self.cols is None:
            self.cols = [np.empty(self.k, dtype=c.dtype) for c in cols]
        if n:
            self._enter(np.zeros(n, dtype=np.int64), cols)
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
        out: list[tuple[np.ndarray, int, list[np.ndarray]]] = []
        # segments of deletes and of inserts, in time order, deletes first at an instant
        kind = np.concatenate([np.zeros(len(d_ts), np.int8), np.ones(len(i_ts), np.int8)])
        ts = np.concatenate([d_ts, i_ts])
        order = np.lexsort((kind, ts))
        k_sorted = kind[order]
        bounds = np.flatnonzero(k_sorted[1:] != k_sorted[:-1]) + 1
        starts = np.concatenate([[0], bounds]).tolist() if len(order) else []
        ends = np.concatenate([bounds, [len(order)]]).tolist() if len(order) else []
        n_d = len(d_ts)
        for a, b in zip(starts, ends):
            idx = order[a:b]
            if k_sorted[a] == 0:
                keep = self._leave(len(idx))
                if len(keep):
                    rows = idx[keep]
                    out.append((d_ts[rows], -1, [c[rows] for c in dels[1]]))
            else:
                rows = idx - n_d
                out += self._enter(i_ts[rows], [c[rows] for c in ins[1]])
        if not out:
            return _EMPTY, np.empty(0, np.int8), [c[:0] for c in self.cols]
        o_ts = np.concatenate([t for t, _, _ in out])
        sign = np.concatenate([np.full(len(t), s, np.int8) for t, s, _ in out])
        cols = [np.concatenate([cs[j] for _, _, cs in out]) for j in range(len(self.cols))]
        o = o_ts.argsort(kind="stable")
        return o_ts[o], sign[o], [c[o] for c in cols]

    def _leave(self, n: int) -> np.ndarray:
        """The next ``n`` copies leave the window: the offsets (within the n) of those that were held."""
        a, b = self.n_out, self.n_out + n
        self.n_out = b
        hi = int(self.q_ids.searchsorted(b))
        ids, slots = self.q_ids[:hi], self.q_slots[:hi]
        self.q_ids, self.q_slots = self.q_ids[hi:], self.q_slots[hi:]
        held = self.copy[slots] == ids
        ids, slots = ids[held], slots[held]
        if self.exact_from is not None:               # draining: keep every copy from exact_from on too
            exact = np.arange(max(a, self.exact_from), b, dtype=np.int64)
            keep = np.union1d(ids - a, exact - a) if len(exact) else ids - a
        else:
            keep = ids - a
            self.c1 += len(ids)
            self.c2 += n - len(ids)
        self.copy[slots] = -1
        self.free += slots.tolist()
        self.held -= len(ids)
        if self.held == self.window_rows:         # the sample is the whole window: a valid reservoir as it is
            self.c1 = self.c2 = 0
        return keep

    def _enter(self, ts: np.ndarray, cols: list[np.ndarray]) -> list[tuple[np.ndarray, int, list[np.ndarray]]]:
        """Copies enter the window: those taken into the sample go in (and the rows they displace out)."""
        n = len(ts)
        first = self.n_in
        self.n_in += n
        if self.exact_from is not None:               # draining: every new copy is kept, in no slot
            return [(ts, 1, cols)]
        takes: list[np.ndarray] = []
        take_slots: list[np.ndarray] = []
        comp = min(n, self.c1 + self.c2)
        if comp:                                      # random pairing: c1 of the next c1 + c2 copies enter
            if self.c1 == 0:
                x = 0
            elif self.c2 == 0:
                x = comp
            else:
                x = int(self.rng.hypergeometric(self.c1, self.c2, comp))
            if x:
                off = np.sort(self.rng.choice(comp, x, replace=False))
                takes.append(off)
                take_slots.append(np.array([self.free.pop() for _ in range(x)], dtype=np.int64))
            self.c1 -= x
            self.c2 -= comp - x
            self.held += x
        rest = n - comp
        if rest:                                      # nothing to compensate: a reservoir over the window
            s = self.sampler
            before = self.window_rows - rest
            if (s.seen, s.size) != (before, self.held):
                s.restart(before, self.held)
            fills = self.k - self.held
            off, slots = s.offer(rest)
            if len(off):
                nf = min(fills, len(off))
                if nf:
                    slots = slots.copy()
                    slots[:nf] = [self.free.pop() for _ in range(nf)]
                    self.held += nf
                takes.append(off + comp)
                take_slots.append(slots)
        if not takes:
            return []
        off = np.concatenate(takes)
        slots = np.concatenate(take_slots)
        # which copy each take displaces: the previous take into its slot, else the slot's occupant
        by_slot = np.lexsort((np.arange(len(slots)), slots))
        s_sorted = slots[by_slot]
        prev = np.full(len(slots), -1, dtype=np.int64)
        same = np.flatnonzero(s_sorted[1:] == s_sorted[:-1]) + 1
        prev[by_slot[same]] = by_slot[same - 1]
        out: list[tuple[np.ndarray, int, list[np.ndarray]]] = [(ts[off], 1, [c[off] for c in cols])]
        from_slot = (prev < 0) & (self.copy[slots] >= 0)
        from_take = prev >= 0
        if from_slot.any():
            sl = slots[from_slot]
            out.append((ts[off[from_slot]], -1, [c[sl] for c in self.cols]))
        if from_take.any():
            src = off[prev[from_take]]
            out.append((ts[off[from_take]], -1, [c[src] for c in cols]))
        for dst, src in zip(self.cols, cols):
            dst[slots] = src[off]                     # in order: the last take into a slot wins
        self.copy[slots] = first + off
        self.q_ids = np.concatenate([self.q_ids, first + off])
        self.q_slots = np.concatenate([self.q_slots, slots])
        if len(self.q_ids) > 4 * self.k + 64:        # drop the entries of displaced copies
            live = self.copy[self.q_slots] == self.q_ids
            self.q_ids, self.q_slots = self.q_ids[live], self.q_slots[live]
        return out
