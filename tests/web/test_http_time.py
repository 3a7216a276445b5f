"""Event time and arrival time do not mix by accident (issue 17): an event-time stream (the default) refuses
elements without ``ts``, an arrival-time stream (``TIME ARRIVAL``) refuses elements with one and stamps them
itself; messages about time answer in ISO 8601 to a client that sent ISO; results come with ISO timestamps on
``?ts=iso`` (docs/http-api.md, docs/cql.md)."""

from __future__ import annotations

import json
import time

from httpkit import Server, elements

from dsms.formats import parse_ts


def _post(server: Server, stream: str, items: list) -> dict:
    r = server.ndjson(stream, items)
    return {"status": r.status, **r.json()}


def test_an_event_time_stream_refuses_elements_without_ts(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (v INT)")
    r = _post(server, uniq, [{"row": {"v": 1}}])
    assert r["status"] == 400 and r["index"] == 0
    assert f"stream '{uniq}' takes event time" in r["detail"] and "TIME ARRIVAL" in r["detail"]
    assert server.get(f"/streams/{uniq}").json()["stats"]["elements_in"] == 0
    assert server.get(f"/streams/{uniq}").json()["time"] == "event"
    # the stream is not spoiled: elements with their event time go in afterwards
    assert _post(server, uniq, [{"ts": 5, "row": {"v": 1}}])["status"] == 200


def test_an_arrival_time_stream_stamps_elements_and_refuses_a_given_ts(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (v INT) TIME ARRIVAL; REGISTER QUERY {uniq}_q AS SELECT v FROM {uniq}")
    r = _post(server, uniq, [{"ts": 5, "row": {"v": 1}}])
    assert r["status"] == 400 and "takes arrival time (TIME ARRIVAL)" in r["detail"] and r["index"] == 0
    before = int(time.time() * 1000)
    assert _post(server, uniq, [{"row": {"v": 2}}, {"row": {"v": 3}}])["status"] == 200
    after = int(time.time() * 1000)
    got = elements(server.wait_results(f"{uniq}_q", lambda it: len(elements(it)) == 2))
    assert [e["row"]["v"] for e in got] == [2, 3]
    assert all(before <= e["ts"] <= after for e in got), (before, got, after)
    assert server.get(f"/streams/{uniq}").json()["time"] == "arrival"
    [shown] = [row for row in server.cql("SHOW STREAMS")[0]["rows"] if row["name"] == uniq]
    assert shown["time"] == "arrival"


def test_time_clause_errors_point_at_it(server: Server, uniq: str) -> None:
    r = server.post("/cql", body=f"REGISTER STREAM {uniq} (v INT) TIME ARRIVAL FROM MQTT 't' TIMESTAMP ts",
                    headers={"Content-Type": "text/plain"})
    assert r.status == 400 and "takes no TIMESTAMP field" in r.json()["detail"]
    assert (r.json()["line"], r.json()["column"]) == (1, len(f"REGISTER STREAM {uniq} (v INT) TIME ") + 1)
    r = server.post("/cql", body=f"REGISTER STREAM {uniq} (v INT) TIME ARIVAL", headers={"Content-Type": "text/plain"})
    assert r.status == 400 and "did you mean ARRIVAL?" in r.json()["detail"]


def test_time_in_messages_and_results_in_the_form_the_client_uses(server: Server, uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (v INT); REGISTER QUERY {uniq}_q AS SELECT v FROM {uniq}")
    assert _post(server, uniq, [{"ts": "2024-05-01T12:00:30Z", "row": {"v": 1}}])["status"] == 200
    r = _post(server, uniq, [{"ts": "2024-05-01T12:00:00Z", "row": {"v": 2}}])
    assert r["status"] == 400
    assert r["detail"] == (f"timestamp 2024-05-01T12:00:00Z is below what '{uniq}' has already passed "
                           "(2024-05-01T12:00:30Z)")
    r = _post(server, uniq, [{"ts": parse_ts("2024-05-01T12:00:00Z"), "row": {"v": 2}}])
    assert r["detail"] == (f"timestamp {parse_ts('2024-05-01T12:00:00Z')} is below what '{uniq}' has already "
                           f"passed ({parse_ts('2024-05-01T12:00:30Z')})")
    assert _post(server, uniq, [{"ts": "2024-05-01T12:00:31.250Z", "row": {"v": 3}},
                                {"heartbeat": "2024-05-01T12:01:00Z"}])["status"] == 200
    items = server.wait_results(f"{uniq}_q", lambda it: len(elements(it)) == 2, ts="iso")
    assert [(e["ts"], e["row"]["v"]) for e in elements(items)] == [("2024-05-01T12:00:30Z", 1),
                                                                  ("2024-05-01T12:00:31.250Z", 3)]
    assert [(e["ts"]) for e in elements(server.results(f"{uniq}_q"))] == [parse_ts("2024-05-01T12:00:30Z"),
                                                                         parse_ts("2024-05-01T12:00:31.250Z")]
    xml = server.get(f"/queries/{uniq}_q/results?follow=false&format=xml&ts=iso").body.decode()
    assert '<element ts="2024-05-01T12:00:31.250Z" sign="+">' in xml
    # a heartbeat marks ISO time too, on a live reader
    c = server.conn(10)
    c.request("GET", f"/queries/{uniq}_q/results?ts=iso")
    resp = c.getresponse()
    assert _post(server, uniq, [{"heartbeat": "2024-05-01T12:02:00Z"}])["status"] == 200
    line = resp.readline()
    c.close()
    assert json.loads(line) == {"heartbeat": "2024-05-01T12:02:00Z"}
    assert server.get(f"/queries/{uniq}_q/results?ts=sec").status == 400
