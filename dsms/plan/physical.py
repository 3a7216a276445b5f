"""The physical planner: logical nodes become operators and queues, one small function per node kind.

Identical subplans run once (digest-004 R-SHR-01, E7): the planner memoises each logical node's output queue,
and a second query that needs an equal node gets a new reader on the same (shared) queue. A stateful subplan
is only shared while no input has arrived since it was built and nothing has been written to its output yet,
so that every query's state reflects exactly the input that arrived after it was registered, and a reader that
starts at the queue's end misses nothing. A scan of a relation or view counts as stateful: the relation's
contents are state that a new plan takes as a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsms.cql import ast
from dsms.errors import SchemaError
from dsms.expr.compile import CompiledExpr, compile_expr, numpy_dtype
from dsms.operators.aggregate import AggregateOp
from dsms.operators.base import Operator
from dsms.operators.distinct import DistinctOp
from dsms.operators.join import JoinOp
from dsms.operators.join_extreme import JoinExtremeOp, widened
from dsms.operators.lex_extreme_agg import LexExtremeAggregateOp
from dsms.operators.lex_extreme_join import LexExtremeJoinOp
from dsms.operators.netting import ChangelogOp, ToStreamOp
from dsms.operators.partition_window import PartitionWindowOp
from dsms.operators.project import ProjectOp
from dsms.operators.range_window import RangeWindowOp
from dsms.operators.row_window import RowWindowOp
from dsms.operators.sample import SampleOp
from dsms.operators.select import SelectOp, keeps_label
from dsms.operators.semi_join import SemiJoinOp
from dsms.operators.set_op import SetOpOp
from dsms.operators.snapshot import SnapshotOp
from dsms.operators.vector_aggregate import VectorAggregateOp, vectorisable
from dsms.operators.window_extreme_join import WindowExtremeJoinOp
from dsms.plan import logical as L
from dsms.plan.arg_extreme import arg_extreme
from dsms.plan.binder import conjuncts, type_resolver
from dsms.plan.istream_pass import passes_through
from dsms.plan.join_extreme import JoinExtreme, join_extreme
from dsms.plan.labels import named_label
from dsms.plan.lex_extreme import LexAggregate, LexExtreme, lex_aggregate, lex_extreme
from dsms.plan.rules.push_projection_down import _remap, narrow, unnarrow
from dsms.plan.support import support_side
from dsms.plan.unique_keys import group_column, keyed_on, unique_key
from dsms.plan.window_extreme import WindowExtreme, window_extreme
from dsms.queues import Queue
from synopses.keyed_index import KeyedIndexSynopsis
from synopses.shared_store import SharedWindowStore


def dtypes_of(types) -> list:
    return [numpy_dtype(t) for t in types]


def compile_over(expr, types) -> CompiledExpr:
    return compile_expr(expr, type_resolver(list(types)))


@dataclass
class Built:
    """What the planner made for one logical node."""

    queue: Queue
    op: Operator | None
    epoch: int
    users: set[str] = field(default_factory=set)
    stateful: bool = False     # holds state built from input (so only reusable in the epoch it was built)
    written: int = 0           # rows written to ``queue`` when it was built (reusable only while unchanged)
    via: object = None         # the node ``op`` reads instead of the node's own child: a view of a shared window


class PhysicalPlanner:
    """Builds operators into the engine's plan, sharing equal subplans."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.memo: dict[object, Built] = {}      # node -> the newest build of it (reusable)
        self._plain: set = set()                 # windows being built as themselves, not as a shared one
        self._joins: list[tuple[set, set]] = []  # per join being built: its RANGE window inputs, what it built
        self.built: list[Built] = []             # every build, for release
        self._support: dict = {}                 # a projection and join below a DISTINCT -> the join told so

    def build(self, node, query_id: str) -> Queue:
        built = self.memo.get(node)
        if built is not None and (not built.stateful or (built.epoch == self.engine.input_epoch
                                                         and built.queue.tuples_in == built.written)):
            fused = self._fused_op(node, built)
            if fused is not None:
                self._unfuse(fused)                     # shared from now on: it needs its output queue again
            if node in self._support:                   # shared from now on: every pair is read
                self._support.pop(node).keep_all_pairs()
            self._own(node, built, query_id)
            return built.queue
        if isinstance(node, L.Join) and (extreme := window_extreme(node)) is not None:
            return self._window_extreme_join(node, extreme, query_id)
        if isinstance(node, L.Join) and (lex := lex_extreme(node, self._view_root)) is not None:
            return self._lex_extreme_join(node, lex, query_id)
        if isinstance(node, L.Aggregate) and (lexagg := lex_aggregate(node, self._view_root)) is not None:
            return self._lex_aggregate(node, lexagg, query_id)
        if isinstance(node, L.Project) and (lexp := self._lex_projected(node)) is not None:
            return self._lex_extreme_join(node, lexp, query_id)
        if (isinstance(node, L.Join | L.SemiJoin | L.Filter) or isinstance(node, L.Window)
                and node.wkind != "UNBOUNDED") and node not in self._plain:
            queue = self._share_narrowed(node, query_id)
            if queue is not None:
                return queue
        fused = self._filtered_join(node) or self._join_extreme(node)
        if fused is not None:
            return self._record(node, self.build(fused, query_id), None, query_id, via=fused)
        make = getattr(self, "_" + type(node).__name__)
        queue, op = make(node, query_id)
        return self._record(node, queue, op, query_id)

    def _filtered_join(self, node) -> L.FilteredJoin | None:
        """The selection ``node`` and the join just below it as one operator (``L.FilteredJoin``), when the
        join's inputs never delete (its release is ``AppendJoin``'s, which evaluates a predicate on the pairs
        it finds over the columns the predicate reads, and gathers only the columns kept) and no build of that
        join exists that another query reads (it is then shared as it is, the selection above it). What it
        checks: the child is an ``L.Join`` with no predicate of its own, both inputs ``monotone``, not in the
        memo. EXPLAIN shows one join whose label ends with the predicate and ``[keeps ...]``. Otherwise (None)
        the selection is built above the join as before."""
        if isinstance(node, L.Project):
            return _projected_join(node, self.memo)
        if not isinstance(node, L.Filter) or not isinstance(node.child, L.Join):
            return None
        join = node.child
        if join.predicate is not None or not join.monotone or join in self.memo:
            return None
        return L.FilteredJoin(join, node.predicate, node.keep)

    def _fused_op(self, node, built: Built) -> Operator | None:
        """The operator fused into a join whose output queue ``built`` hands out: its own, or through nodes
        built as no operator (a ``[RANGE UNBOUNDED]`` window, an identity projection) the operator below
        whose queue they pass on (a selection fused into the join above that window, ``_fuse_select``)."""
        while built is not None and built.op is None and len(node.children) == 1:
            node = node.children[0]
            below = self.memo.get(node)
            built = below if below is not None and below.queue is built.queue else None
        if built is not None and built.op is not None and built.op.fused is not None:
            return built.op
        return None

    def _FilteredJoin(self, node: L.FilteredJoin, qid):
        return self._Join(node.join, qid, node.predicate or node.join.predicate, node.keep)

    def _join_extreme(self, node) -> JoinExtreme | None:
        """A grouped MAX/MIN over a join whose inputs never delete as one node (``dsms/plan/join_extreme.py``
        checks the facts), unless a build of that join (or of the selection over it) exists: it is then shared."""
        shape = join_extreme(node) if isinstance(node, L.Aggregate) else None
        if shape is None:
            return None
        below = node.child                       # the projections, the selection and the join it stands for
        while below is not shape.join:
            if below in self.memo:
                return None
            below = below.child
        return None if shape.join in self.memo else shape

    def _JoinExtreme(self, node: JoinExtreme, qid):
        """The join and the grouped MAX/MIN above it as one ``JoinExtremeOp`` (``dsms/plan/join_extreme.py``),
        built as ``_Join`` builds a join whose inputs never delete, the band's lazy index included. The group
        side's rows carry their group id as one more column, so the predicate is compiled over the columns
        renumbered for it."""
        join, side = node.join, node.group_side
        left = self.build(join.left, qid)
        right = self.build(join.right, qid)
        out = self._new_queue()
        width = len(join.left.types)
        wide = (*join.left.types, *(("INT",) if side == 0 else ()), *join.right.types, *(("INT",) if side else ()))
        moved = {i: widened(i, width, side) for i in range(len(join.types))}
        pred = None
        if node.predicate is not None:
            pred = compile_over(_remap(node.predicate, moved), wide)
            if pred.type != "BOOLEAN":
                raise SchemaError(f"a condition must be BOOLEAN, not {pred.type}")
        keep = (width if side == 0 else len(join.types), *(moved[a] for _, a in node.aggs))
        op = JoinExtremeOp(left, right, out, join.left_keys, join.right_keys, pred,
                           dtypes_of([wide[k] for k in keep]), side, node.group, [f for f, _ in node.aggs], keep,
                           dtypes_of(node.types))
        label = " AND ".join(f"L${a} = R${b}" for a, b in zip(join.left_keys, join.right_keys))
        if node.predicate is not None:
            label += " AND " + compile_over(node.predicate, join.types).text
        offset = width * side
        label += (f" -> GROUP BY {', '.join(f'${g + offset}' for g in node.group)}: "
                  + ", ".join(f"{f}(${a})" for f, a in node.aggs) + " [folded: only pairs that can change it]")
        lazy = band_bound(node.predicate, width, join.types) if node.predicate is not None else None
        if lazy is not None:
            op.append.lazy = lazy
            lz, mine, other = lazy
            hi, lo = (mine + width, other) if lz else (mine, other + width)
            label += f" [lazy {'LR'[lz]} index: ${hi} >= ${lo}]"
        op.detail_positions = label
        op.detail = named_label(join, label)
        op.seed_base = self.engine.config["seed"]
        op.fifo_windows = [None, None]
        if left is not right:
            for input_side, child in enumerate((join.left, join.right)):
                self._fuse_select(op, input_side, child)
        return out, op

    def shareable_joins(self) -> list:
        """The joins a query registered now would share (built since the last input arrived, nothing written,
        no knob written), each as ``unnarrow`` gives it: what ``share_join_prefix`` orders join chains by."""
        return [unnarrow(n)[0] for n, b in self.memo.items()
                if isinstance(n, L.Join) and isinstance(b.op, JoinOp) and b.via is None
                and b.epoch == self.engine.input_epoch and b.queue.tuples_in == b.written and not self._tuned(n)]

    def _own(self, node, built: Built, query_id: str) -> None:
        """Record ``query_id`` as a user of ``built`` and of everything it reads (a window fused into a join
        the query shares stays fused: the query reads the join, not the window)."""
        built.users.add(query_id)
        if built.op is not None:
            built.op.owners.add(query_id)
        for child in self._inputs(node, built):
            below = self.memo.get(child)
            if below is None:
                self.build(child, query_id)
            else:
                self._own(child, below, query_id)

    def _record(self, node, queue: Queue, op: Operator | None, query_id: str, via=None) -> Queue:
        for _, built in self._joins:
            built.add(node)
        if op is not None:
            name_columns(op, node, via)
            self.engine.add_operator(op, query_id)
        inputs = (via,) if via is not None else node.children
        stateful = (op is not None and op.kind not in ("select", "project", "sample")) or any(
            self.memo[c].stateful for c in inputs) or isinstance(node, L.RelationScan) or (
            isinstance(node, L.QueryOutput) and node.kind == L.RELATION)
        b = Built(queue, op, self.engine.input_epoch, {query_id}, stateful, queue.tuples_in, via=via)
        self.memo[node] = b
        self.built.append(b)
        return queue

    @staticmethod
    def _inputs(node, built: Built) -> tuple:
        return (built.via,) if built.via is not None else node.children

    def release(self, query_id: str) -> list[Operator]:
        """Forget the query; returns the operators nothing uses any more."""
        freed = []
        for built in self.built:
            built.users.discard(query_id)
            if built.op is not None:
                built.op.owners.discard(query_id)
                if not built.users:
                    freed.append(built.op)
        self.built = [b for b in self.built if b.users]
        self.memo = {n: b for n, b in self.memo.items() if b.users}
        self._support = {n: op for n, op in self._support.items() if n in self.memo}
        return freed

    # ---------------------------------------------------------------- leaves

    def _StreamScan(self, node: L.StreamScan, qid):
        return self.engine.source_queue(node.name), None

    def _RelationScan(self, node: L.RelationScan, qid):
        inp = self.engine.source_queue(node.name)
        snap = self.engine.relation_snapshot(node.name)
        if snap is None:
            return inp, None
        out = self._new_queue()
        return out, SnapshotOp(snap, inp, out)

    def _QueryOutput(self, node: L.QueryOutput, qid):
        inp = self.engine.query_output_queue(node.query_id)
        snap = self.engine.view_snapshot(node.query_id) if node.kind == L.RELATION else None
        if snap is None:
            return inp, None
        out = self._new_queue()
        return out, SnapshotOp(snap, inp, out)

    # ---------------------------------------------------------------- unary

    def _new_queue(self) -> Queue:
        return self.engine.new_queue()

    def _Sample(self, node: L.Sample, qid):
        inp = self.build(node.child, qid)
        out = self._new_queue()
        return out, SampleOp(node.percent, self.engine.next_seed(), inp, out)

    def _Window(self, node: L.Window, qid):
        inp = self.build(node.child, qid)
        if node.wkind == "UNBOUNDED":
            return inp, None
        out = self._new_queue()
        if node.wkind == "RANGE":
            op = RangeWindowOp(node.range, node.slide, inp, out)
        elif node.partition:
            return out, PartitionWindowOp(node.rows, node.partition, inp, out)
        else:
            op = RowWindowOp(node.rows, inp, out)
        self._share_store(inp, op, qid)
        return out, op

    def _share_narrowed(self, node, qid) -> Queue | None:
        """The same window, join or selection (``unnarrow``: the same computation before projection pushdown)
        built for another query, but keeping other columns: one over the union of the columns the two keep,
        which each reads through a projection onto its own (docs/architecture.md, "Projection pushdown and
        sharing"). A stateful build qualifies while no input has arrived since it was built; a stateless one
        (a selection over a stream) while it holds no unread input. None when there is no such build."""
        origin, want = unnarrow(node)
        found = None
        for n, b in self.memo.items():
            if (type(n) is type(node) and not self._join_input(node, n) and b.via is None and b.op is not None
                    and n != node and self._replaceable(b) and not self._tuned(n)):
                o, have = unnarrow(n)
                if o == origin and (found is None or len(have) > len(found[2])):
                    found = (n, b, have)
        if found is None:
            return None
        n, b, have = found
        if set(want) <= set(have):
            return self._view(node, n, [have.index(c) for c in want], qid)
        wider, kept = narrow(origin, {*have, *want})
        if wider != node:
            self.build(wider, qid)            # builds it and moves the other query onto it, as below
            return self._view(node, wider, [kept.index(c) for c in want], qid)
        self._plain.add(node)
        try:
            queue = self.build(node, qid)
        finally:
            self._plain.discard(node)
        for user in sorted(b.users):          # the other query reads the wider one from now on
            self._own(node, self.memo[node], user)
        self._replace(n, b, node, [kept.index(c) for c in have])
        return queue

    def _replaceable(self, built: Built) -> bool:
        """Whether another query may read ``built`` through a view, or have it widened (``_replace``): a
        stateful build while no input has arrived since it was built and nothing was written to it (its
        state is then what a new build's would be); a stateless one (a selection over a stream, which the
        memo shares at any time) while its operator has no input waiting, which the engine's run before
        every registration sees to: a wider selection built now reads from where it would have read on."""
        if built.stateful:
            return built.epoch == self.engine.input_epoch and built.queue.tuples_in == built.written
        return not any(r.pending() for r in built.op.readers)

    def _join_input(self, node, other) -> bool:
        """Whether ``node`` and ``other`` must not share one window: one of them is a RANGE window read by a
        join being built and the other was built within that join's build (NEXMark q7's MAX subquery over
        the join's own window), so that the join can run its window inside itself (``_fusable``): a fused
        window hands over its deletes and inserts with no queue, no merge and no value-for-value matching of
        the deletes. The two windows still hold views of the same arrays (``_share_store``). A window built
        by an earlier query is shared as before (the join then reads it through its queue)."""
        return any((node in inputs or other in inputs) and other in built for inputs, built in self._joins)

    def _tuned(self, node) -> bool:
        """Whether a knob of an operator (or synopsis) of ``node``'s build, or of a window fused into it, or
        of anything below built for it, was written: such a build is not replaced."""
        built = self.memo.get(node)
        if built is None or built.op is None:
            return False
        ops = [built.op, *(w for w in getattr(built.op, "windows", ()) if w is not None)]
        if any(e.history() for op in ops for e in (op, *op.synopses)):
            return True
        return any(self._tuned(c) for c in self._inputs(node, built))

    def _view(self, node, shared, columns: list[int], qid) -> Queue:
        """``node`` built as the projection onto ``columns`` of the build of ``shared``."""
        queue = self.build(shared, qid)
        out = self._new_queue()
        return self._record(node, out, ProjectOp(columns, queue, out, note=view_note(shared)), qid, via=shared)

    def _replace(self, node, built: Built, wider, columns: list[int]) -> None:
        """Turn ``built`` (of ``node``; no input since it was built) into a projection of the build of
        ``wider``, writing to the same queue, so that whoever reads it reads on unchanged; then forget what
        fed it and nothing reads any more."""
        old, below = built.op, self._inputs(node, built)
        if old.fused is not None:
            self._unfuse(old)
        view = ProjectOp(columns, self.memo[wider].queue, built.queue, note=view_note(wider))
        name_columns(view, None, wider)
        self.engine.replace_operator(old, view)
        built.op, built.via = view, wider
        for child in below:
            self._discard_unread(child, old)
        self._fuse_windows(wider)

    def _discard_unread(self, node, gone: Operator | None = None) -> None:
        """Forget the build of ``node`` (and then of its inputs) when nothing reads it any more: its queue has
        no reader, or it is a window fused into ``gone``, a join just discarded."""
        built = self.memo.get(node)
        if built is None or built.op is None:
            return
        op = built.op
        if (op.fused is not None and op.fused is not gone) or (op.fused is None and built.queue._reader_count()):
            return
        del self.memo[node]
        self.built = [x for x in self.built if x is not built]
        self.engine.discard_operator(op)
        for child in self._inputs(node, built):
            self._discard_unread(child, op)

    def _fuse_windows(self, node) -> None:
        """Fuse into the join built for ``node`` the windows that only it reads now."""
        built = self.memo.get(node)
        if not isinstance(node, L.Join) or built is None or not isinstance(built.op, JoinOp):
            return
        op = built.op
        if op.input_queues[0] is op.input_queues[1]:
            return
        for side, child in enumerate((node.left, node.right)):
            if op.windows[side] is None:
                window = self._fusable(child, op.input_queues[side], op.readers[side])
                if window is not None:
                    op.fuse_window(side, window)
                    self.engine.retire_queue(window.output)

    def _root_queue(self, q: Queue) -> Queue:
        """The queue whose column arrays ``q`` carries: through the projections that copy columns."""
        while True:
            src = next((o for o in self.engine.ops if o.output is q and isinstance(o, ProjectOp)
                        and all(isinstance(e, int) for e in o.exprs)), None)
            if src is None:
                return q
            q = src.input_queues[0]

    def _share_store(self, inp: Queue, op, qid: str) -> None:
        """Windows over the same input hold views of the same arrays (also through projections onto other
        columns of it): group them in one shared store."""
        root = self._root_queue(inp)
        others = [o for o in self.engine.ops if isinstance(o, RangeWindowOp | RowWindowOp)
                  and o.synopses and self._root_queue(o.input_queues[0]) is root]
        if not others:
            return
        store = getattr(others[0], "shared_store", None)
        if store is None:
            store = SharedWindowStore()
            store.members.append(others[0].store)
            others[0].shared_store = store
            others[0].synopses.append(store)
            store.owners = set(others[0].owners)
            self.engine.registry.add(store)
        store.members.append(op.store)
        store.owners |= {qid}
        op.shared_store = store

    def _Filter(self, node: L.Filter, qid):
        inp = self.build(node.child, qid)
        out = self._new_queue()
        pred = compile_over(node.predicate, node.child.types)
        if pred.type != "BOOLEAN":
            raise SchemaError(f"a condition must be BOOLEAN, not {pred.type}")
        return out, SelectOp(pred, inp, out, node.predicate, None if node.keep is None else list(node.keep))

    def _Project(self, node: L.Project, qid):
        inp = self.build(node.child, qid)
        exprs: list = []
        for e in node.exprs:
            if isinstance(e, ast.ColumnRef) and e.name.startswith("$"):
                exprs.append(int(e.name[1:]))
            elif isinstance(e, ast.FuncCall) and e.name == "FLOAT":     # set-operation widening
                exprs.append(_FloatCast(compile_over(e.args[0], node.child.types)))
            else:
                exprs.append(compile_over(e, node.child.types))
        if exprs == list(range(len(node.child.types))):
            return inp, None                                           # identity
        out = self._new_queue()
        return out, ProjectOp(exprs, inp, out, note="[pushed]" if node.pushed else "")

    def _Aggregate(self, node: L.Aggregate, qid):
        inp = self.build(node.child, qid)
        out = self._new_queue()
        ctypes = node.child.types
        arg_types = [ctypes[a] if a is not None else None for _, a, _ in node.aggs]
        if vectorisable(node.aggs, arg_types):
            op = VectorAggregateOp(node.group, node.aggs, arg_types, inp, out, dtypes_of(node.types),
                                   insert_only=node.child.monotone)
        else:
            op = AggregateOp(node.group, node.aggs, arg_types, inp, out, dtypes_of(node.types),
                             keep_values=not node.child.monotone)
        names = node.child.names      # an INT SUM outside int64 is reported by its column (SPEC section 4)
        op.arg_names = ["*" if a is None else names[a] for _, a, _ in node.aggs]
        return out, op

    def _Distinct(self, node: L.Distinct, qid):
        side = support_side(node)
        if side is not None and (node.child in self.memo or node.child.child in self.memo):
            side = None                               # built already for another query: read as it is
        inp = self.build(node.child, qid)
        if side is not None:
            self._keep_support(node.child, side)
        out = self._new_queue()
        return out, DistinctOp(inp, out, dtypes_of(node.types), insert_only=node.child.monotone)

    def _keep_support(self, project, side: int) -> None:
        """Tell the join below a DISTINCT of one side's columns that only the support matters
        (``JoinOp.keep_support``; ``support_side`` says when), if the projection and the join were built as
        themselves for this DISTINCT alone: a projection reading the join's queue, the join a ``JoinOp``, no
        view of another query's build. A later query that shares either gets every pair again
        (``build``: ``keep_all_pairs``, before any input, so before any output)."""
        pb, jb = self.memo.get(project), self.memo.get(project.child)
        if pb is None or jb is None or pb.via is not None or jb.via is not None:
            return
        op = jb.op
        if (not isinstance(op, JoinOp) or not isinstance(pb.op, ProjectOp) or op.append is not None
                or op.arg_ext is not None or pb.op.input_queues[0] is not jb.queue):
            return
        op.keep_support(side)
        self._support[project] = self._support[project.child] = op

    # ---------------------------------------------------------------- binary

    def _Join(self, node: L.Join, qid, predicate=None, keep: tuple[int, ...] | None = None):
        """The join ``node``; with ``predicate`` and ``keep`` (a ``FilteredJoin``'s), a selection above it too."""
        inputs = {c for c in (node.left, node.right) if isinstance(c, L.Window) and c.wkind == "RANGE"}
        self._joins.append((inputs, set()))
        try:
            left = self.build(node.left, qid)
            right = self.build(node.right, qid)
        finally:
            self._joins.pop()
        out = self._new_queue()
        if predicate is None:
            predicate = node.predicate
        pred = compile_over(predicate, node.types) if predicate is not None else None
        if pred is not None and pred.type != "BOOLEAN":
            raise SchemaError(f"a condition must be BOOLEAN, not {pred.type}")
        types = node.types if keep is None else tuple(node.types[k] for k in keep)
        op = JoinOp(left, right, out, node.left_keys, node.right_keys, pred, dtypes_of(types),
                    insert_only=node.left.monotone and node.right.monotone, keep=keep)
        if op.append is not None and predicate is not None:
            lazy = band_bound(predicate, len(node.left.types), node.types)
            if lazy is not None:
                side, mine, other = lazy
                width = len(node.left.types)
                hi, lo = (mine + width, other) if side else (mine, other + width)
                op.append.lazy = lazy
                op.detail += f" [lazy {'LR'[side]} index: ${hi} >= ${lo}]"
        op.seed_base = self.engine.config["seed"]
        op.fifo_windows = [self._window_below(node.left), self._window_below(node.right)]
        if left is not right:
            for side, (child, queue) in enumerate(((node.left, left), (node.right, right))):
                window = self._fusable(child, queue, op.readers[side])
                if window is not None:
                    op.fuse_window(side, window)
                    self.engine.retire_queue(queue)
                    self._fuse_project(op, side, child)
        if op.append is not None and left is not right:
            for side, child in enumerate((node.left, node.right)):
                self._fuse_select(op, side, child)
        spec = None
        if op.append is None and op.windows == [None, None] and left is not right:
            spec = arg_extreme(node, self._view_root)
        if spec is not None:
            op.use_arg_extreme(spec)    # the left's rows at their group's MAX (MIN): from the left alone
            return out, op
        sides = ((node.left, node.left_keys, node.right_keys), (node.right, node.right_keys, node.left_keys))
        for side, (child, keys, other) in enumerate(sides):
            if op.append is None and op.windows[1 - side] is None and keyed_on(child, keys, self._view_root):
                # at most one row per join key: held as a map (dsms/plan/unique_keys.py); a join whose inputs
                # never delete keeps its append-only indexes (a DISTINCT over a stream is both)
                op.key_side(side, group_column(unique_key(child, self._view_root), child.types, keys, other))
        keyed = [type(s) is KeyedIndexSynopsis for s in op.sides]
        if keyed.count(True) == 1 and left is not right and node.left_keys:
            # (a cross product beside a one-row input has one bucket: the sorted-run index serves it)
            side = keyed.index(False)
            if op.windows[side] is None and op.gates[side] is None:
                # probed by a keyed input: a hash multimap, updated in proportion to each release
                # (synopses/hash_multi_index.py; the general path turns it into the sorted-run index)
                op.hash_side(side, _bucket(op.sides[1 - side].group, sides[side][0].types))
        return out, op

    def _window_extreme_join(self, node: L.Join, shape: WindowExtreme, qid) -> Queue:
        """A tumbling window joined with its own MAX or MIN (``dsms/plan/window_extreme.py`` checked the facts)
        as one operator reading the window's input, which picks the window's columns itself; it stands for the
        join, both windows and the aggregate (``dsms/operators/window_extreme_join.py``)."""
        inp = self.build(shape.source, qid)
        out = self._new_queue()
        pred = compile_over(node.predicate, node.types) if node.predicate is not None else None
        other = node.right if shape.side == 0 else node.left
        op = WindowExtremeJoinOp(inp, out, shape.size, list(shape.picks), shape.key, shape.func, shape.side,
                                 pred, numpy_dtype(other.types[0]),
                                 None if pred is None else named_label(node, pred.text))
        return self._record(node, out, op, qid, via=shape.source)

    def _lex_extreme_join(self, node: L.Join | L.Project, shape: LexExtreme, qid) -> Queue:
        """An arg max (min) joined with the MIN or MAX of another column per group (``dsms/plan/lex_extreme.py``
        checked the facts) as one operator reading the relation below the arg max, from its inserts alone
        (``dsms/operators/lex_extreme_join.py``); it stands for the join, the arg max below it and the reads of
        the aggregates, which it needs neither the rows nor the frontier of."""
        inp = self.build(shape.source, qid)
        out = self._new_queue()
        op = LexExtremeJoinOp(inp, out, shape)
        if isinstance(node, L.Project):               # a projection above it, run inside (``_lex_projected``)
            op.detail += keeps_label(shape.out_from)
        return self._record(node, out, op, qid, via=shape.source)

    def _lex_projected(self, node: L.Project) -> LexExtreme | None:
        """A projection of plain columns over a lexicographic-extreme join that no build of that join exists
        for, as that join emitting the projected columns alone (its ``out_from`` composed with the
        projection: the release gathers only them, and no project operator runs above it; EXPLAIN: the join's
        label ends with ``[keeps ...]``). Else None: the projection is built above the join."""
        join = node.child
        if not isinstance(join, L.Join) or join in self.memo:
            return None
        cols = []
        for e in node.exprs:
            if not (isinstance(e, ast.ColumnRef) and e.name.startswith("$") and e.name[1:].isdigit()):
                return None
            cols.append(int(e.name[1:]))
        lex = lex_extreme(join, self._view_root)
        if lex is None:
            return None
        return lex._replace(out_from=tuple(lex.out_from[c] for c in cols))

    def _lex_aggregate(self, node: L.Aggregate, shape: LexAggregate, qid) -> Queue:
        """A MIN or MAX per group over an arg max (``dsms/plan/lex_extreme.py`` checked the facts) as one operator
        reading the relation below the arg max, from its inserts alone (``dsms/operators/lex_extreme_agg.py``);
        it stands for the aggregate and the arg max below it."""
        inp = self.build(shape.source, qid)
        out = self._new_queue()
        op = LexExtremeAggregateOp(inp, out, shape.group, shape.values, dtypes_of(node.types))
        return self._record(node, out, op, qid, via=shape.source)

    def _net_lex(self, node) -> bool:
        """Whether ``node`` is a lexicographic-extreme join (``_lex_extreme_join``), or a projection of plain
        columns of one, that emits each instant's net change once: the join releases whole instants only, and
        within one instant the rows that leave are below the new extreme and the rows that enter at it, so
        no row leaves and enters at one instant as long as the columns kept include every value ranked."""
        return self._lex_columns(node) is not None

    def _lex_group(self, node) -> int | None:
        """The column of ``node`` (``_net_lex`` holds) that copies the join's group column, by which the sink
        folds its log (``dsms/operators/group_fold.py``); None when the group is not kept."""
        found = self._lex_columns(node)
        if found is None:
            return None
        op, cols = found
        return next((i for i, c in enumerate(cols) if op.spec.out_from[c] == op.spec.group), None)

    def _lex_columns(self, node) -> tuple[LexExtremeJoinOp, list[int]] | None:
        """(the join, the join's column each of ``node``'s copies) when ``_net_lex`` holds, else None."""
        cols = list(range(len(node.types)))
        built = self.memo.get(node)
        if (built is None or not isinstance(built.op, LexExtremeJoinOp)) and isinstance(node, L.Project):
            # (a projection run inside the join is the join's build itself: ``_lex_projected``)
            if not all(isinstance(e, ast.ColumnRef) and e.name.startswith("$") for e in node.exprs):
                return None
            cols, node = [int(e.name[1:]) for e in node.exprs], node.child
            built = self.memo.get(node)
        op = built.op if built is not None else None
        if not isinstance(op, LexExtremeJoinOp):
            return None
        kept = {op.spec.out_from[c] for c in cols}
        return (op, cols) if all(c in kept for c, _ in op.spec.values) else None

    def _fuse_project(self, join: JoinOp, side: int, window_node) -> None:
        """Fuse into ``join`` the projection of plain column copies below its fused window on ``side``, when
        that window alone reads it (``JoinOp.fuse_project``)."""
        built = self.memo.get(window_node.child)
        op = built.op if built is not None else None
        if (isinstance(op, ProjectOp) and op.fused is None and all(isinstance(e, int) for e in op.exprs)
                and built.queue is op.output and op.output._readers == [join.readers[side]]):
            join.fuse_project(side, op)
            self.engine.retire_queue(op.output)

    def _fuse_select(self, join: JoinOp, side: int, child) -> None:
        """Fuse into ``join`` (its inputs never delete) the selection, or the projection of plain column
        copies, that input ``side`` reads through ``[RANGE UNBOUNDED]`` windows (no operator), when the join
        alone reads its output (``JoinOp.fuse_select``); a later query sharing it gets it back (``_unfuse``)."""
        while isinstance(child, L.Window) and child.wkind == "UNBOUNDED":
            child = child.child
        built = self.memo.get(child)
        op = built.op if built is not None else None
        copies = isinstance(op, ProjectOp) and all(isinstance(e, int) for e in op.exprs)
        if ((isinstance(op, SelectOp) or copies) and op.fused is None and built.queue is op.output
                and join.input_queues[side] is op.output and op.output._readers == [join.readers[side]]):
            join.fuse_select(side, op)
            self.engine.retire_queue(op.output)

    def _view_root(self, query_id: str):
        """The logical plan of a registered view or query (None if it is gone)."""
        q = self.engine.query_list.get(query_id)
        return q.node if q is not None else None

    def _window_below(self, node) -> RangeWindowOp | None:
        """The RANGE window whose deltas reach a join input through projections and filters only (they keep
        its first-in-first-out order of deletes), which a join of kind reservoir needs; None otherwise."""
        while isinstance(node, L.Project | L.Filter):
            node = node.child
        built = self.memo.get(node)
        if isinstance(node, L.Window) and built is not None and isinstance(built.op, RangeWindowOp):
            return built.op
        return None

    def _fusable(self, node, queue: Queue, reader) -> RangeWindowOp | None:
        """The RANGE window that ``node`` built into ``queue`` for this join alone (its output has no other
        reader), which the join can run inside itself (``JoinOp.fuse_window``); None otherwise."""
        built = self.memo.get(node)
        if not isinstance(node, L.Window) or built is None or built.queue is not queue:
            return None
        op = built.op
        if isinstance(op, RangeWindowOp) and op.fused is None and queue._readers == [reader]:
            return op
        return None

    def _unfuse(self, op) -> None:
        """Give an operator fused into a join back its output queue (a later query reads it): a projection
        fused below a window first, when the window is the one given back."""
        join = op.fused
        if op in join.selects:                 # a selection, or a projection run as one (``_fuse_select``)
            self.engine.restore_queue(op.output)
            join.unfuse_select(join.selects.index(op))
            return
        if isinstance(op, ProjectOp):
            self.engine.restore_queue(op.output)
            join.unfuse_project(join.projects.index(op))
            return
        side = join.windows.index(op)
        if join.projects[side] is not None:
            self._unfuse(join.projects[side])
        self.engine.restore_queue(op.output)
        join.unfuse_window(side)

    def _SemiJoin(self, node: L.SemiJoin, qid):
        left = self.build(node.left, qid)
        right = self.build(node.right, qid)
        out = self._new_queue()
        both = node.left.types + node.right.types
        pred = compile_over(node.predicate, both) if node.predicate is not None else None
        return out, SemiJoinOp(left, right, out, node.left_keys, node.right_keys, pred, node.anti,
                               dtypes_of(node.left.types), dtypes_of(node.right.types))

    def _SetOp(self, node: L.SetOp, qid):
        left = self.build(node.left, qid)
        right = self.build(node.right, qid)
        out = self._new_queue()
        return out, SetOpOp(node.op, node.all, left, right, out, dtypes_of(node.types),
                            insert_only=node.left.monotone and node.right.monotone)

    # ---------------------------------------------------------------- relation to stream, sinks

    def _ToStream(self, node: L.ToStream, qid):
        inp = self.build(node.child, qid)
        if passes_through(node) and all(s.queue is not inp for s in self.engine.sources.values()):
            return inp, None                  # the insert-only rows below are the stream (istream_pass.py)
        ticks = [self.build(t, qid) for t in node.ticks]
        out = self._new_queue()
        eager = node.child.monotone and node.op in ("ISTREAM", "DSTREAM")
        return out, ToStreamOp(node.op, [inp, *ticks], out, dtypes_of(node.types), eager=eager,
                               final_net=final_net(node.child))

    def _Changelog(self, node: L.Changelog, qid):
        inp = self.build(node.child, qid)
        out = self._new_queue()
        # the sink keeps the relation's contents: a later query reading it (a view) and a new reader of its
        # results (the server's snapshot) start from them
        lex = self._net_lex(node.child)
        net = final_net(node.child) or lex
        key = unique_key(node.child) if net else None
        return out, ChangelogOp([inp], out, dtypes_of(node.types), eager=node.child.monotone,
                                keep_state=True, final_net=net, key=None if key is None else tuple(sorted(key)),
                                # nothing to cancel: no delete at all, or (a lexicographic extreme passed
                                # through) no equal row leaves and enters at one instant (``_net_lex``)
                                cancel=not (_bare_aggregate(node.child) or node.child.monotone or lex),
                                group=self._lex_group(node.child) if lex and key is None else None)


