"""The replay planner: which parallel strategy a query's logical plan allows, and why (SPEC section 9; the
rules are tabled in docs/replay.md).

* **key-partitioned**: every input is hash-partitioned by one of its columns, and each Spark partition runs the
  whole plan over its rows. That is exact when every operator's result is the disjoint union of its results
  per partition: rows of different partitions never meet in one group, window partition, join match, duplicate
  or netted change. :func:`key_partitionings` proves it bottom-up: for each node it keeps the candidate
  assignments (input -> column) under which the node is partition-local, with the output positions that still
  carry the partition key. Keyed state needs the key: GROUP BY a key column, PARTITION BY a key column, an
  equi-join on the key of both sides, DISTINCT / set operations / ISTREAM / DSTREAM / a relation's changelog
  over rows that still hold it. ROWS without PARTITION BY, aggregates without GROUP BY, RSTREAM and SAMPLE
  below 100 % are global and disqualify the plan.
* **time-sliced**: the time range is cut into slices; a slice's task starts reading streams early by the plan's
  *warm-up* (the longest history any of its states holds: RANGE sizes plus slides along the plan) and writes
  only its own instants. Relations are always read from the start (their state is not bounded in time; they are
  small). Qualify: RANGE, RANGE SLIDE and NOW windows at any depth, and a stateless ISTREAM over unbounded
  streams (``SELECT ... FROM S WHERE ...``). ROWS and PARTITION BY ROWS are not bounded in time (a quiet key
  keeps its rows forever), nor is RANGE UNBOUNDED under state.
* **single**: anything else runs on one partition.

A plan that allows both prefers key partitioning when a keyed operator holds the state (no warm-up is read
twice), time slicing otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsms.cql import ast
from dsms.plan import logical as L
from dsms.spark.spec import ReplayError

KEY = "key-partitioned"
TIME = "time-sliced"
SINGLE = "single"
STRATEGIES = (KEY, TIME, SINGLE)


@dataclass(frozen=True)
class Strategy:
    """The chosen strategy. ``keys``: input -> column name it is hashed by; ``warmup``: ticks a slice reads
    before its first instant (None: state not bounded in time); ``reason``: why, for the summary."""

    kind: str
    partitions: int
    reason: str
    keys: dict[str, str] = field(default_factory=dict)
    warmup: int | None = None
    alternatives: dict[str, str] = field(default_factory=dict)
    net: str | None = None      # key-partitioned only: "ISTREAM", "DSTREAM" or "CHANGELOG" applied on the driver

    def explain(self) -> str:
        lines = [f"strategy: {self.kind} on {self.partitions} partition(s)", f"  why: {self.reason}"]
        if self.keys:
            lines.append("  partition key: " + ", ".join(f"{i}.{c}" for i, c in sorted(self.keys.items())))
        if self.net:
            lines.append(f"  the partitions' changes are netted per instant on the driver, then {self.net}")
        if self.warmup is not None:
            lines.append(f"  warm-up: {self.warmup} ticks before each slice")
        for kind, why in self.alternatives.items():
            lines.append(f"  {kind}: {why}")
        return "\n".join(lines)


class _NotLocal(Exception):
    """The plan cannot be split this way; the message says which operator prevents it."""


# ---------------------------------------------------------------- key partitioning

# a candidate: (key positions in the node's output, assignment ((input, column index), ...), keyed state seen)
Cand = tuple[frozenset, tuple, bool]


def _merge(a: tuple, b: tuple) -> tuple | None:
    d = dict(a)
    for k, v in b:
        if d.setdefault(k, v) != v:
            return None            # one input would need two different keys (a self-join on other columns)
    return tuple(sorted(d.items()))


def _col(e: Any) -> int | None:
    if isinstance(e, ast.ColumnRef) and str(e.name).startswith("$"):
        return int(str(e.name)[1:])
    return None


def key_partitionings(node: Any, views: dict[str, Any]) -> set[Cand]:
    """Every way to hash-partition the inputs under which ``node`` is partition-local (empty: none).
    ``views`` maps a query id to its root node (views and named queries read through ``QueryOutput``)."""
    if isinstance(node, L.StreamScan | L.RelationScan):
        return {(frozenset({i}), ((node.name, i),), False) for i in range(len(node.types))}
    if isinstance(node, L.QueryOutput):
        return key_partitionings(views[node.query_id], views)
    if isinstance(node, L.Filter):
        cands = key_partitionings(node.child, views)
        if node.keep is None:
            return cands
        return {(frozenset(j for j, c in enumerate(node.keep) if c in k), a, keyed) for k, a, keyed in cands}
    if isinstance(node, L.Sample):
        if node.percent < 100:
            raise _NotLocal(f"SAMPLE({node.percent:g}) draws per batch; it is not reproducible when split")
        return key_partitionings(node.child, views)
    if isinstance(node, L.Project):
        out = set()
        for k, a, keyed in key_partitionings(node.child, views):
            nk = frozenset(j for j, e in enumerate(node.exprs) if _col(e) in k)
            out.add((nk, a, keyed))
        return out
    if isinstance(node, L.Window):
        cands = key_partitionings(node.child, views)
        if node.wkind == "ROWS" and not node.partition:
            raise _NotLocal(f"[ROWS {node.rows}] keeps the latest rows of the whole stream")
        if node.partition:
            cands = {(k, a, True) for k, a, _ in cands if k & set(node.partition)}
            if not cands:
                raise _NotLocal("PARTITION BY does not include a column every input can be partitioned by")
        return cands
    if isinstance(node, L.Aggregate):
        if not node.group:
            raise _NotLocal("an aggregate without GROUP BY is one global group")
        out = set()
        for k, a, _ in key_partitionings(node.child, views):
            if k & set(node.group):
                out.add((frozenset(j for j, g in enumerate(node.group) if g in k), a, True))
        if not out:
            raise _NotLocal("GROUP BY does not include a column every input can be partitioned by")
        return out
    if isinstance(node, L.Distinct | L.Changelog):
        out = {(k, a, True) for k, a, _ in key_partitionings(node.child, views) if k}
        if not out:
            what = "DISTINCT" if isinstance(node, L.Distinct) else "the result's changelog"
            raise _NotLocal(f"{what} compares whole rows, and no column of them carries a partition key")
        return out
    if isinstance(node, L.ToStream):
        if node.op == "RSTREAM":
            raise _NotLocal("RSTREAM emits the whole relation at every input instant of the query")
        out = {(k, a, keyed) for k, a, keyed in key_partitionings(node.child, views) if k}
        if not out:
            raise _NotLocal(f"{node.op} compares whole rows, and no column of them carries a partition key")
        return out
    if isinstance(node, L.Join | L.SemiJoin):
        left, right = key_partitionings(node.left, views), key_partitionings(node.right, views)
        width = len(node.left.types)
        out = set()
        for kl, al, _ in left:
            for kr, ar, _ in right:
                if not any(lk in kl and rk in kr for lk, rk in zip(node.left_keys, node.right_keys)):
                    continue
                a = _merge(al, ar)
                if a is None:
                    continue
                k = kl if isinstance(node, L.SemiJoin) else kl | frozenset(width + r for r in kr)
                out.add((k, a, True))
        if not out:
            raise _NotLocal("a join whose equality does not pair the partition keys of both sides")
        return out
    if isinstance(node, L.SetOp):
        left, right = key_partitionings(node.left, views), key_partitionings(node.right, views)
        bag_union = node.op == "UNION" and node.all
        out = set()
        for kl, al, keyed_l in left:
            for kr, ar, keyed_r in right:
                k = kl & kr
                if not k and not bag_union:
                    continue
                a = _merge(al, ar)
                if a is not None:
                    out.add((k, a, keyed_l or keyed_r or not bag_union))
        if not out:
            raise _NotLocal(f"{node.op}{' ALL' if node.all else ''} needs the partition key at the same "
                            "position on both sides")
        return out
    raise _NotLocal(f"{type(node).__name__} is not known to be partition-local")


# ---------------------------------------------------------------- time slicing


def warmup(node: Any, views: dict[str, Any]) -> int:
    """Ticks of stream history the plan's state at an instant depends on (raises _NotLocal when unbounded).
    An upper bound: sums along the plan, plus one instant per operator that compares with the previous one."""
    if isinstance(node, L.StreamScan | L.RelationScan):
        return 0
    if isinstance(node, L.QueryOutput):
        return warmup(views[node.query_id], views)
    if isinstance(node, L.Window):
        below = warmup(node.child, views)
        if node.wkind == "RANGE":
            return below + int(node.range) + int(node.slide or 0) + 1
        if node.wkind == "NOW":
            return below + 1
        if node.wkind == "UNBOUNDED":
            raise _NotLocal("a stream read without a window (RANGE UNBOUNDED) keeps all its history")
        raise _NotLocal(f"[ROWS {node.rows}]{' with PARTITION BY' if node.partition else ''} is not bounded "
                        "in time (a quiet stream or key keeps its rows forever)")
    if isinstance(node, L.Sample) and node.percent < 100:
        raise _NotLocal(f"SAMPLE({node.percent:g}) draws per batch; it is not reproducible when split")
    if isinstance(node, L.ToStream | L.Changelog):
        return max(warmup(c, views) for c in node.children) + 1
    return max((warmup(c, views) for c in node.children), default=0)


def _stateless_istream(node: Any) -> bool:
    """ISTREAM over filters and projections of an unbounded window over a stream: emits each input element at
    its own instant, so any slice of time is exact with no warm-up."""
    if not (isinstance(node, L.ToStream) and node.op == "ISTREAM"):
        return False
    n = node.child
    while isinstance(n, L.Filter | L.Project):
        n = n.child
    if not (isinstance(n, L.Window) and n.wkind == "UNBOUNDED"):
        return False
    n = n.child
    while isinstance(n, L.Filter | L.Project | L.Sample):
        if isinstance(n, L.Sample) and n.percent < 100:
            return False
        n = n.child
    return isinstance(n, L.StreamScan)


# ---------------------------------------------------------------- choice


def choose(eng: Any, query: Any, partitions: int, requested: str | None = None) -> Strategy:
    """The strategy for ``query`` (registered in ``eng``) on ``partitions`` partitions; ``requested`` forces
    one, refused with the planner's reason when the plan does not allow it."""
    if requested is not None and requested not in STRATEGIES:
        raise ReplayError(f"unknown strategy '{requested}' (one of {', '.join(STRATEGIES)})")
    views = {q.id: q.node for q in eng.queries()}
    root = query.node
    names = {n: list(eng.sources[n].names) for n in eng.sources}
    why: dict[str, str] = {}
    key_choice: tuple[dict[str, str], bool] | None = None
    net: str | None = None
    try:
        cands = key_partitionings(root, views)
        if not cands:
            raise _NotLocal("no assignment of keys keeps every operator partition-local")
    except _NotLocal as e:
        why[KEY] = str(e)
        cands, net = _netted_on_driver(root, views)
    if cands:
        k, a, keyed = sorted(cands, key=lambda c: (not c[2], c[1]))[0]
        key_choice = ({inp: names[inp][i] for inp, i in a}, keyed)
        why.pop(KEY, None)
    warm: int | None = None
    if _stateless_istream(root):
        warm = 0
    else:
        try:
            warm = warmup(root, views)
        except _NotLocal as e:
            why[TIME] = str(e)
    if key_choice is not None and not key_choice[0]:
        key_choice = None
        why[KEY] = "the query reads no input to partition"
    candidates: dict[str, Strategy] = {}
    if key_choice is not None:
        keys, keyed = key_choice
        reason = ("its state is partitioned by key: " if keyed else "every operator is row-local: ") + \
            ", ".join(f"{i}.{c}" for i, c in sorted(keys.items()))
        if net:
            reason += f" (its result drops the key: changes netted on the driver before {net})"
        candidates[KEY] = Strategy(KEY, partitions, reason, keys=keys, net=net)
    if warm is not None:
        reason = (f"its state is bounded in time: each slice warms up over {warm} ticks" if warm else
                  "it is a stateless ISTREAM: each slice needs no earlier input")
        candidates[TIME] = Strategy(TIME, partitions, reason, warmup=warm)
    single_reason = "; ".join(f"not {k}: {v}" for k, v in why.items()) or "requested"
    candidates[SINGLE] = Strategy(SINGLE, 1, single_reason, warmup=warm)
    if requested is not None:
        if requested not in candidates:
            raise ReplayError(f"the query cannot be replayed {requested}: {why.get(requested, 'not allowed')}")
        pick = requested
    elif KEY in candidates and key_choice[1]:
        pick = KEY
    elif TIME in candidates:
        pick = TIME
    elif KEY in candidates:
        pick = KEY
    else:
        pick = SINGLE
    chosen = candidates[pick]
    alternatives = {k: f"not possible: {v}" for k, v in why.items()}
    alternatives.update({k: f"possible ({c.reason})" for k, c in candidates.items() if k not in (pick, SINGLE)})
    return Strategy(chosen.kind, chosen.partitions, chosen.reason, chosen.keys, warm, alternatives, chosen.net)


def _netted_on_driver(root: Any, views: dict[str, Any]) -> tuple[set[Cand], str | None]:
    """Key partitioning of a plan whose last step compares whole rows that no longer hold the key (ISTREAM,
    DSTREAM or the changelog of the result, over rows without the key): every partition computes the
    changelog of the relation below it, the driver adds the partitions' changes per instant and row (the
    relation is their disjoint union, so the sums are its exact net changes) and applies the last step to the
    sums (ISTREAM keeps the positive part, DSTREAM the negative part). Only where that step waits for each
    instant to be final live too (its input can delete; a plan that never deletes emits at once) and the rows
    hold no FLOAT (whose NaN and -0.0 the driver's equality would not treat as the engine does)."""
    if isinstance(root, L.ToStream) and root.op in ("ISTREAM", "DSTREAM"):
        op = root.op
    elif isinstance(root, L.Changelog):
        op = "CHANGELOG"
    else:
        return set(), None
    if root.child.monotone or "FLOAT" in root.types:
        return set(), None
    try:
        cands = key_partitionings(root.child, views)
    except _NotLocal:
        return set(), None
    return {(k, a, True) for k, a, _ in cands}, op if cands else None
