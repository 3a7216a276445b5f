"""A tumbling window joined with its own MAX (or MIN), as one operator: the rows at each period's extreme
(issue 15, NEXMark q7: ``Bid [RANGE 10 S SLIDE 10 S] B, (SELECT MAX(price) ... same window) M WHERE B.price =
M.maxprice``).

Source: SPEC section 3 (tumbling windows; an aggregate without GROUP BY over an empty relation yields no row);
digest-002a section 2.15 (a join's output as inserts and deletes). The planner builds it only where
``dsms/plan/window_extreme.py`` finds the facts that make it exact; its docstring gives the argument.

The general plan keeps every row of the window in the join (every column, the ``extra`` string of q7 too), runs
a second window and an aggregate for the MAX, and at each window end probes the period's rows with it. Here the
stream is read once: an element with timestamp ts belongs to the period ending at e = ceil(ts / T) * T, enters
the window at e and leaves at e + T. Per period the operator keeps the best value seen and, as the arrays they
arrived in plus the positions in them, the rows holding it; a batch whose best is below the period's costs one
``max`` and nothing else, and a row below the best is never kept (it cannot equal the period's MAX, which is at
least the best seen so far: within a period the window only grows, and every row leaves at e + T). Columns are
gathered only for the rows output. At e, once the input has passed it, the rows held are inserted, each with the
extreme as the MAX side's column, and at e + T deleted (as the general join does when both inputs change at one
instant). An element stamped exactly e that arrives after e was output changes that output at e: if it raises
the best, the rows output at e are deleted at e and the new ones inserted; if it equals it, it is inserted too.
An empty period outputs nothing. Like a window with a SLIDE, the operator outputs only at multiples of T, so its
heartbeat is the first multiple at or after its input's frontier, and the operators above it run once a period.
"""

from __future__ import annotations

import numpy as np

from control_tables import Stat
from dsms.batch import Batch, concat
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import NEG_INF, Operator, colmap
from dsms.queues import Queue

MAX_TS = 2**62           # the largest timestamp or heartbeat (docs/contract-engine-api.md)
_MAX, _MIN = np.maximum.reduce, np.minimum.reduce     # a third cheaper than ndarray.max on a push's rows


class _Period:
    """One period's best value, the rows holding it (``(batch, positions)`` of the batches they came in), and
    what was output for it (inserted at ``end`` and still held until ``end + size``)."""

    __slots__ = ("end", "best", "rows", "n_shown", "shown", "shown_best", "dirty", "listed")

    def __init__(self, end: int) -> None:
        self.end = end
        self.best: int | None = None
        self.rows: list[tuple[Batch, np.ndarray]] = []
        self.n_shown = 0                  # entries of ``rows`` output already
        self.shown: list[Batch] = []      # the output rows inserted at ``end``
        self.shown_best: int | None = None
        self.dirty = False                # rows changed since the last output at ``end``
        self.listed = False               # output once: in ``WindowExtremeJoinOp.live`` until ``end + size``

    def held(self) -> int:
        """Rows kept and not output yet (those output are in ``shown``)."""
        return sum(len(i) for _, i in self.rows[self.n_shown:])


