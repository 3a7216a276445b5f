"""The HTTP API against a real server: registration, every input format, every output format (streamed), and
results compared with an in-process Engine fed the same input (SPEC sections 5-7)."""

from __future__ import annotations

import http.client
import json
import re
import time
import xml.etree.ElementTree as ET

import msgpack
from httpkit import Server, bag_by_ts, elements

from dsms import Engine

# ---------------------------------------------------------------- helpers


def engine_results(ddl: list[str], queries: list[str], feed: list[tuple[str, list[dict], list[int], int | None]]):
    """Run the same statements and input through an in-process Engine; results per query text."""
    eng = Engine()
    for d in ddl:
        eng.execute(d)
    qs = [eng.execute(q) for q in queries]
    for stream, rows, ts, hb in feed:
        if rows:
            eng.push(stream, rows, ts)
        if hb is not None:
            eng.heartbeat(hb, stream)
        eng.run()
    return [q.drain() for q in qs]


class StreamReader:
    """An open results connection read incrementally with a deadline."""

    def __init__(self, srv: Server, path: str, headers: dict[str, str] | None = None) -> None:
        self.c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        self.c.request("GET", path, headers=headers or {})
        self.r = self.c.getresponse()
        assert self.r.status == 200, self.r.read()
        self.content_type = self.r.getheader("Content-Type")

    def chunks(self, deadline: float):
        while time.monotonic() < deadline:
            data = self.r.read1(65536)
            if not data:
                return
            yield data

    def close(self) -> None:
        self.c.close()


def _setup(srv: Server, name: str) -> tuple[list[str], list[str], list[str]]:
    ddl = [f"REGISTER STREAM {name} (k INT, v FLOAT, tag STRING)"]
    queries = [
        f"SELECT k, SUM(v) AS s, COUNT(*) AS n FROM {name} [RANGE 50] GROUP BY k",
        f"SELECT * FROM {name} WHERE v > 0.5",
        f"SELECT ISTREAM(tag, MAX(v) AS m) FROM {name} [RANGE 30 SLIDE 10] GROUP BY tag",
    ]
    srv.cql(ddl[0])
    ids = []
    for q in queries:
        r = srv.post("/queries", json_body={"cql": q})
        assert r.status == 201, r
        ids.append(r.json()["id"])
    return ddl, queries, ids