def _projected_join(node: L.Project, memo: dict) -> L.FilteredJoin | None:
    """A projection of plain column copies directly over a join whose inputs never delete, run inside the join
    as the columns it keeps (``L.FilteredJoin`` with no predicate of its own: the join's, if any, stays the
    join's): the join gathers only those columns of the pairs it finds, in the projection's order, and the
    projection costs no run, queue or scheduling decision (NEXMark q3's ``P.name, P.city, P.state, A.id``:
    issue 15). What it checks: every expression is a column reference ``$n`` and they are not the join's
    columns in place (that projection is no operator at all), the child is an ``L.Join`` with both inputs
    ``monotone``, and no build of that join exists, nor of the same join keeping other columns (projection
    pushdown's ``unnarrow``): another query's join is then shared, the projection above it. A later query
    over the same join builds a join of its own, as after ``_filtered_join``. EXPLAIN shows one join whose label ends with ``[keeps ...]`` and no project."""
    join = node.child
    if not isinstance(join, L.Join) or not join.monotone or join in memo:
        return None
    origin = unnarrow(join)[0]
    if any(isinstance(n, L.Join) and unnarrow(n)[0] == origin for n in memo):
        return None                        # the same join, narrowed otherwise: shared (``_share_narrowed``)
    keep = []
    for e in node.exprs:
        if not (isinstance(e, ast.ColumnRef) and e.name.startswith("$") and e.name[1:].isdigit()):
            return None
        keep.append(int(e.name[1:]))
    if keep == list(range(len(join.types))):
        return None
    return L.FilteredJoin(join, None, tuple(keep))


