"""Live statistics for the GUI: snapshots of the control tables, and a sampled history of memory and rates.

The GUI shows what the server computes: rates, lags, totals and the memory history are worked out here from the
runtime's public read API (``entities()``, ``entity()``, ``explain()``, ``system()``, ``query_stats()``,
``source_stats()``), never in the browser. A sampler task (one per app, started with it) records once a
``period`` the bytes of every queue and synopsis and the result count of every query, keeping the last
``keep`` samples (five minutes by default); ``GET /stats/stream`` sends fresh snapshots several times a second
and ``GET /stats/history`` the recorded series (SPEC sections 1 and 8: "a web GUI shows the query plans as
live graphs").

Memory is what the control tables report: a queue's ``bytes`` and a synopsis's ``bytes``. A window whose tuples
are views of a shared store is counted through that store (the plan names the store), so windows over one
stream are not counted twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from dsms.formats import jsonable
from dsms.runtime import Runtime

log = logging.getLogger("dsms.web")

PERIOD_S = 1.0
KEEP = 300


def clean(v: Any) -> Any:
    """A JSON-ready copy (numpy scalars, non-finite floats, odd values as text)."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [clean(x) for x in v]
    if v is None or isinstance(v, bool | int | float | str):
        return jsonable(v)
    try:
        return jsonable(v.item())
    except AttributeError:
        return str(v)


def _bytes(ent: dict[str, Any]) -> int:
    b = ent.get("bytes")
    return int(b) if isinstance(b, int | float) else 0


class Telemetry:
    """Samples the runtime and keeps a short history; builds the snapshots the GUI streams.

    >>> t = Telemetry.__new__(Telemetry); t.keep = 3; t.samples = collections.deque(maxlen=3)
    >>> t.samples.extend([{"t": 1, "bytes": {"queue:0": 8}}, {"t": 2, "bytes": {"queue:0": 16}}])
    >>> t.series(["queue:0", "syn:1"])
    {'t': [1, 2], 'series': {'queue:0': [8, 16], 'syn:1': [None, None]}}
    """

    def __init__(self, rt: Runtime, period: float = PERIOD_S, keep: int = KEEP) -> None:
        self.rt = rt
        self.period = period
        self.keep = keep
        self.samples: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self._prev: dict[str, tuple[float, int]] = {}
        self.result_rates: dict[str, float] = {}
        self._ids: tuple[str, ...] = ()
        self._plans: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------ sampling

    def plan(self, qid: str) -> dict[str, Any]:
        """The query's plan (JSON), cached until the set of entities changes (see ``memory``)."""
        plan = self._plans.get(qid)
        if plan is None:
            plan = self._plans[qid] = self.rt.explain(qid, "json")
        return plan

    def _in_stores(self) -> set[str]:
        """Window synopses counted through a shared store (their arrays are the store's)."""
        out: set[str] = set()
        for q in self.rt.queries():
            try:
                plan = self.plan(q.id)
            except Exception:  # noqa: BLE001 - a query dropped meanwhile
                continue
            out.update(s["id"] for s in plan.get("synopses", ()) if s.get("store"))
        return out

    def memory(self) -> tuple[dict[str, int], dict[str, int]]:
        """(bytes of every queue and synopsis, totals ``queues``, ``synopses``, ``total``). Plans are read
        again only when an entity came or went, so sampling costs one pass over the control tables."""
        entities = self.rt.entities()
        ids = tuple(str(e.get("id")) for e in entities)
        if ids != self._ids:
            self._ids = ids
            self._plans.clear()
        per: dict[str, int] = {}
        skip = self._in_stores()
        totals = {"queues": 0, "synopses": 0}
        for e in entities:
            eid = str(e.get("id"))
            if eid.startswith("queue:"):
                per[eid] = _bytes(e)
                totals["queues"] += per[eid]
            elif eid.startswith("syn:"):
                per[eid] = _bytes(e)
                if eid not in skip:
                    totals["synopses"] += per[eid]
        totals["total"] = totals["queues"] + totals["synopses"]
        return per, totals

    def sample(self) -> dict[str, Any]:
        """Record one sample: bytes per entity, memory totals, and each query's result rate since the last."""
        now = time.time()
        per, totals = self.memory()
        for q in self.rt.queries():
            out = int(self.rt.query_stats(q.id).get("results_out", 0))
            prev = self._prev.get(q.id)
            if prev is not None and now > prev[0]:
                self.result_rates[q.id] = round(max(out - prev[1], 0) / (now - prev[0]), 1)
            self._prev[q.id] = (now, out)
        live = {q.id for q in self.rt.queries()}
        for gone in set(self._prev) - live:
            self._prev.pop(gone, None)
            self.result_rates.pop(gone, None)
        s = {"t": int(now * 1000), "bytes": per, **totals}
        self.samples.append(s)
        return s

    async def run(self) -> None:
        failing = False
        while True:
            try:
                self.sample()
                failing = False
            except Exception:  # noqa: BLE001 - statistics must never take the server down; said once per streak
                if not failing:
                    log.exception("GUI statistics sampler failed (it keeps trying every %.1fs)", self.period)
                failing = True
            await asyncio.sleep(self.period)

    # ------------------------------------------------------------ reading

    def series(self, ids: list[str]) -> dict[str, Any]:
        """The recorded bytes of the entities ``ids``, aligned on the sample times (None: not there then)."""
        samples = list(self.samples)
        return {"t": [s["t"] for s in samples],
                "series": {i: [s["bytes"].get(i) for s in samples] for i in ids}}

    def totals(self) -> dict[str, Any]:
        samples = list(self.samples)
        return {"t": [s["t"] for s in samples], "series": {k: [s[k] for s in samples]
                                                           for k in ("total", "queues", "synopses")}}

    def query_summary(self, qid: str, plan: dict[str, Any] | None = None) -> dict[str, Any]:
        """A query as the overview lists it: kind, state, approximate or exact, result rate and lag.

        The lag is application time: the newest frontier of the streams and relations the query reads minus
        the query's own output frontier (its last heartbeat), in ticks; how far its results trail its input."""
        q = self.rt.query(qid)
        stats = self.rt.query_stats(q.id)
        plan = plan if plan is not None else self.plan(q.id)
        approx = False
        for s in plan.get("synopses", ()):
            with contextlib.suppress(Exception):
                approx = approx or bool(self.rt.entity(s["id"]).get("approximate"))
        frontiers = []
        for name in getattr(q.definition, "depends_on", ()) or ():
            with contextlib.suppress(Exception):
                frontiers.append(self.rt.source_stats(name).get("frontier"))
        now = max((f for f in frontiers if f is not None), default=None)
        out_frontier = stats.get("last_heartbeat")
        lag = None if now is None or out_frontier is None else max(int(now) - int(out_frontier), 0)
        return {"id": q.id, "name": q.name, "kind": q.kind, "text": q.text, "state": "running",
                "exact": not approx, "results_out": stats.get("results_out", 0),
                "result_rate_per_s": self.result_rates.get(q.id, 0.0), "lag_ticks": lag,
                "subscribers": stats.get("subscribers", 0), "last_ts": stats.get("last_ts")}

    def overview(self) -> dict[str, Any]:
        """What the overview page shows: system table, sources with rates, queries, memory now."""
        rt = self.rt
        per, totals = self.memory()
        sources = []
        for s in [*rt.streams(), *rt.relations()]:
            st = rt.source_stats(s.name)
            sources.append({"name": s.name, "kind": s.kind, "rate_per_s": st.get("rate_per_s"),
                            "elements_in": st.get("elements_in"), "frontier": st.get("frontier"),
                            "backlog": st.get("backlog")})
        system = rt.system()
        system.pop("runtime", None)
        return clean({"t": int(time.time() * 1000), "system": system, "memory": totals, "sources": sources,
                      "queries": [self.query_summary(q.id) for q in rt.queries()]})

    def query_view(self, qid: str) -> dict[str, Any]:
        """What a query page shows live: its summary and the control table of every entity of its plan."""
        q = self.rt.query(qid)
        plan = self.rt.explain(q.id, "json")
        ids = [o["id"] for o in plan["operators"]] + [x["id"] for x in plan["queues"]] + \
              [s["id"] for s in plan.get("synopses", ())]
        entities = {}
        for i in ids:
            with contextlib.suppress(Exception):
                entities[i] = self.rt.entity(i)
        return clean({"t": int(time.time() * 1000), "query": self.query_summary(q.id, plan),
                      "plan_ids": sorted(ids), "plan_version": plan_version(plan), "entities": entities})


