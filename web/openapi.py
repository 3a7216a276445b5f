"""The OpenAPI 3.1 description of the HTTP API (SPEC section 7), served at ``GET /openapi.json``.

Written by hand next to ``web/routes.py``; a test checks that both list the same operations, so the document
stays truthful when a route is added.
"""

from __future__ import annotations

import copy
from typing import Any

_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _err(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_AUTH = [{"bearer": []}, {}]
_INPUT_CONTENT = {
    "application/json": {"schema": {"oneOf": [{"type": "array", "items": _ref("InputItem")}, _ref("InputItem")]}},
    "application/x-ndjson": {"schema": {"type": "string", "description": "one InputItem per line"}},
    "application/msgpack": {"schema": {"type": "string", "format": "binary",
                                       "description": "msgpack: an array of items, one item, or items back to "
                                                      "back; columnar {ts: [...], cols: {...}} allowed"}},
    "application/xml": {"schema": {"type": "string", "description": "<elements><element ts='..' sign='+'>"
                                                                   "<col>v</col></element><heartbeat ts='..'/>"
                                                                   "</elements>; no DTD"}},
}


def _op(summary: str, responses: dict[str, Any], *, mutating: bool = False, params: list | None = None,
        body: dict | None = None, tag: str = "") -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if tag:
        op["tags"] = [tag]
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = body
    if mutating:
        op["security"] = _AUTH
        op["responses"].setdefault("401", _err("token missing or wrong (token configured, or not on loopback)"))
        op["responses"].setdefault("413", _err("request body over limits.request_bytes"))
    op["responses"].setdefault("500", _err("server failure (archive I/O); never for bad input"))
    return op


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


def _query_param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_NAME = _path_param("name", "stream or relation name (case-insensitive)")
_QID = _path_param("id", "query id (q1) or name")
_EID = _path_param("id", "entity id (op:7, queue:12, syn:3)")

_SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error", "detail"], "properties": {
        "error": {"type": "string", "description": "short kind: bad input, CQL error, not found, conflict, ..."},
        "detail": {"type": "string", "description": "what was wrong and why"},
        "index": {"type": "integer", "description": "0-based position of the first bad item in the body"},
        "line": {"type": "integer"}, "column": {"type": "integer"},
        "expected": {"type": "array", "items": {"type": "string"}},
        "statement": {"type": "integer", "description": "index of the failing statement of a /cql request"},
        "done": {"type": "array", "items": _ref("CqlResult"),
                 "description": "what the statements before the failing one created (they stay applied)"}}},
    "ReplayRequest": {"type": "object", "properties": {
        "query": {"type": "string", "description": "CQL of the query to run (or query_id)"},
        "query_id": {"type": "string", "description": "a registered query's id or name (or query)"},
        "from": {"type": ["integer", "string"], "description": "first instant written (ms or ISO 8601)"},
        "to": {"type": ["integer", "string"], "description": "end instant, exclusive"},
        "master": {"type": "string", "default": "local[*]", "description": "local[N], local[*], spark://host:port"},
        "partitions": {"type": "integer", "minimum": 1},
        "strategy": {"enum": ["key-partitioned", "time-sliced", "single"],
                     "description": "force a strategy (refused when the plan does not allow it)"}}},
    "Replay": {"type": "object", "required": ["id", "state"], "properties": {
        "id": {"type": "string"}, "state": {"enum": ["queued", "running", "done", "failed"]},
        "request": _ref("ReplayRequest"),
        "plan": {"type": "object", "description": "strategy, partitions, why, partition_key, warmup"},
        "schema": {"type": "array", "items": _ref("Column")},
        "progress": {"type": "object", "description": "tasks_done, tasks, rows (input), results"},
        "summary": {"type": "object", "description": "once done: rows_in, results, instants, seconds, ..."},
        "error": {"type": "string", "description": "why it failed"},
        "results": {"type": "string", "description": "path of the results"}}},
    "Column": {"type": "object", "required": ["name", "type"], "properties": {
        "name": {"type": "string"},
        "type": {"type": "string", "enum": ["INT", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP"]}}},
    "Source": {"type": "object", "properties": {
        "name": {"type": "string"}, "kind": {"type": "string", "enum": ["stream", "relation"]},
        "columns": {"type": "array", "items": _ref("Column")},
        "source": {"type": ["object", "null"], "description": "MQTT source of a stream"},
        "stats": {"type": "object"}, "used_by": {"type": "array", "items": {"type": "string"}},
        "size": {"type": "integer", "description": "rows in a relation now"}}},
    "Registration": {"oneOf": [
        {"type": "object", "required": ["cql"], "properties": {"cql": {"type": "string"}}},
        {"type": "object", "required": ["name", "columns"], "properties": {
            "name": {"type": "string"},
            "columns": {"oneOf": [{"type": "array", "items": _ref("Column")},
                                  {"type": "object", "additionalProperties": {"type": "string"}}]},
            "source": {"type": "object", "properties": {"mqtt": {"type": "string"},
                                                        "format": {"enum": ["JSON", "MSGPACK"]},
                                                        "timestamp": {"type": "string"}}}}}]},
    "Query": {"type": "object", "required": ["id", "kind", "schema"], "properties": {
        "id": {"type": "string"}, "name": {"type": ["string", "null"]},
        "kind": {"type": "string", "enum": ["stream", "relation"]},
        "schema": {"type": "array", "items": _ref("Column")},
        "text": {"type": "string"}, "view": {"type": "boolean"}, "publish_topic": {"type": ["string", "null"]},
        "depends_on": {"type": "array", "items": {"type": "string"}},
        "stats": {"type": "object", "properties": {
            "results_out": {"type": "integer"}, "subscribers": {"type": "integer"},
            "retained": {"type": "integer"}, "retention": {"type": "integer"},
            "missed_by_readers": {"type": "integer"}}},
        "weight": {"type": "number"},
        "approximation": {"type": "object", "description": "exact now or not, since when (application time), "
                          "and the approximation in effect (docs/approximation.md)", "properties": {
                              "exact": {"type": "boolean"}, "since": {"type": ["integer", "null"]},
                              "approx": {"type": ["object", "null"]}}}}},
    "CqlResult": {"type": "object", "description": "what one statement did: created (stream, relation, query, "
                                                   "view) with its description, dropped, or what SHOW, DESCRIBE "
                                                   "or EXPLAIN answered (docs/cql.md)",
                  "properties": {"created": {"type": "string"}, "dropped": {"type": "string"},
                                 "show": {"type": "string"}, "header": {"type": "array", "items": {"type": "string"}},
                                 "rows": {"type": "array", "items": {"type": "object"}},
                                 "describe": {"type": "string"}, "explain": {"type": "string"}}},
    "InputItem": {"description": "an element, a heartbeat, a punctuation (ignored, counted), a columnar batch, "
                                 "or (relations) an insert/delete group",
                  "oneOf": [
                      {"type": "object", "required": ["row"], "properties": {
                          "ts": {"type": ["integer", "string"], "description": "ms, or ISO 8601"},
                          "sign": {"enum": [1, -1, "+", "-"]}, "row": {"type": "object"}}},
                      {"type": "object", "required": ["heartbeat"], "properties": {
                          "heartbeat": {"type": ["integer", "string"]}}},
                      {"type": "object", "required": ["punctuation"], "properties": {
                          "punctuation": {"type": "object"}}},
                      {"type": "object", "required": ["cols"], "properties": {
                          "ts": {"type": "array"}, "cols": {"type": "object"}, "sign": {"type": "array"}}},
                      {"type": "object", "properties": {"ts": {}, "insert": {"type": "array"},
                                                        "delete": {"type": "array"}}}]},
    "Accepted": {"type": "object", "properties": {
        "accepted": {"type": "integer"}, "heartbeat": {"type": ["integer", "null"]},
        "punctuations_ignored": {"type": "integer"}, "inserted": {"type": "integer"},
        "deleted": {"type": "integer"}}},
    "Element": {"type": "object", "required": ["ts", "sign", "row"], "properties": {
        "ts": {"type": "integer"}, "sign": {"enum": [1, -1]}, "row": {"type": "object"},
        "approx": {"type": "object"}}},
    "Entity": {"type": "object", "required": ["id", "kind"], "additionalProperties": True,
               "properties": {"id": {"type": "string"}, "kind": {"type": "string"}}},
}

_RESULT_CONTENT = {
    "application/x-ndjson": {"schema": {"type": "string"}, "example": '{"ts":7,"sign":1,"row":{"a":1}}\n'
                                                                         '{"heartbeat":20}\n'
                                                                         '{"gap":{"missed":3,"from_ts":21,"to_ts":25}}'},
    "text/event-stream": {"schema": {"type": "string"}, "example": 'data: {"ts":7,"sign":1,"row":{"a":1}}\n\n'},
    "application/xml": {"schema": {"type": "string"},
                        "example": '<stream query="q1"><element ts="7" sign="+"><a>1</a></element></stream>'},
}


def _paths() -> dict[str, Any]:
    p: dict[str, Any] = {}
    p["/"] = {"get": _op("The web GUI (docs/gui.md), with a plain listing of the catalog for browsers without scripts",
                         {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
                         tag="index")}
    p["/cql"] = {"post": _op(
        "Run CQL statements in order (text body, or JSON {cql}); a bare SELECT is refused (POST /queries runs one)",
        {"200": _json({"type": "object", "properties": {"results": {"type": "array", "items": _ref("CqlResult")}}},
                      "what each statement created, dropped, showed (SHOW, DESCRIBE) or explained (EXPLAIN)"),
         "400": _err("parse/bind error: line, column (from the start of the body), expected; statement index and "
                     "what was done before; a bare SELECT"),
         "404": _err("DROP of an unknown name"), "409": _err("a name taken, a DROP of something in use, or limits.max_queries reached"),
         "413": _err("statement text over limits.statement_chars")},
        mutating=True, tag="cql",
        body={"required": True, "content": {"text/plain": {"schema": {"type": "string"}},
                                            "application/json": {"schema": {"type": "object", "required": ["cql"],
                                                                            "properties": {"cql": {"type": "string"}}}}}})}
    for kind, plural in (("stream", "streams"), ("relation", "relations")):
        p[f"/{plural}"] = {
            "get": _op(f"List {plural}", {"200": _json({"type": "object", "properties": {
                plural: {"type": "array", "items": _ref("Source")}}}, f"every {kind}")}, tag=plural),
            "post": _op(f"Register a {kind}", {"201": _json(_ref("Source"), "registered"),
                                                "400": _err("bad definition"), "409": _err("name taken")},
                        mutating=True, tag=plural,
                        body={"required": True, "content": {"application/json": {"schema": _ref("Registration")}}}),
        }
        p[f"/{plural}/{{name}}"] = {
            "get": _op(f"Describe a {kind} with statistics", {"200": _json(_ref("Source"), kind),
                                                              "404": _err("unknown")}, params=[_NAME], tag=plural),
            "delete": _op(f"Drop a {kind}", {"204": {"description": "dropped"}, "404": _err("unknown"),
                                             "409": _err("a query reads it")},
                          mutating=True, params=[_NAME], tag=plural),
        }
    p["/streams/{name}/elements"] = {"post": _op(
        "Append elements (all or nothing); acknowledged once archived",
        {"200": _json(_ref("Accepted"), "accepted"), "400": _err("bad element: index and why"),
         "404": _err("unknown stream"), "415": _err("unknown Content-Type"),
         "503": {**_err("input backlog over limits.ingest_backlog"),
                 "headers": {"Retry-After": {"schema": {"type": "integer"}}}}},
        mutating=True, params=[_NAME], tag="streams", body={"required": True, "content": _INPUT_CONTENT})}
    p["/relations/{name}/updates"] = {"post": _op(
        "Timestamped inserts and deletes (all or nothing; a delete must match a row)",
        {"200": _json(_ref("Accepted"), "applied"), "400": _err("bad update: index and why"),
         "404": _err("unknown relation"), "415": _err("unknown Content-Type"),
         "503": {**_err("input backlog over limits.ingest_backlog"),
                 "headers": {"Retry-After": {"schema": {"type": "integer"}}}}},
        mutating=True, params=[_NAME], tag="relations", body={"required": True, "content": _INPUT_CONTENT})}
    p["/queries"] = {
        "get": _op("List queries", {"200": _json({"type": "object", "properties": {
            "queries": {"type": "array", "items": _ref("Query")}}}, "every query")}, tag="queries"),
        "post": _op("Register a query", {"201": _json(_ref("Query"), "registered: id, name, kind, schema"),
                                         "400": _err("CQL error or not a query"),
                                         "409": _err("name taken or limits.max_queries reached"),
                                         "413": _err("statement over limits.statement_chars")},
                    mutating=True, tag="queries",
                    body={"required": True, "content": {"application/json": {"schema": {
                        "type": "object", "required": ["cql"], "properties": {
                            "cql": {"type": "string"}, "retention": {"type": "integer", "minimum": 0}}}}}}),
    }
    p["/queries/{id}"] = {
        "get": _op("Describe a query with statistics", {"200": _json(_ref("Query"), "query"),
                                                        "404": _err("unknown")}, params=[_QID], tag="queries"),
        "patch": _op("Set runtime knobs of a query (retention, weight)", {"200": _json(_ref("Query"), "updated"),
                                                                   "400": _err("bad value"), "404": _err("unknown")},
                     mutating=True, params=[_QID], tag="queries",
                     body={"required": True, "content": {"application/json": {"schema": {
                         "type": "object", "properties": {"retention": {"type": "integer", "minimum": 0},
                                                          "weight": {"type": "number", "exclusiveMinimum": 0}}}}}}),
        "delete": _op("Drop a query", {"204": {"description": "dropped"}, "404": _err("unknown"),
                                       "409": _err("another query reads it")},
                      mutating=True, params=[_QID], tag="queries"),
    }
    p["/queries/{id}/results"] = {"get": _op(
        "Results, streamed while the query runs (NDJSON, SSE or XML)",
        {"200": {"description": "a stream of elements, heartbeats and gap markers; a relation's reader first gets "
                            "its contents (a snapshot item, then elements marked snapshot)", "content": _RESULT_CONTENT},
         "400": _err("bad parameter"), "404": _err("unknown query")},
        params=[_QID,
                _query_param("format", {"enum": ["ndjson", "sse", "xml"]}, "output format (else by Accept)"),
                _query_param("from", {"type": ["integer", "string"]}, "replay retained results with ts >= from"),
                _query_param("ts", {"enum": ["ms", "iso"], "default": "ms"},
                             "timestamps as milliseconds or as ISO 8601 text"),
                _query_param("after", {"type": "integer", "minimum": 0},
                             "resume after this element id (as the Last-Event-ID header does)"),
                _query_param("snapshot", {"type": "boolean"},
                             "a relation's current contents first (default: when following without from/after)"),
                _query_param("follow", {"type": "boolean", "default": True},
                             "false: send what is retained/produced so far, then end"),
                _query_param("buffer", {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                             "this reader's buffer in elements (default results.subscriber_buffer); bounded "
                             "in bytes too (results.reader_buffer_bytes, results.reader_memory)")],
        tag="queries")}
    p["/queries/{id}/plan"] = {"get": _op(
        "The query plan: entities and edges",
        {"200": {"description": "plan", "content": {"application/json": {"schema": {"type": "object"}},
                                                    "application/xml": {"schema": {"type": "string"}},
                                                    "text/plain": {"schema": {"type": "string"}}}},
         "400": _err("bad format"), "404": _err("unknown query")},
        params=[_QID, _query_param("format", {"enum": ["json", "xml", "text"]}, "plan format (else by Accept)")],
        tag="queries")}
    _rid = _path_param("id", "replay id (r1)")
    p["/replays"] = {
        "get": _op("Every replay of this server, with its state", {"200": _json(
            {"type": "array", "items": _ref("Replay")}, "replays")}, tag="replays"),
        "post": _op("Start a replay of the archive on Spark (docs/replay.md)",
                    {"202": _json(_ref("Replay"), "accepted: queued or running; Location: /replays/{id}"),
                     "400": _err("bad request: CQL that does not compile, empty range, no data in the range, "
                                 "bad master or strategy"),
                     "404": _err("unknown query id")},
                    mutating=True, tag="replays", body={"required": True, "content": {"application/json": {
                        "schema": _ref("ReplayRequest")}}}),
    }
    p["/replays/{id}"] = {"get": _op("A replay's state, progress and (once done) its summary",
                                     {"200": _json(_ref("Replay"), "the replay"), "404": _err("unknown replay")},
                                     params=[_rid], tag="replays")}
    p["/replays/{id}/results"] = {"get": _op(
        "A finished replay's results: NDJSON elements in timestamp order",
        {"200": {"description": "one element a line, as GET /queries/{id}/results writes them",
                 "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
         "404": _err("unknown replay"), "409": _err("the replay is queued, running or failed (detail says which)")},
        params=[_rid], tag="replays")}
    p["/entities"] = {"get": _op(
        "Control tables of every entity, or of one query's",
        {"200": _json({"type": "object", "properties": {"entities": {"type": "array", "items": _ref("Entity")}}},
                      "entities"), "404": _err("unknown query")},
        params=[_query_param("query", {"type": "string"}, "only the entities of this query")], tag="entities")}
    p["/entities/{id}"] = {
        "get": _op("One control table", {"200": _json(_ref("Entity"), "the control table"),
                                         "404": _err("unknown entity")},
                   params=[_EID, _query_param("history", {"type": "boolean"}, "include the change history")],
                   tag="entities"),
        "patch": _op("Write knobs (validated; all or nothing)",
                     {"200": _json(_ref("Entity"), "the control table after the write"),
                      "400": _err("refused write: why, and what is allowed"),
                      "404": _err("unknown entity or attribute")},
                     mutating=True, params=[_EID], tag="entities",
                     body={"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}),
    }
    p["/system"] = {
        "get": _op("System control table (scheduler policy, global statistics) and global statistics",
                   {"200": _json({"type": "object"}, "system")}, tag="system"),
        "patch": _op("Write system knobs", {"200": _json({"type": "object"}, "after the write"),
                                            "400": _err("refused write"), "404": _err("unknown attribute")},
                     mutating=True, tag="system",
                     body={"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}),
    }
    p["/entities/{id}/attributes"] = {"get": _op(
        "One control table for an editor: per attribute its kind (stat|knob), type, unit, range, choices, "
        "default, description and value; and the change history",
        {"200": _json({"type": "object", "properties": {
            "id": {"type": "string"}, "kind": {"type": "string"},
            "attributes": {"type": "array", "items": {"type": "object"}},
            "history": {"type": "array", "items": {"type": "object"}}}}, "the control table described"),
         "404": _err("unknown entity")}, params=[_EID], tag="entities")}
    p["/stats/stream"] = {"get": _op(
        "Live statistics for the GUI as server-sent events: the overview (system table, sources with rates, "
        "queries with result rate, lag and exact/approximate, memory), or one query's entities",
        {"200": {"description": "one 'data:' JSON snapshot per interval; 'event: end' when the query is dropped",
                 "content": {"text/event-stream": {"schema": {"type": "string"}}}},
         "400": _err("bad parameter"), "404": _err("unknown query")},
        params=[_query_param("query", {"type": "string"}, "one query's plan entities instead of the overview"),
                _query_param("interval_ms", {"type": "integer", "minimum": 50, "default": 250},
                             "time between snapshots"),
                _query_param("follow", {"type": "boolean", "default": True}, "false: one snapshot, then end")],
        tag="stats")}
    p["/stats/history"] = {"get": _op(
        "Sampled memory over the last minutes (one sample a second): totals, or each queue and synopsis of "
        "one query",
        {"200": _json({"type": "object", "properties": {
            "period_s": {"type": "number"}, "t": {"type": "array", "items": {"type": "integer"}},
            "series": {"type": "object", "additionalProperties": {"type": "array"}},
            "kinds": {"type": "object", "additionalProperties": {"enum": ["queue", "synopsis"]}}}},
            "times (ms since the epoch) and one series of bytes per name"),
         "404": _err("unknown query")},
        params=[_query_param("query", {"type": "string"}, "this query's queues and synopses")], tag="stats")}
    p["/metrics"] = {"get": _op("Prometheus text format", {"200": {"description": "metrics", "content": {
        "text/plain": {"schema": {"type": "string"}}}}}, tag="metrics")}
    p["/openapi.json"] = {"get": _op("This document", {"200": _json({"type": "object"}, "OpenAPI 3.1")},
                                     tag="openapi")}
    return p


_DOC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "dsms", "version": "0.1.0",
             "description": "A data stream management system in the style of Stanford STREAM: CQL continuous "
                            "queries over streams and relations. Errors are JSON {error, detail}."},
    "paths": _paths(),
    "components": {"schemas": _SCHEMAS,
                   "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                  "description": "required on mutating requests when a token is "
                                                                 "configured or the server is not on loopback"}}},
}


def document() -> dict[str, Any]:
    """A fresh copy of the OpenAPI document."""
    return copy.deepcopy(_DOC)