def _bucket(group: tuple[int, ...] | None, types: tuple[str, ...]) -> tuple[int, int] | None:
    """How the input probed by a keyed one buckets its rows (``HashMultiIndexSynopsis.bucket``): by its join
    column equated with the keyed input's INT key column (``group`` as ``KeyedIndexSynopsis`` holds it), when
    that column is INT or TIMESTAMP too; None (by join key code) otherwise.

    >>> _bucket((0, 3), ("INT", "FLOAT", "INT", "TIMESTAMP")), _bucket((0, 1), ("INT", "FLOAT")), _bucket((), ())
    ((3, 0), None, None)
    """
    if not group:
        return None
    own, other = group
    return (other, own) if types[other] in ("INT", "TIMESTAMP") else None


def band_bound(predicate, width: int, types: tuple[str, ...]) -> tuple[int, int, int] | None:
    """A band's lower bound in a join predicate: a conjunct ``a >= b`` (or ``a > b``, ``b <= a``, ``b < a``,
    ``a BETWEEN b AND ..``, ``.. BETWEEN .. AND a`` with ``b`` the middle) of two INT or TIMESTAMP columns, ``a`` of one input and ``b`` of the other, as (``a``'s side, ``a``'s
    column in it, ``b``'s column in the other side); the right input's when both have one (NEXMark's bids:
    ``B.dateTime >= A.dateTime``). A held row of that side can pair with a new row of the other only if its
    ``a`` is at least the new row's ``b``: ``AppendJoin.lazy``. None when there is no such conjunct.

    >>> c = lambda i: ast.ColumnRef(f"${i}")
    >>> band_bound(ast.BinaryOp(">=", c(3), c(1)), 2, ("INT",) * 4), band_bound(ast.BinaryOp("<", c(0), c(2)), 2, ("INT",) * 3)
    ((1, 1, 1), (1, 0, 0))
    """
    found = None
    parts = []
    for p in conjuncts(predicate):               # x BETWEEN lo AND hi (not negated): x >= lo and hi >= x
        if isinstance(p, ast.Between) and not p.negated:
            parts += [ast.BinaryOp(">=", p.expr, p.low), ast.BinaryOp(">=", p.high, p.expr)]
        else:
            parts.append(p)
    for p in parts:
        if not (isinstance(p, ast.BinaryOp) and p.op in (">=", ">", "<=", "<")
                and isinstance(p.left, ast.ColumnRef) and isinstance(p.right, ast.ColumnRef)
                and p.left.name.startswith("$") and p.right.name.startswith("$")):
            continue
        a, b = int(p.left.name[1:]), int(p.right.name[1:])
        if p.op in ("<=", "<"):
            a, b = b, a
        if (a < width) == (b < width) or not {types[a], types[b]} <= {"INT", "TIMESTAMP"}:
            continue
        side = int(a >= width)
        got = (side, a - width * side, b - width * (1 - side))
        if found is None or side > found[0]:
            found = got
    return found


