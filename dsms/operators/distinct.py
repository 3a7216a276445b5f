"""Duplicate elimination (δ) over a relation: a row is in the output while its multiplicity is positive.

Source: digest-004 R-PLAN-04; digest-003 section 3.1 (per-chunk distinct is wrong: the state must span the
whole relation). ``RowCounts`` is the vectorised state that δ and the set operations share: each distinct row
has a dense id (``synopses.rowcodes.RowIds``) and one count array per input side, and a whole batch of signed
deltas is folded in with per-row cumulative sums, giving each delta's count before and after it exactly as a
row-at-a-time loop in arrival order would (that loop is the benchmark's baseline, in bench/row_at_a_time.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dsms.batch import Batch
from dsms.operators.base import Operator
from dsms.operators.row_state_kind import RowStateKind
from dsms.queues import Queue
from synopses.base import rows_bytes
from synopses.prefix_rowids import PrefixRowIds
from synopses.rowcodes import RowIds

# forget rows whose counts are all zero once they outnumber the live ones (and this many)
COMPACT_MIN = 1 << 14
RECENT = 2              # batches whose row ids are kept by their column arrays (``RowCounts._ids``)
RECENT_MIN_ROWS = 64    # ... when they have at least this many rows (fewer cost less to code again)


class RowCounts:
    """Per-row multiplicities on ``sides`` inputs, indexed by persistent row ids.

    Counts may go negative inside an instant (its deltas arrive in any order); a row is forgotten only when
    every side's count is exactly zero after a batch, which is the same as never having seen it.
    """

    def __init__(self, dtypes: list, sides: int) -> None:
        # rows of numbers and strings: coded on the numbers first (``synopses/prefix_rowids.py``)
        self.rowids = PrefixRowIds(dtypes) if PrefixRowIds.fits(dtypes) else RowIds(dtypes)
        self.counts = np.zeros((sides, 0), dtype=np.int64)      # capacity grows by doubling
        self.live = 0                                           # rows with a nonzero count on some side
        # one side only: distinct rows held with count 1 each, not coded (``turnover``), while the coded
        # table holds none with a nonzero count; ``settle`` codes them
        self.uncoded: list[np.ndarray] | None = None
        self._recent: dict[tuple[int, ...], tuple[list[np.ndarray], np.ndarray]] = {}   # ``_ids``
        self._pos = np.arange(64, dtype=np.int64)              # 0, 1, 2, ... (``_all_distinct``)
        self._scratch = np.empty(64, dtype=np.int64)           # a slot per id (``_all_distinct``)

    def nbytes(self) -> int:
        held = 0 if self.uncoded is None else rows_bytes(None, None, self.uncoded)
        return self.rowids.nbytes() + self.counts.nbytes + held

    def changes(self, cols: list[np.ndarray], deltas: list[np.ndarray],
                f: Callable[..., np.ndarray]) -> np.ndarray:
        """Apply the deltas (one int64 array per side, in arrival order) of the rows ``cols``; return, per
        delta, ``f(counts after it) - f(counts before it)``, where f maps the per-side counts to the output
        multiplicity."""
        self.settle()
        ids = self._ids(cols)
        self._reserve(self.rowids.n)
        n = len(ids)
        if self._all_distinct(ids):
            return self._distinct_changes(ids, deltas, f)
        order = group_order(ids, self.rowids.n)                 # by row; arrival order kept within a row
        g = ids[order]
        start = np.ones(n, dtype=bool)
        start[1:] = g[1:] != g[:-1]
        starts = np.flatnonzero(start)
        row_no = np.cumsum(start) - 1
        last = np.empty(len(starts), dtype=np.int64)
        last[:-1] = starts[1:] - 1
        last[-1:] = n - 1
        ug = g[starts]
        before, after = [], []
        was_live = np.zeros(len(ug), dtype=bool)
        is_live = np.zeros(len(ug), dtype=bool)
        for side, dv in enumerate(deltas):
            v = dv[order]
            cs = np.cumsum(v)
            base = self.counts[side, ug]
            run = cs + (base - (cs[starts] - v[starts]))[row_no]  # count after each delta
            after.append(run)
            before.append(run - v)
            fin = run[last]
            was_live |= base != 0
            is_live |= fin != 0
            self.counts[side, ug] = fin
        self.live += int(is_live.sum()) - int(was_live.sum())
        d = np.empty(n, dtype=np.int64)
        d[order] = f(*after) - f(*before)
        if self.rowids.n - self.live > max(self.live, COMPACT_MIN):
            self._compact()
        return d

    def turnover(self, cols: list[np.ndarray], dv: np.ndarray, f: Callable[..., np.ndarray]) -> np.ndarray | None:
        """``changes`` of one side with no row coded, for the two batches of a relation that turns over whole at
        an instant (the caller's condition: DISTINCT asks for batches of one instant; above a join of tumbling
        windows, NEXMark q8, at each window end the pairs of the period that ended leave, as the very arrays
        they entered with, and the next period's enter; issue 15): a batch of inserts of distinct rows into a
        table with no row held is kept as it is (``uncoded``), and a batch deleting once each row of the very
        arrays kept that way empties it again. Coding a window of new (id, name) rows was most of q8's
        DISTINCT; here it costs a check that one integer column has no value twice. Rows are equal only if
        every column is, so one such column makes them distinct. None (nothing changed) for any other batch:
        the caller goes to ``changes``, which codes the rows kept (``settle``) and goes the general way."""
        n = len(dv)
        u = self.uncoded
        if u is not None:
            if (len(u[0]) == n and all(a is b for a, b in zip(u, cols))
                    and dv.item(dv.argmax()) == -1 and dv.item(dv.argmin()) == -1):
                self.uncoded = None           # every row kept leaves: counts 1 -> 0
                self.live -= n
                return f(np.zeros(n, dtype=np.int64)) - f(np.ones(n, dtype=np.int64))
            return None
        if (self.live or n < RECENT_MIN_ROWS or dv.item(dv.argmin()) != 1 or dv.item(dv.argmax()) != 1
                or not _distinct_rows(cols)):
            return None
        self.uncoded = list(cols)             # counts 0 -> 1, held as the arrays themselves
        self.live = n
        return f(np.ones(n, dtype=np.int64)) - f(np.zeros(n, dtype=np.int64))

    def settle(self) -> None:
        """Code the rows kept uncoded (``turnover``) into the table, count 1 each: before any other change, and
        before the table is read from outside (a switch of the state's kind)."""
        u = self.uncoded
        if u is None:
            return
        self.uncoded = None
        ids = self._ids(u)
        self._reserve(self.rowids.n)
        self.counts[0, ids] = 1               # distinct rows, each at count 0 in the table before
        # ``live`` counted them already

    def _all_distinct(self, ids: np.ndarray) -> bool:
        """Whether no row occurs twice in the batch (a whole window's rows entering or leaving, as DISTINCT
        above a join of tumbling windows gets them): each position is written at its id in a scratch array and
        read back; a repeated id reads back another position for one of its rows, whichever write won."""
        n = len(ids)
        if n > len(self._pos):
            self._pos = np.arange(max(n, 2 * len(self._pos)), dtype=np.int64)
        if self.rowids.n > len(self._scratch):
            self._scratch = np.empty(max(self.rowids.n, 2 * len(self._scratch)), dtype=np.int64)
        pos, scratch = self._pos[:n], self._scratch
        scratch[ids] = pos
        return bool((scratch[ids] == pos).all())

    def _distinct_changes(self, ids: np.ndarray, deltas: list[np.ndarray],
                          f: Callable[..., np.ndarray]) -> np.ndarray:
        """``changes`` when every row occurs once in the batch: each delta's count before it is the row's
        count before the batch, with no grouping of the batch by row."""
        if len(deltas) == 1:              # DISTINCT's one side: no per-side lists and masks to combine
            base = self.counts[0, ids]
            run = base + deltas[0]
            self.counts[0, ids] = run
            self.live += int(np.count_nonzero(run)) - int(np.count_nonzero(base))
            d = f(run) - f(base)
            if self.rowids.n - self.live > max(self.live, COMPACT_MIN):
                self._compact()
            return d
        before, after = [], []
        was_live = np.zeros(len(ids), dtype=bool)
        is_live = np.zeros(len(ids), dtype=bool)
        for side, dv in enumerate(deltas):
            base = self.counts[side, ids]
            run = base + dv
            before.append(base)
            after.append(run)
            was_live |= base != 0
            is_live |= run != 0
            self.counts[side, ids] = run
        self.live += int(is_live.sum()) - int(was_live.sum())
        d = f(*after) - f(*before)
        if self.rowids.n - self.live > max(self.live, COMPACT_MIN):
            self._compact()
        return d

    def _ids(self, cols: list[np.ndarray]) -> np.ndarray:
        """The rows' ids, reused for the very column arrays of one of the last ``RECENT`` batches: a join of
        tumbling windows deletes a window's pairs at its end as the arrays it inserted them with
        (``dsms/operators/tumbling_join.py``), passed on as they are by column projections, and coding them
        again (a hash lookup per string) was most of q8's DISTINCT (issue 15). The arrays are held with their
        ids, so no other array can take their ``id``; ids stay valid until ``_compact`` renumbers them."""
        key = tuple(map(id, cols))
        hit = self._recent.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], cols)):
            return hit[1]
        ids = self.rowids.ids(cols)
        if len(ids) >= RECENT_MIN_ROWS:
            self._recent[key] = (list(cols), ids)
            if len(self._recent) > RECENT:
                del self._recent[next(iter(self._recent))]
        return ids

    def _reserve(self, n: int) -> None:
        cap = self.counts.shape[1]
        if n > cap:
            grown = np.zeros((self.counts.shape[0], max(n, 2 * cap, 64)), dtype=np.int64)
            grown[:, :cap] = self.counts
            self.counts = grown

    def _compact(self) -> None:
        self._recent.clear()              # ids are renumbered
        n = self.rowids.n
        keep = (self.counts[:, :n] != 0).any(axis=0)
        self.rowids.compact(keep)
        kept = self.counts[:, :n][:, keep]
        self.counts = np.zeros((kept.shape[0], max(2 * kept.shape[1], 64)), dtype=np.int64)
        self.counts[:, :kept.shape[1]] = kept


