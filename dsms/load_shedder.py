"""The load shedder: when the work arriving exceeds what the engine can do, random drops placed in the shared
plan at rates that minimise the largest weighted relative error over the registered aggregate queries; when
the load falls, they go (SPEC section 1; issue 14 item 1; docs/approximation.md).

Source: Babcock, Datar, Motwani, "Load Shedding for Aggregation Queries over Data Streams", ICDE 2004 (as
STREAM P2 section 5 and digest-004 R-APX-06 describe it): each query i has an effective sampling rate P_i (the
product of the drop rates on its path) and a relative error eps_i(P_i) that falls as P_i grows; the optimum
of ``min max_i w_i eps_i`` subject to the load ``sum_i c_i P_i <= capacity`` gives every shed query the same
weighted error lambda, so P_i = eps_i^-1(lambda / w_i), and lambda is the smallest value whose rates fit the
capacity (found by bisection: the load falls as lambda grows). Drops go as early as possible: on the edge
from an input into the query's first operator; where that operator is shared, the shared edge gets the
largest rate its queries need and each query that needs less gets a second drop on the edge into its first
operator of its own, so a query that needs no shedding is never thinned by a neighbour's drop (P-11).

The error of query i at rate P (one value per group; each result value is within it with probability
``CONFIDENCE``, by the normal approximation of the Horvitz-Thompson estimator of a Bernoulli sample):
COUNT scaled by 1/P has relative standard deviation sqrt((1 - P) / (P N)), SUM scaled by 1/P
sqrt((1 - P)(1 + k^2) / (P N)), AVG (not scaled: the ratio of the sample's sum and count) about
sqrt((1 - P) k^2 / (P N)), where N is the smallest group's size and k the coefficient of variation of the
aggregated values, both measured by the aggregate (``VectorAggregateOp.error_profile``). MIN, MAX and the
other aggregates have no such bound: their queries are never shed; nor are queries over more than one input
edge (a join of two sampled inputs keeps p^2 of its pairs, and not independently, pitfall P-9).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dsms.approx import Approx
from dsms.batch import Batch
from dsms.operators.promising import PromisingDrop, RegionIndex, column_intervals
from dsms.operators.shed import Shedder
from dsms.plan import logical as L

if TYPE_CHECKING:
    from dsms.engine import Engine

CONFIDENCE = 0.95
Z = 1.959963984540054          # two-sided normal quantile of CONFIDENCE
SCALED = ("COUNT", "SUM")      # scaled by 1/P; AVG is a ratio and is not
BOUNDED = ("COUNT", "SUM", "AVG")


ROW_WISE = ("select", "project")     # operators whose output rows each come from one input row, alone


class ResultEdge:
    """A query's own reading of its results (``Query.reader``) as an edge the load shedder drops on, with what
    ``shed`` reads of an operator's edge: the reader, the queue it reads and a name for the shedder's label."""

    fused = None
    condition = None                         # no predicate: a drop here is random

    def __init__(self, query: Any) -> None:
        self.readers = [query.reader]
        self.input_queues = [query.reader.queue]
        self.id = f"results of {query.id}"
        self.owners = {query.id}


def error_bound(p: float, n_min: int, k2: float, funcs: tuple[str, ...]) -> float:
    """Relative error bound (at ``CONFIDENCE``) of a query's aggregates computed from a Bernoulli sample at
    rate ``p``, scaled as the module docstring says; inf when it has none.

    >>> round(error_bound(0.5, 400, 0.0, ("COUNT",)), 4)
    0.098
    >>> error_bound(1.0, 1, 9.0, ("SUM",))
    0.0
    """
    if p >= 1.0:
        return 0.0
    if p <= 0.0 or n_min <= 0 or any(f not in BOUNDED for f in funcs):
        return math.inf
    v = 0.0
    for f in funcs:
        v = max(v, 1.0 if f == "COUNT" else (1.0 + k2) if f == "SUM" else k2)
    return Z * math.sqrt((1.0 - p) * v / (p * n_min))


def rate_for(err: float, n_min: int, k2: float, funcs: tuple[str, ...]) -> float:
    """The smallest rate whose error bound is at most ``err`` (the inverse of ``error_bound``)."""
    if err <= 0.0 or n_min <= 0 or any(f not in BOUNDED for f in funcs):
        return 1.0
    v = max(1.0 if f == "COUNT" else (1.0 + k2) if f == "SUM" else k2 for f in funcs)
    if v <= 0.0:
        return 1e-6
    t = (err / Z) ** 2 * n_min / v           # (1 - p) / p = t
    return min(1.0, max(1e-6, 1.0 / (1.0 + t)))


def solve_rates(costs: dict[str, float], profiles: dict[str, tuple[int, float, tuple[str, ...]]],
                weights: dict[str, float], capacity: float) -> tuple[dict[str, float], float]:
    """BDM04's rates: per query, the rate that gives every shed query the same weighted error lambda, with
    the smallest lambda whose load ``sum(costs[q] * rate[q])`` fits ``capacity``. Queries without a bound
    (``profiles`` missing or not COUNT/SUM/AVG) keep rate 1 and their cost is taken off the capacity first.
    Returns (rates, lambda); lambda is 0 when nothing need be shed.

    >>> r, lam = solve_rates({"a": 1.0, "b": 1.0}, {"a": (100, 0.0, ("COUNT",)), "b": (400, 0.0, ("COUNT",))},
    ...                      {"a": 1.0, "b": 1.0}, 1.5)
    >>> r["a"] > r["b"] and abs(r["a"] + r["b"] - 1.5) < 1e-6
    True
    """
    shed = {q for q in costs if q in profiles and all(f in BOUNDED for f in profiles[q][2]) and profiles[q][0] > 0}
    fixed = sum(c for q, c in costs.items() if q not in shed)
    room = capacity - fixed
    if sum(costs[q] for q in shed) <= room or not shed:
        return {q: 1.0 for q in costs}, 0.0

    def rates(lam: float) -> dict[str, float]:
        return {q: rate_for(lam / weights.get(q, 1.0), *profiles[q]) for q in shed}

    lo, hi = 0.0, 1.0
    while sum(costs[q] * p for q, p in rates(hi).items()) > room and hi < 1e6:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(costs[q] * p for q, p in rates(mid).items()) > room:
            lo = mid
        else:
            hi = mid
    out = {q: 1.0 for q in costs}
    out.update(rates(hi))
    return out, hi


SELECTION_MIN_RATE = 0.01      # a selection's share never falls below this (its output would stop)
SMOOTHING = 0.5                # weight of the newest observation in the calibration factor (an EWMA)
LAG_STEPS = 2                  # the backlog above the system's lag_target is worked off within this many steps
MIN_ROOM = 0.5                 # the capacity planned for new input never falls below this share of the target
MAX_HISTORY = 512              # rate changes kept per query (older ones are merged, their average kept)
MIN_BUSY = 0.05                # the factor is observed only over intervals the engine was busy this share of


def allot(demand: dict[str, float], profiles: dict[str, tuple[int, float, tuple[str, ...]]],
          weights: dict[str, float], capacity: float, selections: set[str]) -> dict[str, float]:
    """Every query's rate for ``capacity``: the load of the queries that can be shed (aggregates with a
    bound, ``profiles``, and selection-only queries) is cut to what the others leave; each selection gets
    the same share of its demand, the fraction the whole sheddable load must be cut to (a selection has no
    error to weigh, so it neither gains nor loses against the aggregates), and the aggregates get BDM04's
    rates (``solve_rates``) within what is left.

    >>> r = allot({"s": 1.0, "t": 1.0}, {}, {}, 1.0, {"s", "t"})
    >>> r["s"], r["t"]
    (0.5, 0.5)
    """
    sel = {q for q in selections if q in demand}
    if not sel:
        return solve_rates(demand, profiles, weights, capacity)[0]
    fixed = sum(c for q, c in demand.items() if q not in sel and q not in profiles)
    sheddable = sum(c for q, c in demand.items() if q in sel or q in profiles)
    share = 1.0 if sheddable <= 0 else min(1.0, max(SELECTION_MIN_RATE, (capacity - fixed) / sheddable))
    rest = {q: c for q, c in demand.items() if q not in sel}
    rates = solve_rates(rest, profiles, weights, capacity - share * sum(demand[q] for q in sel))[0] if rest else {}
    rates.update({q: share for q in sel})
    return rates


class LoadShedder:
    """Measures load, decides rates, places and removes the ``Shedder`` entities (``shed:N``), and says which
    queries it makes approximate. ``step()`` is called by the server a few times a second while the
    system's ``shedding`` knob is on; ``shed(rates)`` places given rates (tests, benchmarks).

    The measurement (``measure``) reads the wall time from ``clock`` (``time.perf_counter``) and the engine
    time spent so far from ``busy`` (``Engine.busy_seconds``, wall time inside ``Engine.run``); a test gives
    another clock and busy counter, or hands ``step`` the demand (and the realised cost) itself, to check the
    decision against a known load.

    Feedback (docs/approximation.md, "Feedback"): the per-tuple cost model misses what does not shrink with
    the rates (scheduling, netting every query's output), so the capacity planned for is corrected by what
    the engine actually took: ``factor`` is the engine time per second over the work the model predicted at
    the rates in force, smoothed, and the model capacity is ``threshold * capacity / factor``; the demand
    counts the rows that arrived, not only those processed (a backlog grows when they differ); and while
    the input backlog would take the engine more than the system's ``lag_target`` seconds, the capacity
    planned for new input is cut so that the excess is worked off within ``LAG_STEPS`` steps (after Tu, Liu,
    Prabhakar, Yao, "Load Shedding in Stream Databases: A Control-Based Approach", VLDB 2006: the queueing
    delay is the controlled output). BDM04's allocation across the queries is unchanged: only the total
    capacity it fits changes."""

    LINGER = True

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.perf_counter,
                 busy: Callable[[], float] | None = None) -> None:
        self.engine = engine
        self.clock = clock
        self.busy = busy if busy is not None else (lambda: engine.busy_seconds)
        self.factor = 1.0                       # realised engine time / modelled time (1 before any)
        self.calibrated = False
        self.model = 0.0                        # modelled CPU s/s at the rates in force, last measurement
        self.realised = 0.0                     # engine s/s, last measurement
        self.lag = 0.0                          # engine seconds the input backlog would take now
        self.planned = 0.0                      # the model capacity the last decision fitted
        self.room = 0.0                         # the engine time per second it was planned from
        self._row_cost: float | None = None     # engine seconds per input row read, at the rates in force
        self.unit_cost: dict[str, float] = {}   # op id -> its cost per tuple as the model counts it (ns)
        self.history: dict[str, list[tuple[int, float]]] = {}   # qid -> (first ts read at it, rate), in order
        self.origin: dict[str, int] = {}        # qid -> the first timestamp its input had for it
        self._dt: float | None = None
        self._demand: dict[str, float] = {}     # the smoothed demand of the last measurement
        self.forced: str | None = None
        self.squeeze = 1.0                      # capacity factor while the server is over its limits
        self.rates: dict[str, float] = {}       # query id -> effective rate in effect (< 1 only)
        self.placed: dict[tuple[int, int], Shedder] = {}
        self.lingering: dict[str, tuple[float, float, Approx]] = {}   # qid -> (until app time, rate, approx)
        self.load = 0.0                         # measured demand, CPU seconds per second at full rate
        self.regions: dict[int, tuple[Any, RegionIndex]] = {}   # input queue id -> its region summaries
        self._selections: dict[str, tuple[Any, int] | None] = {}  # selection_edge per query, until the plan changes
        self._results: dict[str, ResultEdge] = {}   # qid -> its own reading of its results, once dropped on
        self._last: tuple[float, dict, dict] | None = None
        self._offered_moved = False              # the drops read rows since the last measurement
        self._joins: dict[str, list] = {}        # qid -> sampling joins under its top aggregate (plan cache)

    # ------------------------------------------------------------------ what the queries are

    def _agg(self, qid: str) -> Any:
        for op in self.engine.ops:
            if qid in op.owners and hasattr(op, "error_profile"):
                return op
        return None

    def profile(self, qid: str) -> tuple[int, float, tuple[str, ...]] | None:
        """(smallest group, squared coefficient of variation, functions) of the query's aggregate, or None
        when it has none that the shedder can bound."""
        agg = self._agg(qid)
        if agg is None or len(self._source_edges(qid)) != 1:
            return None                       # BDM04's setting: an aggregate over one input (see shed)
        if any(qid in op.owners and getattr(op, "reads_extremes", False) for op in self.engine.ops):
            return None                       # a join with a MAX/MIN read from one edge: a sample moves the MAX
        n_min, k2, funcs = agg.error_profile()          # measured on what reached it: the sample
        if any(f not in BOUNDED for f in funcs):
            return None                       # MIN, MAX (vectorised for INT too) have no error bound
        return int(n_min / max(self.effective(qid), 1e-6)), k2, funcs

    def selection_edge(self, qid: str) -> tuple[Any, int] | None:
        """The edge into a selection-only query's select operator, when the query is one: over one input,
        made of selections, projections and an ISTREAM that passes rows through (no window state, no
        aggregate, no join), its first operator a selection. Such a query has no error bound; under
        overload it is shed by promising regions (docs/approximation.md, "Shedding selections")."""
        if qid not in self._selections:
            self._selections[qid] = self._selection_edge(qid)
        return self._selections[qid]

    def _selection_edge(self, qid: str) -> tuple[Any, int] | None:
        edges = self._source_edges(qid)
        if len(edges) != 1 or edges[0][0].kind != "select":
            return None
        for op in self.engine.ops:
            if qid in op.owners and not (op.kind in ("select", "project")
                                         or op.kind == "to_stream" and getattr(op, "eager", False)):
                return None
        return edges[0]

    def bound(self, qid: str, p: float) -> float:
        prof = self.profile(qid)
        return math.inf if prof is None else error_bound(p, *prof)

    def horizon(self, qid: str) -> float:
        """How long (ticks) sampled rows stay in the query's state: its largest RANGE (inf with any other
        window, whose contents do not leave by time)."""
        h = 0.0
        for op in self.engine.ops:
            if qid in op.owners:
                if op.kind == "range_window":
                    h = max(h, float(op.range))
                elif op.kind in ("row_window", "partition_window"):
                    return math.inf
        return h if h > 0 else math.inf

    # ------------------------------------------------------------------ placing drops

    def _source_edges(self, qid: str) -> list[tuple[Any, int]]:
        srcq = {id(s.queue) for s in self.engine.sources.values()}
        return [(op, j) for op in self.engine.ops if qid in op.owners and op.fused is None
                for j, q in enumerate(op.input_queues[:len(op.readers)]) if id(q) in srcq]

    def _own_edge(self, op: Any, qid: str) -> tuple[Any, int] | None:
        """The edge into the first operator below ``op`` (on the query's path) that only ``qid`` uses; failing
        one, when every operator of the query passes rows on one by one (``ROW_WISE``), its own reading of its
        results (``ResultEdge``: an ISTREAM of an insert-only input is no operator, dsms/plan/istream_pass.py),
        where a Bernoulli drop keeps each result row as it would have kept the input row it came from."""
        own = self._own_op_edge(op, qid)
        if own is not None:
            return own
        query = self.engine.query_list[qid]
        if all(o.kind in ROW_WISE for o in self.engine.ops if qid in o.owners):
            edge = self._results.get(qid)
            if edge is None or edge.readers[0] is not query.reader:
                edge = self._results[qid] = ResultEdge(query)
            return edge, 0
        return None

    def _own_op_edge(self, op: Any, qid: str) -> tuple[Any, int] | None:
        todo, seen = [op], set()
        while todo:
            cur = todo.pop(0)
            for c in self.engine.ops:
                if qid in c.owners and id(c) not in seen and c.fused is None:
                    for j, q in enumerate(c.input_queues[:len(c.readers)]):
                        if q is cur.output:
                            if c.owners == {qid}:
                                return c, j
                            seen.add(id(c))
                            todo.append(c)
        return None

    def shed(self, rates: dict[str, float]) -> None:
        """Place drops so that each query's effective rate is ``rates[qid]`` (missing: 1), replacing what
        was placed; rates of 1 everywhere remove every drop (and start the lingering approximations)."""
        want: dict[tuple[int, int], tuple[Any, int, float, set[str]]] = {}
        selections = {q for q in self.engine.query_list if self.selection_edge(q) is not None}
        before = {q: self.effective(q) for q in self.engine.query_list}
        for qid in self.engine.query_list:
            p = rates.get(qid, 1.0)
            edges = self._source_edges(qid)
            if len(edges) != 1:
                # a join of two shed inputs keeps p^2 of its pairs, not independently (P-9), and a union
                # needs every input shed alike: only queries over one input edge are shed
                p = 1.0
            for op, j in edges:
                key = (id(op), j)
                if op.owners == {qid}:
                    want[key] = (op, j, p, {qid})
                    continue
                top = max(rates.get(o, 1.0) for o in op.owners)
                want[key] = (op, j, top, set(op.owners))
                if p < top:
                    own = self._own_edge(op, qid)
                    if own is not None:
                        want[(id(own[0]), own[1])] = (own[0], own[1], p / top, {qid})
        now = self.engine.now()
        for qid, p in self.rates.items():         # queries no longer shed keep their approximation a while
            if rates.get(qid, 1.0) >= 1.0 and p < 1.0 and qid not in selections:   # (a selection holds
                # no state: its next results are exact)
                h = self.horizon(qid)
                a = Approx(min(self.bound(qid, p), 1e9), CONFIDENCE, p)
                self.lingering[qid] = ((now or 0) + h, p, a)
        for key in list(self.placed):
            if key not in want or want[key][2] >= 1.0:
                self._remove(key)
        for key, (op, j, p, qs) in want.items():
            if p >= 1.0:
                continue
            s = self.placed.get(key)
            drop = self._promising(op, j, p) if qs <= selections else None
            if s is not None and s.method != (drop.method if drop is not None else "random"):
                self._remove(key)                 # the queries behind the edge changed: the other kind of drop
                s = None
            if s is None:
                seed = self.engine.next_seed()
                s = Shedder(op.readers[j], f"{op.input_queues[j].id} -> {op.id}", seed, p, drop)
                self.engine.registry.add(s)
                op.readers[j].shed = s
                self.placed[key] = s
            elif s.auto:
                s.set_rate(p)
            s.queries = sorted(qs)
        self.rates = {q: p for q, p in rates.items() if p < 1.0 and len(self._source_edges(q)) == 1}
        for q, old in before.items():
            new = self.effective(q)
            if new != old:
                self._record(q, new)
        for q in self.rates:
            self.lingering.pop(q, None)
        for s in self.placed.values():
            errs = [self.bound(q, self.effective(q)) for q in s.queries]
            s.rel_error = float(min(max(errs, default=0.0), 1e9)) if s.method == "random" else math.inf

    def _next_ts(self, qid: str) -> int | None:
        """The first timestamp the query's input edge has not read yet: where a rate set now takes effect
        (None before any input)."""
        for op, j in self._source_edges(qid):
            ts = op.readers[j].oldest_ts()
            if ts is not None:
                return ts
        now = self.engine.now()
        return None if now is None else now + 1

    def _note_origin(self, qid: str) -> None:
        """The first timestamp the query's input had for it: the instant after its registration, or when it
        was registered before any input, the first timestamp its inputs received."""
        if qid in self.origin:
            return
        query = self.engine.query_list.get(qid)
        born = getattr(query, "registered_at", None)
        if born is not None:
            self.origin[qid] = born + 1
            return
        srcq = {id(s.queue): s for s in self.engine.sources.values()}
        firsts = [srcq[id(op.input_queues[j])].first_ts for op, j in self._source_edges(qid)
                  if id(op.input_queues[j]) in srcq]
        firsts = [f for f in firsts if f is not None]
        if firsts:
            self.origin[qid] = min(firsts)

    def _record(self, qid: str, rate: float) -> None:
        """The query's effective rate changed to ``rate`` for the rows its input edge reads from now on; the
        history keeps what its window may still hold (``horizon``)."""
        self._note_origin(qid)
        b = self._next_ts(qid)
        if b is None:
            b = self.origin.setdefault(qid, 0)
        hist = self.history.setdefault(qid, [(self.origin.get(qid, b), 1.0)])
        while hist and hist[-1][0] >= b:
            hist.pop()
        hist.append((b, rate))
        h = self.horizon(qid)
        if math.isfinite(h):
            cut = b - h
            while len(hist) > 1 and hist[1][0] <= cut:
                hist.pop(0)
        while len(hist) > MAX_HISTORY:            # the two oldest become one at their average rate (the
            (b0, r0), (b1, r1), (b2, _) = hist[:3]   # rows read under both count the same)
            hist[:2] = [(b0, (r0 * (b1 - b0) + r1 * (b2 - b1)) / max(b2 - b0, 1))]

    def realised_rate(self, qid: str, ts: np.ndarray | int) -> np.ndarray:
        """The rate the rows a result at instant ``ts`` aggregates were sampled at: the rate in force for
        each timestamp of its window, ``(ts - horizon, ts]`` from the query's first input on, averaged
        over the window's span (rows spread evenly over application time). With one rate since the window
        began it is that rate; after the rate changes, the old rows count at their own rate until they
        leave the window, so a result is scaled by what it was sampled at (the rates of a closed loop move
        every step), not by the rate of the moment (docs/approximation.md, "How the error is computed")."""
        t = np.atleast_1d(np.asarray(ts, dtype=np.float64))
        hist = self.history.get(qid)
        if not hist:
            return np.ones(len(t))
        bounds = np.array([b for b, _ in hist], dtype=np.float64)
        rates = np.array([r for _, r in hist], dtype=np.float64)
        cum = np.concatenate(([0.0], np.cumsum(rates[:-1] * np.diff(bounds))))

        def integral(x: np.ndarray) -> np.ndarray:
            x = np.maximum(x, bounds[0])
            k = np.searchsorted(bounds, x, side="right") - 1
            return cum[k] + rates[k] * (x - bounds[k])

        hi = t + 1.0
        lo = np.maximum(hi - self.horizon(qid), bounds[0])
        span = hi - lo
        out = np.where(span > 0, (integral(hi) - integral(lo)) / np.maximum(span, 1e-12), rates[-1])
        return np.clip(out, 1e-12, 1.0)

    def _promising(self, op: Any, j: int, p: float) -> PromisingDrop | None:
        """A promising-regions drop for the select ``op`` reading input ``j`` (every query behind the edge is
        a selection), sharing the region summaries of that input queue with the other selections; None
        when its predicate confines no column to an interval (then it is dropped at random)."""
        intervals = column_intervals(getattr(op, "condition", None))
        if not intervals:
            return None
        q = op.input_queues[j]
        got = self.regions.get(id(q))
        if got is None or got[0] is not q:
            got = self.regions[id(q)] = (q, RegionIndex())
        return PromisingDrop(p, intervals, got[1], self.engine.next_seed())

    def _remove(self, key: tuple[int, int]) -> None:
        s = self.placed.pop(key)
        if s.reader.shed is s:
            s.reader.shed = None
        if s.id is not None and s.id in self.engine.registry:
            self.engine.registry.remove(s.id)

    def effective(self, qid: str) -> float:
        """The product of the drop rates on the query's path (1 when none)."""
        p = 1.0
        for s in self.placed.values():
            if qid in s.queries:
                p *= s.sampling_rate
        return p

    def plan_changed(self) -> None:
        """A query came or went: drops on edges that are gone are taken away."""
        self._joins = {}
        self._selections = {}
        for q in [q for q in self.history if q not in self.engine.query_list]:
            del self.history[q]
        for q in [q for q in self.origin if q not in self.engine.query_list]:
            del self.origin[q]
        for q in self.engine.query_list:
            self._note_origin(q)
        self._results = {q: e for q, e in self._results.items() if q in self.engine.query_list
                         and e.readers[0] is self.engine.query_list[q].reader}
        live = {(id(op), j) for op in [*self.engine.ops, *self._results.values()] for j in range(len(op.readers))}
        for key in [k for k in self.placed if k not in live]:
            self._remove(key)

    # ------------------------------------------------------------------ what results say

    def approximations(self, query_id: str) -> list[Approx]:
        """The approximation the drops upstream of the query give its results now (empty: none)."""
        if not self.placed and not self.lingering:
            return []
        p = self.effective(query_id)
        if p < 1.0:
            if self.selection_edge(query_id) is not None:     # every row is exact, some are missing
                return [Approx(math.inf, 1.0, p, subset=True)]
            return [Approx(min(self.bound(query_id, p), 1e9), CONFIDENCE, p)]
        lin = self.lingering.get(query_id)
        if lin is not None:
            now = self.engine.now()
            if now is not None and now > lin[0]:
                del self.lingering[query_id]
                return []
            return [lin[2]]
        return []

    def scale_rate(self, query_id: str, ts: np.ndarray | None = None) -> float | np.ndarray:
        """The rate the query's COUNT and SUM results are to be scaled by (1/rate): the rate the rows its
        window holds were sampled at (``realised_rate``: its drops' rate once the window holds only rows
        read since the rate was set; 1 when it was never shed), times the
        sampling rate p_L p_R of every join of kind reservoir under its top aggregate
        (``dsms/operators/join_kind.py``). Another approximate entity that aggregates its own sample scales
        what it samples itself. With ``ts`` (the result rows' instants) the rate is per row: a join's input
        counts only from the instant its sample took effect, since rows before it were computed from exact
        state (a result computed just before a switch may be delivered after it)."""
        p: float | np.ndarray = 1.0
        if query_id in self.history and self.selection_edge(query_id) is None:
            # (promising regions drop whole regions of a selection: nothing to scale)
            if ts is None:
                now = self.engine.now()
                p = float(self.realised_rate(query_id, 0 if now is None else now)[0])
            else:
                p = self.realised_rate(query_id, ts)
                if np.all(p >= 1.0):
                    p = 1.0
        joins = self._joins.get(query_id)
        if joins is None:
            joins = self._joins[query_id] = sampling_joins(self.engine, query_id)
        rate: float | np.ndarray = p
        for j in joins:
            if j.gates[0] is not None or j.gates[1] is not None:
                rate = rate * (j.sampling_rate() if ts is None else j.sampling_rates_at(ts))
        return np.clip(rate, 1e-12, 1.0) if isinstance(rate, np.ndarray) else min(1.0, max(rate, 1e-12))

    def scaled(self, query: Any, batch: Batch) -> Batch:
        """``batch`` of the query's results with its COUNT and SUM columns scaled by 1/rate for each row
        (``scale_rate``); the batch itself when nothing is to be scaled."""
        return self.scale(query, batch, self.scale_rate(query.id, batch.ts))

    def scale(self, query: Any, batch: Batch, p: float | np.ndarray) -> Batch:
        """The query's result batch with its COUNT and SUM columns scaled by 1/p (one rate, or one per row;
        AVG is not: a ratio of two scaled sums is the unscaled ratio). Other columns are left as they are."""
        cols = scaled_columns(query.node)
        if not cols or np.min(p, initial=1.0) >= 1.0:
            return batch
        out = list(batch.cols)
        for k in cols:
            c = out[k]
            out[k] = np.rint(c / p).astype(c.dtype) if c.dtype.kind in "iu" else c / p
        b = Batch(batch.ts, batch.sign, out)
        b.approx = batch.approx
        return b

    # ------------------------------------------------------------------ the control loop

    def can_shed(self) -> bool:
        """Whether some registered query could be shed (an aggregate with an error bound over one input, or a
        selection-only query)."""
        return any(self.profile(q) is not None or self.selection_edge(q) is not None
                   for q in self.engine.query_list)

    def force(self, reason: str) -> None:
        """The server is over its backlog or memory limits with shedding on: shed harder at the next step."""
        self.forced = reason

    def measure(self) -> dict[str, float] | None:
        """Each query's demand since the last measurement: CPU seconds per second its operators would use at
        full rate, from their cost per tuple and the tuples they read over the ``clock`` time passed (an
        operator shared by k queries counts 1/k for each), divided by the rate the query was shed at, and
        times the rows that arrived on its input over the rows read from it (a growing backlog means the
        arrivals ask more than what was processed). Besides, the calibration (``factor``: the ``busy`` time
        passed over the modelled time at the rates in force, observed when the engine was busy at least
        ``MIN_BUSY`` of the time) and the input lag (rows waiting in the input queues times the engine time
        per row read). None at the first call, which only starts the clock."""
        eng = self.engine
        now = self.clock()
        busy = float(self.busy())
        seen = {op.id: (op.tuples_in, op.cost_ns_per_tuple) for op in eng.ops}
        offered = sum(s.kept + s.dropped for s in self.placed.values())     # rows the drops read
        srcs = {id(s.queue): s.queue for s in eng.sources.values()}
        inputs = {k: (q.tuples_in, q.tuples) for k, q in srcs.items()}
        last, self._last = self._last, (now, seen, {"offered": offered, "busy": busy, "inputs": inputs})
        self._offered_moved = last is not None and offered != last[2].get("offered", offered)
        for q in eng.query_list:
            if q not in self.origin:
                self._note_origin(q)
        if last is None:
            return None
        dt = max(now - last[0], 1e-3)
        self._dt = dt
        ratio: dict[int, float] = {}              # input queue -> rows arrived / rows read from it
        read_all = 0
        for k, (tin, held) in inputs.items():
            prev = last[2].get("inputs", {}).get(k)
            if prev is None:
                continue
            arrived = tin - prev[0]
            read = arrived - (held - prev[1])
            read_all += read
            if arrived > 0 and read > 0:
                ratio[k] = arrived / read
        demand: dict[str, float] = {q: 0.0 for q in eng.query_list}
        backlog: dict[str, float] = {}
        model = 0.0
        for op in eng.ops:
            if ratio:
                r = max((ratio.get(id(q), 0.0) for q in op.input_queues), default=0.0)
                if r > 0.0:
                    for q in op.owners:
                        backlog[q] = max(backlog.get(q, 0.0), r)
            prev = last[1].get(op.id)
            if prev is None or not op.owners:
                continue
            ns = (op.tuples_in - prev[0]) * self._unit(op) / 1e9 / dt
            model += ns
            share = ns / len(op.owners)
            for q in op.owners:
                if q in demand:
                    demand[q] += share / max(self.effective(q), 1e-6)
        for q, r in backlog.items():
            if q in demand:
                demand[q] *= r
        if model > 0.0:                           # (nothing processed is no news: see step)
            prev_demand, self._demand = self._demand, {}
            for q, d in demand.items():           # smoothed as the factor is: input that arrives in
                if q in prev_demand:              # batches makes one step's figure jump
                    d = prev_demand[q] + SMOOTHING * (d - prev_demand[q])
                demand[q] = self._demand[q] = d
        spent = busy - last[2].get("busy", busy)
        self.model, self.realised = model, spent / dt
        if model > 0.0 and spent >= MIN_BUSY * dt:
            self.observe(spent / dt / model)
        if read_all > 0 and spent > 0.0:
            self._row_cost = spent / read_all
        held_all = sum(q.tuples for q in srcs.values())
        self.lag = held_all * self._row_cost if self._row_cost is not None else 0.0
        return demand

    def _unit(self, op: Any) -> float:
        """The operator's cost per tuple for the model: its measured cost (``cost_ns_per_tuple``, decayed
        totals of run time over tuples read) while no query it serves is shed, and the last such figure
        while one is. A shed operator reads few tuples per run and its per-run costs (its output per group,
        which does not shrink with the rate) then inflate the per-tuple figure, which would make the queries
        shed hardest look the most expensive and be shed harder still; held at its unshed value, the
        per-tuple cost is the cost that scales with the rate, and what does not scale is in the calibration
        ``factor``."""
        c = float(op.cost_ns_per_tuple)
        prev = self.unit_cost.get(op.id)
        if prev is not None and any(q in self.rates for q in op.owners):
            return prev
        if c > 0.0:
            self.unit_cost[op.id] = c
        return c

    def observe(self, ratio: float) -> None:
        """One observation of realised engine time over modelled time: folded into ``factor`` (the first one
        taken as it is, then an EWMA of weight ``SMOOTHING``)."""
        ratio = min(max(float(ratio), 1e-6), 1e6)
        self.factor = ratio if not self.calibrated else self.factor + SMOOTHING * (ratio - self.factor)
        self.calibrated = True

    def step(self, capacity: float = 1.0, threshold: float | None = None,
             demand: dict[str, float] | None = None, busy: float | None = None) -> None:
        """Decide on the demand (``measure()``'s, or the one given: query id -> CPU seconds per second at full
        rate): shed when its total passes what the capacity leaves, ``threshold * capacity / factor``
        (``threshold`` None: the system's ``load_threshold``, read at every step), less what working off an
        input backlog above ``lag_target`` takes, or when the server is over its limits; stop when the demand
        fits again. ``busy`` (with a given demand): the engine time per second realised at the rates in
        force, observed into ``factor`` as ``measure`` does."""
        eng = self.engine
        moved = False
        dt = None
        if demand is None:
            demand = self.measure()
            if demand is None:
                return
            moved = self._offered_moved
            dt = self._dt
        elif busy is not None:
            model = sum(float(d) * self.effective(q) for q, d in demand.items())
            if model > 0.0 and busy > 0.0:
                self.observe(busy / model)
        demand = {q: float(demand.get(q, 0.0)) for q in eng.query_list}
        self.load = sum(demand.values())
        target = eng.system.lag_target
        lagging = dt is not None and self.lag > target
        if self.load <= 0.0 and self.forced is None and not moved and not lagging:
            return                                # nothing was processed: no news, the rates stay
        # (rows the drops read and all dropped measure no demand: the drops go, and the next step measures
        # the demand unshed)
        thr = eng.system.load_threshold if threshold is None else threshold
        if self.forced is not None:               # over memory or backlog: aim below the present demand
            self.squeeze = max(0.05, self.squeeze * 0.5)
            self.forced = None
        else:
            self.squeeze = min(1.0, self.squeeze * 1.5)
        room = thr * capacity
        if lagging:
            room = max(MIN_ROOM * room, room - (self.lag - target) / (LAG_STEPS * dt))
        self.room = room
        cap = room / self.factor
        if self.squeeze < 1.0:
            cap = min(cap, self.load * self.squeeze)
        self.planned = cap
        if self.load <= cap:
            if self.rates:
                self.shed({})
            return
        self.shed(self.allocate(demand, cap))

    def allocate(self, demand: dict[str, float], cap: float) -> dict[str, float]:
        """The rates for ``demand`` within the model capacity ``cap``: ``allot`` (BDM04 across the aggregates,
        one share for the selections)."""
        eng = self.engine
        profiles = {q: p for q in demand if (p := self.profile(q)) is not None}
        weights = {q: eng.query_list[q].weight for q in demand}
        return allot(demand, profiles, weights, cap, {q for q in demand if self.selection_edge(q) is not None})


def sampling_joins(engine: Any, query_id: str) -> list:
    """The joins whose sample COUNT and SUM of the query's top aggregate count: from the query's output back
    through netting, projections and filters to its aggregate, then under it through projections, filters,
    windows and joins (another aggregate, DISTINCT or set operation in between ends the path: what it
    computes is not a sum of pairs)."""
    query = engine.query_list.get(query_id)
    if query is None:
        return []
    producer = {id(op.output): op for op in engine.ops if op.output is not None}
    op = producer.get(id(query.reader.queue))
    while op is not None and op.kind in ("changelog", "to_stream", "project", "select"):
        op = producer.get(id(op.input_queues[0]))
    if op is None or op.kind != "aggregate":
        return []
    joins, todo = [], list(op.input_queues)
    while todo:
        below = producer.get(id(todo.pop()))
        if below is None:
            continue
        if below.kind == "join" and hasattr(below, "gates"):
            joins.append(below)
        if below.kind in ("join", "project", "select", "range_window"):
            todo += below.input_queues
    return joins


def scaled_columns(node: Any) -> list[int]:
    """Output positions of a query that are COUNT or SUM of its top aggregate, through projections that
    only pick columns and through filters (HAVING); [] when the query has no such aggregate on top."""
    if isinstance(node, L.ToStream | L.Changelog):
        node = node.child
    picks: list[int] | None = None
    while True:
        if isinstance(node, L.Filter):
            if node.keep is not None:           # a selection that outputs some columns picks them
                pos = list(node.keep)
                picks = pos if picks is None else [pos[i] if i >= 0 else -1 for i in picks]
            node = node.child
        elif isinstance(node, L.Project):
            pos = []
            for e in node.exprs:
                name = getattr(e, "name", None)
                if type(e).__name__ != "ColumnRef" or not str(name).startswith("$"):
                    pos.append(-1)
                else:
                    pos.append(int(name[1:]))
            picks = pos if picks is None else [pos[i] if i >= 0 else -1 for i in picks]
            node = node.child
        else:
            break
    if not isinstance(node, L.Aggregate):
        return []
    g = len(node.group)
    agg_cols = {g + k for k, (f, _, d) in enumerate(node.aggs) if f in SCALED and not d}
    if picks is None:
        return sorted(agg_cols)
    return [i for i, src in enumerate(picks) if src in agg_cols]
