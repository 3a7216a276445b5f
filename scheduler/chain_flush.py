"""Chain-Flush: Chain scheduling under a latency bound.

Source: Babcock, Babu, Datar, Motwani, Thomas, "Operator scheduling in data stream systems", VLDB Journal 2004
(the journal version of BBDM03), section on latency: run Chain, and when a tuple is about to exceed the
latency bound, switch to FIFO until it is out; digest-004 R-SCH-05 and P-15 (Chain can starve operators and
delay results during bursts; the planned fix minimises memory subject to a latency threshold, P2 section 5).

Units. ``latency_bound`` is in the units of the policy's clock. By default the clock is application time: the
newest timestamp written to any queue of the plan, so the "wait" of a batch is how far its timestamp lags
behind the newest input. A driver with a clock of its own (the simulator in ``tests/scheduler``, or an engine
with a processing-time clock) passes ``clock=``. ``cost_scale`` converts ``cost_ns_per_tuple`` into clock
units for the look-ahead: by default 1 with a driver's clock (it counts the units the costs are measured in,
as the simulator does) and 0 with application time, which stands still while the engine runs.

What waits. Items in the queues (``QueueReader.stamps()``), and rows an operator holds internally until its
input frontier passes them (``held_stamps()``: an aggregate's rows of an instant that is not final yet, a
join's deltas waiting for its other input, a sink's buffered instant). Held rows are released only by a run
of their operator that advances its frontier, i.e. by an item reaching it from upstream; when nothing
upstream has anything waiting they wait for time (the next element or heartbeat), which no schedule can
shorten, so they never start a flush.

Costs. With a clock, the look-ahead uses what runs cost on that clock, measured by the policy on the runs it
picked (``RunCosts``: clock time per row read, every run counted, those that only carried heartbeats
included, and rows written per row read), not the operators' own statistics, which miss the runs that only
carry heartbeats and the bookkeeping around each run, and average per-run ratios that operators holding rows
skew. Until an operator has been timed, its ``cost_ns_per_tuple`` x ``cost_scale`` and ``selectivity`` are
used (all the simulator's toy operators offer). A run also costs per item read (a batch or a heartbeat: the
run's bookkeeping, an aggregate's release), measured on the runs that read no rows (``RunCosts.item_cost``)
and charged to every waiting item besides its rows (``item_tail``), because the backlog of small items Chain
leaves costs more than its rows alone say.

Work of a flush. A run costs per run and per item, not only per row, so a flush that moved the backlog one
item at a time would do more work than FIFO, which reads a batch and its heartbeat together. A flush
therefore defers an operator that would read less than its budget while a candidate upstream of it can still
feed it (``full_runs``).

Cost of deciding. The exact test reads every waiting item, so it costs in proportion to the backlog, and most
when the processor is busiest. It runs only when two cheap bounds cannot settle the pick, and a flush keeps
its target until it is done or the clock has moved by the margin ``headroom * latency_bound``.

The measurements behind each of these choices are in docs/scheduling.md (Chain-Flush, and "Current figures").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from control_tables import Knob, Stat

from .base import SchedOperator, held_stamps, oldest_pending
from .chain import ChainPolicy

MEASURE_DECAY = 0.98            # per run: about the last 50 runs of an operator count
RETAIL_EVERY = 32               # runs between two recomputations of the tail times from the measured costs
RESCAN_EVERY = 64               # flush picks between two full scans while a flush target stands


class RunCosts:
    """What one operator's runs cost on the policy's clock, from the runs the policy timed: clock time per item
    read (a batch or a heartbeat), per row read beyond that, and rows written per row read, as ratios of
    exponentially decayed sums over its runs (recent runs count most). The time per item is that of the runs
    that read items but no rows (heartbeats: the overhead of a run and of an item, and what an aggregate's
    release costs); the rest of the time is spread over the rows. A ratio of sums, unlike the operators'
    averages of per-run ratios, is not skewed by an operator that holds rows and releases them in a later
    run."""

    __slots__ = ("bare_items", "bare_time", "items", "out", "rows", "time")

    def __init__(self) -> None:
        self.time = self.rows = self.out = self.items = self.bare_time = self.bare_items = 0.0

    def add(self, took: float, rows: float, out: float, items: float = 0.0) -> None:
        d = MEASURE_DECAY
        self.time = self.time * d + took
        self.rows = self.rows * d + rows
        self.out = self.out * d + out
        self.items = self.items * d + items
        if not rows and items:
            self.bare_time = self.bare_time * d + took
            self.bare_items = self.bare_items * d + items

    def item_cost(self) -> float:
        return self.bare_time / self.bare_items if self.bare_items >= 1.0 else 0.0

    def row_cost(self, fallback: float) -> float:
        if self.rows < 1.0:
            return fallback
        return max(self.time - self.item_cost() * self.items, 0.0) / self.rows

    def selectivity(self, fallback: float) -> float:
        return self.out / self.rows if self.rows >= 1.0 else fallback


class ChainFlushPolicy(ChainPolicy):
    """Chain, except that batches at risk of waiting longer than ``latency_bound`` are flushed FIFO-style.

    At each pick the policy estimates, for everything waiting, when it would be out under FIFO from now on:
    its wait so far, plus the processing time of everything ahead of it in FIFO order (at an operator with
    several inputs, the round-robin order it reads them in), plus its own and one
    run in progress (runs are not preempted), from the measured costs and selectivities (time per input row
    until all it leads to has left the plan, every branch of a fan-out included, ``flush_tail``, plus the
    time per input item, ``item_tail``).
    Waiting are queued items and the rows operators hold internally (``held_stamps``); held rows come out
    in FIFO order once the first item newer than them has reached their operator, so they are placed at the
    oldest item waiting upstream of it. If anything would exceed the bound, the ready operator holding the
    oldest item at or before the newest one at risk runs (the deepest one on a tie), or, for held rows, the
    one upstream of their operator that does (it carries the item that releases them), except that an
    operator that would read less than its budget waits while a candidate upstream can still feed it
    (``full_runs``), until nothing is at risk; chain priorities and the user ``priority`` knob wait, the bound comes first. Otherwise Chain
    decides. The bound holds when it is feasible (at least the FIFO latency of the workload) and the
    estimates are good; it is a target, not a guarantee, when costs change faster than the statistics follow.
    """

    name = "chain_flush"
    RECOMPUTE_RUNS = 1      # recompute on every drift, as before issue 15: its look-ahead reads tail_time,
    #                         which the recompute refreshes, and its latency bound was tuned with that (headroom)

    latency_bound = Knob(float, default=100.0, gt=0.0, unit="clock units",
                         doc="longest a batch may wait before it is flushed FIFO-style (application time "
                             "by default)")
    cost_scale = Knob(float | None, default=None, ge=0.0, unit="clock units per cost unit",
                      doc="converts cost_ns_per_tuple into clock units for the look-ahead; None: 1 with a "
                          "clock of the driver's, 0 with application time (which stands still during a run)")
    headroom = Knob(float, default=0.09, ge=0.0, lt=1.0,
                    doc="safety margin: flush once a batch is estimated to exceed (1 - headroom) * "
                        "latency_bound, to absorb errors in the measured costs")
    flushes = Stat(int, default=0, unit="picks", doc="picks made in flush mode")
    scans = Stat(int, default=0, unit="scans", doc="full scans of every waiting item (the costly part of a pick)")
    held_flushes = Stat(int, default=0, unit="picks",
                        doc="flush picks made while rows an operator holds are at risk (their releasers run)")

    def __init__(self, *, clock: Callable[[], float] | None = None, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.clock = clock
        self.longest_run = 0.0
        self.flush_tail: dict[int, float] = {}     # clock time per input row until all it leads to is out
        self.item_tail: dict[int, float] = {}      # ... and per input item (batch or heartbeat), besides
        self._costs: dict[int, RunCosts] = {}
        self._held: dict[int, list] = {}           # held_stamps() per operator, until it runs again
        self._tail_runs = 0
        self._target: float | None = None         # the flush in progress: its FIFO position ...
        self._late: list[SchedOperator] = []       # ... and the operators holding rows at or before it
        self._since_scan = 0                       # flush picks since the scan that set the target
        self._scanned_at = -math.inf
        self._slack: tuple[float, ...] | None = None   # the last scan that found no risk (see at_risk)
        self._unreleased = math.inf                # oldest held row only time could release, at the last scan
        self._run_started: float | None = None
        self._rows_started: tuple[float | None, float | None] | None = None

    # -- clock and costs ----------------------------------------------------------------------------------
    def now(self) -> float:
        if self.clock is not None:
            return self.clock()
        stamps = [q.last_ts for q in self.topology.queues.values() if getattr(q, "last_ts", None) is not None]
        return max(stamps, default=-math.inf)

    def scale(self) -> float:
        """Clock units per unit of ``cost_ns_per_tuple`` (0: no look-ahead)."""
        return self.cost_scale if self.cost_scale is not None else (1.0 if self.clock is not None else 0.0)

    def recompute(self) -> None:
        super().recompute()
        self.retail()

    def plan_changed(self, ops: Any) -> None:
        super().plan_changed(ops)
        self._held = {}

    def held(self, op: SchedOperator) -> list:
        """``op.held_stamps()``, read once between two runs of ``op``: only its own runs change what it
        holds (``on_ran`` forgets it)."""
        got = self._held.get(id(op))
        if got is None:
            got = self._held[id(op)] = held_stamps(op)
        return got

    def retail(self) -> None:
        """``flush_tail``: Chain's ``tail_time`` in clock units, from the costs measured on the clock
        (``RunCosts``; before any, the ``cost_ns_per_tuple`` statistic times ``cost_scale`` and the
        ``selectivity`` statistic); ``item_tail``: the measured time per item of the operator and of every
        operator below it (an item read leads to an item at each; 0 until measured, as in the simulator)."""
        topo, costs, scale = self.topology, self.costs(), self.scale()
        tail: dict[int, float] = {}
        item_tail: dict[int, float] = {}
        for op in sorted(topo.ops, key=lambda o: -topo.depth[id(o)]):          # consumers first
            m = self._costs.get(id(op))
            stat_cost, stat_sel = costs[id(op)] * scale, max(op.selectivity, 0.0)
            cost = m.row_cost(stat_cost) if m is not None and scale else stat_cost
            sel = 0.0 if topo.is_sink(op) else m.selectivity(stat_sel) if m is not None else stat_sel
            tail[id(op)] = cost + sel * sum(tail.get(id(c), 0.0) for c in topo.consumers[id(op)])
            item_tail[id(op)] = (m.item_cost() if m is not None and scale else 0.0) + sum(
                item_tail.get(id(c), 0.0) for c in topo.consumers[id(op)])
        self.flush_tail = tail
        self.item_tail = item_tail
        self._tail_runs = 0
        self._slack = None                # estimates changed: the next pick scans again

    # -- what waits ---------------------------------------------------------------------------------------
    def waiting(self, ready: Sequence[SchedOperator], oldest: dict[int, float] | None = None
                ) -> list[tuple[float, float, float, SchedOperator | None]]:
        """Everything waiting as (FIFO position, timestamp, clock time to process it and all it leads to,
        the operator holding it when it is held rows, else None).

        A queued item's position is its timestamp, except at an operator with several inputs: it reads them
        round robin, one item of each in turn whatever their timestamps, so the k-th item of an input is read
        after the first k-1 of every other input, and its position is the newest timestamp of the items read
        up to its round (placed at their own timestamps, a join's items of one input would hide the work of
        the other's newer items read with them; docs/scheduling.md has the case). A reader with ``stamps()`` (timestamp and rows of each pending item) gives
        exact figures; otherwise all of a reader's pending rows are counted at its oldest
        timestamp, an over-estimate of the wait of its newer items (the bound still holds, at the price of
        flushing earlier than needed). Held rows come out once an item newer than them reaches their
        operator: their position is the oldest item waiting at or above the operator (at least their own
        timestamp); with nothing waiting there they wait for time and are left out.
        """
        if oldest is None:
            oldest = {id(op): oldest_pending(op) for op in ready}
        tail, item_tail = self.flush_tail, self.item_tail
        out: list[tuple[float, float, float, SchedOperator | None]] = []
        for op in ready:
            per_tuple, per_item = tail.get(id(op), 0.0), item_tail.get(id(op), 0.0)
            if len(op.readers) > 1 and all(hasattr(r, "stamps") for r in op.readers):
                lists = [r.stamps() for r in op.readers if r.pending()]
                if len(lists) > 1:        # read round robin: the k-th item of an input after the others' k-1st
                    pos = -math.inf
                    for k in range(max(map(len, lists))):
                        rnd = [lst[k] for lst in lists if k < len(lst)]
                        pos = max(pos, max(ts for ts, _ in rnd))
                        out += [(pos, ts, per_item + rows * per_tuple, None) for ts, rows in rnd]
                    continue
            for q, r in zip(op.input_queues, op.readers):
                n = r.pending()
                if not n:
                    continue
                stamps = getattr(r, "stamps", None)
                if stamps is not None:
                    out += [(ts, ts, per_item + rows * per_tuple, None) for ts, rows in stamps()]
                    continue
                held = len(q) if hasattr(q, "__len__") else 0
                rows = q.tuples * n / held if held else r.peek_rows()
                out.append((oldest[id(op)], oldest[id(op)], n * per_item + rows * per_tuple, None))
        self._unreleased = math.inf
        for x in self.topology.ops:
            held = self.held(x)
            if not held:
                continue
            up = self.topology.upstream(x)
            release = min((oldest[id(o)] for o in ready if id(o) in up), default=math.inf)
            if release == math.inf:           # nothing upstream moves: only time can release them
                self._unreleased = min(self._unreleased, min(ts for ts, _ in held))
                continue
            per_tuple = tail.get(id(x), 0.0)
            out += [(max(ts, release), ts, rows * per_tuple, x) for ts, rows in held]
        return out

    def flush_target(self, now: float, waiting: list[tuple]
                     ) -> tuple[float | None, list[SchedOperator], float, float]:
        """The FIFO position of the newest item that would finish later than the bound under FIFO from now
        on (or None), the operators holding rows at or before it, the latest estimated finish (its wait
        included) of anything, and the total work.

        Under FIFO an item is out once everything ahead of it has been processed, after the run in progress:
        ``now - ts + (work of everything at positions <= its own) + longest run``.
        """
        cum, target, bound = self.longest_run, None, self.latency_bound * (1.0 - self.headroom)
        worst = -math.inf
        entries = sorted(waiting, key=itemgetter(0, 1))
        for pos, ts, work, _ in entries:
            cum += work
            late = now - ts + cum
            if late > worst:
                worst = late
            if late > bound:
                target = pos
        total = cum - self.longest_run
        if target is None:
            return None, [], worst, total
        holders = {id(x): x for pos, _, _, x in entries if x is not None and pos <= target}
        return target, list(holders.values()), worst, total

    def at_risk(self, now: float, ready: Sequence[SchedOperator], oldest: dict[int, float] | None = None
                ) -> tuple[float | None, list[SchedOperator]]:
        """``flush_target`` of what waits, without its full scan when cheaper tests settle it.

        The scan reads every waiting item, so it costs in proportion to the backlog, i.e. most when the
        processor is busiest; two cheap tests avoid most of them. First an upper bound: every queued tuple
        and every held row, at the oldest stamp anywhere. Then the slack the last scan left: what was waiting
        then has aged by the clock time since, and its work ahead in FIFO order has not grown (arrivals queue
        behind it, or, at an operator with several inputs, at most in the rounds of its shorter inputs, which
        the test leaves out), so it is safe while that time is below the slack; what arrived since (and held rows only
        time could release at the scan) has at most all the work of the scan plus what was added since ahead
        of it, and has waited at most that time (or as long as those held rows).
        """
        if oldest is None:
            oldest = {id(op): oldest_pending(op) for op in ready}
        tail, item_tail = self.flush_tail, self.item_tail
        first, work = min(oldest.values(), default=math.inf), 0.0
        for op in ready:
            work += (sum(q.tuples for q in op.input_queues) * tail.get(id(op), 0.0)
                     + sum(r.pending() for r in op.readers) * item_tail.get(id(op), 0.0))
        for x in self.topology.ops:
            for ts, rows in self.held(x):
                first = min(first, ts)
                work += rows * tail.get(id(x), 0.0)
        bound = self.latency_bound * (1.0 - self.headroom) - self.longest_run
        if now - first + work <= bound:
            self._slack = None
            return None, []
        if self._slack is not None:
            then, slack, unreleased, total, work_then = self._slack
            if (now - then < slack
                    and max(now - then, now - unreleased) + total + max(0.0, work - work_then) <= bound):
                return None, []
        self.scans += 1
        self._scanned_at = now
        target, late, worst, total = self.flush_target(now, self.waiting(ready, oldest))
        self._slack = None if target is not None else (
            now, bound + self.longest_run - worst, self._unreleased, total, work)
        return target, late

    def flush_pick(self, now: float, ready: Sequence[SchedOperator]) -> SchedOperator | None:
        """The run a flush makes now, or None when nothing is at risk (or only time can help).

        A flush runs, among the ready operators holding an item at or before its target and those upstream
        of an operator holding rows at or before it, FIFO's choice. It stands until none is left, or the
        clock has moved by the margin ``headroom * latency_bound`` since its scan (or ``RESCAN_EVERY``
        picks): then a new scan, which may find a later target.
        """
        oldest = {id(op): oldest_pending(op) for op in ready}
        for _ in range(2):
            fresh = False
            if (self._target is None or self._since_scan >= RESCAN_EVERY
                    or now - self._scanned_at >= self.headroom * self.latency_bound):
                self._target, self._late = self.at_risk(now, ready, oldest)
                self._since_scan, fresh = 0, True
                if self._target is None:
                    return None
            target = self._target
            self._late = [x for x in self._late if any(ts <= target for ts, _ in self.held(x))]
            up = frozenset().union(*(self.topology.upstream(x) for x in self._late))
            cands = [o for o in ready if oldest[id(o)] <= target or id(o) in up]
            if cands:
                self._since_scan += 1
                self.held_flushes += bool(self._late)
                return min(self.full_runs(cands), key=self.fifo_key)
            self._target = None           # this flush is done (or only time can help): look again once
            if fresh:
                break
        return None

    def full_runs(self, cands: list[SchedOperator]) -> list[SchedOperator]:
        """The candidates of a flush less those that would read less than their budget while a candidate
        upstream of them is still to feed them: they run once it has, with fuller runs."""
        ids = {id(o) for o in cands}
        up = self.topology.upstream
        out = [o for o in cands
               if sum(r.pending() for r in o.readers) >= self.budget(o)
               or not any(k in ids for k in up(o) if k != id(o))]
        return out or cands

    # -- the interface ------------------------------------------------------------------------------------
    def pick(self, ready: Any) -> SchedOperator | None:
        if not ready:
            return None
        self._sync(ready)
        if self._dirty:
            self.recompute()
        elif self._tail_runs >= RETAIL_EVERY or not self.flush_tail:
            self.retail()
        now = self.now()
        op = self.flush_pick(now, ready)
        if op is not None:
            self.picks += 1
            self.flushes += 1
        else:
            op = super().pick(ready)
        if self.clock is not None:
            self._run_started = now
            self._rows_started = (getattr(op, "tuples_in", None), getattr(op.output, "tuples_in", None))
        return op

    def on_ran(self, op: SchedOperator, consumed: int) -> None:
        super().on_ran(op, consumed)
        self._tail_runs += 1
        self._held.pop(id(op), None)
        if self._run_started is not None and self.clock is not None:      # a run this policy picked
            took = self.clock() - self._run_started
            self.longest_run = max(self.longest_run, took)
            rows_in, rows_out = self._rows_started or (None, None)
            now_in, now_out = getattr(op, "tuples_in", None), getattr(op.output, "tuples_in", None)
            if rows_in is not None and now_in is not None and self.scale() > 0.0:
                out = now_out - rows_out if rows_out is not None and now_out is not None else 0.0
                self._costs.setdefault(id(op), RunCosts()).add(took, now_in - rows_in, out, consumed)
        self._run_started = None
        self._rows_started = None

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "longest_run": self.longest_run}
