"""The operator base: input cursors, per-input time frontiers, heartbeat forwarding, statistics.

Source: digest-004 R-PLAN-07 (``run(budget)`` consumes a bounded amount of input, then returns to the
scheduler) and R-TIME-03 (heartbeats). A frontier is the smallest timestamp an input may still deliver: the
last element's timestamp, or a heartbeat's. An operator's own output frontier is the minimum over its inputs,
forwarded as a heartbeat whenever it passes what the output's data already says.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns

import numpy as np

from control_tables import Entity, Knob, Stat
from dsms.batch import Batch, Heartbeat, concat
from dsms.queues import Queue, QueueReader
from synopses.sort_order import stable_argsort

NEG_INF = -(2**62)
ROWS_PER_RUN = 1 << 16      # a run stops reading input once it has read this many rows (issue 14 item 0)


class Operator(Entity):
    """Base of all operators. Subclasses implement ``on_batch`` and, if they hold back output until time
    passes, ``on_frontier``. The control table (SPEC section 8) is declared here; statistics are updated once
    per run, never per tuple."""

    prefix = "op"
    kind = "operator"
    tuples_in = Stat(int, default=0, unit="tuples", doc="tuples consumed")
    tuples_out = Stat(int, default=0, unit="tuples", doc="tuples produced")
    batches_in = Stat(int, default=0, unit="runs", doc="runs that consumed input")
    selectivity = Stat(float, default=1.0, doc="tuples out per tuple in, over recent runs (decayed totals)")
    cost_ns_per_tuple = Stat(float, default=0.0, unit="ns",
                             doc="processing time per input tuple, over recent runs (decayed totals)")
    last_ts = Stat(int | None, default=None, unit="ticks", doc="largest input timestamp seen")
    frontier_ts = Stat(int | None, compute="_frontier_stat", name="frontier", unit="ticks",
                       doc="smallest timestamp any input may still deliver")
    priority = Knob(int, default=0, ge=0, le=1000, doc="scheduler hint: among ready operators of equal "
                    "policy rank, a higher priority runs first")

    fused = None                          # the operator that runs this one inside its own runs (not scheduled)

    # Whether the class keeps the base's no-op ``on_heartbeat`` / ``on_frontier`` and its plain
    # ``forward_heartbeat``: ``run`` then skips the calls and forwards the heartbeat inline (set per class by
    # ``__init_subclass__``; a call costs 0.1-0.3 us, and a stateless operator on a small batch pays about 5 us
    # a run in all, issue 15).
    _hb_noop = _frontier_noop = _forward_plain = True

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._hb_noop = cls.on_heartbeat is Operator.on_heartbeat
        cls._frontier_noop = cls.on_frontier is Operator.on_frontier
        cls._forward_plain = cls.forward_heartbeat is Operator.forward_heartbeat

    def __init__(self, inputs: list[Queue], output: Queue, detail: str = "") -> None:
        self.detail = detail
        self.readers: list[QueueReader] = [q.reader() for q in inputs]
        self.input_queues = list(inputs)
        self.output = output
        self.frontiers = [q.last_ts if q.last_ts is not None else NEG_INF for q in inputs]
        self.epoch = 0
        self._start = -1                  # round robin over the inputs
        self.keep_stats = True            # the engine's "statistics" setting (off only to measure their cost)
        self._in_acc = self._out_acc = self._ns_acc = 0.0      # decayed totals behind selectivity and cost
        self.synopses: list = []          # the state this operator keeps, each with a control table

    def _frontier_stat(self) -> int | None:
        f = self.frontier()
        return None if f <= NEG_INF else f

    # ---------------------------------------------------------------- scheduling interface

    def ready(self) -> bool:
        for r in self.readers:             # r.pending() inlined: asked of every operator before every pick
            q = r.queue
            if r.pos < q._base + len(q._items):
                return True
        return False

    def pending_rows(self) -> int:
        return sum(r.peek_rows() for r in self.readers)

    def held_stamps(self) -> list[tuple[int, int]]:
        """(timestamp, rows) of what the operator holds internally until its input frontier passes it (read
        only, for the scheduler: Chain-Flush counts the wait of held rows). Only a run of this operator that
        advances its frontier releases them. Default: nothing held."""
        return []

    def held_rows(self) -> int:
        """Rows held inside the operator until time passes them (for the backlog; read only)."""
        return sum(r for _, r in self.held_stamps())

    def work_rows(self) -> int:
        """Rows the operator holds that only its own later runs will process (no input needed): 0 unless
        it bounds its runs (``JoinOp``)."""
        return 0

    def held_bytes(self) -> int:
        """Bytes of held rows that no synopsis of the operator counts (for the memory budget)."""
        return 0

    def run(self, budget: int = 1 << 30) -> int:
        """Consume up to ``budget`` queue items (batches or heartbeats), and stop early once ``ROWS_PER_RUN``
        rows were read, so that one run stays short whatever the batches hold. Returns how many were
        consumed."""
        keep_stats = self.keep_stats
        t0 = perf_counter_ns() if keep_stats else 0
        rows_in = 0
        output = self.output
        out_before = output.tuples_in
        readers = self.readers
        frontiers = self.frontiers
        k = len(readers)
        done = 0
        beat = None                         # the last heartbeat read (forwarded as is if it is the frontier)
        if k == 1:                          # the common case, without the round robin below
            r = readers[0]
            while done < budget and rows_in < ROWS_PER_RUN:
                item = r.get()
                if item is None:
                    break
                done += 1
                if type(item) is Batch:
                    ts = item.ts
                    rows_in += len(ts)
                    last = ts.item(-1)
                    if last > frontiers[0]:
                        frontiers[0] = last
                    self.last_ts = last
                    self.on_batch(0, item)
                else:
                    beat = item
                    if item.ts > frontiers[0]:
                        frontiers[0] = item.ts
                        if not self._hb_noop:
                            self.on_heartbeat(0)
        while k > 1 and done < budget and rows_in < ROWS_PER_RUN:
            progressed = False
            self._start = start = (self._start + 1) % k        # no input starves another
            for j in range(k):
                if done >= budget:
                    break
                i = (start + j) % k
                item = readers[i].get()
                if item is None:
                    continue
                progressed = True
                done += 1
                if type(item) is Batch:
                    rows_in += len(item.ts)
                    last = item.ts.item(-1)
                    if last > frontiers[i]:
                        frontiers[i] = last
                    self.last_ts = last
                    self.on_batch(i, item)
                elif item.ts > frontiers[i]:
                    frontiers[i] = item.ts
                    self.on_heartbeat(i)
            if not progressed:
                break
        if done:
            f = frontiers[0] if k == 1 else self.frontier()
            if not self._frontier_noop:
                self.on_frontier(f)
            if self._forward_plain:         # forward_heartbeat, inlined; the heartbeat read is passed on
                last = output.last_ts       # itself when it is the frontier (heartbeats are immutable)
                if f > NEG_INF and (last is None or f > last):
                    output.put(beat if beat is not None and beat.ts == f else Heartbeat(f))
            else:
                self.forward_heartbeat(f)
            if keep_stats:
                rows_out = output.tuples_in - out_before
                if rows_in or rows_out:
                    self._account(rows_in, rows_out, perf_counter_ns() - t0)
                else:                       # _account of a run that only forwarded a heartbeat, inlined
                    self.batches_in += 1
        return done

    def _account(self, rows_in: int, rows_out: int, ns: int) -> None:
        """Selectivity and cost are ratios of decayed totals (each run's rows and time weigh 0.8 per later run),
        not averages of per-run ratios: an operator that holds rows (a join waiting for its other input, an
        aggregate waiting for its instant to be final) reads in one run and emits in another, and a run that
        only releases on a heartbeat reads nothing; per-run ratios would swing from 0 to several times the
        truth, and Chain's priorities with them.

        A run that neither read nor wrote a row (it only forwarded a heartbeat) is left out of the totals: it
        says nothing about the cost of a row, and a silent source sends a heartbeat every few milliseconds,
        so counted it would age the rows out of the totals while its time stayed in them, and a cheap filter
        would read as costly after its stream's silence (the benchmark case is in docs/scheduling.md)."""
        self.batches_in += 1
        self.tuples_in += rows_in
        self.tuples_out += rows_out
        if not rows_in and not rows_out:
            return
        d = 0.8
        self._in_acc = acc_in = d * self._in_acc + rows_in
        self._out_acc = acc_out = d * self._out_acc + rows_out
        self._ns_acc = acc_ns = d * self._ns_acc + ns
        if acc_in >= 1e-9:
            self.cost_ns_per_tuple = acc_ns / acc_in
            self.selectivity = acc_out / acc_in

    # ---------------------------------------------------------------- hooks

    def frontier(self) -> int:
        return min(self.frontiers) if self.frontiers else NEG_INF

    def on_batch(self, i: int, batch: Batch) -> None:
        raise NotImplementedError

    def on_heartbeat(self, i: int) -> None:
        """Called when input ``i``'s frontier advanced by a heartbeat."""

    def on_frontier(self, f: int) -> None:
        """Called after a run with the operator's input frontier: release what is now final."""

    def announce_frontier(self) -> None:
        """Called once the operator is built: what its inputs had already passed, its output has passed too.
        A plan built after an input passed τ (a heartbeat, a later element) must count τ as passed for that
        input (SPEC section 3: results for τ are final once every input has passed τ), even if the input sends
        nothing more; the heartbeat, put before the output has a reader, sets the frontier that the operators
        built above take from it."""
        self.forward_heartbeat()

    def forward_heartbeat(self, f: int | None = None) -> None:
        if f is None:
            f = self.frontier()
        last = self.output.last_ts         # a heartbeat at or below it adds nothing: the queue would drop it
        if f > NEG_INF and (last is None or f > last):
            self.output.put(Heartbeat(f))

    def emit(self, batch: Batch) -> None:
        if len(batch):
            self.output.put(batch)

    # ---------------------------------------------------------------- teardown and display

    def close(self) -> None:
        for q, r in zip(self.input_queues, self.readers):
            q.detach(r)

    def explain(self) -> str:
        return f"{self.kind}{': ' + self.detail if self.detail else ''}"


_KEYS = tuple(f"${i}" for i in range(64))


def colmap(batch: Batch) -> dict[str, np.ndarray]:
    """The batch's columns under the positional keys the compiled expressions read (``$0``, ``$1``, ..)."""
    cols = batch.cols
    if len(cols) <= len(_KEYS):
        return dict(zip(_KEYS, cols))          # no key formatted per call
    return {f"${i}": c for i, c in enumerate(cols)}


def column_reader(keys: frozenset[str] | set[str]) -> Callable[[list[np.ndarray]], dict[str, np.ndarray]]:
    """What ``colmap`` gives, narrowed to the positional keys an expression reads (``CompiledExpr.columns``):
    a map of one or two columns is built for each batch, not one of every column (``colmap`` of NEXMark's
    seven-column Bid cost 0.4-1.2 us a batch). A key that is not positional falls back to the whole map.

    >>> read = column_reader(frozenset({"$2"}))
    >>> read([np.array([1]), np.array([2]), np.array([3])])
    {'$2': array([3])}
    """
    pairs = []
    for key in sorted(keys):
        if not (key.startswith("$") and key[1:].isdigit()):
            return lambda cols: colmap(Batch(None, None, cols))
        pairs.append((key, int(key[1:])))
    if len(pairs) == 1:
        (k0, j0), = pairs
        return lambda cols: {k0: cols[j0]}
    if len(pairs) == 2:
        (k0, j0), (k1, j1) = pairs
        return lambda cols: {k0: cols[j0], k1: cols[j1]}
    return lambda cols: {key: cols[j] for key, j in pairs}


def merge_by_ts(batches: list[Batch]) -> Batch:
    """Rows of all batches in timestamp order (stable: ties keep batch order, then row order)."""
    parts = [b for b in batches if len(b)]
    if not parts:
        return batches[0]
    if len(parts) == 1:
        return parts[0]
    b = concat(parts)
    ts = b.ts
    if (ts[1:] >= ts[:-1]).all():       # in order already (a window's deletes then its inserts at one instant)
        return b
    if all((p.ts[1:] >= p.ts[:-1]).all() for p in parts):
        # runs in order (a window's deletes and inserts of several instants): numpy's stable argsort is a
        # timsort, which finds the runs and merges them (0.2 ms for 276,000 rows in three runs, against 2.3 ms
        # for the packed sort of ``stable_argsort``, which is the faster one on keys in random order)
        return b.take(np.argsort(ts, kind="stable"))
    return b.take(stable_argsort(ts))


class FinalInstantsOperator(Operator):
    """An operator that only ever processes complete instants: rows are held until the input frontier has
    passed their timestamp, then handed to ``process`` in one batch. Its output for an instant is therefore
    final and net (one change per row per instant), which lets the sink above it pass results straight
    through instead of netting them again (digest-002a section 3.11: a PNA aggregate must not publish
    intermediate values inside one instant)."""

    def __init__(self, inputs: list[Queue], output: Queue, detail: str = "") -> None:
        super().__init__(inputs, output, detail)
        self.held: list[Batch] = []

    def on_batch(self, i: int, batch: Batch) -> None:
        self.held.append(batch)

    def on_frontier(self, f: int) -> None:
        if not self.held or self.held[0].ts[0] >= f:     # nothing final yet: no concatenation either (a
            return                                       # turnover of 184,000 rows is read over three runs)
        b = concat(self.held) if len(self.held) > 1 else self.held[0]
        cut = int(np.searchsorted(b.ts, f, side="left"))
        self.held = [b.slice(cut, len(b))] if cut < len(b) else []
        if cut:
            self.process(b.slice(0, cut) if cut < len(b) else b)

    def held_rows(self) -> int:
        return sum(len(b) for b in self.held)

    def held_stamps(self) -> list[tuple[int, int]]:
        """(timestamp, rows) per instant of the rows held until their instant is final (read only)."""
        out: list[tuple[int, int]] = []
        for b in self.held:
            if len(b):
                ts, rows = np.unique(b.ts, return_counts=True)
                out += zip(ts.tolist(), rows.tolist())
        return out

    def process(self, batch: Batch) -> None:
        raise NotImplementedError
