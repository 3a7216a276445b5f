"""Join (⋈) of two relations given as delta streams: a symmetric join (STREAM's symmetric hash join, with each
side indexed by sorted key runs instead of a hash table), vectorised per release of deltas.

Source: digest-004 R-PLAN-06 (one synopsis per input, hashed on the join key) and P-14 (deletes retract
results); digest-002a section 2.15 (the positive/negative approach): Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR.

The binary base releases the deltas of both sides up to the common frontier. Each side's state is a
``SortedRunIndexSynopsis`` (rows in arrival order, found by key through sorted index runs; see its module):
probes are located by binary search, or by lookup when the codes span a small range, and the matching pairs
gathered with index arithmetic, so a release costs in proportion to the release, not to the rows held. A release is
applied in one of two ways:

- **First in, first out, by lifetimes** (the usual case: windows over streams, whose deletes retract rows first in, first out). Each
  delete is matched with the row it retracts, so every row touched by the release has the instant it entered
  and the instant it left; a pair is in the join from the later entry to the earlier exit. The output is each
  pair's insert and delete, and nothing for pairs that never overlap: no changes that cancel within the
  release, however much input it holds, so the work does not depend on how the scheduler batches the inputs.
- **Signed rows** (deletes that do not match first in, first out: a relation updated at random, a partitioned
  window, a window whose size changed). Applied one by one in time order each delta would join the other side's
  state as it was then; in bulk that is each side's deltas against the other side's state, plus every pair of
  new deltas from the two sides, stamped with the later timestamp. A delete is stored as a row with sign -1
  until the table is compacted.

Equi-join columns are the key; any other predicate filters the joined rows.

**Inputs that never delete** (``insert_only``, from the plan's ``monotone``: streams under ``[RANGE UNBOUNDED]``)
need neither form: their state and release are ``AppendJoin``'s (``append_join.py``), with an append-only index
per input.

**Windows fused into the join.** The planner runs a RANGE window that only this join reads inside the join
(``fuse_window``; ``dsms/plan/physical.py``): the join reads the window's input, hands it every batch and
heartbeat, and takes the deletes and inserts it releases as two lists, with no queue between them, no
scheduling decision before each, and no merge of deletes with inserts that the join would split again. While
the window's size has never changed its deletes retract its tuples first in, first out
(``RangeWindowOp.retracts_in_order``), so the release is matched by counting (``match_ordered``) instead of
value by value. The window stays an operator entity: its ``range`` knob, its synopsis (``memory`` budget,
shared window store) and its statistics (counted over what it does in the join's runs) work as before. A
later query that shares the window (possible only before any input arrives, like any stateful subplan) gets
it back as an operator with its output queue (``unfuse_window``).

**Bounded runs** (issue 14 item 0: the server stays responsive whatever the queries do). A release can pair
every new row with every held row of the same key: a self-join over 20,000 rows of ten keys is 4 * 10^7 pairs.
Before applying a release the join counts, per released row, the rows of the other side with its key (held
rows and the other side's released rows: an upper bound on the pairs it takes part in), and when the total
passes ``PAIR_BUDGET`` it applies only the longest prefix in time order (at least one row) that stays within
it, puts the rest back, and stays ready. The output of a prefix has timestamps within the prefix's instants,
so the chunks come out in time order; a prefix that cuts one instant in two is still a valid sequence of
deltas (only the net change of an instant is observed), and the heartbeat forwarded stops at the first
instant not fully applied. Results are exactly those of one release. One row's own pairs are never split,
so a run emits at most ``max(PAIR_BUDGET, the largest key group held)`` pairs.
"""

from __future__ import annotations

from time import perf_counter_ns

import numpy as np

from dsms.batch import Batch, ConcatBatch, Heartbeat, concat, take_until
from dsms.expr.compile import CompiledExpr
from dsms.operators.append_join import AppendJoin
from dsms.operators.arg_extreme import ArgExtremeRelease
from dsms.operators.base import NEG_INF, colmap, merge_by_ts
from dsms.operators.binary import BinaryOperator
from dsms.operators.join_kind import JoinStateKind
from dsms.operators.keyed_join import keyed_release
from dsms.operators.range_window import RangeWindowOp
from dsms.operators.select import keeps_label
from dsms.operators.tumbling_join import TumblingEpochs
from dsms.queues import Queue
from synopses.hash_multi_index import HashMultiIndexSynopsis
from synopses.keyed_index import KeyedIndexSynopsis
from synopses.rowcodes import IntIds, pack_bits, packed, row_codes
from synopses.sort_order import search_both, stable_argsort
from synopses.sorted_run_index import LIVE, OLD, Release, SortedRunIndexSynopsis, expand
from synopses.state import StateSynopsis

PAIR_BUDGET = 1 << 16       # pairs one run may produce (counted before the release is applied)
RELEASE_ROWS = 1 << 13      # released rows weighed per run (the oldest; the rest waits for a later run)


