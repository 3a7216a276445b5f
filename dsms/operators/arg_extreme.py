"""The release of a join that the planner proved to be an arg max (or min): a relation that never deletes joined
with its own per-group MAX (MIN) on the group and on the extreme (``dsms/plan/arg_extreme.py``; NEXMark q9's
bids joined with ``Q9M``).

Source: SPEC section 3 (a relation's value at each instant; only an instant's net change is observed). At every
instant the join holds exactly the left rows whose value is their group's extreme over the rows so far, each
with the right's columns, which are copies of its own. From the left's inserts alone (in time order): per group
the extreme of each instant of the release (the largest value among its rows) and the running extreme through
it (the extreme held before the release included). A row enters at its instant when its value is the running
extreme there, and leaves at the group's next instant whose running extreme is higher (strictly: ties stay,
so several rows of one value are all in); the rows held from earlier releases, the group's winners, leave at
the group's first such instant of the release. A row that enters and leaves within the release is emitted
both ways at two instants, never stored. Nothing of the right's changes is read but their frontier: their
rows are the same relation's extreme, which the join knows already.

State: per group slot (``KeySlots``: group values while dense, auction ids; a table otherwise) the extreme so
far, and the winners (``_Winners``): rows appended in a store, each linked to the previous winner of its slot,
a slot's chain dropped whole when its extreme rises; a few rows per group instead of every row of the left
input. Values are compared as int64 (INT, TIMESTAMP: the
planner's condition); MIN is MAX of the values bit-inverted (``~v``: order reversed, no overflow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from dsms.batch import Batch
from synopses.key_slots import KeySlots
from synopses.sort_order import stable_argsort

if TYPE_CHECKING:
    from dsms.operators.join import JoinOp
    from dsms.plan.arg_extreme import ArgExtreme
    from dsms.plan.lex_extreme import LexExtreme


class ArgExtremeRelease:
    """The state and release of a ``JoinOp`` that computes an arg max (min): see the module."""

    def __init__(self, spec: ArgExtreme | LexExtreme) -> None:
        self.spec = spec
        self.group = spec.group
        # the values ranked, first to last (a lexicographic extreme, ``dsms/plan/lex_extreme.py``: ties on one
        # value broken by the next), and the output columns as copies of the left's
        self.values = getattr(spec, "values", None) or ((spec.value, spec.fn),)
        self.out_from = getattr(spec, "out_from", None)
        self.slots = KeySlots()
        self.best = np.zeros(64, dtype=np.int64)      # per slot: the extreme so far (bit-inverted for MIN)
        # ... its further values, when several are ranked
        self.more = [np.zeros(64, dtype=np.int64) for _ in self.values[1:]]
        self.has = np.zeros(64, dtype=bool)           # ... whether the group has any row yet
        self.winners = _Winners()                     # the rows at their group's extreme now
        self.slots.rows = lambda: self.winners.live

    def nbytes(self) -> int:
        return self.best.nbytes + self.has.nbytes + sum(a.nbytes for a in self.more) + self.winners.nbytes()

    def __len__(self) -> int:
        return self.winners.live

    def _grow(self, n: int) -> None:
        if n > len(self.best):
            cap = max(n, 2 * len(self.best))
            best, has = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=bool)
            best[:len(self.best)], has[:len(self.has)] = self.best, self.has
            self.more = [_grown(a, cap, len(a)) for a in self.more]
            self.best, self.has = best, has

    def apply(self, op: JoinOp, parts: dict) -> None:
        """Emit the change of the arg-extreme rows that the left's released inserts make (the right's are not
        read), and keep the winners."""
        b = parts.get(0)
        if b is None or not len(b):
            return
        if type(b) is tuple or (b.sign < 0).any():
            raise RuntimeError(f"{op.id}: the left input of an arg-extreme join deleted a row; the planner "
                               "chose this form because it never deletes")
        if not (b.ts[1:] >= b.ts[:-1]).all():
            b = b.take(stable_argsort(b.ts))      # rows of a slot must come in time order below
        g = b.cols[self.group].astype(np.int64, copy=False)
        vals = []
        for col, fn in self.values:
            v = b.cols[col].astype(np.int64, copy=False)
            vals.append(~v if fn == "MIN" else v)
        s = self.slots.of(g)
        self._grow(self.slots.n)
        o, ss, tt, brk, starts, i_slot, i_ts, seg, f = slot_instants(s, b.ts)
        m = len(starts)
        inst = brk.cumsum() - 1                 # each row's instant
        had = self.has[i_slot[f]]
        if len(vals) == 1:
            vv, old, back = vals[0][o], self.best[i_slot[f]], None
        else:                                     # several values: coded as one, in their order
            code, old, back = _lex_ranks(vals, [a[i_slot[f]] for a in (self.best, *self.more)], had)
            vv = code[o]                          # coded in arrival order, one gather
        i_max = np.maximum.reduceat(vv, starts)
        run, prev, value = running_extreme(i_max, old, had, seg, f)
        rises = run > prev                        # the running extreme goes up at this instant
        # per instant, the next instant of its slot where it rises (m: none): the rises after it counted, the
        # first of them taken, kept when in the same slot (segments are runs of instants)
        at_rise = np.append(_nonzero(rises), m)
        nxt = at_rise[rises.cumsum()]
        seg_end = np.append(seg, -1)
        nxt[seg_end[nxt] != seg] = m
        # rows at their instant's running extreme enter; they leave at the next rise, or stay
        run_val = value(run)                      # every instant has a row: run >= 1
        win = _nonzero(vv == run_val[inst])
        leave = nxt[inst[win]]
        gone = leave < m
        stay = win[~gone]
        # the winners held before leave at their slot's first rise
        first_rise = np.where(rises[f], f, nxt[f])
        out_old = _nonzero(had & (first_rise < m))
        # commit the extremes
        last = np.concatenate((f[1:] - 1, [m - 1]))
        if back is None:
            self.best[i_slot[f]] = run_val[last]
        else:
            for a, t in zip((self.best, *self.more), back(run_val[last])):
                a[i_slot[f]] = t
        self.has[i_slot[f]] = True
        left_cols = b.cols
        parts_ts, parts_sign = [], []
        popped: np.ndarray | None = None         # the held winners that leave, their rows in the store
        if len(out_old):
            p, held = self.winners.pop(i_slot[f[out_old]])
            if len(p):
                parts_ts.append(i_ts[first_rise[out_old]][p])
                parts_sign.append(np.full(len(p), -1, dtype=np.int8))
                popped = held
        rows = o[win]                             # the batch's rows emitted: the entering, then those leaving
        if len(win):
            parts_ts.append(tt[win])
            parts_sign.append(np.ones(len(win), dtype=np.int8))
            if gone.any():
                k = gone.nonzero()[0]
                parts_ts.append(i_ts[leave[k]])
                parts_sign.append(np.full(len(k), -1, dtype=np.int8))
                rows = np.concatenate((rows, rows[k]))
            if len(stay):
                at = o[stay]
                self.winners.add([c[at] for c in left_cols], ss[stay])
        if not parts_ts:
            self.winners.tidy()
            return
        ts = np.concatenate(parts_ts) if len(parts_ts) > 1 else parts_ts[0]
        sign = np.concatenate(parts_sign) if len(parts_sign) > 1 else parts_sign[0]
        order = time_order(ts, sign)
        # each output column gathered once, in output order: from the batch's rows (and the popped winners' rows,
        # which come first in ``ts``)
        srcs = self.out_from if self.out_from is not None else (*range(len(left_cols)), *self.spec.right_from)
        if popped is None:
            at = rows[order]
            cols = [left_cols[j][at] for j in srcs]
        else:
            # the popped rows' columns put before the batch's whole columns, and one gather in output order
            # from both: the batch's rows come in time order, so that gather reads the batch nearly in sequence
            np_ = len(popped)
            ob = order - np_
            at = np.where(ob >= 0, rows[np.maximum(ob, 0)] + np_, order)
            cols = [np.concatenate((self.winners.cols[j][popped], left_cols[j]))[at] for j in srcs]
        self.winners.tidy()                       # after the popped rows are read: it renumbers the store
        op.emit(Batch(ts[order], sign[order], cols))

SLACK = 4096        # rows that left tolerated beyond the live winners before the store is compacted


class _Winners:
    """Rows by slot, each slot's rows a chain from its newest (``head``) through ``prev``; rows leave a whole slot
    at a time (``pop``), and the store is compacted (``tidy``) once the rows that left outnumber the live ones.

    >>> w = _Winners()
    >>> w.add([np.array([10, 11, 12])], np.array([0, 0, 2]))
    >>> p, rows = w.pop(np.array([2, 0, 1]))
    >>> sorted(zip(p.tolist(), w.cols[0][rows].tolist())), w.live
    ([(0, 12), (1, 10), (1, 11)], 0)
    """

    def __init__(self) -> None:
        self.cols: list[np.ndarray] | None = None
        self.prev = np.zeros(64, dtype=np.int64)
        self.slot = np.zeros(64, dtype=np.int64)
        self.alive = np.zeros(64, dtype=bool)
        self.head = np.full(64, -1, dtype=np.int64)
        self.n = 0
        self.live = 0

    def nbytes(self) -> int:
        held = sum(c.nbytes for c in self.cols) if self.cols is not None else 0
        return held + self.prev.nbytes + self.slot.nbytes + self.alive.nbytes + self.head.nbytes

    def add(self, cols: list[np.ndarray], slots: np.ndarray) -> None:
        """Append rows whose slots are in ascending order (a slot's rows in time order)."""
        m, r0 = len(slots), self.n
        if not m:
            return
        if self.cols is None:
            self.cols = [np.empty(64, dtype=c.dtype) for c in cols]
        if r0 + m > len(self.prev):
            cap = max(r0 + m, 2 * len(self.prev))
            self.cols = [_grown(c, cap, r0) for c in self.cols]
            self.prev, self.slot, self.alive = (_grown(a, cap, r0) for a in (self.prev, self.slot, self.alive))
        top = int(slots[-1]) + 1
        if top > len(self.head):
            head = np.full(max(top, 2 * len(self.head)), -1, dtype=np.int64)
            head[:len(self.head)] = self.head
            self.head = head
        for a, c in zip(self.cols, cols):
            a[r0:r0 + m] = c
        rows = np.arange(r0, r0 + m)
        new = np.ones(m, dtype=bool)
        new[1:] = slots[1:] != slots[:-1]
        prev = rows - 1
        prev[new] = self.head[slots[new]]
        last = np.append(new[1:], True)
        self.head[slots[last]] = rows[last]
        self.prev[r0:r0 + m] = prev
        self.slot[r0:r0 + m] = slots
        self.alive[r0:r0 + m] = True
        self.n, self.live = r0 + m, self.live + m

    def pop(self, slots: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Remove every row of these (distinct) slots: (index into ``slots``, the rows in ``cols``, readable until
        the next ``tidy``)."""
        inside = slots < len(self.head)
        at = _nonzero(inside)
        cur = self.head[slots[at]]
        self.head[slots[at]] = -1
        found_p, found_r = [], []
        while len(cur):
            keep = cur >= 0
            if not keep.all():
                cur, at = cur[keep], at[keep]
            if not len(cur):
                break
            found_p.append(at)
            found_r.append(cur)
            cur = self.prev[cur]
        if not found_p:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        p, rows = np.concatenate(found_p), np.concatenate(found_r)
        self.alive[rows] = False
        self.live -= len(rows)
        return p, rows

    def tidy(self) -> None:
        """Compact the store when the rows that left outnumber the live ones (renumbers the rows)."""
        if self.n - self.live > self.live + SLACK:
            self._compact()

    def _compact(self) -> None:
        """Keep the live rows alone, renumbered in order, their chains rebuilt."""
        rows = _nonzero(self.alive[:self.n])
        slots = self.slot[rows]
        o = stable_argsort(slots)
        cols = [c[rows[o]] for c in self.cols]
        self.__init__()
        if len(rows):
            self.add(cols, slots[o])


def slot_instants(s: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, ...]:
    """A batch's rows put by slot ``s``, in time order within one (``o``; ``ss``, ``tt`` their slots and
    times), cut into the instants of each slot: ``brk`` marks a row that starts one, ``starts`` is each
    instant's first row, ``i_slot``/``i_ts`` its slot and time, ``seg`` its slot's segment and ``f`` each
    segment's first instant. An arg max's release and a lexicographic aggregate both walk a batch this way,
    and the rows of one slot must be in time order in the batch (a stable sort keeps them so)."""
    o = stable_argsort(s)
    ss, tt = s[o], ts[o]
    brk = np.ones(len(o), dtype=bool)
    brk[1:] = (ss[1:] != ss[:-1]) | (tt[1:] != tt[:-1])
    starts = _nonzero(brk)
    i_slot, i_ts = ss[starts], tt[starts]
    first = np.ones(len(starts), dtype=bool)
    first[1:] = i_slot[1:] != i_slot[:-1]
    return o, ss, tt, brk, starts, i_slot, i_ts, np.cumsum(first) - 1, _nonzero(first)


def time_order(ts: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """The stable order of rows by time, deletes first within an instant: one integer key (time and sign) in a
    fast stable sort while the times span less than 2**61, else a ``lexsort``.

    >>> time_order(np.array([5, 3, 5, 3]), np.array([1, 1, -1, 1], dtype=np.int8)).tolist()
    [1, 3, 2, 0]
    """
    if not len(ts):
        return np.zeros(0, dtype=np.int64)
    lo = int(ts.min())
    if int(ts.max()) - lo < 2**61:
        return stable_argsort((ts - lo) * 2 + (sign > 0))
    return np.lexsort((sign > 0, ts))


def running_extreme(i_max: np.ndarray, old: np.ndarray, had: np.ndarray, seg: np.ndarray, f: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per instant (grouped by slot, in time order within one: ``seg`` its slot's segment, ``f`` each segment's
    first instant), the running extreme through it from the extreme held before (``old`` per segment, where
    ``had``) and the instants' own (``i_max``): (``run``, ``prev``: the running extreme through the instant
    and before it, as positive codes in one order, 0 for nothing held; the function from codes to values).
    One ``maximum.accumulate`` over the codes offset per segment: the values minus their least when the
    segments times their span fit in 62 bits, else their dense ranks (a sort).

    >>> run, prev, value = running_extreme(np.array([3, 1, 4, 2]), np.array([2, 9]), np.array([True, False]),
    ...                                    np.array([0, 0, 1, 1]), np.array([0, 2]))
    >>> value(run).tolist(), (prev > 0).tolist(), value(prev[prev > 0]).tolist()
    ([3, 3, 4, 4], [True, True, False, True], [2, 3, 4])
    """
    m = len(i_max)
    held = old[had]
    lo = int(i_max.min())
    hi = int(i_max.max())
    if len(held):
        lo, hi = min(lo, int(held.min())), max(hi, int(held.max()))
    width = hi - lo + 2
    if (len(f) + 1) * width < 2**62:
        # differences below width (< 2**62): exact, though ``v - least`` may wrap on the way (numpy arrays wrap)
        least = np.int64(lo)
        r_inst = (i_max - least) + 1
        r_old = np.zeros(len(f), dtype=np.int64)
        r_old[had] = (held - least) + 1

        def value(code: np.ndarray) -> np.ndarray:
            return (code - 1) + least
    else:
        uniq, inv = np.unique(np.concatenate([i_max, held]), return_inverse=True)
        inv = inv.reshape(-1) + 1
        r_inst = inv[:m]
        r_old = np.zeros(len(f), dtype=np.int64)
        r_old[had] = inv[m:]
        width = len(uniq) + 1

        def value(code: np.ndarray) -> np.ndarray:
            return uniq[code - 1]
    base = seg * width
    run = np.maximum.accumulate(base + np.maximum(r_inst, r_old[seg])) - base
    prev = np.empty(m, dtype=np.int64)
    prev[1:] = run[:-1]                           # the instant before, in its slot but at a slot's first
    prev[f] = r_old
    return run, prev, value


def _lex_ranks(rows: list[np.ndarray], held: list[np.ndarray], had: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], list[np.ndarray]]]:
    """Several values ranked lexicographically as one int64 each: (the rows' codes, the held extremes' codes
    (meaningless where ``had`` is False), the function from codes back to the values). The codes order the rows
    and the held extremes exactly as the tuples do, and equal tuples get equal codes: the values packed into
    bit fields, offset by their least, when their ranges fit in 62 bits together; else dense ranks (from 1)
    over the rows and the held extremes together.

    >>> for big in (0, 2**62):
    ...     r, h, back = _lex_ranks([np.array([5, 5, 7]), np.array([2, 1, big])],
    ...                             [np.array([5, 9]), np.array([1, 0])], np.array([True, False]))
    ...     print(bool(r[1] < r[0] < r[2]) and bool(h[0] == r[1]), [x.tolist() for x in back(r)])
    True [[5, 5, 7], [2, 1, 0]]
    True [[5, 5, 7], [2, 1, 4611686018427387904]]
    """
    n = len(rows[0])
    held_at = [h[had] for h in held]              # a few per release: no copy of the rows to join them
    lows, spans = [], []
    for r, h in zip(rows, held_at):
        lo, hi = int(r.min()), int(r.max())
        if len(h):
            lo, hi = min(lo, int(h.min())), max(hi, int(h.max()))
        lows.append(lo)
        spans.append(hi - lo + 1)
    total = 1
    for sp in spans:
        total *= sp
    if total < 2**62:
        # in place, a pass per value and step: int64 arithmetic wraps, but the result is below 2**62, so exact
        code = rows[0] - lows[0]
        held_code = np.zeros(len(had), dtype=np.int64)
        hc = held_at[0] - lows[0]
        for r, h, lo, sp in zip(rows[1:], held_at[1:], lows[1:], spans[1:]):
            code *= sp
            code += r
            code -= lo
            hc = hc * sp + (h - lo)
        held_code[had] = hc

        def unpack(c: np.ndarray) -> list[np.ndarray]:
            out = []
            for lo, sp in zip(lows[::-1], spans[::-1]):
                c, part = np.divmod(c, sp)
                out.append(part + lo)
            return out[::-1]
        return code, held_code, unpack
    keys = [np.concatenate([r, h]) for r, h in zip(rows, held_at)]
    order = np.lexsort(keys[::-1])                # the first value the primary key
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for k in keys:
        sk = k[order]
        new[1:] |= sk[1:] != sk[:-1]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.cumsum(new)                  # 1, 2, ...
    table = [np.concatenate([k[:1], k[order][new]]) for k in keys]    # rank r's values at r (0: a filler)
    held_rank = np.zeros(len(had), dtype=np.int64)
    held_rank[had] = rank[n:]
    return rank[:n], held_rank, lambda r: [t[r] for t in table]


def _nonzero(mask: np.ndarray) -> np.ndarray:
    """The positions where a 1-D ``mask`` holds (``np.flatnonzero`` without its Python wrapper: called a dozen
    times per release)."""
    return mask.nonzero()[0]


def _grown(a: np.ndarray, cap: int, used: int) -> np.ndarray:
    """``a``'s first ``used`` entries at the front of an array of ``cap``."""
    out = np.zeros(cap, dtype=a.dtype)
    out[:used] = a[:used]
    return out
