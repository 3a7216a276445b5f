"""``GET /metrics``: Prometheus text exposition format 0.0.4 (SPEC section 7): ingest counters and rates per
input, queue bytes, results per query, reader gaps, errors by kind, engine slices, archive; all read through
the runtime's read API (docs/server.md), nothing from the engine's insides."""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from dsms.runtime import Runtime
from web.handlers.common import runtime


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(v: float) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_: str, samples: Iterable[tuple[dict[str, str], float]]) -> None:
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lab = ",".join(f'{k}="{_esc(str(v))}"' for k, v in labels.items())
            self.lines.append(f"{name}{{{lab}}} {_num(value)}" if lab else f"{name} {_num(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render(rt: Runtime) -> str:
    """The whole exposition, from the runtime's read API (source_stats, query_stats, runtime_stats, system)."""
    o = _Out()
    inputs = sorted(s.name for s in (*rt.streams(), *rt.relations()))
    per = {name.lower(): rt.source_stats(name) for name in inputs}
    o.metric("dsms_ingest_elements_total", "counter", "Input elements accepted, per stream or relation.",
             (({"input": k}, c["elements_in"]) for k, c in per.items()))
    o.metric("dsms_ingest_requests_total", "counter", "Input requests (HTTP and MQTT), per input.",
             (({"input": k}, c["requests"]) for k, c in per.items()))
    o.metric("dsms_ingest_bytes_total", "counter", "Input body bytes received, per input.",
             (({"input": k}, c["bytes_in"]) for k, c in per.items()))
    o.metric("dsms_ingest_refused_total", "counter", "Input requests refused (bad input or overload), per input.",
             (({"input": k}, c["refused"]) for k, c in per.items()))
    o.metric("dsms_heartbeats_total", "counter", "Heartbeats that advanced an input.",
             (({"input": k}, c["heartbeats"]) for k, c in per.items()))
    o.metric("dsms_ingest_rate", "gauge", "Input elements per second, smoothed over the last seconds.",
             (({"input": k}, c["rate_per_s"]) for k, c in per.items()))
    o.metric("dsms_input_backlog_tuples", "gauge", "Input tuples not yet consumed by the engine, per input.",
             (({"input": k}, c["backlog"]) for k, c in per.items()))
    system = rt.system()
    o.metric("dsms_queue_bytes", "gauge", "Bytes held in all engine queues.", [({}, system["queue_bytes"])])
    o.metric("dsms_queue_tuples", "gauge", "Tuples held in all engine queues.", [({}, system["queue_tuples"])])
    o.metric("dsms_queue_peak_bytes", "gauge", "Largest bytes any single engine queue has held.",
             [({}, system["queue_peak_bytes"])])
    queries = sorted((q.id, rt.query_stats(q.id)) for q in rt.queries())
    o.metric("dsms_results_out_total", "counter", "Result elements produced, per query.",
             (({"query": qid}, st["results_out"]) for qid, st in queries))
    o.metric("dsms_results_missed_total", "counter", "Result elements readers missed (gap markers), per query.",
             (({"query": qid}, st["missed_by_readers"]) for qid, st in queries))
    o.metric("dsms_subscribers", "gauge", "Open result readers, per query.",
             (({"query": qid}, st["subscribers"]) for qid, st in queries))
    o.metric("dsms_retained_results", "gauge", "Result elements kept for ?from= replay, per query.",
             (({"query": qid}, st["retained"]) for qid, st in queries))
    stats = system["runtime"]
    eng = stats["engine"]
    o.metric("dsms_errors_total", "counter", "Errors by kind (http_<status>, bad_input, overloaded, archive, ...).",
             (({"kind": k}, v) for k, v in sorted(stats["errors"].items())))
    o.metric("dsms_punctuations_ignored_total", "counter", "Punctuations received (accepted, not yet used).",
             [({}, stats["punctuations_ignored"])])
    o.metric("dsms_engine_slices_total", "counter", "Engine time slices run.", [({}, eng["slices"])])
    o.metric("dsms_engine_steps_total", "counter", "Operator runs done by the engine.", [({}, eng["steps"])])
    o.metric("dsms_engine_slice_seconds_total", "counter", "Time spent in engine slices.",
             [({}, eng["slice_seconds_total"])])
    o.metric("dsms_engine_slice_seconds_max", "gauge", "Longest engine slice so far.",
             [({}, eng["slice_ms_max"] / 1000.0)])
    o.metric("dsms_catalog_changes_waiting", "gauge",
             "Catalog changes waiting for their turn or for the engine to process the input before them.",
             [({}, stats["barrier"]["changes_waiting"])])
    o.metric("dsms_input_held_tuples", "gauge", "Input tuples held behind a catalog change that waits.",
             [({}, stats["barrier"]["rows_held"])])
    o.metric("dsms_catalog_objects", "gauge", "Registered streams, relations and queries.",
             [({"kind": "stream"}, stats["streams"]), ({"kind": "relation"}, stats["relations"]),
              ({"kind": "query"}, stats["queries"])])
    a = stats["archive"]
    if "bytes" in a:
        o.metric("dsms_archive_bytes", "gauge", "Bytes in the input archive.", [({}, a["bytes"])])
        o.metric("dsms_archive_appends_total", "counter", "Frames appended to the archive.", [({}, a["appends"])])
        o.metric("dsms_archive_syncs_total", "counter", "Archive fsync rounds (group commits).", [({}, a["syncs"])])
        o.metric("dsms_archive_unsynced_appends", "gauge", "Appends waiting for a group commit.",
                 [({}, a["unsynced_appends"])])
    o.metric("dsms_uptime_seconds", "gauge", "Seconds since the runtime started.", [({}, stats["uptime_s"])])
    return o.text()


async def get_metrics(request: web.Request) -> web.Response:
    return web.Response(body=render(runtime(request)).encode(),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