def _distinct_rows(cols: list[np.ndarray]) -> bool:
    """Whether some integer column of the rows holds no value twice (so no two rows are equal): by a table
    indexed by value when the values span a range a few times their number (person ids of one window), else
    by a sort.

    >>> _distinct_rows([np.array(["a", "a"], dtype=object), np.array([3, 9])])
    True
    >>> _distinct_rows([np.array([3, 9, 3]), np.array([1.0, 2.0, 3.0])])
    False
    """
    for c in cols:
        if c.dtype.kind not in "iu" or not len(c):
            continue
        lo, hi = c.item(c.argmin()), c.item(c.argmax())
        n = len(c)
        if hi - lo < 4 * n + 1024:
            seen = np.zeros(hi - lo + 1, dtype=np.int64)
            seen[c - lo] = 1
            if int(seen.sum()) == n:          # as many values as rows
                return True
            continue
        s = np.sort(c)
        if (s[1:] != s[:-1]).all():
            return True
    return False


def group_order(ids: np.ndarray, n: int) -> np.ndarray:
    """A stable argsort of ids below ``n`` (< 2**32), as one or two radix passes over 16-bit digits.

    >>> group_order(np.array([70000, 3, 70000, 3, 5]), 70001).tolist()
    [1, 3, 4, 0, 2]
    """
    if n <= 1 << 16:
        return np.argsort(ids.astype(np.uint16), kind="stable")
    o = np.argsort((ids & 0xFFFF).astype(np.uint16), kind="stable")
    return o[np.argsort((ids[o] >> 16).astype(np.uint16), kind="stable")]