class WindowExtremeJoinOp(Operator):
    """A tumbling window joined with its own MAX or MIN (NEXMark q7), built by the planner in place of the join,
    its two windows and the aggregate (docs/architecture.md, "A tumbling window joined with its own MAX or
    MIN"): it keeps only the rows at each period's running extreme, so it has no window synopsis, no ``range``
    or ``memory`` knob and no join ``kind``."""

    kind = "window_extreme_join"
    reads_extremes = True    # never shed: the general plan's MAX side has no error bound (dsms/load_shedder.py)
    rows_held = Stat(int, compute="_rows_held", unit="tuples", doc="rows held: those at the running extreme of "
                     "the periods not output yet, and those output and not yet deleted")

    def _rows_held(self) -> int:
        return sum(p.held() for p in self.open) + sum(len(b) for p in self.live for b in p.shown)

    def __init__(self, inp: Queue, out: Queue, size: int, picks: list[int], key: int, func: str, side: int,
                 predicate: CompiledExpr | None, dtype, predicate_label: str | None = None) -> None:
        """``picks``: the input columns the window's side outputs; ``key``: the position among them of the
        column compared with the extreme; ``side``: the window's side of the join (0: its columns first, then
        the extreme's); ``predicate``: the join's other conjuncts, over the joined row; ``predicate_label``: its
        text with the joined row's column names (the label's other positions are the input's)."""
        col = f"${picks[key]}"
        label = f"RANGE {size} SLIDE {size}: {col} = {func}({col})"
        if predicate is not None:
            label += f" AND {predicate_label or predicate.text}"
        super().__init__([inp], out, label + " [rows at the window's extreme only]")
        self.size = size
        self.picks = list(picks)
        self.col = picks[key]             # the compared column, in the input
        self.is_max = func == "MAX"
        self.side = side
        self.predicate = predicate
        self.dtype = dtype                # the extreme's column in the output
        self.open: list[_Period] = []     # periods that may still change output (ends ascending)
        self.live: list[_Period] = []     # periods output and not deleted yet (ends ascending)
        self.due = MAX_TS + 1             # the earliest frontier at which something is due (fast path)

    # ---------------------------------------------------------------- input

    def on_batch(self, i: int, batch: Batch) -> None:
        ts = batch.ts                      # a stream's: every sign +1 (SPEC section 3; the planner checked)
        s = self.size
        e0, e1 = -(-ts.item(0) // s) * s, -(-ts.item(-1) // s) * s
        vals = batch.cols[self.col]
        if e0 == e1:
            self._add(e0, batch, vals, 0)
            return
        ends = -((-ts) // s) * s
        cuts = np.flatnonzero(ends[1:] != ends[:-1]) + 1
        lo = 0
        for hi in [*cuts.tolist(), len(ts)]:
            self._add(int(ends[lo]), batch, vals[lo:hi], lo)
            lo = hi

    def _add(self, end: int, batch: Batch, vals: np.ndarray, base: int) -> None:
        """Rows ``base ..`` of ``batch`` (values ``vals`` of the compared column), all of the period ending at
        ``end``: kept if they hold the best value of the period so far."""
        p = self.open[-1] if self.open else None
        if p is None or p.end != end:
            p = _Period(end)
            self.open.append(p)
        m = _MAX(vals) if self.is_max else _MIN(vals)
        best = p.best
        if best is not None and (m < best if self.is_max else m > best):
            return                                     # every row below the best: none can match
        if best is None or m != best:
            p.best, p.rows, p.n_shown = m, [], 0       # a new best: the rows held before cannot match
        idx = np.flatnonzero(vals == m)
        p.rows.append((batch, idx + base if base else idx))
        p.dirty = True
        if end < self.due:
            self.due = end

    # ---------------------------------------------------------------- output

    def on_frontier(self, f: int) -> None:
        if f < self.due:
            return                                      # nothing due (most pushes within a period)
        while True:
            p = next((q for q in self.open if q.dirty), None)
            t_ins = p.end if p is not None and p.end <= f else None
            t_del = self.live[0].end + self.size if self.live and self.live[0].end + self.size <= f else None
            if t_ins is None and t_del is None:
                break
            if t_del is not None and (t_ins is None or t_del <= t_ins):
                gone = self.live.pop(0)
                self._emit(gone.shown, t_del, -1)
                gone.shown = []
            else:
                self._show(p)
        self.open = [q for q in self.open if q.end >= f]        # an element stamped ``end`` may still come
        dues = [q.end for q in self.open if q.dirty] + ([self.live[0].end + self.size] if self.live else [])
        self.due = min(dues) if dues else MAX_TS + 1

    def _show(self, p: _Period) -> None:
        """Output the changes of ``p`` at its end: all its rows anew if its best changed since it was last
        output (the rows output before deleted), else the rows not output yet."""
        if p.shown and p.shown_best != p.best:
            self._emit(p.shown, p.end, -1)
            p.shown = []
        new = p.rows[p.n_shown:]
        if new:
            out = self._joined(new, p.best, p.end)
            if len(out):
                p.shown.append(out)
                self.emit(out)
        if not p.listed:
            p.listed = True
            self.live.append(p)
        p.n_shown, p.shown_best, p.dirty = len(p.rows), p.best, False

    def _joined(self, rows: list[tuple[Batch, np.ndarray]], best, t: int) -> Batch:
        """The joined rows of ``rows`` (gathered from the batches they came in: only the columns picked, only
        the rows kept) with the extreme ``best``, stamped ``t``, filtered by the join's other conjuncts."""
        cols = []
        for c in self.picks:
            parts = [b.cols[c][idx] for b, idx in rows]
            cols.append(parts[0] if len(parts) == 1 else np.concatenate(parts))
        n = len(cols[0])
        ext = np.full(n, best, dtype=self.dtype)
        cols = cols + [ext] if self.side == 0 else [ext, *cols]
        out = Batch(np.full(n, t, dtype=np.int64), np.ones(n, dtype=np.int8), cols)
        if self.predicate is not None:
            out = out.take(self.predicate(colmap(out), n))
        return out

    def _emit(self, shown: list[Batch], t: int, sign: int) -> None:
        if not shown:
            return
        b = concat(shown) if len(shown) > 1 else shown[0]
        n = len(b)
        self.emit(Batch(np.full(n, t, dtype=np.int64), np.full(n, sign, dtype=np.int8), b.cols))

    def forward_heartbeat(self, f: int | None = None) -> None:
        """Output happens at multiples of the period only: the first one at or after the input's frontier."""
        if f is None:
            f = self.frontier()
        if f > NEG_INF:
            s = self.size
            f = max(f, min(-(-f // s) * s, MAX_TS))
        super().forward_heartbeat(f)

    # ---------------------------------------------------------------- what it holds (read only)

    def held_stamps(self) -> list[tuple[int, int]]:
        """(period end, rows) of the rows held until the input passes the end of their period."""
        return [(p.end, n) for p in self.open if (n := p.held())]

    def held_bytes(self) -> int:
        """The batches that rows held come from (kept as they arrived) and the rows output and not yet deleted."""
        seen = {id(b): b for p in self.open for b, _ in p.rows}
        return sum(b.nbytes for b in seen.values()) + sum(b.nbytes for p in self.live for b in p.shown)