def _rows(n: int, start: int, seed: int) -> tuple[list[dict], list[int]]:
    rows, ts = [], []
    for i in range(n):
        j = start + i
        rows.append({"k": (j * 7 + seed) % 5, "v": ((j * 37 + seed) % 100) / 100.0,
                     "tag": ["a", "b", "<c&d>", "é"][j % 4]})
        ts.append(j // 3 + start)
    return rows, ts


# ---------------------------------------------------------------- catalog


def test_register_list_describe_drop(server: Server, uniq: str) -> None:
    s = f"{uniq}_s"
    res = server.cql(f"REGISTER STREAM {s} (a INT, b FLOAT); REGISTER RELATION {uniq}_r (id INT, c STRING);"
                     f"REGISTER QUERY {uniq}_q AS SELECT a, COUNT(*) AS n FROM {s} [ROWS 10] GROUP BY a")
    assert [r["created"] for r in res] == ["stream", "relation", "query"]
    assert res[2]["kind"] == "relation" and res[2]["schema"] == [{"name": "a", "type": "INT"},
                                                                 {"name": "n", "type": "INT"}]
    r = server.post("/streams", json_body={"name": f"{uniq}_j", "columns": {"x": "INT", "y": "STRING"}})
    assert r.status == 201 and r.json()["columns"] == [{"name": "x", "type": "INT"}, {"name": "y", "type": "STRING"}]
    r = server.post("/relations", json_body={"cql": f"REGISTER RELATION {uniq}_r2 (z INT)"})
    assert r.status == 201, r
    names = [x["name"] for x in server.get("/streams").json()["streams"]]
    assert s in names and f"{uniq}_j" in names
    assert f"{uniq}_r" in [x["name"] for x in server.get("/relations").json()["relations"]]
    r = server.post("/queries", json_body={"cql": f"SELECT * FROM {s}"})
    assert r.status == 201 and r.headers["location"] == f"/queries/{r.json()['id']}"
    body = r.json()
    assert set(body) == {"id", "name", "kind", "schema"} and body["kind"] == "stream"
    qid = body["id"]
    assert server.get(f"/queries/{qid}").json()["text"] == f"SELECT * FROM {s}"
    assert server.get(f"/queries/{uniq}_q").status == 200          # by name too
    # drops: in use -> 409, unknown -> 404, fine -> 204
    r = server.request("DELETE", f"/streams/{s}")
    assert r.status == 409 and r.json()["error"] == "conflict" and uniq in r.json()["detail"]
    assert server.request("DELETE", f"/streams/{uniq}_nope").status == 404
    assert server.request("DELETE", f"/relations/{s}").status == 404          # a stream is not a relation
    assert server.request("DELETE", f"/queries/{qid}").status == 204
    assert server.request("DELETE", f"/queries/{uniq}_q").status == 204
    assert server.request("DELETE", f"/streams/{s}").status == 204
    assert server.get(f"/streams/{s}").status == 404
    assert server.get(f"/queries/{qid}").status == 404
    assert server.request("DELETE", f"/relations/{uniq}_r").status == 204


def test_cql_errors_are_400_with_position(server: Server, uniq: str) -> None:
    r = server.post("/cql", body="REGISTER STREAM x (a INT,, b INT)", headers={"Content-Type": "text/plain"})
    assert r.status == 400
    e = r.json()
    assert e["error"] == "CQL error" and e["line"] == 1 and e["column"] and e["detail"]
    r = server.post("/cql", json_body={"cql": f"REGISTER STREAM {uniq} (a INT); "
                                              f"REGISTER QUERY {uniq}_bad AS SELECT nope FROM {uniq}"})
    assert r.status == 400
    e = r.json()
    assert e["statement"] == 1 and e["done"][0]["name"] == uniq       # the first statement stays applied
    r = server.post("/queries", json_body={"cql": f"REGISTER STREAM {uniq}_2 (a INT)"})
    assert r.status == 400 and "exactly one query" in r.json()["detail"]
    r = server.post("/queries", json_body={"sql": "x"})
    assert r.status == 400
    r = server.post("/cql", json_body={"cql": f"REGISTER STREAM {uniq} (b INT)"})
    assert r.status == 409 and "already registered" in r.json()["detail"]


# ---------------------------------------------------------------- input formats, compared with the engine


def test_every_input_format_matches_the_engine(server: Server, uniq: str) -> None:
    ddl, queries, ids = _setup(server, uniq)
    feed = []
    # JSON array with an ISO 8601 timestamp and a heartbeat item
    rows, ts = _rows(6, 0, 1)
    body = [{"ts": t, "row": r} for r, t in zip(rows, ts)]
    body[0]["ts"] = "1970-01-01T00:00:00.000Z"
    r = server.post(f"/streams/{uniq}/elements", json_body=body + [{"heartbeat": 3}])
    assert r.status == 200 and r.json()["accepted"] == 6, r
    feed.append((uniq, rows, ts, 3))
    # NDJSON with a punctuation and a mid-body heartbeat
    rows, ts = _rows(9, 10, 2)
    items = [{"ts": t, "sign": 1, "row": r} for r, t in zip(rows, ts)]
    items.insert(4, {"punctuation": {"k": 1, "tag": "*"}})
    items.insert(2, {"heartbeat": ts[0]})
    r = server.ndjson(uniq, items)
    assert r.status == 200 and r.json() == {"accepted": 9, "heartbeat": ts[0], "punctuations_ignored": 1}, r
    feed.append((uniq, rows, ts, None))
    # msgpack, row-wise
    rows, ts = _rows(7, 25, 3)
    r = server.post(f"/streams/{uniq}/elements", body=msgpack.packb([{"ts": t, "row": x} for x, t in zip(rows, ts)]),
                    headers={"Content-Type": "application/msgpack"})
    assert r.status == 200 and r.json()["accepted"] == 7, r
    feed.append((uniq, rows, ts, None))
    # msgpack, columnar, with a trailing heartbeat object
    rows, ts = _rows(12, 40, 4)
    cols = {c: [x[c] for x in rows] for c in ("k", "v", "tag")}
    body = msgpack.packb({"ts": ts, "cols": cols}) + msgpack.packb({"heartbeat": 60})
    r = server.post(f"/streams/{uniq}/elements", body=body, headers={"Content-Type": "application/x-msgpack"})
    assert r.status == 200 and r.json()["accepted"] == 12, r
    feed.append((uniq, rows, ts, 60))
    # XML
    rows, ts = _rows(5, 70, 5)
    xml = "<elements>" + "".join(
        f'<element ts="{t}"><k>{x["k"]}</k><v>{x["v"]}</v><tag>{x["tag"].replace("&", "&amp;").replace("<", "&lt;")}'
        f"</tag></element>" for x, t in zip(rows, ts)) + '<heartbeat ts="200"/></elements>'
    r = server.post(f"/streams/{uniq}/elements", body=xml.encode(), headers={"Content-Type": "application/xml"})
    assert r.status == 200 and r.json()["accepted"] == 5, r
    feed.append((uniq, rows, ts, 200))
    expected = engine_results(ddl, queries, feed)
    for qid, exp in zip(ids, expected):
        n = len(exp)
        got = server.wait_results(qid, lambda items, n=n: len(elements(items)) >= n)
        assert bag_by_ts(elements(got)) == bag_by_ts(exp), qid
    st = server.get(f"/streams/{uniq}").json()["stats"]
    assert st["elements_in"] == 39 and st["refused"] == 0


def test_streamed_ndjson_sse_and_xml_while_the_query_runs(server: Server, uniq: str) -> None:
    ddl, queries, ids = _setup(server, uniq)
    agg = ids[0]
    readers = {
        "ndjson": StreamReader(server, f"/queries/{agg}/results"),
        "sse": StreamReader(server, f"/queries/{agg}/results", {"Accept": "text/event-stream"}),
        "xml": StreamReader(server, f"/queries/{agg}/results?format=xml"),
    }
    assert readers["sse"].content_type.startswith("text/event-stream")
    assert readers["xml"].content_type.startswith("application/xml")
    feed = []
    for b in range(4):
        rows, ts = _rows(10, b * 20, b)
        r = server.ndjson(uniq, [{"ts": t, "row": x} for x, t in zip(rows, ts)] + [{"heartbeat": b * 20 + 19}])
        assert r.status == 200, r
        feed.append((uniq, rows, ts, b * 20 + 19))
    expected = engine_results(ddl, queries[:1], feed)[0]
    n = len(expected)
    deadline = time.monotonic() + 20
    # NDJSON
    got, buf = [], b""
    for data in readers["ndjson"].chunks(deadline):
        buf += data
        *lines, buf = buf.split(b"\n")
        got += [json.loads(x) for x in lines if x.strip()]
        if len(elements(got)) >= n:
            break
    assert bag_by_ts(elements(got)) == bag_by_ts(expected)
    assert any("heartbeat" in i for i in got)
    # SSE
    got, buf = [], b""
    for data in readers["sse"].chunks(deadline):
        buf += data
        *events, buf = buf.split(b"\n\n")
        for ev in events:
            for line in ev.split(b"\n"):
                if line.startswith(b"data: "):
                    got.append(json.loads(line[6:]))
        if len(elements(got)) >= n:
            break
    assert bag_by_ts(elements(got)) == bag_by_ts(expected)
    # XML, parsed incrementally while it streams
    parser = ET.XMLPullParser(events=("start", "end"))
    xml_elems, root_seen = [], False
    schema = {c["name"]: c["type"] for c in server.get(f"/queries/{agg}").json()["schema"]}
    for data in readers["xml"].chunks(deadline):
        parser.feed(data)
        for event, el in parser.read_events():
            if event == "start" and el.tag == "stream":
                root_seen = True
                assert el.get("query") == agg
            if event == "end" and el.tag == "element":
                row = {c.tag: (int(c.text) if schema[c.tag] == "INT" else float(c.text)) for c in el}
                xml_elems.append({"ts": int(el.get("ts")), "sign": 1 if el.get("sign") == "+" else -1, "row": row})
        if len(xml_elems) >= n:
            break
    assert root_seen and bag_by_ts(xml_elems) == bag_by_ts(expected)
    for rd in readers.values():
        rd.close()
    # the readers are gone once their connections close
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and server.get(f"/queries/{agg}").json()["stats"]["subscribers"]:
        time.sleep(0.05)
    assert server.get(f"/queries/{agg}").json()["stats"]["subscribers"] == 0


def test_follow_false_and_from_replays_retained_results(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT)")
    qid = server.post("/queries", json_body={"cql": f"SELECT * FROM {uniq}"}).json()["id"]
    r = server.post(f"/streams/{uniq}/elements", json_body={"ts": list(range(100)), "cols": {"a": list(range(100))}})
    assert r.status == 200, r
    allr = server.wait_results(qid, lambda items: len(elements(items)) == 100)
    assert [e["row"]["a"] for e in elements(allr)] == list(range(100))
    part = elements(server.results(qid, **{"from": 60}))
    assert [e["ts"] for e in part] == list(range(60, 100))
    iso = elements(server.results(qid, **{"from": "1970-01-01T00:00:00.090Z"}))
    assert [e["ts"] for e in iso] == list(range(90, 100))
    xml = server.get(f"/queries/{qid}/results?follow=false&format=xml&from=98")
    root = ET.fromstring(xml.body)
    assert root.tag == "stream" and [int(e.get("ts")) for e in root.iter("element")] == [98, 99]
    # retention is a knob
    r = server.request("PATCH", f"/queries/{qid}", json_body={"retention": 10})
    assert r.status == 200 and r.json()["stats"]["retained"] == 10
    assert [e["ts"] for e in elements(server.results(qid))] == list(range(90, 100))
    assert server.request("PATCH", f"/queries/{qid}", json_body={"retention": -1}).status == 400


def test_relation_updates_and_a_join(server: Server, uniq: str) -> None:
    s, r = f"{uniq}_s", f"{uniq}_r"
    ddl = [f"REGISTER STREAM {s} (id INT, amount FLOAT)", f"REGISTER RELATION {r} (id INT, name STRING)"]
    q = f"SELECT ISTREAM({s}.id, name, amount) FROM {s} [NOW], {r} WHERE {s}.id = {r}.id"
    server.cql("; ".join(ddl))
    qid = server.post("/queries", json_body={"cql": q}).json()["id"]
    resp = server.post(f"/relations/{r}/updates", json_body=[
        {"ts": 1, "insert": [{"id": 1, "name": "one"}, {"id": 2, "name": "two"}]},
        {"ts": 5, "sign": -1, "row": {"id": 2, "name": "two"}},
        {"ts": 5, "sign": 1, "row": {"id": 2, "name": "deux"}},
    ])
    assert resp.status == 200 and resp.json() == {"accepted": 4, "inserted": 3, "deleted": 1, "heartbeat": None}
    bad = server.post(f"/relations/{r}/updates", json_body=[{"ts": 6, "sign": -1, "row": {"id": 9, "name": "x"}}])
    assert bad.status == 400 and bad.json()["index"] == 0 and "not in" in bad.json()["detail"]
    assert server.get(f"/relations/{r}").json()["size"] == 2
    rows = [{"id": 1, "amount": 1.5}, {"id": 2, "amount": 2.5}, {"id": 2, "amount": 3.5}]
    assert server.post(f"/streams/{s}/elements", json_body=[{"ts": t, "row": x} for x, t in
                                                          zip(rows, [2, 3, 7])]).status == 200
    for name in (s, r):
        assert server.post(f"/streams/{name}/elements" if name == s else f"/relations/{name}/updates",
                           json_body=[{"heartbeat": 10}]).status == 200
    eng = Engine()
    for d in ddl:
        eng.execute(d)
    eq = eng.execute(q)
    eng.update(r, insert=[{"id": 1, "name": "one"}, {"id": 2, "name": "two"}], ts=1)
    eng.update(r, insert=[{"id": 2, "name": "deux"}], delete=[{"id": 2, "name": "two"}], ts=5)
    eng.push(s, rows, [2, 3, 7])
    eng.heartbeat(10)
    eng.run()
    expected = eq.drain()
    got = server.wait_results(qid, lambda items: len(elements(items)) >= len(expected))
    assert bag_by_ts(elements(got)) == bag_by_ts(expected)
    assert {e["row"]["name"] for e in elements(got)} == {"one", "two", "deux"}


# ---------------------------------------------------------------- refusals name the element


def test_bad_input_is_refused_whole_with_the_index(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT, b STRING)")
    qid = server.post("/queries", json_body={"cql": f"SELECT * FROM {uniq}"}).json()["id"]
    cases = [
        ([{"ts": 1, "row": {"a": 1, "b": "x"}}, {"ts": 2, "row": {"a": 1, "b": "x"}},
          {"ts": 3, "row": {"a": "no", "b": "x"}}], 2, "column 'a'"),
        ([{"ts": 1, "row": {"a": 1, "b": "x"}}, {"ts": 2, "row": {"a": 1}}], 1, "missing column 'b'"),
        ([{"ts": 5, "row": {"a": 1, "b": "x"}}, {"ts": 4, "row": {"a": 1, "b": "x"}}], 1, "backwards"),
        ([{"ts": 1, "row": {"a": 1, "b": "x", "c": 2}}], 0, "unknown column 'c'"),
        ([{"ts": 1, "row": {"a": True, "b": "x"}}], 0, "bool"),
        ([{"ts": 1, "sign": -1, "row": {"a": 1, "b": "x"}}], 0, "insert"),
        ([{"ts": "yesterday", "row": {"a": 1, "b": "x"}}], 0, "ISO 8601"),
        ([{"heartbeat": 9}, {"ts": 3, "row": {"a": 1, "b": "x"}}], 1, "below the heartbeat"),
    ]
    for body, index, words in cases:
        r = server.post(f"/streams/{uniq}/elements", json_body=body)
        assert r.status == 400, (body, r)
        e = r.json()
        assert e["error"] == "bad input" and e["index"] == index and words in e["detail"], (body, e)
    r = server.ndjson(uniq, [{"ts": 1, "row": {"a": 1, "b": "x"}}, {"punctuation": {}}, {"ts": 2, "row": {"a": "z", "b": "y"}}])
    assert r.status == 400 and r.json()["index"] == 2
    r = server.post(f"/streams/{uniq}/elements", body=b'{"ts": 1, "row": {"a": 1, "b": "x"}}\n{"ts": 2,',
                    headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 400 and r.json()["index"] == 1 and "line 2" in r.json()["detail"]
    r = server.post(f"/streams/{uniq}/elements", body=b"<a><!DOCTYPE x></a>", headers={"Content-Type": "text/xml"})
    assert r.status == 400
    r = server.post(f"/streams/{uniq}/elements", body=b"\x00\x01", headers={"Content-Type": "image/png"})
    assert r.status == 415
    assert server.post(f"/streams/{uniq}_nope/elements", json_body=[]).status == 404
    # nothing of the refused requests got in
    assert server.get(f"/streams/{uniq}").json()["stats"]["elements_in"] == 0
    assert server.results(qid) == []
    ok = server.post(f"/streams/{uniq}/elements", json_body=[{"ts": 1, "row": {"a": 1, "b": "x"}}])
    assert ok.status == 200
    assert len(server.wait_results(qid, lambda items: len(items) == 1)) == 1
    late = server.post(f"/streams/{uniq}/elements", json_body=[{"ts": 0, "row": {"a": 1, "b": "x"}}])
    assert late.status == 400 and "already passed" in late.json()["detail"]


# ---------------------------------------------------------------- plans, control tables, system, metrics


def test_plan_entities_and_system(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT)")
    qid = server.post("/queries", json_body={"cql": f"SELECT a, COUNT(*) AS n FROM {uniq} [RANGE 10] GROUP BY a"}
                      ).json()["id"]
    plan = server.get(f"/queries/{qid}/plan")
    assert plan.status == 200, "engine.explain() is missing (lead's API): " + repr(plan)
    assert isinstance(plan.json(), dict)
    xml = server.get(f"/queries/{qid}/plan?format=xml")
    assert xml.status == 200 and xml.headers["content-type"].startswith("application/xml")
    ET.fromstring(xml.body)
    assert server.get(f"/queries/{qid}/plan", headers={"Accept": "text/plain"}).headers["content-type"].startswith(
        "text/plain")
    assert server.get(f"/queries/{qid}/plan?format=dot").status == 400
    ents = server.get(f"/entities?query={qid}")
    assert ents.status == 200, "engine.entities() is missing (lead's API): " + repr(ents)
    ops = [e for e in ents.json()["entities"] if e["id"].startswith("op:")]
    assert ops
    op = ops[0]["id"]
    one = server.get(f"/entities/{op}?history=1")
    assert one.status == 200 and one.json()["id"] == op and one.json()["history"] == []
    r = server.request("PATCH", f"/entities/{op}", json_body={"priority": 3})
    assert r.status == 200 and r.json()["priority"] == 3, r
    r = server.request("PATCH", f"/entities/{op}", json_body={"priority": -5})
    assert r.status == 400 and r.json()["error"] == "refused" and r.json()["attribute"] == "priority"
    r = server.request("PATCH", f"/entities/{op}", json_body={"no_such_knob": 1})       # docs/control-tables.md
    assert r.status == 400 and r.json()["error"] == "refused" and "no_such_knob" in r.json()["detail"]
    assert server.request("PATCH", f"/entities/{op}", json_body={"tuples_in": 1}).status == 400
    assert server.get("/entities/op:999999").status == 404
    assert server.get("/entities?query=nope").status == 404
    assert len(server.get(f"/entities/{op}?history=1").json()["history"]) == 1
    sysr = server.get("/system")
    assert sysr.status == 200 and "runtime" in sysr.json() and sysr.json()["config"]["token"] is None
    policy = sysr.json().get("policy")
    r = server.request("PATCH", "/system", json_body={"policy": "round_robin"})
    assert r.status == 200 and r.json()["policy"] == "round_robin", r
    assert server.request("PATCH", "/system", json_body={"policy": "nope"}).status == 400
    if policy is not None:
        assert server.request("PATCH", "/system", json_body={"policy": policy}).status == 200
    assert server.request("PATCH", "/system", json_body={"shedding": "often"}).status == 400
    assert server.request("PATCH", "/system", json_body={"memory_budget": -5}).status == 400
    r = server.request("PATCH", "/system", json_body={"policy": "chain_flush"})
    assert r.status == 200 and r.json()["scheduler"] == "sched:0"
    r = server.request("PATCH", "/entities/sched:0", json_body={"latency_bound": 40.0, "headroom": 0.2})
    assert r.status == 200 and (r.json()["latency_bound"], r.json()["headroom"]) == (40.0, 0.2), r
    assert server.request("PATCH", "/entities/sched:0", json_body={"headroom": 2}).status == 400
    assert server.get("/entities/sched:0").json()["policy"] == "chain_flush"


_SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$|'
                     r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? (NaN|\+Inf|-Inf)$")


def test_metrics_are_prometheus_text(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT)")
    qid = server.post("/queries", json_body={"cql": f"SELECT * FROM {uniq}"}).json()["id"]
    server.post(f"/streams/{uniq}/elements", json_body={"ts": [1, 2, 3], "cols": {"a": [1, 2, 3]}})
    server.post(f"/streams/{uniq}/elements", json_body=[{"ts": 1, "row": {"a": "x"}}])
    server.wait_results(qid, lambda items: len(items) == 3)
    r = server.get("/metrics")
    assert r.status == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.body.decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            assert line.startswith(("# HELP ", "# TYPE ")) or not line
            continue
        assert _SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    assert samples[f'dsms_ingest_elements_total{{input="{uniq}"}}'] == 3
    assert samples[f'dsms_ingest_refused_total{{input="{uniq}"}}'] == 1
    assert samples[f'dsms_results_out_total{{query="{qid}"}}'] == 3
    assert samples['dsms_errors_total{kind="bad_input"}'] >= 1
    assert "dsms_queue_bytes" in samples
    assert samples["dsms_catalog_changes_waiting"] == 0 and samples["dsms_input_held_tuples"] == 0


def test_openapi_describes_every_route_and_index_page(server: Server, uniq: str) -> None:
    from web.routes import ROUTES
    doc = server.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    routed = {(m, p) for m, p, _ in ROUTES}
    assert documented == routed
    for ops in doc["paths"].values():
        for op in ops.values():
            for code in op["responses"]:
                assert code.isdigit()
    server.cql(f"REGISTER STREAM {uniq} (a INT)")
    page = server.get("/")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert f'href="/streams/{uniq}"' in page.body.decode()
    r = server.request("PUT", "/streams")
    assert r.status == 405 and r.json()["error"]
    r = server.get("/no/such/path")
    assert r.status == 404 and r.json()["error"] == "not found"


def test_dropping_a_query_ends_its_result_streams(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT); REGISTER QUERY {uniq}_q AS SELECT * FROM {uniq}")
    rd = StreamReader(server, f"/queries/{uniq}_q/results?format=xml")
    assert server.request("DELETE", f"/queries/{uniq}_q").status == 204
    data = b"".join(rd.chunks(time.monotonic() + 10))
    rd.close()
    root = ET.fromstring(data)                      # a complete document: the stream was closed properly
    assert root.tag == "stream" and [(c.tag, c.get("reason")) for c in root] == [("closed", "query dropped")]


def test_overload_maps_to_503_with_retry_after() -> None:
    from dsms.runtime import Overloaded
    from web.middlewares import error_response
    r = error_response(Overloaded("backlog over the limit", retry_after=2))
    assert r.status == 503 and r.headers["Retry-After"] == "2"
    assert json.loads(r.body) == {"error": "overloaded", "detail": "backlog over the limit"}


def test_a_large_body_is_decoded_off_the_loop_and_accepted(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT, b STRING); REGISTER QUERY {uniq}_n AS "
               f"SELECT COUNT(*) AS n FROM {uniq}")
    rows = [{"ts": i // 100, "row": {"a": i, "b": f"value-{i}"}} for i in range(40_000)]
    body = json.dumps(rows + [{"heartbeat": 1000}]).encode()
    assert len(body) > 1 << 20
    r = server.post(f"/streams/{uniq}/elements", body=body, headers={"Content-Type": "application/json"})
    assert r.status == 200 and r.json()["accepted"] == 40_000
    got = server.wait_results(f"{uniq}_n", lambda items: any(e["row"]["n"] == 40_000 for e in elements(items)))
    assert elements(got)[-1]["row"] == {"n": 40_000}