def emit_changes(op: Operator, batch: Batch, d: np.ndarray, whole: bool = False) -> None:
    """Emit the rows of ``batch`` whose output multiplicity changed, |d| times each with d's sign, in order;
    ``whole``: every row changed once with its own sign (d is the batch's signs), so the batch is the output."""
    if whole:
        out, signs = batch, batch.sign
    else:
        idx = np.flatnonzero(d)
        if not len(idx):
            return
        dd = d[idx]
        if np.abs(dd).max() > 1:
            rep = np.abs(dd)
            idx, dd = np.repeat(idx, rep), np.repeat(dd, rep)
            out = batch.take(idx)
        elif len(idx) == len(d):
            out = batch     # every row changed, once: its own arrays, not a copy (a tumbling window's turnover)
        else:
            out = batch.take(idx)
        signs = np.sign(dd).astype(np.int8)
    cols = [c.astype(dt, copy=False) for c, dt in zip(out.cols, op.dtypes)]
    emitted = Batch(out.ts, signs, cols)
    if out is batch and batch.col_bytes is not None and all(a is b for a, b in zip(cols, batch.cols)):
        emitted.col_bytes = list(batch.col_bytes)      # the same columns: their byte counts are known
    op.emit(emitted)


def _positive(c: np.ndarray) -> np.ndarray:
    return (c > 0).astype(np.int64)


class DistinctOp(RowStateKind, Operator):
    # δ a batch at a time: a row's output multiplicity is 1 while its count is positive; each delta that
    # changes it is emitted (an insert or a delete of that row), in arrival order. The row state may be a
    # Bloom filter (row_state_kind.py: the synopsis's kind knob)
    kind = "distinct"

    def __init__(self, inp: Queue, out: Queue, dtypes: list, insert_only: bool = False) -> None:
        super().__init__([inp], out)
        self.table = RowCounts(dtypes, 1)
        self.dtypes = dtypes
        self.synopses = [self.init_row_state("distinct rows", 1, insert_only, lambda: RowCounts(dtypes, 1))]

    @property
    def size(self) -> int:
        return self.table.live

    def on_batch(self, i: int, batch: Batch) -> None:
        if len(batch):
            sign = batch.sign.astype(np.int64)
            ts = batch.ts
            if self.pending_kind is None and type(self.table) is RowCounts and ts[0] == ts[-1]:
                # one instant's batch: the relation may turn over whole there (``RowCounts.turnover``); then
                # each row's count went 0 -> 1 or 1 -> 0 by its own delta, and the batch is the output
                if self.table.turnover(batch.cols, sign, _positive) is not None:
                    self.last_instant = int(ts[-1])         # as ``counted_changes`` would
                    emit_changes(self, batch, sign, whole=True)
                    return
            emit_changes(self, batch, self.counted_changes(batch, [sign], _positive))
