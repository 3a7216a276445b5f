"""``/stats``: live statistics for the GUI, streamed as server-sent events, and the sampled memory history
(computed in ``web/telemetry.py``; SPEC sections 1 and 8)."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from web.handlers.common import bool_param, int_param, runtime
from web.telemetry import TELEMETRY, Telemetry


def telemetry(request: web.Request) -> Telemetry:
    """The app's Telemetry (a fresh one without history when the app runs without its sampler)."""
    tel = request.app.get(TELEMETRY)
    return tel if tel is not None else Telemetry(runtime(request))


def _snapshot(tel: Telemetry, query: str | None) -> dict:
    return tel.query_view(query) if query else tel.overview()


async def stream(request: web.Request) -> web.StreamResponse:
    """``text/event-stream`` of snapshots every ``interval_ms`` (default 250): the overview, or with
    ``?query=id`` that query's summary and the control table of every entity of its plan. ``?follow=false``
    sends one snapshot and ends. The stream ends with an ``event: end`` when the query is dropped."""
    tel = telemetry(request)
    query = request.query.get("query") or None
    if query:
        query = runtime(request).query(query).id          # 404 before the stream starts
    interval = int_param(request, "interval_ms", 250, 50, 60_000) / 1000.0
    follow = bool_param(request, "follow", True)
    first = _snapshot(tel, query)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                       "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    try:
        await resp.write(b"data: " + json.dumps(first).encode() + b"\n\n")
        while follow:
            await asyncio.sleep(interval)
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            try:
                snap = _snapshot(tel, query)
            except Exception as e:  # noqa: BLE001 - the query went away: say so and end
                await resp.write(b"event: end\ndata: " + json.dumps({"detail": str(e)}).encode() + b"\n\n")
                break
            await resp.write(b"data: " + json.dumps(snap).encode() + b"\n\n")
        await resp.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    return resp


async def history(request: web.Request) -> web.Response:
    """The sampled bytes over the last minutes: totals (queues, synopses, all), or with ``?query=id`` every
    queue and synopsis of that query's plan; ``kinds`` says which series is which."""
    tel = telemetry(request)
    query = request.query.get("query") or None
    if not query:
        return web.json_response({"period_s": tel.period, **tel.totals()})
    rt = runtime(request)
    plan = rt.explain(rt.query(query).id, "json")
    kinds = {x["id"]: "queue" for x in plan["queues"]}
    kinds.update({s["id"]: "synopsis" for s in plan.get("synopses", ())})
    return web.json_response({"period_s": tel.period, "kinds": kinds, **tel.series(list(kinds))})