def plan_version(plan: dict[str, Any]) -> str:
    """A short digest of what a plan graph draws (entities, edges, labels, owners, sharing), without its
    statistics: it changes when the plan does (another query comes to share an entity, a window's range is
    set), so a page knows when to fetch the plan again.

    >>> p = {"operators": [{"id": "op:1", "label": "RANGE 5", "owners": ["q1"]}], "queues": [], "edges": []}
    >>> plan_version(p) == plan_version(p), plan_version(p) == plan_version({**p, "operators": []})
    (True, False)
    """
    sig = [[(o["id"], o.get("label"), o.get("owners"), o.get("output")) for o in plan.get("operators", ())],
           [(x["id"], x.get("readers"), x.get("source")) for x in plan.get("queues", ())],
           [(x["id"], x.get("owners"), x.get("operators"), x.get("store")) for x in plan.get("synopses", ())],
           [(e["from"], e["to"]) for e in plan.get("edges", ())]]
    return hashlib.sha1(json.dumps(sig, default=str).encode()).hexdigest()[:16]


TELEMETRY: web.AppKey[Telemetry] = web.AppKey("telemetry", Telemetry)


def install(app: web.Application, runtime_key: web.AppKey) -> None:
    """Give ``app`` a Telemetry whose sampler runs while the app does."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        tel = Telemetry(app[runtime_key])
        app[TELEMETRY] = tel
        task = asyncio.get_running_loop().create_task(tel.run(), name="dsms-telemetry")
        yield
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

    app.cleanup_ctx.append(ctx)