class JoinOp(JoinStateKind, BinaryOperator):
    """A RANGE window below a join may run inside it (``fuse_window``; ``windows`` names them per input).
    Its state is exact, or per input a sample of the window (``kind`` knob; ``dsms/operators/join_kind.py``)."""

    kind = "join"

    def __init__(self, left: Queue, right: Queue, out: Queue, left_keys: tuple[int, ...],
                 right_keys: tuple[int, ...], predicate: CompiledExpr | None, dtypes: list,
                 insert_only: bool = False, keep: tuple[int, ...] | None = None) -> None:
        """``keep``: the joined columns it outputs, in order (None: all), for a selection fused into a join
        whose inputs never delete (``L.FilteredJoin``): only ``AppendJoin`` gathers a subset of columns."""
        label = " AND ".join(f"L${a} = R${b}" for a, b in zip(left_keys, right_keys))
        if predicate is not None:
            label = (label + " AND " if label else "") + predicate.text
        if keep is not None and not insert_only:
            raise ValueError("a join keeps a subset of its columns only when its inputs never delete")
        super().__init__([left, right], out, (label or "cross product") + keeps_label(keep))
        self.keep = None if keep is None else list(keep)
        self.keys = (tuple(left_keys), tuple(right_keys))
        self.predicate = predicate
        self.dtypes = dtypes
        # inputs that never delete (the planner knows): an append-only index each (``append_join.py``)
        self.append = AppendJoin() if insert_only else None
        self.sides = self.append.sides if insert_only else (SortedRunIndexSynopsis(), SortedRunIndexSynopsis())
        self.synopses = list(self.sides)
        self.key_ids: dict[tuple, int] = {}
        self.int_key_ids: list[IntIds] | None = None     # keys of several INT columns (``_int_codes``)
        self.pack_bits: list[int] | None = None          # their bit fields when packed (``_int_codes``)
        self.windows: list[RangeWindowOp | None] = [None, None]
        self.projects: list = [None, None]     # column projections fused below those windows (``fuse_project``)
        self.selects: list = [None, None]      # selections run inside an insert-only join (``fuse_select``)
        self._select_rows = [[0, 0], [0, 0]]   # rows they read and kept in this run (their statistics)
        self._project_rows = [0, 0]            # rows they passed in this run (their statistics)
        self.more: int | None = None      # first instant of released deltas put back (bounded runs), or None
        # (side, id(batch)) -> its codes, within one release; by side too, since a self-join's two sides read
        # the same batches with different key columns
        self._memo: dict[tuple[int, int], tuple[Batch, np.ndarray]] = {}
        self.epochs: TumblingEpochs | None = None     # two tumbling windows of one size: a period at a time
        self.arg_ext: ArgExtremeRelease | None = None  # an arg max (min) the planner proved (use_arg_extreme)
        self.support_side: int | None = None   # only a DISTINCT of this side's columns reads it (keep_support)
        self.init_join_kind()

    def key_side(self, side: int, group: tuple[int, ...] | None) -> None:
        """Hold input ``side``, which the planner knows to keep at most one row per join key (a GROUP BY's
        output joined on its group columns, ``dsms/plan/unique_keys.py``), as a map from key to row
        (``synopses/keyed_index.py``; ``group`` as its ``KeyedIndexSynopsis`` takes it): its releases are
        then overwrites, and probes one lookup each (``dsms/operators/keyed_join.py``)."""
        syn = KeyedIndexSynopsis(group)
        syn.on_kind = self.sides[side].on_kind
        self.sides = (syn, self.sides[1]) if side == 0 else (self.sides[0], syn)
        self.synopses = list(self.sides)

    def use_arg_extreme(self, spec) -> None:
        """Compute this join as the arg max (min) the planner proved it to be (``dsms/plan/arg_extreme.py``): the
        left's rows at their group's extreme, from the left's inserts alone (``dsms/operators/arg_extreme.py``);
        the right's changes are read for their frontier only. EXPLAIN shows it on the join's label."""
        ext = self.arg_ext = ArgExtremeRelease(spec)
        self.synopses = [*self.sides, StateSynopsis("rows at their group's extreme", ext.__len__, ext.nbytes)]
        self.detail += f" [winners: {spec.fn} per group, from the left alone]"

    def keep_support(self, side: int) -> None:
        """Only a DISTINCT of columns of input ``side`` reads this join (the planner knows,
        ``PhysicalPlanner._Distinct``), so the output need only hold, at every instant, at least one pair of
        each row of that side that has a match: a tumbling join (``tumbling_join.py``) then emits one pair
        of each such row instead of all of them (NEXMark q8: a person and one of their auctions).
        The general path emits every pair as before, and the tumbling path completes what it emitted to every
        pair before handing over (``TumblingEpochs._complete``). EXPLAIN shows it on the join's label."""
        self.support_side = side
        self.detail += f" [one pair per {('left', 'right')[side]} row: DISTINCT above]"

    def keep_all_pairs(self) -> None:
        """Undo ``keep_support`` (a later query shares this join or the projection above it): only before any
        input arrived, when nothing has been emitted."""
        if self.support_side is not None:
            self.detail = self.detail.replace(f" [one pair per {('left', 'right')[self.support_side]} row: "
                                              "DISTINCT above]", "")
            self.support_side = None

    def hash_side(self, side: int, bucket: tuple[int, int] | None) -> None:
        """Hold input ``side``, probed by the other input held by key (``key_side``), as a hash multimap from
        key code to rows (``synopses/hash_multi_index.py``): ``keyed_release`` appends its inserts and retracts
        its deletes there in proportion to the release, where the sorted-run index merged every release into
        a signed table as long as the rows held (``bucket`` as its ``HashMultiIndexSynopsis`` takes it). EXPLAIN
        shows it on the join's label."""
        syn = HashMultiIndexSynopsis(bucket)
        syn.on_kind = self.sides[side].on_kind
        self.sides = (syn, self.sides[1]) if side == 0 else (self.sides[0], syn)
        self.synopses = list(self.sides)
        self.detail += f" [{('left', 'right')[1 - side]} by key, {('left', 'right')[side]} hashed]"

    # ---------------------------------------------------------------- windows fused into the join

    def fuse_window(self, side: int, window: RangeWindowOp) -> None:
        """Run ``window`` (whose output queue is read by nobody yet) inside this join: the join reads the
        window's input from where the window would have, hands it each batch and heartbeat, and takes the
        tuples it releases with no queue between, and no scheduling decision or merge of deletes with inserts
        on the way. The window keeps its control table, knobs and synopsis (and its place in a shared window
        store); its statistics count what it does inside the join's runs. ``unfuse_window`` undoes it."""
        inp = window.input_queues[0]
        old, r = self.readers[side], window.readers[0]
        self.input_queues[side].detach(old)
        self.readers[side], self.input_queues[side] = r, inp      # the window's cursor, now the join's
        self.frontiers[side] = window.frontier()
        window.readers = []
        window.fused = self
        self.windows[side] = window
        if self.windows[1 - side] is not None and not len(self.sides[0]) and not len(self.sides[1]):
            self.epochs = TumblingEpochs()    # used while both windows are tumbling of one size (its module)

    def fuse_project(self, side: int, project) -> None:
        """Run ``project`` (a ``ProjectOp`` of plain column copies, whose output only the window fused on
        ``side`` reads) inside this join too: the join reads the projection's input and hands the window the
        columns it picks. A pushed projection below a window then costs no run, no queue and no scheduling
        decision of its own at every push (issue 15: two of q8's three runs per push). The projection keeps its
        entity and statistics; ``unfuse_project`` undoes it."""
        inp = project.input_queues[0]
        old, r = self.readers[side], project.readers[0]
        project.output.detach(old)
        self.readers[side], self.input_queues[side] = r, inp
        self.frontiers[side] = project.frontier()
        project.readers = []
        project.fused = self
        self.projects[side] = project
        self.windows[side].fed_by = project

    def fuse_select(self, side: int, select) -> None:
        """Run ``select`` (a ``SelectOp`` whose output only this join, with inputs that never delete, reads)
        inside this join: the join reads the selection's input and keeps, of each batch, the rows and columns
        the selection would have put in its queue (``SelectOp.picked``), so the selection costs no run, queue
        or scheduling decision of its own at every push (issue 15: NEXMark q3's two selections). Its frontier
        is its input's, which the join now reads. The selection keeps its entity and statistics;
        ``unfuse_select`` undoes it."""
        inp = select.input_queues[0]
        select.output.detach(self.readers[side])
        self.readers[side], self.input_queues[side] = select.readers[0], inp
        self.frontiers[side] = select.frontier()
        select.readers = []
        select.fused = self
        self.selects[side] = select

    def unfuse_select(self, side: int) -> None:
        """Give a fused selection back its cursor; the join reads the selection's output again, from a
        heartbeat at the frontier the selection had passed."""
        select = self.selects[side]
        out = self._give_back(side, select)
        select.frontiers[0] = self.frontiers[side]
        self.selects[side] = None
        self.readers[side], self.input_queues[side] = out.reader(), out
        if select.frontier() > NEG_INF:
            select.forward_heartbeat()

    def _give_back(self, side: int, op) -> Queue:
        """Give a fused operator (the window or projection on ``side``) a cursor of its own on its input, where
        the join's cursor is, and detach the join's; returns the operator's output queue, which the caller
        makes the join read."""
        inp = op.input_queues[0]
        r = inp.reader()
        r.pos = self.readers[side].pos
        inp.detach(self.readers[side])
        op.readers, op.fused = [r], None
        return op.output

    def unfuse_project(self, side: int) -> None:
        """Give a fused projection back its cursor; the join (its window) reads the projection's output again,
        from a heartbeat at the frontier the projection had passed."""
        if self.epochs is not None:
            self.epochs.flush(self)       # the batches held back were read from the projection's input
        project = self.projects[side]
        out = self._give_back(side, project)
        project.frontiers[0] = self.frontiers[side]
        self.projects[side] = None
        self.windows[side].fed_by = None
        self.readers[side], self.input_queues[side] = out.reader(), out
        if project.frontier() > NEG_INF:
            project.forward_heartbeat()

    def unfuse_window(self, side: int) -> None:
        """Give a fused window back its own cursor and output queue (which must be empty so far): the join
        reads the window's output again. The planner does this when a later query shares the window (after
        giving back a projection fused below it)."""
        self._leave_epochs()
        window = self.windows[side]
        out = self._give_back(side, window)
        self.windows[side] = None
        self.readers[side], self.input_queues[side] = out.reader(), out
        self.frontiers[side] = NEG_INF
        rest = [b for b in (*window.out_dels, *window.out_ins) if len(b)]
        window.out_dels, window.out_ins = [], []
        if rest:
            out.put(merge_by_ts(rest))
        if window.frontier() > NEG_INF:
            out.put(Heartbeat(window.frontier()))

    def ready(self) -> bool:
        return self.more is not None or super().ready()

    def pending_rows(self) -> int:
        return super().pending_rows() + self.work_rows()

    def held_rows(self) -> int:
        """Rows held until the other input passes them or until a later run applies them (read only)."""
        n = sum(len(b) for pend in (*self.pending, *self.gated) for b in pend)
        for w in self.windows:
            if w is not None:
                n += sum(len(b) for b in (*w.out_dels, *w.out_ins))
        return n

    def work_rows(self) -> int:
        return self.held_rows() if self.more is not None else 0

    def held_bytes(self) -> int:
        n = super().held_bytes() + sum(b.nbytes for g in self.gated for b in g)
        if self.epochs is not None:
            n += self.epochs.nbytes()     # the rows and pairs held outside the indexes (tumbling_join.py)
        for w in self.windows:
            if w is not None:
                n += sum(b.nbytes for b in (*w.out_dels, *w.out_ins))
        return n

    def forward_heartbeat(self, f: int | None = None) -> None:
        if f is None:
            f = self.frontier()
        if self.more is not None and self.more < f:
            f = self.more                 # deltas at ``more`` are still to be applied
        elif self.more is None:
            f = self._output_frontier(f)
        super().forward_heartbeat(f)

    def _output_frontier(self, f: int) -> int:
        """The smallest timestamp the join may still output when it has applied everything up to ``f``, the
        smaller input frontier: every pair is stamped with the time of one of its rows' deltas, so it is the
        smallest time either side may still deliver. A side with a fused window of a SLIDE delivers at its
        multiples only (``RangeWindowOp.output_frontier``), or at its deltas released and not applied yet;
        any other side, at its frontier. Above a tumbling window's join the operators then run once a window
        end, not once a push (issue 15). A sampled side (``kind``), or a switch of kind waiting, keeps ``f``;
        a switch applies after the largest heartbeat sent (``applied_until``)."""
        if f <= NEG_INF or self.gates[0] is not None or self.gates[1] is not None or any(self.pending_kinds):
            return f
        out = None
        for side, w in enumerate(self.windows):
            if w is None:
                return f
            c = w.output_frontier(self.frontiers[side])
            for held in (w.out_dels, w.out_ins):
                if held and len(held[0]) and held[0].ts[0] < c:
                    c = int(held[0].ts[0])
            out = c if out is None else min(out, c)
        if out > f and self.applied_until is not None and self.applied_until < out - 1:
            self.applied_until = out - 1  # nothing can be output below ``out`` now: those instants are done
        return max(f, out)

    def run(self, budget: int = 1 << 30) -> int:
        if self.more is not None and not super().ready():
            # no new input: go on with the release put back by the previous run
            t0 = perf_counter_ns() if self.keep_stats else 0
            out_before = self.output.tuples_in
            f = self.frontier()
            self.on_frontier(f)
            self.forward_heartbeat(f)
            if self.keep_stats:
                self._account(0, self.output.tuples_in - out_before, perf_counter_ns() - t0)
            return 0
        if self.epochs is not None and (done := self.epochs.run(self, budget)) is not None:
            return done                   # a run of two tumbling windows' join (``TumblingEpochs.run``)
        done = super().run(budget)
        self.fused_stats()
        return done

    def fused_stats(self) -> None:
        """At the end of a run: the statistics of the operators fused into the join, for what they did in it."""
        for side, sel in enumerate(self.selects):
            if sel is not None:
                sel.frontiers[0] = self.frontiers[side]     # its input's, which the join read for it
                if self._select_rows[side][0]:
                    (n, kept), self._select_rows[side] = self._select_rows[side], [0, 0]
                    if self.keep_stats:
                        sel._account(n, kept, 0)
        for side, p in enumerate(self.projects):
            if p is not None and self._project_rows[side]:
                n, self._project_rows[side] = self._project_rows[side], 0
                if self.keep_stats:
                    p._account(n, n, 0)
        for w in self.windows:
            if w is not None and w.fused_items:
                if self.keep_stats:
                    w._account(w.fused_rows_in, w.fused_rows_out, w.fused_ns)
                w.fused_items = w.fused_rows_in = w.fused_rows_out = w.fused_ns = 0

    def selected(self, i: int, batch: Batch) -> Batch | None:
        """``batch`` through input ``i``'s fused selection or projection (``fuse_select``), counting its rows in
        and out for that operator's statistics; None when no row is left."""
        sel = self.selects[i]
        if sel is None:
            return batch
        counts = self._select_rows[i]
        counts[0] += len(batch.ts)
        batch = sel.picked(batch)
        if batch is not None:
            counts[1] += len(batch.ts)
        return batch

    def on_batch(self, i: int, batch: Batch) -> None:
        w = self.windows[i]
        if w is None:
            if i == 1 and self.arg_ext is not None:
                return                    # an arg max's right: read for its frontier only (the run loop's)
            batch = self.selected(i, batch)
            if batch is not None:
                self.pending[i].append(batch)
            return
        if self.epochs is not None and self.epochs.hold(self, i, batch):
            return                        # nothing in it is due before a window end (``TumblingEpochs.hold``)
        self.feed_window(i, batch)

    def feed_window(self, i: int, batch: Batch, picked: bool = False) -> None:
        """Hand the fused window on input ``i`` a batch read from that input (through the fused projection,
        unless its columns are ``picked`` already)."""
        w = self.windows[i]
        t0 = perf_counter_ns() if self.keep_stats else 0
        last = int(batch.ts[-1])
        p = self.projects[i]
        if p is not None:                 # the fused projection's columns (``ProjectOp.on_batch``, copies only)
            if not picked:
                cols, known = batch.cols, batch.col_bytes
                batch = Batch(batch.ts, batch.sign, [cols[e] for e in p.exprs])
                if known is not None:
                    batch.col_bytes = [known[e] for e in p.exprs]
            p.frontiers[0] = max(p.frontiers[0], last)
            p.last_ts = last
            self._project_rows[i] += len(batch.ts)
        if last > w.frontiers[0]:
            w.frontiers[0] = last
        w.last_ts = last
        w.on_batch(0, batch)
        w.fused_items += 1
        w.fused_rows_in += len(batch.ts)
        if self.keep_stats:
            w.fused_ns += perf_counter_ns() - t0

    def on_heartbeat(self, i: int) -> None:
        w = self.windows[i]
        if w is not None:
            w.frontiers[0] = self.frontiers[i]
            w.fused_items += 1
            if self.projects[i] is not None:
                self.projects[i].frontiers[0] = self.frontiers[i]

    def held_stamps(self) -> list[tuple[int, int]]:
        """The deltas waiting for the other input: held in the join, released by a fused window, or passed on
        by an input's sample (kind reservoir) and not applied yet."""
        out = super().held_stamps()
        for w, gated in zip(self.windows, self.gated):
            for b in (*w.out_dels, *w.out_ins, *gated) if w is not None else gated:
                if len(b):
                    ts, rows = np.unique(b.ts, return_counts=True)
                    out += zip(ts.tolist(), rows.tolist())
        return out

    def _leave_epochs(self) -> None:
        if self.epochs is not None:
            self.epochs.leave(self)
            self.epochs = None

    def on_frontier(self, f: int) -> None:
        if self.epochs is not None:
            if not TumblingEpochs.fits(self):
                self._leave_epochs()      # a knob changed a window, or the kind: the general path from here
            elif self.epochs.is_due(self):
                self.epochs.flush(self, due_only=True)    # a window end held rows enter at is final: feed them
        if self.more is None and (self.pending_kinds[0] or self.pending_kinds[1]):
            self.apply_switches()         # a switch applies to the instants after the last one applied
        parts: dict[int, Batch | tuple[Batch | None, Batch | None]] = {}
        for side in (0, 1):
            w = self.windows[side]
            part = None
            if w is None:
                part = self.take_pending(side, f)
            else:
                if w.fused_items:                         # as the window's own run ends: release what is final
                    t0 = perf_counter_ns() if self.keep_stats else 0
                    w.on_frontier(w.frontier())
                    if self.keep_stats:
                        w.fused_ns += perf_counter_ns() - t0
                if w.out_dels or w.out_ins:
                    dels, ins = _deletes(take_until(w.out_dels, f)), _joined(take_until(w.out_ins, f))
                    if dels is not None or ins is not None:
                        part = (dels, ins)
            if self.gates[side] is not None:              # sampled: what reaches the index is the sample's
                if part is not None:
                    self.gate(side, part)
                part = _joined(take_until(self.gated[side], f))
            if part is not None:
                parts[side] = part
        self.more = None
        if parts:
            try:
                if self.arg_ext is not None:
                    self.arg_ext.apply(self, parts)
                elif self.epochs is None or not self.epochs.apply(self, parts, PAIR_BUDGET):
                    self._leave_epochs()
                    if not keyed_release(self, parts, PAIR_BUDGET):      # an input held by key: probed once
                        parts = self._bounded(parts)
                        self.process(parts)
            finally:
                self._memo.clear()
        self.applied_until = f if self.more is None else self.more - 1
        for side in (0, 1):
            if self.gates[side] is not None and not self.gated[side] and self.gates[side].drained():
                self.end_drain(side)

    # ---------------------------------------------------------------- bounded runs

    def _matches(self, side: int, codes: np.ndarray) -> np.ndarray:
        """Per probe code, how many rows ``side``'s index holds with that key (entries of rows that left and
        are not tidied away yet count too: an upper bound)."""
        return self.sides[side].counts(codes)

    def _bounded(self, parts: dict) -> dict:
        """The release cut to its longest prefix in time order whose pairs stay within ``PAIR_BUDGET`` (at
        least one row); the rest goes back where it came from and ``more`` says where it starts."""
        if self.append is not None and self.append.fits(self, parts, PAIR_BUDGET):
            return parts                                   # counted exactly by key
        comps: list[tuple[int, int, Batch]] = []          # (side, 0 deletes / 1 inserts or signed rows, batch)
        for side, p in parts.items():
            if type(p) is tuple:
                comps += [(side, k, b) for k, b in enumerate(p) if b is not None and len(b)]
            else:
                comps.append((side, 1, p))
        n_rel = [sum(len(b) for s, _, b in comps if s == side) for side in (0, 1)]
        held = [len(self.sides[0]), len(self.sides[1])]
        if n_rel[0] * (held[1] + n_rel[1]) + n_rel[1] * (held[0] + n_rel[0]) <= PAIR_BUDGET:
            return parts                                   # cannot pass the budget: the usual release
        if 2 * n_rel[0] * n_rel[1] <= PAIR_BUDGET:       # else the bound below cannot hold: not worth a pass
            most = [self.sides[0].most_per_key(), self.sides[1].most_per_key()]
            if n_rel[0] * (most[1] + n_rel[1]) + n_rel[1] * (most[0] + n_rel[0]) <= PAIR_BUDGET:
                return parts                               # bounded by the most rows any key has held
        if self._pairs_bound(comps) <= PAIR_BUDGET:
            return parts                                   # counted by key: within the budget after all
        ts = np.concatenate([b.ts for _, _, b in comps])
        comp = np.concatenate([np.full(len(b), k) for k, (_, _, b) in enumerate(comps)])
        row = np.concatenate([np.arange(len(b)) for _, _, b in comps])
        order = np.lexsort((row, comp, ts))               # the release in time order, left first at a tie
        cut = False
        if len(order) > RELEASE_ROWS:                     # weigh only the oldest rows: the rest waits anyway
            order, cut = order[:RELEASE_ROWS], True
        head = np.bincount(comp[order], minlength=len(comps))   # a prefix of each part
        sub = [(s, kind, b.slice(0, n)) for (s, kind, b), n in zip(comps, head.tolist())]
        base = np.concatenate([[0], np.cumsum([len(b) for _, _, b in comps])[:-1]])
        pos = np.concatenate([base[k] + np.arange(n) for k, n in enumerate(head.tolist())])
        rank = np.empty(len(ts), dtype=np.int64)
        rank[order] = np.arange(len(order))
        m_order = stable_argsort(rank[pos])       # rows of ``sub`` (concatenated) in time order
        side_of = np.array([s for s, _, _ in comps])[comp[pos]][m_order]
        codes = [self._codes(s, b) for s, _, b in sub]
        code = np.concatenate(codes)[m_order]
        # pairs with held rows, and pairs of released rows counted at the later of the two (exact)
        held_m = np.concatenate([self._matches(1 - s, c) for (s, _, _), c in zip(sub, codes)])[m_order]
        by_code = np.lexsort((np.arange(len(code)), code))
        c_sorted, right = code[by_code], side_of[by_code].astype(np.int64)
        new_group = np.concatenate([[True], c_sorted[1:] != c_sorted[:-1]])
        starts = np.flatnonzero(new_group)
        group = np.cumsum(new_group) - 1
        seen_r = np.cumsum(right) - right
        seen_l = np.cumsum(1 - right) - (1 - right)
        seen_r -= seen_r[starts][group]
        seen_l -= seen_l[starts][group]
        cross = np.empty(len(code), dtype=np.int64)
        cross[by_code] = np.where(right == 1, seen_l, seen_r)
        csum = (held_m + cross).cumsum()
        if not cut and int(csum[-1]) <= PAIR_BUDGET:
            return parts
        k = max(1, int(csum.searchsorted(PAIR_BUDGET, side="right")))
        chosen = comp[pos][m_order[:k]]
        taken = np.bincount(chosen, minlength=len(comps))
        rest_ts = [int(b.ts[n]) for (_, _, b), n in zip(comps, taken.tolist()) if n < len(b)]
        self.more = min(rest_ts) if rest_ts else None
        out: dict = {}
        for (side, kind, b), n in zip(comps, taken.tolist()):
            head_b, rest = b.slice(0, n), b.slice(n, len(b))
            w = self.windows[side]
            signed = type(parts[side]) is not tuple
            if len(rest):
                if self.gates[side] is not None:
                    self.gated[side].insert(0, rest)      # a sample's deltas
                elif w is None:
                    self.pending[side].insert(0, rest)
                else:
                    (w.out_dels if kind == 0 else w.out_ins).insert(0, rest)
            if signed:
                out[side] = head_b
            else:
                dels, ins = out.get(side, (None, None))
                out[side] = (head_b, ins) if kind == 0 else (dels, head_b)
        for side in list(out):
            p = out[side]
            if type(p) is tuple:
                dels, ins = (x if x is not None and len(x) else None for x in p)
                if dels is None and ins is None:
                    del out[side]
                else:
                    out[side] = (dels, ins)
            elif not len(p):
                del out[side]
        return out

    def _pairs_bound(self, comps: list[tuple[int, int, Batch]]) -> int:
        """An upper bound on the pairs the whole release takes part in, counted by key without ordering it:
        each released row's matches among the other side's held rows, plus every pair of released rows of
        the two sides with equal keys. A release of many rows with few matches each (a window's turnover
        against a MAX of one row, bids against the one auction each names) is applied whole instead of in
        ``RELEASE_ROWS`` slices each weighed by a sort of the whole release."""
        codes: list[list[np.ndarray]] = [[], []]
        total = 0
        for side, _, b in comps:
            c = self._codes(side, b)
            codes[side].append(c)
            total += self.sides[1 - side].total_matches(c)
            if total > PAIR_BUDGET:
                return total
        if codes[0] and codes[1]:
            # pairs of equal codes: each of the fewer codes counted among the others (sorted: numpy's binary
            # search is slow on probes in random order; ``search``), or compared with them when very few
            small, large = (np.concatenate(c) for c in sorted(codes, key=lambda c: sum(len(x) for x in c)))
            if len(small) <= 8:
                total += sum(int((large == c).sum()) for c in small.tolist())
            else:
                lo, hi = search_both(np.sort(large), small)
                total += int((hi - lo).sum())
        return total

    def _codes(self, side: int, batch: Batch) -> np.ndarray:
        """An int64 per row, equal for equal join keys across both sides (computed once per batch and
        release: ``_pairs_bound`` and ``process`` both need them)."""
        got = self._memo.get((side, id(batch)))
        if got is not None and got[0] is batch:
            return got[1]
        codes = self._codes_of(side, batch)
        self._memo[side, id(batch)] = (batch, codes)
        return codes

    def _codes_of(self, side: int, batch: Batch) -> np.ndarray:
        keys = self.keys[side]
        n = len(batch)
        if not keys:
            return np.zeros(n, dtype=np.int64)
        cols = [batch.column(k) for k in keys]
        if len(cols) == 1 and cols[0].dtype.kind in "iu":
            return cols[0].astype(np.int64, copy=False)
        if all(c.dtype.kind in "iu" for c in cols):
            return self._int_codes(cols)
        codes = row_codes(cols)
        if codes is None:
            tuples = list(zip(*[c.tolist() for c in cols]))
            return np.fromiter((self.key_ids.setdefault(t, len(self.key_ids)) for t in tuples),
                               dtype=np.int64, count=n)
        uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
        ukeys = zip(*[c[first].tolist() for c in cols])
        ids = np.fromiter((self.key_ids.setdefault(t, len(self.key_ids)) for t in ukeys), dtype=np.int64,
                          count=len(uniq))
        return ids[inv.reshape(-1)]

    def _int_codes(self, cols: list[np.ndarray]) -> np.ndarray:
        """Codes for keys of several integer columns with no Python per key.

        A key whose values are nonnegative and fit bit fields fixed at the first batch (each column the bits
        its largest value there needs, plus the spare bits of 63 shared out: (auction id, bid time) packs
        into 17 + 46 bits) is its packed int64 itself (``packed``): nonnegative, and no table to look up (a
        persistent hash table of dense ids cost 0.8 ms per 10,000 new keys, several times what the index's
        sorts and searches of the wide codes cost: ``stable_argsort`` sorts them by rank). Any other key goes
        the general way: each column's values get dense ids (one table per key position), combined pairwise
        into dense ids again (each below 2**31: that many distinct keys would not fit in memory anyway): code
        ``-1 - id``, negative. Whether a key packs depends on its values alone, so equal keys always get the
        same code, on both sides and in every batch."""
        k = len(cols)
        if self.int_key_ids is None:
            self.int_key_ids = [IntIds() for _ in range(2 * k - 1)]
            self.pack_bits = pack_bits(cols)
        tables = self.int_key_ids
        fits = None
        if self.pack_bits is not None:
            fits = np.ones(len(cols[0]), dtype=bool)
            for c, w in zip(cols, self.pack_bits):
                fits &= (c >= 0) & (c < (1 << w))
            if fits.all():
                return packed(cols, self.pack_bits)
        rest = cols if fits is None else [c[~fits] for c in cols]
        code = tables[0].ids(rest[0])
        for j in range(1, k):
            code = tables[k + j - 1].ids(code * (1 << 31) + tables[j].ids(rest[j]))
        code = -1 - code
        if fits is None or not fits.any():
            return code
        out = np.empty(len(cols[0]), dtype=np.int64)
        out[~fits] = code
        out[fits] = packed([c[fits] for c in cols], self.pack_bits)
        return out

    def process(self, parts: dict[int, Batch | tuple[Batch | None, Batch | None]]) -> None:
        """Apply the released deltas of each side: a batch of signed rows, or a fused window's deletes and
        inserts. A window that retracts in order needs no matching of its deletes with the rows they retract
        (``SortedRunIndexSynopsis.match_ordered``); other deletes are matched value for value, and when they do not
        match first in, first out the release is applied as signed rows."""
        if self.append is not None:
            self.append.apply(self, parts)
            return
        rels = []
        for side in (0, 1):
            self.count_copies(side, parts.get(side))
        for side in (0, 1):
            p = parts.get(side)
            index = self.sides[side]
            if p is None:
                rel = index.match()
            elif type(p) is tuple and self.windows[side].retracts_in_order():
                dels, ins = p
                rel = index.match_ordered(dels, ins, self._codes(side, ins) if ins is not None else None)
            else:
                if type(p) is tuple:
                    p = parts[side] = merge_by_ts([b for b in p if b is not None])
                rel = index.match(p.ts, p.sign, p.cols, self._codes(side, p))
            if rel is None:
                got = {side: merge_by_ts([b for b in p if b is not None]) if type(p) is tuple else p
                       for side, p in parts.items()}
                self._join_signed(got, {side: self._codes(side, b) for side, b in got.items()})
                return
            rels.append(rel)
        self._join_fifo(*rels)

    def _join_fifo(self, left: Release, right: Release) -> None:
        """Each pair of rows with equal keys is in the join from the later of their entries until the earlier
        of their exits: it is inserted then (if that is in the released input) and deleted then (if so), and
        nothing when the two never overlap. Only pairs with a row the release touched (entered or left) can
        change. Both inputs' inserts are appended first (``stage``), so two probes find them all: the touched
        left rows against every right row the release saw (held before it, or inserted by it), then the
        touched right rows against the left rows held before it and not touched. A pair's insert and delete
        never fall at one instant, so the output holds no changes that cancel (the bulk signed path below
        produces such pairs when rows come and go within one release)."""
        L, R = self.sides
        sl, sr = L.stage(left), R.stage(right)
        seq_l = seq_r = start = end = None
        if sl.touched() and R.log is not None:
            p, seq = R.find(sl.touched_codes(L.log), sr.s0)
            if len(p):
                seq_l, seq_r = sl.touched_seq(p), seq
                start = np.maximum(sl.entered(p), sr.entered_of(seq))
                end = np.minimum(sl.left(p), sr.left_of(seq))
        if sr.touched() and sl.e0 > sl.s0 + sl.victims:           # left rows held and not touched
            q, seq = L.find(sr.touched_codes(R.log), sl.s0 + sl.victims)
            if len(q):
                keep = seq < sl.e0                                # not the release's own inserts
                if not keep.all():
                    q, seq = q[keep], seq[keep]
                if len(q):
                    q_seq = sr.touched_seq(q)
                    q_start, q_end = sr.entered(q), sr.left(q)
                    if seq_l is None:
                        seq_l, seq_r, start, end = seq, q_seq, q_start, q_end
                    else:
                        seq_l, seq_r = np.concatenate([seq_l, seq]), np.concatenate([seq_r, q_seq])
                        start, end = np.concatenate([start, q_start]), np.concatenate([end, q_end])
        if seq_l is not None:
            self._emit_pairs(seq_l, seq_r, start, end)
        L.adopt(sl)
        R.adopt(sr)

    def _emit_pairs(self, seq_l: np.ndarray, seq_r: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """The inserts (at ``start``) and deletes (at ``end``) of the pairs of rows numbered ``seq_l`` and
        ``seq_r`` that overlap, in time order (inserts first at an instant)."""
        overlap = start < end
        ii = (overlap & (start != OLD)).nonzero()[0]
        dd = (overlap & (end != LIVE)).nonzero()[0]
        n_ins, n_del = len(ii), len(dd)
        if not n_ins + n_del:
            return
        ts = np.concatenate([start[ii], end[dd]])
        o = stable_argsort(ts)
        sign = np.ones(n_ins + n_del, np.int8)
        sign[n_ins:] = -1
        rows = np.concatenate([ii, dd])[o]
        out = Batch(ts[o], sign[o], self.sides[0].gather(seq_l[rows]) + self.sides[1].gather(seq_r[rows]))
        if self.predicate is not None:
            out = out.take(self.predicate(colmap(out), len(out)))
        self.emit(out)

    def _join_signed(self, got: dict[int, Batch], codes: dict[int, np.ndarray]) -> None:
        """Join everything released at once: each side's deltas against the other side's state, plus the
        pairs of deltas from both sides, stamped with the later of the two timestamps (the one that would
        have found the other, had they been applied one by one in time order)."""
        outs = []
        for side, b in got.items():
            pidx, theirs, their_sign = self.sides[1 - side].lookup(codes[side])
            if len(pidx):
                outs.append(self._deltas_joined(side, b, pidx, theirs, their_sign))
        if len(got) == 2:
            o = stable_argsort(codes[1])
            lo, hi = search_both(codes[1][o], codes[0])
            pairs = self._delta_pairs(got[0], got[1], o, lo, hi - lo)
            if pairs is not None:
                outs.append(pairs)
        self._emit_signed(outs, len(got) == 2)
        for side, b in got.items():
            self.sides[side].insert(b.ts, b.sign, b.cols, codes[side])

    def _deltas_joined(self, side: int, b: Batch, pidx: np.ndarray, theirs: list[np.ndarray],
                       their_sign: np.ndarray | None) -> Batch:
        """The rows of ``b`` (``side``'s deltas) at ``pidx`` joined with the other side's rows they found
        (``theirs``, signed ``their_sign``, None when all +1)."""
        mine = b.take(pidx)
        sign = mine.sign * their_sign if their_sign is not None else mine.sign
        return self._joined(side, mine, theirs, mine.ts, sign)

    def _delta_pairs(self, lb: Batch, rb: Batch, o: np.ndarray, lo: np.ndarray, cnt: np.ndarray) -> Batch | None:
        """The pairs of new deltas of the two sides (``rb``'s rows sorted by code in ``o``; each of ``lb``'s
        rows matches ``cnt`` of them from ``lo``), stamped with the later timestamp; None when there are none."""
        pidx, tidx = expand(lo, cnt)
        if not len(pidx):
            return None
        mine, theirs = lb.take(pidx), rb.take(o[tidx])
        return self._joined(0, mine, theirs.cols, np.maximum(mine.ts, theirs.ts), mine.sign * theirs.sign)

    def _emit_signed(self, outs: list[Batch], crossed: bool) -> None:
        """Emit a signed release's joined rows in time order (``crossed``: pairs of new deltas, stamped with the
        later timestamp, may be among them), filtered by the join's predicate."""
        if not outs:
            return
        out = outs[0] if len(outs) == 1 else concat(outs)
        ts = out.ts                                # in order already: no copy
        if (len(outs) > 1 or crossed) and not (ts[1:] >= ts[:-1]).all():
            out = out.take(stable_argsort(ts))
        if self.predicate is not None:
            out = out.take(self.predicate(colmap(out), len(out)))
        self.emit(out)

    @staticmethod
    def _joined(side: int, mine: Batch, theirs: list[np.ndarray], ts: np.ndarray, sign: np.ndarray) -> Batch:
        """Joined rows: left columns then right, whichever side ``mine`` came from."""
        cols = mine.cols + theirs if side == 0 else theirs + mine.cols
        return Batch(ts, sign.astype(np.int8, copy=False), cols)


def _joined(parts: list[Batch]) -> Batch | None:
    """The batches as one, or None when there are none."""
    return concat(parts) if parts else None


def _deletes(parts: list[Batch]) -> Batch | None:
    """A fused window's released deletes as one batch whose columns are joined only if read: deletes applied
    in order need their timestamps and key codes alone (``match_ordered``)."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ConcatBatch(parts)
