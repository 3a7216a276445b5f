"""The kind of DISTINCT's and the set operations' row state, exact or Bloom, and the switch between them at a
future instant (issue 14 item 3; digest-004 R-APX-04: Bloom filters for duplicate elimination, set difference
and intersection; SPEC section 8: a synopsis's ``kind`` knob).

``switch_kind(kind)`` (what the synopsis's ``kind`` knob calls, and what the memory governor,
``dsms/memory_governor.py``, calls directly) asks for a kind, and ``projected_bytes(kind)`` says what the state
would take in it; the switch applies to the rows of instants after the last one the operator has
seen, so no instant is split between two kinds:

* exact -> bloom: the exact counts are read back (``RowIds.rows``) and added to the new filter with their
  multiplicities, so nothing exact is lost: from then on the filter answers. Over an input that never deletes
  the filter is a plain Bloom filter (one bit per cell), otherwise a counting one.
* bloom -> exact: a filter cannot give back its rows, so it drains (``DrainingCounts``): inserts go to a new
  exact table, a delete goes to the filter while the filter may still hold that row (a window retracts its
  oldest copies first, and those are the filter's), and a row's count is the sum of both. When the filter's
  net count is zero (every row it held has left: the window has turned over) it is dropped and the state is
  exact again (``in_effect`` reads ``draining`` until then). A plain filter (input that never deletes) would
  never drain, and the switch is refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dsms.approx import Approx
from dsms.batch import Batch
from synopses.bloom import BloomRowSet, batch_rows, bloom_size, positions, running
from synopses.counting_bloom import CountingBloomRowCounts
from synopses.state import RowStateSynopsis

KINDS = ("exact", "bloom")
MIN_BLOOM_ROWS = 1024


class RowStateKind:
    """Mixin of ``DistinctOp`` and ``SetOpOp``: ``self.table`` is their row state, of either kind."""

    table: object           # distinct.RowCounts (exact), BloomRowSet or CountingBloomRowCounts
    dtypes: list

    def init_row_state(self, what: str, sides: int, insert_only: bool,
                       exact: Callable[[], object]) -> RowStateSynopsis:
        """The synopsis entity of the row state; ``exact`` makes an empty exact table."""
        self.new_exact = exact
        self.row_sides = sides
        self.insert_only = insert_only
        self.pending_kind: str | None = None
        self.switch_after: int | None = None        # the switch applies to instants after this one
        self.last_instant: int | None = None
        self.row_state = RowStateSynopsis(what, lambda: self.table.live, self.table_bytes, self._knob_kind)
        return self.row_state

    def table_bytes(self) -> int:
        return self.table.nbytes()

    def kind_in_effect(self) -> str:
        if isinstance(self.table, DrainingCounts):
            return "draining"
        return "bloom" if isinstance(self.table, BloomRowSet | CountingBloomRowCounts) else "exact"

    def switch_kind(self, kind: str) -> None:
        """Ask for row state of ``kind`` (exact or bloom) from the next instant on; raises ValueError (and
        changes nothing) for an unknown kind or a switch that cannot happen."""
        self._request(kind)
        object.__setattr__(self.row_state, type(self.row_state).state_kind.slot, kind)

    def projected_bytes(self, kind: str) -> int | None:
        """Bytes the row state would hold in ``kind`` if switched now (what the memory governor weighs before
        it switches): a Bloom filter's size follows from ``bloom_rows`` (or the rows held) and ``fp_rate``;
        None for exact from a filter (its size is known only once rows are back). Raises ValueError for a
        kind this state does not take."""
        self._known(kind)
        if kind == self.kind_in_effect():
            return self.table_bytes()
        if kind == "exact":
            return None
        m, _ = bloom_size(self._filter_rows(self.table.live), self.row_state.fp_rate)
        return self.row_sides * ((m + 7) // 8 if self.insert_only else 2 * m)     # bits, or uint16 counters

    def _filter_rows(self, live: int) -> int:
        """Distinct rows a new filter is sized for: the ``bloom_rows`` knob, or twice the rows held."""
        rows = self.row_state.bloom_rows
        return max(2 * live, MIN_BLOOM_ROWS) if rows is None else rows

    def _knob_kind(self, kind: str) -> None:
        self._request(kind)

    def _known(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown synopsis kind {kind!r} for {self.kind}; it takes one of "
                             f"{', '.join(KINDS)} (reservoir is for join state)")

    def _request(self, kind: str) -> None:
        self._known(kind)
        if kind == "bloom" and getattr(self, "passthrough", False):
            raise ValueError("UNION ALL keeps no row state to put in a Bloom filter")
        if kind == "exact" and isinstance(self.table, BloomRowSet):
            raise ValueError("this Bloom filter holds the rows of an input that never deletes: it never "
                             "empties, so it cannot hand its state back to an exact table")
        now = self.kind_in_effect()
        if kind == now or (kind == "exact" and now == "draining"):
            self.pending_kind = None
            return
        if now == "draining":
            raise ValueError("the Bloom filter is still draining into the exact table; switch again once "
                             "in_effect reads exact")
        self.pending_kind = kind
        self.switch_after = self.last_instant

    def approximation(self) -> Approx | None:
        """None while the state is exact; under a Bloom filter, its expected false-positive rate (the
        fraction of rows judged present that are not), from the formula for the rows it holds."""
        if self.kind_in_effect() == "exact":
            return None
        return Approx(rel_error=self.table.expected_fp_rate(), confidence=0.95)

    def _after_batch(self) -> None:
        if isinstance(self.table, DrainingCounts) and self.table.old.total <= 0:
            self.table = self.table.exact              # drained: exact again
            self.row_state.in_effect = "exact"

    def _apply_switch(self) -> None:
        kind = self.pending_kind
        if kind == "exact":
            self.table = DrainingCounts(self.new_exact(), self.table) if self.table.total else self.new_exact()
        else:
            old = self.table
            old.settle()                               # rows held uncoded go into the table read here
            live = np.flatnonzero((old.counts[:, :old.rowids.n] != 0).any(axis=0))
            rows = self._filter_rows(len(live))
            p = self.row_state.fp_rate
            if self.insert_only:
                new = BloomRowSet(self.row_sides, rows, p)
                if len(live):
                    cols = old.rowids.rows(live, self.dtypes)
                    for side in range(self.row_sides):
                        keep = old.counts[side, live] > 0
                        new.filters[side].add([c[keep] for c in cols], int(keep.sum()))
                    new.live = max(f.added for f in new.filters)
            else:
                new = CountingBloomRowCounts(self.row_sides, rows, p)
                if len(live):
                    cols = old.rowids.rows(live, self.dtypes)
                    for side in range(self.row_sides):
                        new.seed(side, cols, old.counts[side, live])
            self.table = new
        self.pending_kind = None
        self.row_state.in_effect = self.kind_in_effect()

    def counted_changes(self, b: Batch, deltas: list[np.ndarray], f) -> np.ndarray:
        """``self.table.changes`` over batch ``b``, switching kind between two instants when one is due."""
        if self.pending_kind is not None and len(b):
            cut = 0 if self.switch_after is None else int(np.searchsorted(b.ts, self.switch_after, "right"))
            if cut == 0:
                self._apply_switch()
            elif cut < len(b):
                first = self.table.changes([c[:cut] for c in b.cols], [d[:cut] for d in deltas], f)
                self._apply_switch()
                rest = self.table.changes([c[cut:] for c in b.cols], [d[cut:] for d in deltas], f)
                self.last_instant = int(b.ts[-1])
                self._after_batch()
                return np.concatenate([first, rest])
        d = self.table.changes(b.cols, deltas, f) if len(b) else np.zeros(0, dtype=np.int64)
        if len(b):
            self.last_instant = int(b.ts[-1])
        self._after_batch()
        return d


class DrainingCounts:
    """An exact table that takes every insert, beside the counting Bloom filter it replaces, which takes the
    deletes of the rows it may still hold until it is empty. A row's count is the sum of both."""

    def __init__(self, exact, old: CountingBloomRowCounts) -> None:
        self.exact, self.old = exact, old

    @property
    def live(self) -> int:
        return self.exact.live + self.old.live

    @property
    def total(self) -> int:
        return self.old.total + int(self.exact.counts.sum())

    def nbytes(self) -> int:
        return self.exact.nbytes() + self.old.nbytes()

    def expected_fp_rate(self) -> float:
        return self.old.expected_fp_rate()

    def changes(self, cols: list[np.ndarray], deltas: list[np.ndarray], f) -> np.ndarray:
        n = len(deltas[0])
        h1, h2, (uid, first) = batch_rows(cols, n)
        ids = self.exact.rowids.ids(cols)
        self.exact._reserve(self.exact.rowids.n)
        befores, afters, to_exact = [], [], []
        for side, (flt, dv) in enumerate(zip(self.old.filters, deltas)):
            pos = positions(h1[first], h2[first], flt.k, flt.m)
            base_old = flt.estimate_positions(pos)
            dels = (dv < 0).astype(np.int64)
            _, dels_upto = running(uid, dels, np.zeros(len(first), dtype=np.int64))
            to_old = (dv < 0) & (dels_upto <= base_old[uid])          # the oldest copies are the filter's
            d_old = np.where(to_old, dv, 0)
            d_exact = dv - d_old
            b_old, a_old = running(uid, d_old, base_old)
            b_ex, a_ex = running(ids, d_exact, self.exact.counts[side])
            befores.append(np.maximum(b_old, 0) + b_ex)
            afters.append(np.maximum(a_old, 0) + a_ex)
            to_exact.append(d_exact)
            net = np.zeros(len(first), dtype=np.int64)
            np.add.at(net, uid, d_old)
            end = base_old + net
            flt.distinct += int(((base_old <= 0) & (end > 0)).sum()) - int(((base_old > 0) & (end <= 0)).sum())
            nz = net != 0
            flt.add_positions(pos[nz], net[nz])
        self.exact.changes(cols, to_exact, lambda *c: c[0])          # apply the exact part
        return f(*afters) - f(*befores)