def name_columns(op: Operator, node, via=None) -> None:
    """EXPLAIN shows column names where the operator's label has positions (``GROUP BY item: COUNT(*)`` for
    ``GROUP BY $0: COUNT(*)``); the positional label stays in ``detail_positions`` for the XML plan."""
    named = named_label(node, op.detail, via)
    if named != op.detail:
        op.detail_positions = op.detail
        op.detail = named


def view_note(shared) -> str:
    what = "window" if isinstance(shared, L.Window) else "select" if isinstance(shared, L.Filter) else "join"
    return f"[view of shared {what}]"


def _bare_aggregate(node) -> bool:
    """Whether ``node`` is an aggregate with at most a renaming above it (a projection of every column in
    place): its output pairs a group's delete with an insert only when the row changed (the vectorised and
    the row-at-a-time aggregate both skip unchanged groups, NaN staying NaN included), so a sink above it
    finds no adjacent equal pair to cancel."""
    while isinstance(node, L.Project):
        if [e.name if isinstance(e, ast.ColumnRef) else None for e in node.exprs] != \
                [f"${i}" for i in range(len(node.child.types))]:
            return False
        node = node.child
    return isinstance(node, L.Aggregate)


def final_net(node) -> bool:
    """Whether ``node`` emits, for each instant, only after the instant is final and at most one change per
    row: true above an aggregate (which processes whole instants) through key-preserving filters and
    projections. A sink above such a node need not buffer or net again."""
    if isinstance(node, L.Aggregate):
        return True
    if isinstance(node, L.Filter | L.Project):
        return final_net(node.child) and unique_key(node) is not None
    return False


class _FloatCast:
    """INT column widened to FLOAT where a set operation meets INT and FLOAT."""

    def __init__(self, inner: CompiledExpr) -> None:
        self.inner = inner
        self.type = "FLOAT"
        self.text = f"CAST({inner.text} AS FLOAT)"

    def __call__(self, cols, n):
        return self.inner(cols, n).astype("float64")
