"""One engine over one share of the archive: what every Spark task of a replay runs (SPEC section 2: "the
Spark replay drives [the engine] directly").

The task rebuilds the catalog and the query in a fresh :class:`dsms.Engine`, pushes its records the way the
server's recovery does (stream batches, relation updates one instant per frame, heartbeats), runs the engine,
and keeps the results of the instants it owns. Results are therefore dsms's own by construction; the strategies
(``dsms.spark.strategy``) only decide which records a task gets and which instants it owns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from dsms.archive import Record
from dsms.errors import DsmsError
from dsms.plan import logical as L
from dsms.plan.xml_plan import plan_to_xml
from dsms.spark.spec import ReplaySpec

RUN_EVERY = 64   # frames between engine runs: keeps the engine's input queues short, as the server's pump does


@dataclass
class TaskResult:
    """What one task sends back: its results (columnar, in timestamp order) and its counters."""

    ts: np.ndarray
    sign: np.ndarray
    cols: list[np.ndarray]
    rows_in: int = 0          # input rows of the instants this task owns (warm-up excluded)
    rows_read: int = 0        # every row fed to the engine, warm-up included
    frames: int = 0
    errors: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)


def run_engine(spec: ReplaySpec, records: Iterable[Record], emit_from: int | None = None,
               emit_to: int | None = None, close_at: int | None = None, changelog: bool = False) -> TaskResult:
    """Feed ``records`` (already merged in time order) to a fresh engine running the query; return the results
    whose instants are in ``[emit_from, emit_to)``. ``close_at``: a heartbeat on every input once the records
    are in (the end of a time slice: instants below it are final because later input has passed them).
    ``changelog``: run the query without its final ISTREAM/DSTREAM, giving the changelog of the relation below
    it (for the driver to net across key partitions, ``dsms.spark.strategy._netted_on_driver``)."""
    eng, q = spec.engine()
    if changelog and isinstance(q.node, L.ToStream):
        xml = plan_to_xml(L.Changelog(q.node.child, names=q.node.names), q.id, L.RELATION)
        eng.drop(q.id)
        q = eng.load_plan(xml)
    sources = eng.sources
    out: list = []
    res = TaskResult(np.empty(0, np.int64), np.empty(0, np.int8), [])
    for rec in records:
        src = sources.get(rec.input)
        if src is None:
            continue
        res.frames += 1
        try:
            if rec.is_heartbeat:
                eng.heartbeat(int(rec.ts), rec.input)
            elif src.obj.kind == "stream":
                if len(rec.ts):
                    eng.push(rec.input, {n: rec.cols[n] for n in src.names}, rec.ts)
            elif len(rec.ts):
                ins = rec.sign > 0
                eng.update(rec.input, insert={n: rec.cols[n][ins] for n in src.names},
                           delete={n: rec.cols[n][~ins] for n in src.names}, ts=int(rec.ts[0]))
            res.rows_read += len(rec)
            res.rows_in += _owned(rec, emit_from, emit_to)
        except DsmsError as e:      # the server validated this input before archiving it: report, never hide
            res.errors.append(f"{rec.input} frame {rec.seq}: {e}")
        if res.frames % RUN_EVERY == 0:
            eng.run()
            out.extend(q.drain_batches())
    if close_at is not None:
        eng.heartbeat(close_at)
    eng.run()
    out.extend(q.drain_batches())
    ncols = len(q.schema)
    if out:
        ts = np.concatenate([b.ts for b in out])
        sign = np.concatenate([b.sign for b in out])
        cols = [_concat([b.cols[i] for b in out]) for i in range(ncols)]
    else:
        ts, sign, cols = np.empty(0, np.int64), np.empty(0, np.int8), [np.empty(0, object) for _ in range(ncols)]
    if emit_from is not None or emit_to is not None:
        keep = np.ones(len(ts), dtype=bool)
        if emit_from is not None:
            keep &= ts >= emit_from
        if emit_to is not None:
            keep &= ts < emit_to
        if not keep.all():
            ts, sign, cols = ts[keep], sign[keep], [c[keep] for c in cols]
    res.ts, res.sign, res.cols = ts, sign, cols
    return res


def _owned(rec: Record, lo: int | None, hi: int | None) -> int:
    if rec.is_heartbeat:
        return 0
    if lo is None and hi is None:
        return len(rec)
    keep = np.ones(len(rec.ts), dtype=bool)
    if lo is not None:
        keep &= rec.ts >= lo
    if hi is not None:
        keep &= rec.ts < hi
    return int(keep.sum())


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    if len(arrays) == 1:
        return arrays[0]
    if len({a.dtype for a in arrays}) > 1:
        return np.concatenate([a.astype(object) for a in arrays])
    return np.concatenate(arrays)
