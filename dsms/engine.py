"""The engine: catalog, input queues, the operator network of all registered queries, and the run loop.

Source: SPEC section 5 (the embedded API) and digest-004 sections 2.C-2.E (queries become a shared network of
operators, queues and synopses). The engine is synchronous and deterministic: push input, call ``run()``, read
output. Only application timestamps decide results; nothing here reads the wall clock for semantics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from time import perf_counter

import numpy as np

from control_tables import Knob, Registry
from dsms import introspect
from dsms.allocator import keep_freed_memory
from dsms.approx import Approx, combine
from dsms.batch import (
    ApproxElement,
    Batch,
    Element,
    Heartbeat,
    column_bytes,
    filler_buffer,
    from_rows,
    insert_signs,
)
from dsms.catalog import Catalog, QueryDef, RelationDef, StreamDef
from dsms.config import ConfigError, load_config
from dsms.cql import ast
from dsms.cql.parser import parse
from dsms.errors import ConflictError, CQLError, InputError, ResultOverflowError, SchemaError
from dsms.load_shedder import LoadShedder
from dsms.memory_governor import MemoryGovernor
from dsms.operators.base import Operator
from dsms.operators.columns_read import unread_columns
from dsms.operators.netting import ChangelogOp
from dsms.plan import logical as L
from dsms.plan.binder import Binder
from dsms.plan.explain import explain_text, explain_xml, plan_entities
from dsms.plan.physical import PhysicalPlanner
from dsms.plan.rules import optimize
from dsms.plan.rules.reduce_for_approximation import reduce_for_approximation
from dsms.plan.rules.share_join_prefix import share_join_prefix
from dsms.plan.view_demand import plan_leaves, replayable
from dsms.plan.xml_plan import plan_from_xml, plan_to_xml
from dsms.queues import Queue, QueueReader
from dsms.system import EngineSystem
from dsms.types import ColumnCheck, check_timestamps, numpy_dtype, to_ticks, typed_columns

DEFAULTS: dict = {"seed": 0, "batch_budget": 64, "policy": "chain", "statistics": True}


def stream_time(s: ast.RegisterStream) -> str:
    """"event" or "arrival": as written, else arrival for an MQTT source without a TIMESTAMP field (its
    messages carry no time), else event (docs/cql.md, "Event time and arrival time")."""
    if s.time is not None:
        return s.time.lower()
    return "arrival" if s.source is not None and not s.source.timestamp_field else "event"


class Query:
    """A registered continuous query; ``drain()`` returns and removes the results produced so far."""

    def __init__(self, engine: Engine, qdef: QueryDef, reader: QueueReader, node) -> None:
        self.engine = engine
        self.definition = qdef
        self.reader = reader
        self.node = node
        self._overflows_seen: dict[str, int] = {}     # per operator: overflow messages already raised
        #: the static approximation asked for at registration ({"window": f, "sample": g}; empty: none)
        self.reduction: dict[str, float] = {}
        self.weight = 1.0                        # the load shedder weighs this query's error by it
        self.registered_at = engine.now()        # None before any input (the load shedder's origin)
        self.approx: Approx | None = None        # as of the last ``approximation()``
        self.approx_since: int | None = None     # application time the query became exact or approximate
        #: a view whose plan is built when first read (``Engine.materialise``, dsms/plan/view_demand.py)
        self.deferred = False

    def read_now(self) -> None:
        """A view waiting to be read (``deferred``) is read now: built (``Engine.materialise``) and run, so
        that its results so far are there for a drain or its contents."""
        if self.deferred:
            self.engine.materialise(self.id)
            self.engine.run()

    def approximation(self) -> Approx | None:
        """What the results produced now are: None when exact, else their combined approximation
        (``dsms.approx``: asked of every entity upstream of the output). Also updates ``approx_since``,
        the application time of the last change between exact and approximate."""
        a = self.engine.query_approximation(self.id)
        if (a is None) != (self.approx is None):
            self.approx_since = self.engine.now()
        self.approx = a
        return a

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def name(self) -> str | None:
        return self.definition.name

    @property
    def kind(self) -> str:
        return self.definition.kind

    @property
    def schema(self) -> list[tuple[str, str]]:
        return list(self.definition.columns)

    @property
    def text(self) -> str:
        return self.definition.text

    def drain_batches(self) -> list[Batch]:
        """Results as columnar batches (cheaper than ``drain`` for large outputs). A batch produced while
        the query is approximate carries it as ``batch.approx`` (exact ones: None)."""
        out = []
        eng = self.engine
        self.read_now()
        shedder = eng.shedder
        if self.approx is None and eng._approx_sources.get(self.definition.id) == [] and not shedder.placed \
                and not shedder.lingering:
            approx = None          # ``approximation()``'s answer, without the calls: nothing upstream can be
        else:                      # approximate and the query was exact (asked at every drain; issue 15)
            approx = self.approximation()
        while True:
            item = self.reader.get()
            if item is None:
                return out
            if isinstance(item, Batch):
                if approx is not None:           # a copy: the batch may be read by others too
                    item = Batch(item.ts, item.sign, item.cols)
                    item.approx = approx
                    item = self.engine.shedder.scaled(self, item)
                out.append(item)

    def drain_items(self) -> list[Batch | Heartbeat]:
        """Results as batches with the heartbeats between them (a reader that forwards time, like the
        server's streams, needs both)."""
        self.read_now()
        out = []
        while True:
            item = self.reader.get()
            if item is None:
                return out
            out.append(item)

    def drain(self) -> list[Element]:
        """The results produced so far, as elements. Raises :class:`ResultOverflowError` first if an INT SUM of
        the query left int64 since the last drain (the rows concerned are left out; the next drain returns
        the rest, dsms/operators/int_sums.py)."""
        self._raise_overflows()
        names = [c for c, _ in self.definition.columns]
        out: list[Element] = []
        for b in self.drain_batches():
            if b.approx is None:
                for t, s, row in zip(b.ts.tolist(), b.sign.tolist(), b.rows()):
                    out.append(Element(t, s, dict(zip(names, row))))
            else:
                for t, s, row in zip(b.ts.tolist(), b.sign.tolist(), b.rows()):
                    out.append(ApproxElement(t, s, dict(zip(names, row)), b.approx))
        return out

    def _raise_overflows(self) -> None:
        seen = self._overflows_seen
        new: list[str] = []
        for op in self.engine.ops:
            errors = getattr(op, "overflow_errors", None)
            if errors and self.id in op.owners and len(errors) > seen.get(op.id, 0):
                new += errors[seen.get(op.id, 0):]
                seen[op.id] = len(errors)
        if new:
            raise ResultOverflowError("; ".join(new))

    def __repr__(self) -> str:
        return f"Query({self.id}, {self.kind}, {self.schema})"


class Source:
    """An input stream or relation: its queue, its time frontier, and (for a relation) its contents."""

    def __init__(self, obj: StreamDef | RelationDef, queue: Queue) -> None:
        self.obj = obj
        self.queue = queue
        self.names = [c for c, _ in obj.columns]
        self.types = [t for _, t in obj.columns]
        self.dtypes = [numpy_dtype(t) for t in self.types]
        self.check = ColumnCheck(obj.columns)  # numpy columns pushed as they are stored, checked fast
        self.frontier: int | None = None       # nothing below this may arrive
        self.contents: dict[tuple, list[int]] = {}   # relations only: row -> insert times of live copies
        self.version = 0                             # relations only: bumped by every applied change
        self.elements_in = 0
        self.first_ts: int | None = None       # the first timestamp it received (the load shedder's origin)
        #: streams only: positions of the columns no reader of the queue reads (``Engine._input_batch``), as
        #: of ``unread_gen`` and ``unread_readers`` (the plan's generation and the queue's readers)
        self.unread: list[tuple[int, np.ndarray]] = []       # (position, the buffer its fillers are views of)
        self.unread_known: list[int | None] = []             # the batch's col_bytes: 0 for a filler
        self.unread_gen = -1
        self.unread_readers: list = []
        self.row_bytes = 9                     # bytes a row of its batch holds outside the string columns read
        self.string_read: list[int] = []       # the string columns read (sampled for their bytes)
        self.stream = obj.kind == "stream"


@dataclass
class RelationChange:
    """Relation changes validated by ``Engine.prepare_update``, not applied yet: one batch per instant
    (inserts first), ``order`` maps their rows back to the positions given, and ``touched`` is the new
    contents of the rows they touch, valid while the relation's ``version`` is the one recorded."""

    batches: list[Batch]
    order: np.ndarray
    version: int
    touched: dict[tuple, list[int]]

    def __len__(self) -> int:
        return sum(len(b) for b in self.batches)


class Engine:
    """The embedded engine (SPEC section 5)."""

    def __init__(self, config: Mapping | None = None) -> None:
        keep_freed_memory()                 # large numpy arrays without page faults each time (dsms/allocator.py)
        self.config = dict(DEFAULTS)
        if config:
            flat = {k: v for k, v in config.items() if k in DEFAULTS}
            rest = {k: v for k, v in config.items() if k not in DEFAULTS}
            if rest:
                # the server's settings (SPEC section 5: the same as the server's): validated as the server
                # validates them; the engine reads its [engine] table and ignores the rest
                try:
                    server = load_config(overrides=rest)
                except ConfigError as e:
                    raise SchemaError(str(e)) from None
                flat = {**server.values["engine"], **flat}
            self.config.update(flat)
        self.catalog = Catalog()
        self.sources: dict[str, Source] = {}
        self.ops: list[Operator] = []
        self.queues: list[Queue] = []
        self.query_list: dict[str, Query] = {}
        self.planner = PhysicalPlanner(self)
        self.input_epoch = 0
        self._next = {"q": 0, "seed": 0}
        self.registry = Registry(clock=self.now)
        self.system = self.registry.add(EngineSystem(self))
        self.policy = None
        self.shedder = LoadShedder(self)
        self.busy_seconds = 0.0            # wall time spent in run(): what the load shedder calibrates against
        self.governor = self.registry.add(MemoryGovernor(self), id=self.GOVERNOR_ID)
        self._approx_sources: dict[str, list] = {}     # per query: its entities that define approximation()
        self._run_cache: tuple | None = None      # what ``run`` needs of the plan (``_run_plan``)
        self._plan_gen = 0                        # bumped by every plan change (``Source.unread_gen``)
        if self.config["policy"] != self.system.policy:
            self.system.set("policy", self.config["policy"])      # validated like any knob write
        else:
            self.set_policy(self.system.policy)

    # ---------------------------------------------------------------- ids and plumbing for the planner

    def _id(self, prefix: str) -> str:
        self._next[prefix] += 1
        return f"{prefix}{self._next[prefix]}"

    def id_counters(self) -> dict[str, dict[str, int]]:
        """Where the next ids come from (queries, SAMPLE seeds, each entity kind). The server records them with
        every catalog change, so that recovery gives later objects the ids they had even when an earlier change
        no longer applies."""
        return {"engine": dict(self._next), "entities": self.registry.counters()}

    def advance_id_counters(self, counters: Mapping[str, Mapping[str, int]]) -> None:
        """Move the id counters to at least ``counters`` (from :meth:`id_counters`); never back."""
        for k, v in (counters.get("engine") or {}).items():
            if k in self._next:
                self._next[k] = max(self._next[k], int(v))
        self.registry.advance(counters.get("entities") or {})

    def new_queue(self) -> Queue:
        q = self.registry.add(Queue())
        self.queues.append(q)
        return q

    def retire_queue(self, q: Queue) -> None:
        """Take a queue out of the plan's entities (a window fused into a join needs no output queue)."""
        self.queues.remove(q)
        self.registry.remove(q.id)

    def restore_queue(self, q: Queue) -> None:
        """Put a retired queue back, with its id."""
        self.registry.add(q)
        self.queues.append(q)

    def next_seed(self) -> int:
        self._next["seed"] += 1
        return hash((self.config["seed"], self._next["seed"])) & 0xFFFFFFFF

    def add_operator(self, op: Operator, query_id: str) -> None:
        op.keep_stats = bool(self.config["statistics"])
        self.registry.add(op)
        op.owners.add(query_id)
        for syn in op.synopses:
            syn.owners = op.owners            # a synopsis is used by whoever uses its operator
            self.registry.add(syn)
        op.epoch = self.input_epoch
        self.ops.append(op)
        op.announce_frontier()

    def discard_operator(self, op: Operator, keep_output: bool = False) -> None:
        """Take an operator (and, unless kept, its output queue) out of the plan: the planner replaced it
        before any input reached it (docs/architecture.md, "Projection pushdown and sharing")."""
        op.close()
        self.registry.remove(op.id)
        for syn in op.synopses:
            if syn is not getattr(op, "shared_store", None):
                self.registry.remove(syn.id)
        self._leave_shared_store(op)
        self.ops = [o for o in self.ops if o is not op]
        if not keep_output and op.output in self.queues:
            self.retire_queue(op.output)

    def replace_operator(self, old: Operator, new: Operator) -> None:
        """``new`` writes where ``old`` wrote, for the same queries; ``old`` leaves the plan."""
        self.discard_operator(old, keep_output=True)
        owners = sorted(old.owners)
        self.add_operator(new, owners[0])
        new.owners.update(owners)
        writers = {id(op.output): op for op in self.ops}
        order: list[Operator] = []
        placed: set[int] = set()

        def place(op: Operator) -> None:      # producers first again: ``new`` reads a queue built after it
            if id(op) not in placed:
                placed.add(id(op))
                for q in op.input_queues:
                    if id(q) in writers:
                        place(writers[id(q)])
                order.append(op)
        for op in self.ops:
            place(op)
        self.ops = order

    def source_queue(self, name: str) -> Queue:
        return self.sources[name.lower()].queue

    def query_output_queue(self, qid: str) -> Queue:
        self.materialise(qid)
        return self.query_list[qid].reader.queue

    def _build(self, root, qid: str) -> Queue:
        """The physical plan of ``root``, after the waiting views it reads (``materialise``)."""
        for leaf in plan_leaves(root, self.planner._view_root):
            if isinstance(leaf, L.QueryOutput) and leaf.query_id in self.query_list:
                self.materialise(leaf.query_id)
        return self.planner.build(root, qid)

    def materialise(self, qid: str) -> None:
        """Build the plan of a view that was waiting to be read (``dsms/plan/view_demand.py``): a query's plan,
        a reader or ``drain`` reads it now. Its sink writes from now on where its reader reads; its first run
        replays its inputs' kept contents, so its results are the ones it would have produced since it was
        registered. Nothing to do for any other query."""
        query = self.query_list[qid]
        if not query.deferred:
            return
        out = self._build(query.node, qid)
        old = query.reader.queue
        old.detach(query.reader)
        query.reader = out.reader()
        query.deferred = False
        if old in self.queues:
            self.retire_queue(old)
        self._plan_changed()

    def relation_snapshot(self, name: str) -> Batch | None:
        """The live rows of a base relation, stamped with their insert times, for a newly built plan."""
        src = self.sources[name.lower()]
        pairs = sorted(((t, r) for r, times in src.contents.items() for t in times), key=lambda p: p[0])
        if not pairs:
            return None
        return from_rows([t for t, _ in pairs], [1] * len(pairs), [r for _, r in pairs], src.dtypes)

    def view_snapshot(self, qid: str) -> Batch | None:
        """The current contents of a relation-valued query (a view), for a newly built plan."""
        self.materialise(qid)
        for op in self.ops:
            if isinstance(op, ChangelogOp) and op.output is self.query_list[qid].reader.queue:
                return op.snapshot()
        return None

    def contents(self, query_id: str) -> list[tuple]:
        """The current contents of a relation-valued query: every row its results have inserted and not
        deleted (a row held twice is listed twice), as of the results produced so far. The server sends them
        to a new reader before the changelog (docs/http-api.md)."""
        q = self.query(query_id)
        if q.kind != L.RELATION:
            raise SchemaError(f"query '{query_id}' is a stream; only a relation has contents")
        q.read_now()
        for op in self.ops:
            if isinstance(op, ChangelogOp) and op.output is q.reader.queue:
                live = op.snapshot()
                return list(live.rows()) if live is not None else []
        return []

    # ---------------------------------------------------------------- statements

    def execute(self, text: str):
        """Run one or more CQL statements; returns the result of each (one statement: its result alone)."""
        if not isinstance(text, str):
            raise CQLError("a statement must be a string")
        try:
            stmts = parse(text)
            results = [self._execute(s, text if len(stmts) == 1 else None) for s in stmts]
        except RecursionError:
            raise CQLError("the statement is nested too deeply to plan") from None
        return results[0] if len(results) == 1 else results

    def _execute(self, s, text: str | None):
        if isinstance(s, ast.RegisterStream | ast.RegisterRelation):
            cols = self._columns(s)
            obj = StreamDef(s.name, cols, s.source, time=stream_time(s)) if isinstance(s, ast.RegisterStream) \
                else RelationDef(s.name, cols)
            self.catalog.add(s.name, obj)
            q = self.new_queue()
            self.sources[s.name.lower()] = Source(obj, q)
            return obj
        if isinstance(s, ast.RegisterQuery):
            return self._register(s.query, s.name, text, publish=s.publish_topic, approximate=dict(s.approximate))
        if isinstance(s, ast.RegisterView):
            return self._register(s.query, s.name, text, view=True)
        if isinstance(s, ast.QueryStatement):
            return self._register(s.query, None, text)
        if isinstance(s, ast.Drop):
            return self.drop(s.name, s.kind)
        if isinstance(s, ast.Show):
            return introspect.show(self, s.what)
        if isinstance(s, ast.Describe):
            return introspect.describe(self, s.name)
        if isinstance(s, ast.Explain):
            return introspect.explain(self, s)
        raise CQLError(f"unsupported statement {type(s).__name__}")

    @staticmethod
    def _columns(s) -> list[tuple[str, str]]:
        seen = set()
        cols = []
        for c in s.columns:
            if c.name.lower() in seen:
                raise SchemaError(f"column '{c.name}' is declared twice in '{s.name}'")
            seen.add(c.name.lower())
            cols.append((c.name, c.type))
        if not cols:
            raise SchemaError(f"'{s.name}' needs at least one column")
        return cols

    def _register(self, query, name: str | None, text: str | None, view: bool = False,
                  publish: str | None = None, approximate: dict[str, float] | None = None) -> Query:
        if name is not None and self.catalog.get(name) is not None:
            raise ConflictError(f"'{name}' is already registered")
        binder = Binder(self.catalog, {})
        bound = binder.bind_statement_query(query, as_view=view)
        node = bound.node
        if approximate:                  # static approximation (R-APX-02): smaller windows, lower samples
            node = reduce_for_approximation(node, approximate.get("WINDOW", 1.0), approximate.get("SAMPLE", 1.0))
        node = optimize(share_join_prefix(node, self.planner.shareable_joins()))
        root = node if bound.kind == L.STREAM else L.Changelog(node, names=bound.names)
        query = self._install(root, bound.kind, list(zip(bound.names, bound.types)), name, text or "",
                              set(binder.depends), view, publish)
        query.reduction = {k.lower(): v for k, v in (approximate or {}).items()}
        return query

    def _install(self, root, kind: str, columns: list[tuple[str, str]], name: str | None, text: str,
                 depends: set[str], view: bool = False, publish: str | None = None) -> Query:
        """Build the physical plan of a bound (or loaded) logical plan and register the query.

        The input already pushed is processed first (as the server quiesces before a catalog change), so the
        new query's readers start after it wherever they attach: on a source queue, or on the output of a
        stateless operator or derived stream it shares, which would otherwise still hand it elements that
        arrived before the query (contract, "Registration time"; what a query sees does not depend on when
        ``run()`` was called)."""
        self.run()
        qid = self._id("q")
        views = {q.id: q.definition.inputs for q in self.query_list.values()}
        qdef = QueryDef(qid, name, text, kind, columns, is_view=view, monotone=root.monotone,
                        publish_topic=publish, depends_on=depends,
                        inputs=L.input_leaves(root, views) if kind == L.RELATION else ())
        deferred = view and replayable(root, self.planner._view_root)
        try:
            out = self.new_queue() if deferred else self._build(root, qid)
        except Exception:
            for op in self.planner.release(qid):
                op.close()
            for op in self.ops:               # what was built for it alone (what it widened stays, for the
                if not op.owners:             # queries that read it now)
                    for e in [op, *op.synopses]:
                        if e.id in self.registry:
                            self.registry.remove(e.id)
            self.ops = [op for op in self.ops if op.owners]
            self._forget_unused_queues()      # and the queues it made: a failed statement leaves nothing
            self._next["q"] -= 1              # the next query gets the id this one would have had
            self._plan_changed()
            raise
        query = Query(self, qdef, out.reader(), root)
        query.deferred = deferred
        self.query_list[qid] = query
        if name is not None:
            self.catalog.add(name, qdef)
        self._plan_changed()
        return query

    # ---------------------------------------------------------------- control tables

    def now(self) -> int | None:
        """The application time: the largest frontier over the inputs (None before any input)."""
        fs = [s.frontier for s in self.sources.values() if s.frontier is not None]
        return max(fs) if fs else None

    def entities(self, query: str | None = None) -> list[dict]:
        """Every entity's control table (or those of one query's plan: its operators and their queues)."""
        if query is None:
            return [e.get() for e in self.registry]
        q = self.query(query)
        ids: list[str] = []
        for op in self.ops:
            if q.id in op.owners:
                for x in [*op.input_queues, op, *op.synopses, *([op.output] if op.fused is None else [])]:
                    if x.id not in ids:
                        ids.append(x.id)
        return [self.registry.get(i).get() for i in ids]

    def entity(self, entity_id: str):
        """One entity (``op:3``, ``queue:5``, ``sys:0``): ``.get()``, ``.set(attr, value)``, ``.history()``.
        Raises ``control_tables.ControlTableError`` (a ValueError) for an unknown id."""
        return self.registry.get(entity_id)

    def set(self, entity_id: str, attr: str, value) -> None:
        """Write a knob, validated and recorded in the change history; an invalid write changes nothing."""
        self.registry.set(entity_id, attr, value)

    def _leave_shared_store(self, op: Operator) -> None:
        """A dropped window leaves its input's shared store; the store goes when its last window does."""
        store = getattr(op, "shared_store", None)
        if store is None:
            return
        store.members = [m for m in store.members if m is not op.store]
        holders = [o for o in self.ops if getattr(o, "shared_store", None) is store and o is not op]
        if store in op.synopses:
            op.synopses.remove(store)
            if holders:
                holders[0].synopses.append(store)
        if not holders and store.id in self.registry:
            self.registry.remove(store.id)

    POLICY_ID = "sched:0"
    GOVERNOR_ID = "mem:0"

    def set_policy(self, name: str) -> None:
        """Switch the scheduling policy (also reachable as the system's ``policy`` knob).

        The policy is an entity with its own control table, always ``sched:0`` (``GET /entities/sched:0``):
        its knobs (``budget``, ``unit``, Chain's ``drift``, Chain-Flush's ``latency_bound``, ``headroom``,
        ``cost_scale``) are read at every pick, so a write takes effect at the next one. A new policy keeps
        the values of the knobs it shares with the one it replaces (``budget`` and ``unit`` always)."""
        try:
            from scheduler import POLICIES
        except ImportError:        # the scheduler package is optional for the plan-order loop
            POLICIES = {}
        cls = POLICIES.get(name)
        old = self.policy
        knobs: dict = {"budget": self.config["batch_budget"]}
        if old is not None:
            if old.id is not None and old.id in self.registry:
                self.registry.remove(old.id)
            mine = cls.control_attributes() if cls is not None else {}
            knobs = {k: old.get(k) for k, a in old.control_attributes().items()
                     if isinstance(a, Knob) and k in mine and isinstance(mine[k], Knob)}
        self.policy = cls(**knobs) if cls is not None else None
        if self.policy is not None:
            self.registry.add(self.policy, id=self.POLICY_ID)
        self._plan_changed()

    def query_approximation(self, query_id: str) -> Approx | None:
        """The combined approximation (``dsms.approx.combine``) of what every entity upstream of the query's
        output says now: its operators and their synopses (those defining ``approximation()``) and the load
        shedder's drops on the edges into them. None when everything is exact."""
        ents = self._approx_sources.get(query_id)
        if ents is None:       # asked at every drain: the entities that can be approximate, found once per plan
            ents = self._approx_sources[query_id] = [
                e for op in self.ops if query_id in op.owners for e in (op, *op.synopses)
                if hasattr(e, "approximation")]
        shedder = self.shedder
        if not ents and not shedder.placed and not shedder.lingering:
            return None                   # asked at every drain: nothing here can be approximate
        parts = [e.approximation() for e in ents]
        parts += shedder.approximations(query_id)
        return combine(parts)

    def set_query_weight(self, query_id: str, weight: float) -> None:
        """The query's ``weight``: the load shedder minimises the largest weighted relative error, so a query
        of weight 2 gets half the error of one of weight 1 (SchemaError for a value that is not a finite
        number above 0; nothing changes then)."""
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) \
                or not 0 < weight <= 1e6:
            raise SchemaError(f"weight must be a number in (0, 1000000], not {weight!r}")
        self.query(query_id).weight = float(weight)

    def _plan_changed(self) -> None:
        self._plan_gen += 1
        self._approx_sources = {}
        self._run_cache = None
        self.shedder.plan_changed()
        if self.policy is not None:
            self.policy.plan_changed([op for op in self.ops if op.fused is None])

    # ---------------------------------------------------------------- plans

    def explain(self, query_id: str, fmt: str = "text"):
        """The query's plan: ``text``, ``json`` (a dict of operators, queues and edges) or ``xml``."""
        q = self.query(query_id)
        if fmt == "json":
            return plan_entities(self, q.id)
        if fmt == "xml":
            return explain_xml(self, q.id)
        if fmt == "text":
            return explain_text(self, q.id)
        raise SchemaError(f"unknown plan format '{fmt}' (text, json or xml)")

    def load_plan(self, xml_text: str, name: str | None = None) -> Query:
        """Register a query from a plan file (``plan_xml`` output, or ``explain(.., 'xml')`` as it is, which
        holds the logical plan in its ``<logical>`` part), without CQL (STREAM's XML plans, digest-004
        R-PLAN-02)."""
        root = plan_from_xml(xml_text)
        if not isinstance(root, L.ToStream | L.Changelog):
            raise CQLError("plan XML: the root must be a ToStream (stream result) or a Changelog (relation)")
        depends = set()
        for n in L.walk(root):
            if isinstance(n, L.StreamScan | L.RelationScan):
                src = self.sources.get(n.name)
                want = "stream" if isinstance(n, L.StreamScan) else "relation"
                if src is None or src.obj.kind != want:
                    raise SchemaError(f"plan XML: no {want} named '{n.name}'")
                if tuple(src.types) != tuple(n.types):
                    raise SchemaError(f"plan XML: '{n.name}' has types {src.types}, the plan says "
                                      f"{list(n.types)}")
                depends.add(n.name)
            elif isinstance(n, L.QueryOutput):
                if n.query_id not in self.query_list:
                    raise SchemaError(f"plan XML: no query '{n.query_id}'")
        kind = L.STREAM if isinstance(root, L.ToStream) else L.RELATION
        names = list(root.names) or [f"col{i + 1}" for i in range(len(root.types))]
        return self._install(root, kind, list(zip(names, root.types)), name, "", depends)

    def plan_xml(self, query_id: str) -> str:
        """The logical plan of a query as a loadable plan file."""
        q = self.query(query_id)
        return plan_to_xml(q.node, q.id, q.kind)

    # ---------------------------------------------------------------- catalog access

    def query(self, name_or_id: str) -> Query:
        q = self.query_list.get(name_or_id)
        if q is not None:
            return q
        for q in self.query_list.values():
            if q.name is not None and q.name.lower() == name_or_id.lower():
                return q
        raise SchemaError(f"no query '{name_or_id}'")

    def queries(self) -> list[Query]:
        return list(self.query_list.values())

    def streams(self) -> list[StreamDef]:
        return [s.obj for s in self.sources.values() if isinstance(s.obj, StreamDef)]

    def relations(self) -> list[RelationDef]:
        return [s.obj for s in self.sources.values() if isinstance(s.obj, RelationDef)]

    def drop(self, name: str, kind: str | None = None) -> str:
        """Drop a query, view, stream or relation; refused (SchemaError) while something reads it."""
        key = name.lower()
        src = self.sources.get(key)
        if src is not None and kind in (None, "STREAM", "RELATION"):
            if kind is not None and kind.lower() != src.obj.kind:
                raise SchemaError(f"'{name}' is a {src.obj.kind}, not a {kind.lower()}")
            users = [q.name or q.id for q in self.query_list.values() if key in q.definition.depends_on]
            if users:
                raise ConflictError(f"cannot drop {src.obj.kind} '{name}': used by {', '.join(users)}")
            del self.sources[key]
            self.catalog.remove(name)
            if src.queue in self.queues:
                self.queues.remove(src.queue)
                self.registry.remove(src.queue.id)
            return name
        try:
            q = self.query(name)
        except SchemaError:
            raise SchemaError(f"nothing named '{name}' to drop") from None
        self._check_drop_kind(q, name, kind)
        if q.name is not None:
            users = [o.name or o.id for o in self.query_list.values()
                     if o is not q and q.name.lower() in o.definition.depends_on]
            if users:
                raise ConflictError(f"cannot drop '{name}': used by {', '.join(users)}")
        freed = self.planner.release(q.id)
        for op in freed:
            op.close()
            self.registry.remove(op.id)
            for syn in op.synopses:
                if syn is getattr(op, "shared_store", None):
                    continue
                self.registry.remove(syn.id)
            self._leave_shared_store(op)
        freed_set = set(map(id, freed))
        self.ops = [op for op in self.ops if id(op) not in freed_set]
        q.reader.queue.detach(q.reader)
        q.deferred = False                    # a view never built: its waiting output queue goes too
        self._forget_unused_queues()
        self._plan_changed()
        del self.query_list[q.id]
        if q.name is not None:
            self.catalog.remove(q.name)
        return q.id

    def _forget_unused_queues(self) -> None:
        """Take out of the plan every queue that no operator writes and that is no input's."""
        live = {id(op.output) for op in self.ops} | {id(s.queue) for s in self.sources.values()}
        live |= {id(q.reader.queue) for q in self.query_list.values() if q.deferred}
        for x in self.queues:
            if id(x) not in live and x.id in self.registry:
                self.registry.remove(x.id)
        self.queues = [x for x in self.queues if id(x) in live]

    @staticmethod
    def _check_drop_kind(q: Query, name: str, kind: str | None) -> None:
        """DROP VIEW drops a view; DROP QUERY a query or a view (a view is a named query); DROP STREAM a
        stream-valued query (PIPES' ``CREATE STREAM x AS ...`` makes one); DROP RELATION never a query."""
        is_view = q.definition.is_view
        ok = (kind is None or kind == "QUERY" or (kind == "VIEW" and is_view)
              or (kind == "STREAM" and q.kind == "stream" and not is_view))
        if not ok:
            what = "a view" if is_view else f"a {q.kind}-valued query"
            raise SchemaError(f"'{name}' is {what}, not a {kind.lower()}; use DROP {'VIEW' if is_view else 'QUERY'}")

    # ---------------------------------------------------------------- input

    def _source(self, name: str, want: str) -> Source:
        src = self.sources.get(name.lower()) if isinstance(name, str) else None
        if src is None:
            raise SchemaError(f"no {want} named '{name}'")
        if src.obj.kind != want:
            raise SchemaError(f"'{name}' is a {src.obj.kind}, not a {want}")
        return src

    def push(self, name: str, rows: Sequence[Mapping] | Mapping[str, Sequence], ts: int | Sequence[int]) -> int:
        """Append elements to a stream, all or nothing. ``rows`` is a list of dicts, or columnar
        ``{"col": [...]}``. ``ts`` is one timestamp for all rows or one per row, never decreasing."""
        src = self.sources.get(name.lower()) if type(name) is str else None
        if src is None or not src.stream:
            src = self._source(name, "stream")     # raises, naming what is wrong
        got = src.check.push(rows, ts, src.frontier)     # numpy columns as stored: every check in one call
        if got is None:                                   # the general checks, with their messages
            cols, n = self._convert(src, rows)
            ts_arr = check_timestamps(src.obj.name, ts, n, src.frontier, str)     # also below the frontier
            if n == 0:
                return 0
        else:
            cols, n, ts_arr = got
        last = self._advance(src, ts_arr)
        q = src.queue
        if q._readers:
            q.put(self._input_batch(src, ts_arr, cols, n))
        else:                                     # validated all the same, but no batch is built for nobody
            q.put_unread(n, last)
        return n

    def prepare(self, name: str, rows: Sequence[Mapping] | Mapping[str, Sequence],
                ts: int | Sequence[int], *, show: Callable[[int], str] = str) -> Batch | None:
        """Validate and convert stream input without applying it (the server archives it in between);
        raises InputError naming the first bad element (``show`` writes a timestamp in its message: the
        server answers in ISO 8601 a client that sent ISO). None when there are no rows."""
        return self._prepare(self._source(name, "stream"), rows, ts, show)

    def _prepare(self, src: Source, rows, ts, show: Callable[[int], str]) -> Batch | None:
        cols, n = self._convert(src, rows)
        ts_arr = check_timestamps(src.obj.name, ts, n, src.frontier, show)
        if n == 0:
            return None
        return Batch(ts_arr, insert_signs(n), cols)

    def apply(self, name: str, batch: Batch) -> int:
        """Append a batch made by ``prepare`` (re-checking only that time has not moved past it since)."""
        return self._apply(self._source(name, "stream"), batch)

    def _apply(self, src: Source, batch: Batch) -> int:
        if src.frontier is not None and int(batch.ts[0]) < src.frontier:
            raise InputError(f"timestamp {int(batch.ts[0])} is below what '{src.obj.name}' has already passed "
                             f"({src.frontier})", index=0)
        self._advance(src, batch.ts)
        if src.queue.has_readers():
            src.queue.put(self._input_batch(src, batch.ts, list(batch.cols), len(batch), batch.sign))
        else:
            src.queue.put_unread(len(batch), src.frontier)
        return len(batch)

    def _input_batch(self, src: Source, ts: np.ndarray, cols: list[np.ndarray], n: int,
                     sign: np.ndarray | None = None) -> Batch:
        """The batch a stream's accepted rows go into its queue as (``cols``: a list of the caller's own, which
        this may change): a column that no reader of the queue reads (``columns_read``) is replaced by a
        ``filler`` of no bytes, so that it is neither counted nor kept (issue 15: the per-row cost of a
        stateless plan does not depend on the columns it does not read). A reader attached later starts after
        this batch (``Queue.reader``), so it never sees a filler. Its byte count (``Batch.nbytes``) is set here
        from the stream's layout: the numeric columns read are ``n`` times their item size, only the string
        columns read are sampled; a filler shared by the unread columns of one dtype."""
        q = src.queue
        if src.unread_gen != self._plan_gen or src.unread_readers != q._readers:    # identity first, per item
            unread = unread_columns(q, self.ops, len(src.dtypes))
            groups: dict[np.dtype, list[int]] = {}
            for j in unread:
                groups.setdefault(src.dtypes[j], []).append(j)
            src.unread = [(tuple(js), filler_buffer(dt)) for dt, js in groups.items()]
            src.unread_known = [0 if j in unread else None for j in range(len(src.dtypes))]
            read = [j for j in range(len(src.dtypes)) if j not in unread]
            src.row_bytes = 9 + sum(src.dtypes[j].itemsize for j in read if not src.dtypes[j].hasobject)
            src.string_read = [j for j in read if src.dtypes[j].hasobject]
            src.unread_gen, src.unread_readers = self._plan_gen, list(q._readers)
        b = Batch(ts, insert_signs(n) if sign is None else sign, cols)
        for js, base in src.unread:      # ``filler``, inlined
            f = base[:n] if n <= len(base) else np.broadcast_to(base[:1], (n,))
            for j in js:
                cols[j] = f
        known = list(src.unread_known)
        total = n * src.row_bytes        # ts (8 bytes a row), sign (1) and the numeric columns read
        for j in src.string_read:
            known[j] = cb = column_bytes(cols[j])
            total += cb
        b.col_bytes = known
        b._nbytes = total
        return b

    def _advance(self, src: Source, ts: np.ndarray) -> int:
        """A stream's bookkeeping for accepted elements (``ts``: theirs, checked, not empty); returns its new
        frontier."""
        if src.first_ts is None:
            src.first_ts = ts.item(0)
        src.frontier = last = ts.item(-1)
        src.elements_in += len(ts)
        self.input_epoch += 1
        return last

    def update(self, name: str, insert: Sequence[Mapping] | Mapping[str, Sequence] = (),
               delete: Sequence[Mapping] | Mapping[str, Sequence] = (), ts: int = 0) -> int:
        """Timestamped inserts and deletes on a relation, all or nothing. A delete must match a row."""
        src = self._source(name, "relation")
        if isinstance(ts, bool) or not isinstance(ts, int | np.integer | float | str):
            raise InputError(f"an update takes one integer timestamp, not {ts!r:.80}")
        ins_cols, n_ins = self._convert(src, insert)
        del_cols, n_del = self._convert(src, delete, offset=n_ins)
        check_timestamps(src.obj.name, ts, 1, src.frontier)      # also with no rows: a bad ts is refused
        n = n_ins + n_del
        if n == 0:
            return 0
        cols = [np.concatenate([a, b]) for a, b in zip(ins_cols, del_cols)]
        sign = np.concatenate([np.ones(n_ins, np.int8), -np.ones(n_del, np.int8)])
        change = self._prepare_update(src, cols, n, check_timestamps(src.obj.name, ts, n, src.frontier), sign)
        return self.apply_update(name, change)

    def prepare_update(self, name: str, rows: Sequence[Mapping] | Mapping[str, Sequence], ts: int | Sequence[int],
                       sign: Sequence[int] | None = None, *, show: Callable[[int], str] = str) -> RelationChange | None:
        """Validate relation changes without applying them (the server archives them in between): rows or
        columns as for ``push``, one timestamp or one per row (never decreasing), ``sign`` +1 (insert, the
        default) or -1 (delete) per row. Within an instant inserts come before deletes, and every delete
        must match a row live at its instant. Raises InputError naming the first bad element (timestamps
        written by ``show``, as for ``prepare``); None when there are no rows."""
        src = self._source(name, "relation")
        cols, n = self._convert(src, rows)
        ts_arr = check_timestamps(src.obj.name, ts, n, src.frontier, show)
        if sign is None:
            sign_arr = np.ones(n, np.int8)
        else:
            sign_list = list(sign)
            if len(sign_list) != n:
                raise InputError(f"{n} rows but {len(sign_list)} signs")
            for k, x in enumerate(sign_list):
                if isinstance(x, bool) or x not in (1, -1):
                    raise InputError(f"sign must be 1 (insert) or -1 (delete), not {x!r}", index=k)
            sign_arr = np.asarray(sign_list, dtype=np.int8)
        if n == 0:
            return None
        return self._prepare_update(src, cols, n, ts_arr, sign_arr)

    def _prepare_update(self, src: Source, cols: list[np.ndarray], n: int, ts: np.ndarray,
                        sign: np.ndarray) -> RelationChange:
        order = np.lexsort((-sign, ts))                 # stable: by instant, inserts before deletes
        if not (order == np.arange(n)).all():
            ts, sign, cols = ts[order], sign[order], [c[order] for c in cols]
        bounds = np.flatnonzero(np.diff(ts)) + 1
        edges = [0, *bounds.tolist(), n]
        batches = [Batch(ts[lo:hi], sign[lo:hi], [c[lo:hi] for c in cols]) for lo, hi in zip(edges, edges[1:])]
        change = RelationChange(batches, order, src.version, {})
        change.touched = self._touched(src, change)
        return change

    def _touched(self, src: Source, change: RelationChange) -> dict[tuple, list[int]]:
        """The insert times of the live copies of every row the change touches, as they will be after it;
        InputError naming the element (as given) of a delete that matches no live row."""
        touched: dict[tuple, list[int]] = {}
        k = 0
        for b in change.batches:
            t = int(b.ts[0])
            for r, s in zip(b.rows(), b.sign.tolist()):
                live = touched.get(r)
                if live is None:
                    live = touched[r] = list(src.contents.get(r, ()))
                if s > 0:
                    live.append(t)
                elif live:
                    live.pop()
                else:
                    raise InputError(f"delete of a row that is not in '{src.obj.name}': "
                                     f"{dict(zip(src.names, r))}", index=int(change.order[k]))
                k += 1
        return touched

    def apply_update(self, name: str, change: RelationChange) -> int:
        """Apply changes made by ``prepare_update`` (checked again against the relation's contents only if
        they changed since, and against time moving past them)."""
        src = self._source(name, "relation")
        first = int(change.batches[0].ts[0])
        if src.frontier is not None and first < src.frontier:
            raise InputError(f"timestamp {first} is below what '{src.obj.name}' has already passed "
                             f"({src.frontier})", index=0)
        touched = change.touched if change.version == src.version else self._touched(src, change)
        for r, live in touched.items():
            if live:
                src.contents[r] = live
            else:
                src.contents.pop(r, None)
        src.version += 1
        n = 0
        for b in change.batches:
            src.queue.put(b)
            n += len(b)
        src.frontier = int(change.batches[-1].ts[-1])
        src.elements_in += n
        self.input_epoch += 1
        return n

    def heartbeat(self, ts: int, name: str | None = None) -> None:
        """No element or update with a timestamp below ``ts`` will arrive (on ``name``, or on every input)."""
        try:
            ts = to_ticks(ts)
        except (TypeError, ValueError) as e:
            raise InputError(f"heartbeat: {e}") from None
        targets = [self._any_source(name)] if name is not None else self.sources.values()
        hb = None
        for src in targets:
            if src.frontier is None or ts > src.frontier:
                src.frontier = ts
                q = src.queue
                if not q._readers:      # what ``put`` keeps of a heartbeat nobody reads: its time (inlined,
                    if q.last_ts is None or ts > q.last_ts:     # with no heartbeat built: 0.5 us a build)
                        q.last_ts = ts
                    continue
                if hb is None:          # one (immutable) heartbeat for every input
                    hb = Heartbeat(ts)
                q.put(hb)

    def frontier(self, name: str) -> int | None:
        """What input ``name`` has passed: no element below it may arrive (None before anything did)."""
        return self._any_source(name).frontier

    def relation_size(self, name: str) -> int:
        """Rows a base relation holds now (copies counted)."""
        return sum(len(times) for times in self._source(name, "relation").contents.values())

    def backlog(self) -> int:
        """Tuples waiting for work: in every queue (input and between operators) and inside operators that
        put part of a release back for a later run (a join's bounded runs). Rows an operator holds until
        time passes them (an aggregate's instant not final yet) are state, counted by ``memory_bytes``."""
        return sum(q.tuples for q in self.queues) + sum(op.work_rows() for op in self.ops)

    def memory_bytes(self) -> int:
        """Bytes held by every queue and every synopsis (each counted once, shared ones too): what the
        system's ``memory_budget`` is compared with. Synopses count rows held inside their operators."""
        seen: set[int] = set()
        total = sum(q.bytes for q in self.queues)
        for op in self.ops:
            total += op.held_bytes()
            for syn in op.synopses:
                if id(syn) not in seen:
                    seen.add(id(syn))
                    total += syn.nbytes()
        return total

    def overloaded(self, reason: str) -> None:
        """The server is over its backlog or memory limits and shedding is on: the load shedder sheds at
        once, whatever its own load measurement says (docs/approximation.md)."""
        self.shedder.force(reason)

    def input_backlog(self) -> dict[str, int]:
        """Tuples each input's queue holds (pushed, not yet read by every operator reading it), by name."""
        return {s.obj.name: int(s.queue.tuples) for s in self.sources.values()}

    def _any_source(self, name: str) -> Source:
        src = self.sources.get(name.lower()) if isinstance(name, str) else None
        if src is None:
            raise SchemaError(f"no stream or relation named '{name}'")
        return src

    def _convert(self, src: Source, rows, offset: int = 0) -> tuple[list[np.ndarray], int]:
        """Validate and convert input rows to columns; raises InputError naming the first bad element."""
        if type(rows) is dict or isinstance(rows, Mapping):     # the ABC's check costs 0.5 us a push
            fast = src.check.exact(rows)
            if fast is not None:
                return fast
            return typed_columns(src.obj.columns, cols=rows)
        if isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
            raise InputError("rows must be a list of objects or a map of columns")
        try:
            return typed_columns(src.obj.columns, rows=list(rows))
        except InputError as e:
            if offset and e.index is not None:
                raise InputError(str(e).split(": ", 1)[-1], index=e.index + offset) from None
            raise

    # ---------------------------------------------------------------- running

    def run(self, max_steps: int | None = None, deadline: float | None = None) -> int:
        """Run operators until no operator has input waiting (or ``max_steps`` operator runs, or
        ``time.perf_counter()`` passes ``deadline``: the server's time slices); returns the number of runs. The scheduling policy (the system's ``policy`` knob) picks which ready operator runs
        next; an operator whose output queue is at its ``capacity`` is not ready. Results never depend on
        the policy: every operator is correct under any order of runs."""
        started = perf_counter()
        steps = 0
        cached = self._run_cache               # _run_plan's test, inlined: asked at every run
        ops, feeds, where = cached[1] if cached is not None and cached[0] == self.ops else self._run_plan()
        waiting = [op.ready() for op in ops]
        if True in waiting:                    # else nothing to run: no pick, no step (issue 15: a cycle's end)
            policy = self.policy
            if (waiting.count(True) == 1 and policy is not None and policy.same_budget and max_steps is None
                    and deadline is None):
                # the usual push cycle at 1,000 events a push (NEXMark q1, q2): one operator has input, and
                # often nothing reads its output but the query; ``_steps``'s first step, without its set-up
                steps = self._one_step(ops, feeds, waiting, policy)
            if True in waiting:
                steps += self._steps(ops, feeds, where, waiting, max_steps, deadline)
        if max_steps is None and deadline is None:
            gov = self.governor                # ``armed`` first without a call: off unless it holds state or
            if (gov.held or gov._knob_auto_kind) and gov.armed():      # switches on its own
                gov.step()                     # in-process, a run to idle ends with the memory governor's step
        self.busy_seconds += perf_counter() - started
        return steps

    @staticmethod
    def _one_step(ops: list[Operator], feeds: list[list[int]], waiting: list[bool], policy) -> int:
        """``_steps``'s step when one operator alone has input waiting (no pick to make) and the policy gives
        every operator its ``budget`` knob: that operator runs unless its output is full (then 0 runs, and
        ``_steps`` decides as before); ``waiting`` is brought up to date for it and its readers."""
        i = waiting.index(True)
        op = ops[i]
        out = op.output
        if (cap := out._knob_capacity) is not None and out.tuples >= cap:
            return 0
        policy.on_ran(op, op.run(policy.budget_items))
        waiting[i] = op.ready()
        for j in feeds[i]:
            waiting[j] = ops[j].ready()
        return 1

    def _steps(self, ops: list[Operator], feeds: list[list[int]], where: dict[int, int], waiting: list[bool],
               max_steps: int | None, deadline: float | None) -> int:
        """``run``'s loop: operator runs until none is ready (``waiting`` and its output not full), or the
        step limit or the deadline; returns the runs made."""
        steps = 0
        policy = self.policy
        budget = self.config["batch_budget"]
        fixed = None                           # the budget, when the policy gives every operator the same
        if policy is not None:
            pick, budget_of, on_ran = policy.pick, policy.budget, policy.on_ran
            if getattr(policy, "same_budget", False):     # ``Policy.budget``: the knob, read once a run
                fixed = policy.budget_items
        limit = math.inf if max_steps is None else max_steps
        while steps < limit:
            waits = waiting.count(True)
            if waits == 1 and policy is not None:    # the usual step: one operator has input, no pick to make
                op = ops[waiting.index(True)]
                out = op.output              # ``not op.output.full()``, inlined as below
                if (cap := out._knob_capacity) is not None and out.tuples >= cap:
                    break
            elif not waits:
                break
            else:
                # ``not op.output.full()``, inlined: the capacity knob's slot, None unless a capacity was set
                ready = [op for op in compress(ops, waiting)
                         if (cap := op.output._knob_capacity) is None or op.output.tuples < cap]
                if not ready:
                    break
                if policy is not None:
                    op = ready[0] if len(ready) == 1 else pick(ready)
            if policy is None:
                for op in ready:
                    op.run(budget)
                    steps += 1
                    self._after_run(op, ops, feeds, where, waiting)
                    if steps >= limit:
                        break
                continue
            on_ran(op, op.run(budget_of(op) if fixed is None else fixed))
            steps += 1
            i = where[id(op)]                  # _after_run, inlined: one step of the loop costs 1-3 us
            waiting[i] = op.ready()
            for j in feeds[i]:
                waiting[j] = ops[j].ready()
            if deadline is not None and perf_counter() >= deadline:
                break
        return steps

    @staticmethod
    def _after_run(op: Operator, ops: list[Operator], feeds: list[list[int]], where: dict[int, int],
                   waiting: list[bool]) -> None:
        """Which operators have input waiting after ``op`` ran: a run reads only its own inputs and writes
        only its output queue, so only ``op`` and the operators reading that queue can have changed."""
        i = where[id(op)]
        waiting[i] = op.ready()
        for j in feeds[i]:
            waiting[j] = ops[j].ready()

    def _run_plan(self) -> tuple[list[Operator], list[list[int]], dict[int, int]]:
        """The operators ``run`` schedules (a window fused into a join runs inside it), for each the positions
        of the operators reading its output, and each one's position; kept until the plan changes."""
        cached = self._run_cache
        # besides _plan_changed: a plan edited without telling it. A list compares item by item, identity
        # first: the copy's items are the operators themselves (no id of a freed one reused)
        if cached is not None and cached[0] == self.ops:
            return cached[1]
        key = list(self.ops)
        ops = [op for op in self.ops if op.fused is None]
        where = {id(op): i for i, op in enumerate(ops)}
        readers: dict[int, list[int]] = {}
        for i, op in enumerate(ops):
            for q in op.input_queues:
                readers.setdefault(id(q), []).append(i)
        feeds = [readers.get(id(op.output), []) for op in ops]
        self._run_cache = (key, (ops, feeds, where))
        return ops, feeds, where
