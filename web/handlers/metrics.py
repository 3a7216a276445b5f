"""``GET /metrics``: Prometheus text exposition format 0.0.4 (SPEC section 7): ingest counters and rates per
input, queue bytes, results per query, reader gaps, errors by kind, engine slices, archive."""

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
    """The whole exposition, from the runtime's counters and the engine's public statistics."""
    o = _Out()
    eng = rt.engine
    inputs = sorted(set(rt.input.counters) | set(eng.sources))
    per = {k: rt.input.counters[k] for k in inputs}
    o.metric("dsms_ingest_elements_total", "counter", "Input elements accepted, per stream or relation.",
             (({"input": k}, int(c["elements"])) for k, c in per.items()))
    o.metric("dsms_ingest_requests_total", "counter", "Input requests (HTTP and MQTT), per input.",
             (({"input": k}, int(c["requests"])) for k, c in per.items()))
    o.metric("dsms_ingest_bytes_total", "counter", "Input body bytes received, per input.",
             (({"input": k}, int(c["bytes"])) for k, c in per.items()))
    o.metric("dsms_ingest_refused_total", "counter", "Input requests refused (bad input or overload), per input.",
             (({"input": k}, int(c["refused"])) for k, c in per.items()))
    o.metric("dsms_heartbeats_total", "counter", "Heartbeats that advanced an input.",
             (({"input": k}, int(c["heartbeats"])) for k, c in per.items()))
    o.metric("dsms_ingest_rate", "gauge", "Input elements per second, smoothed over the last seconds.",
             (({"input": k}, rt.input.rates.get(k, 0.0)) for k in inputs))
    o.metric("dsms_input_backlog_tuples", "gauge", "Input tuples not yet consumed by the engine, per input.",
             (({"input": k.lower()}, n) for k, n in sorted(eng.input_backlog().items())))
    o.metric("dsms_queue_bytes", "gauge", "Bytes held in all engine queues.",
             [({}, sum(int(q.bytes) for q in eng.queues))])
    o.metric("dsms_queue_tuples", "gauge", "Tuples held in all engine queues.",
             [({}, sum(int(q.tuples) for q in eng.queues))])
    o.metric("dsms_queue_peak_bytes", "gauge", "Largest bytes any single engine queue has held.",
             [({}, max((int(q.peak_bytes) for q in eng.queues), default=0))])
    states = sorted(rt.states.items())
    o.metric("dsms_results_out_total", "counter", "Result elements produced, per query.",
             (({"query": qid}, st.results_out) for qid, st in states))
    o.metric("dsms_results_missed_total", "counter", "Result elements readers missed (gap markers), per query.",
             (({"query": qid}, st.missed) for qid, st in states))
    o.metric("dsms_subscribers", "gauge", "Open result readers, per query.",
             (({"query": qid}, len(st.subscribers)) for qid, st in states))
    o.metric("dsms_retained_results", "gauge", "Result elements kept for ?from= replay, per query.",
             (({"query": qid}, st.ring_elements) for qid, st in states))
    o.metric("dsms_errors_total", "counter", "Errors by kind (http_<status>, bad_input, overloaded, archive, ...).",
             (({"kind": k}, v) for k, v in sorted(rt.errors.items())))
    o.metric("dsms_punctuations_ignored_total", "counter", "Punctuations received (accepted, not yet used).",
             [({}, rt.input.punctuations)])
    o.metric("dsms_engine_slices_total", "counter", "Engine time slices run.", [({}, rt.pump.slices)])
    o.metric("dsms_engine_steps_total", "counter", "Operator runs done by the engine.", [({}, rt.pump.steps_total)])
    o.metric("dsms_engine_slice_seconds_total", "counter", "Time spent in engine slices.", [({}, rt.pump.slice_seconds)])
    o.metric("dsms_engine_slice_seconds_max", "gauge", "Longest engine slice so far.", [({}, rt.pump.slice_max)])
    o.metric("dsms_catalog_objects", "gauge", "Registered streams, relations and queries.",
             [({"kind": "stream"}, len(eng.streams())), ({"kind": "relation"}, len(eng.relations())),
              ({"kind": "query"}, len(eng.queries()))])
    if rt.archive is not None and not rt.archive.closed:
        a = rt.archive.stats()
        o.metric("dsms_archive_bytes", "gauge", "Bytes in the input archive.", [({}, a["bytes"])])
        o.metric("dsms_archive_appends_total", "counter", "Frames appended to the archive.", [({}, a["appends"])])
        o.metric("dsms_archive_syncs_total", "counter", "Archive fsync rounds (group commits).", [({}, a["syncs"])])
        o.metric("dsms_archive_unsynced_appends", "gauge", "Appends waiting for a group commit.",
                 [({}, a["unsynced_appends"])])
    o.metric("dsms_uptime_seconds", "gauge", "Seconds since the runtime started.",
             [({}, rt.runtime_stats()["uptime_s"])])
    return o.text()


async def get_metrics(request: web.Request) -> web.Response:
    return web.Response(body=render(runtime(request)).encode(),
                        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
