"""The server runtime in-process (dsms/runtime/): fan-out with bounded readers and gap markers, overload,
recovery that rebuilds the same engine state, knob persistence, time slicing, MQTT isolation."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from dsms import Engine, InputError
from dsms.formats import Decoded
from dsms.runtime import Gap, HeartbeatMark, NotFound, Overloaded, ResultChunk, Runtime, Subscriber


def make(tmp_path: Path, **over) -> Runtime:
    cfg = {"data_dir": str(tmp_path / "data"), "archive.fsync": "never", **over}
    return Runtime(cfg)


def run(coro):
    return asyncio.run(coro)


def flat(items) -> list:
    out = []
    for it in items:
        if isinstance(it, ResultChunk):
            out += [(e.ts, e.sign, tuple(sorted(e.row.items()))) for e in it.elements()]
    return out


async def settle(rt: Runtime) -> None:
    """Wait (a condition, not a sleep) until the pump has run everything queued and fanned it out."""
    for _ in range(100_000):
        await asyncio.sleep(0)
        if rt.backlog() == 0 and not any(op.ready() and not op.output.full() for op in rt.engine.ops) \
                and not rt.pump.work.is_set():
            await asyncio.sleep(0)
            return
    ready = [op.id for op in rt.engine.ops if op.ready()]
    raise AssertionError(f"engine did not settle: backlog {rt.backlog()}, ready {ready}, "
                         f"pump woken {rt.pump.work.is_set()}")


def test_slow_subscriber_gets_a_gap_and_never_blocks(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path, **{"results.subscriber_buffer": 100})
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT); REGISTER QUERY q AS SELECT * FROM s")
        slow = rt.subscribe("q")
        fast = rt.subscribe("q")
        got_fast = []
        for b in range(20):
            await rt.ingest("s", {"a": list(range(b * 50, b * 50 + 50))}, list(range(b * 50, b * 50 + 50)))
            await settle(rt)
            got_fast += flat(fast.take())
        items = slow.take()
        delivered = flat(items)
        gaps = [i for i in items if isinstance(i, Gap)]
        assert len(got_fast) == 1000                      # a reader that keeps up misses nothing
        assert len(gaps) == 1 and gaps[0].missed + len(delivered) == 1000
        assert gaps[0].from_ts == delivered[-1][0] + 1 and gaps[0].to_ts == 999
        assert rt.query_stats(rt.query("q").id)["missed_by_readers"] == gaps[0].missed
        # after the gap the slow reader gets new results again
        await rt.ingest("s", {"a": [7]}, [2000])
        await settle(rt)
        assert flat(slow.take()) == [(2000, 1, (("a", 7),))]
        await rt.stop()
    run(main())


def test_subscriber_buffer_rules() -> None:
    async def main():
        sub = Subscriber("q1", capacity=3)
        big = ResultChunk(["a"], [1, 2, 3, 4, 5], [1] * 5, [[1, 2, 3, 4, 5]])
        sub.offer(big)                                     # an empty buffer takes one batch whatever its size
        sub.offer(ResultChunk(["a"], [6], [1], [[6]]))
        sub.offer(HeartbeatMark(7))                        # after a gap, a heartbeat adds nothing
        sub.offer(ResultChunk(["a"], [8, 9], [1, 1], [[8, 9]]))
        items = await sub.get(0.1)
        assert [type(i).__name__ for i in items] == ["ResultChunk", "Gap"]
        assert items[1] == Gap(3, 6, 9)
        sub.offer(HeartbeatMark(10))
        sub.offer(HeartbeatMark(11))
        assert await sub.get(0.1) == [HeartbeatMark(11)]
        assert await sub.get(0.01) == []
        sub.close("bye")
        assert [type(i).__name__ for i in await sub.get(0.1)] == ["Closed"]
    run(main())


def test_overload_is_refused_with_retry_after(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path, **{"limits.ingest_backlog": 10})
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT); REGISTER QUERY q AS SELECT * FROM s")
        # fsync "never": ingest does not suspend, so the pump cannot drain between the two calls
        await rt.ingest("s", [{"a": i} for i in range(20)], 1)
        with pytest.raises(Overloaded) as e:
            await rt.ingest("s", [{"a": 1}], 2)
        assert e.value.retry_after >= 1 and "ingest_backlog" in str(e.value)
        await settle(rt)
        await rt.ingest("s", [{"a": 1}], 2)                # accepted again once the engine caught up
        await rt.stop()
    run(main())


def test_ingest_validates_everything_before_anything_is_kept(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path)
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT, b FLOAT, c STRING, d BOOLEAN)")
        good = {"a": 1, "b": 2, "c": "x", "d": True}
        for rows, ts, index, words in [
            ([good, {**good, "a": 1.5}], [1, 2], 1, "expected INT"),
            ([good, {**good, "d": 1}], [1, 2], 1, "BOOLEAN"),
            ([good, {**good, "c": "\ud800"}], [1, 2], 1, "Unicode"),
            ([good, {**good, "b": "1"}], [1, 2], 1, "FLOAT"),
            ([good, {**good, "a": 2**70}], [1, 2], 1, "64 bits"),
            ([good, good], [3, 2], 1, "backwards"),
        ]:
            with pytest.raises(InputError) as e:
                await rt.ingest("s", rows, ts)
            assert e.value.index == index and words in str(e.value), (rows, str(e.value))
        assert rt.archive.ranges() == {}
        assert await rt.ingest("s", {"a": [1, 2], "b": [1, 2.5], "c": ["x", "y"], "d": [True, False]}, [5, 5]) == 2
        with pytest.raises(InputError, match="already passed"):
            await rt.ingest("s", [good], 4)
        with pytest.raises(NotFound):
            await rt.ingest("nope", [good], 9)
        await rt.stop()
    run(main())


def _session(rt: Runtime, phase: int):
    """Statements interleaved with input: what recovery must reproduce exactly."""
    async def go():
        if phase == 0:
            rt.execute("REGISTER STREAM s (k INT, v FLOAT); REGISTER RELATION r (k INT, name STRING)")
            await rt.ingest("s", [{"k": i % 3, "v": float(i)} for i in range(10)], list(range(10)))
            rt.execute("REGISTER QUERY total AS SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM s GROUP BY k")
            await rt.ingest("s", [{"k": i % 3, "v": float(i)} for i in range(10, 20)], list(range(10, 20)))
            await rt.update("r", Decoded(rows=[{"k": 0, "name": "zero"}, {"k": 1, "name": "one"}],
                                         ts=[15, 15], n=2))
            rt.execute("REGISTER QUERY win AS SELECT k, AVG(v) AS a FROM s [RANGE 8] GROUP BY k")
            rt.execute("SELECT ISTREAM(s.k, name, v) FROM s [NOW], r WHERE s.k = r.k")
            rt.execute("REGISTER STREAM gone (x INT)")
            await rt.ingest("gone", [{"x": 1}], 3)
            rt.drop("gone")
            rt.execute("REGISTER STREAM gone (x STRING, y INT)")      # same name, another schema
            await rt.ingest("gone", [{"x": "a", "y": 2}], 30)
            await rt.ingest("s", [{"k": i % 3, "v": float(i)} for i in range(20, 30)], list(range(20, 30)))
        else:
            await rt.ingest("s", [{"k": i % 3, "v": float(i)} for i in range(30, 40)], list(range(30, 40)))
            await rt.update("r", Decoded(rows=[{"k": 1, "name": "one"}], ts=[35], sign=[-1], n=1))
            await rt.heartbeat(100)
        await settle(rt)
    return go()


def test_recovery_rebuilds_the_same_state(tmp_path: Path) -> None:
    """A runtime restarted after phase 0 and fed phase 1 produces what one runtime fed both phases does,
    including a query registered after input had arrived (it must not see that earlier input)."""
    async def one_run(path: Path, restart: bool) -> dict[str, list]:
        rt = make(path)
        await rt.start()
        await _session(rt, 0)
        if restart:
            await rt.stop()
            rt = make(path)
            await rt.start()
            assert rt.recovery_info["entries"] == 8
            assert [q.id for q in rt.queries()] == ["q1", "q2", "q3"]
        await _session(rt, 1)
        out = {q.id: flat(rt.states[q.id].ring) for q in rt.queries()}
        await rt.stop()
        return out

    straight = run(one_run(tmp_path / "a", False))
    restarted = run(one_run(tmp_path / "b", True))
    assert set(straight) == {"q1", "q2", "q3"}
    for qid in straight:
        assert sorted(restarted[qid]) == sorted(straight[qid]), qid
    # the late-registered unbounded count never saw the first ten elements
    last = {}
    for _ts, sign, row in straight["q1"]:
        if sign > 0:
            last[dict(row)["k"]] = dict(row)["n"]
    assert sum(last.values()) == 30
    from dsms.runtime.catalog_log import decode_line
    lines = (tmp_path / "b" / "data" / "catalog.snapshot").read_bytes().splitlines()
    cat = [decode_line(line) for line in lines[1:]]
    assert [e["op"] for e in cat][:3] == ["cql", "cql", "cql"]
    assert [e["n"] for e in cat] == list(range(1, len(cat) + 1))


def test_knobs_survive_a_restart(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path)
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT); REGISTER QUERY q AS SELECT a, COUNT(*) AS n FROM s [ROWS 5] "
                   "GROUP BY a")
        ops = [e["id"] for e in rt.entities("q") if e["id"].startswith("op:")]
        rt.set_entity(ops[0], {"priority": 4})
        rt.set_system({"policy": "round_robin"})
        rt.set_entity("sched:0", {"budget": 3})
        rt.set_entity("mem:0", {"auto_kind": True, "low_water": 0.3})
        rt.set_query_retention("q", 7)
        await rt.stop()
        rt = make(tmp_path)
        await rt.start()
        assert rt.entity(ops[0])["priority"] == 4
        assert rt.system()["policy"] == "round_robin"
        assert rt.entity("sched:0")["budget"] == 3 and rt.engine.policy.budget_items == 3
        assert rt.entity("mem:0")["auto_kind"] is True and rt.engine.governor.low_water == 0.3
        assert rt.query_stats("q1")["retention"] == 7
        await rt.stop()
    run(main())


def test_from_replays_the_retention_ring(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path, **{"results.retention": 25})
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT); SELECT * FROM s")
        for b in range(4):
            await rt.ingest("s", {"a": list(range(b * 10, b * 10 + 10))}, list(range(b * 10, b * 10 + 10)))
        await settle(rt)
        sub = rt.subscribe("q1", from_ts=-1)
        assert [e[0] for e in flat(sub.take())] == list(range(15, 40))       # the last 25
        sub = rt.subscribe("q1", from_ts=33)
        assert [e[0] for e in flat(sub.take())] == list(range(33, 40))
        await rt.stop()
    run(main())


def test_engine_slices_leave_the_loop_free(tmp_path: Path) -> None:
    """While the engine works through a large backlog, other coroutines keep running in between slices."""
    async def main():
        rt = make(tmp_path, **{"results.slice_ms": 1})
        await rt.start()
        rt.execute("REGISTER STREAM s (k INT, v FLOAT); "
                   "REGISTER QUERY q AS SELECT k, SUM(v) AS t FROM s [ROWS 50] GROUP BY k")
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        for b in range(3000):
            await rt.ingest("s", {"k": [i % 7 for i in range(20)], "v": [float(i) for i in range(20)]}, b)
        slices_before = rt.pump.slices
        await settle(rt)
        done.set()
        await t
        assert rt.pump.slices - slices_before > 1 and ticks > 1
        assert rt.runtime_stats()["engine"]["steps_per_slice"] >= 1
        await rt.stop()
    run(main())


def test_group_commit_acknowledges_after_fsync(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path, **{"archive.fsync": "group", "archive.group_delay_ms": 1})
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT)")
        await asyncio.gather(*(rt.ingest("s", [{"a": i}], i) for i in range(50)))
        st = rt.archive.stats()
        assert st["unsynced_appends"] == 0 and 1 <= st["syncs"] <= 50 and st["appends"] == 50
        await rt.stop()
    run(main())


def test_group_commit_starts_at_once_when_idle_and_at_most_once_per_delay(tmp_path: Path) -> None:
    """An idle server fsyncs at once; a busy one never fsyncs more often than every group_delay_ms, and each
    fsync covers every request appended before it began (nothing is acknowledged before it is durable)."""
    async def main():
        rt = make(tmp_path, **{"archive.fsync": "group", "archive.group_delay_ms": 400})
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT)")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await rt.ingest("s", [{"a": 0}], 0)
        first = loop.time() - t0
        assert first < 0.3, first                     # no 400 ms wait on an idle server
        assert rt.archive.stats()["unsynced_appends"] == 0
        syncs = rt.archive.stats()["syncs"]
        t1 = loop.time()
        await asyncio.gather(*(rt.ingest("s", [{"a": i}], i) for i in range(1, 30)))
        assert loop.time() - t0 >= 0.39               # the next fsync waited for the delay...
        st = rt.archive.stats()
        assert st["syncs"] == syncs + 1 and st["unsynced_appends"] == 0   # ...and covered all 29 requests
        assert loop.time() - t1 < 0.4 + 0.3
        await rt.stop()
    run(main())


def test_mqtt_sources_never_take_the_runtime_down(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # nothing listens there once closed
    async def main():
        rt = make(tmp_path, mqtt_url=f"mqtt://127.0.0.1:{port}")
        await rt.start()
        rt.execute("REGISTER STREAM t (a INT) FROM MQTT 'x/+/y' FORMAT JSON")
        rt.execute("REGISTER QUERY p AS SELECT * FROM t PUBLISH TO MQTT 'out/p'")
        await rt.ingest("t", [{"a": 1}], 1)
        for _ in range(100):
            await asyncio.sleep(0)
        assert "t" in rt.mqtt_stats()
        rt.drop("p")
        rt.drop("t")
        await rt.stop()
    run(main())


def test_statements_keep_their_own_text(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path)
        await rt.start()
        res = rt.execute("REGISTER STREAM s (a INT);\n  SELECT a FROM s WHERE a > 1 ; -- tail\nSELECT * FROM s")
        assert [getattr(r, "text", None) for r in res[1:]] == ["SELECT a FROM s WHERE a > 1",
                                                               "SELECT * FROM s"]
        await rt.stop()
    run(main())


def test_results_match_a_bare_engine(tmp_path: Path) -> None:
    async def main():
        rt = make(tmp_path)
        await rt.start()
        ddl = "REGISTER STREAM s (k INT, v FLOAT)"
        q = "SELECT k, MAX(v) AS m FROM s [RANGE 5 SLIDE 2] GROUP BY k"
        rt.execute(ddl)
        qid = rt.execute(q)[0].id
        eng = Engine()
        eng.execute(ddl)
        eq = eng.execute(q)
        for b in range(30):
            rows = [{"k": (b + i) % 4, "v": float((b * 13 + i * 7) % 17)} for i in range(5)]
            await rt.ingest("s", rows, b)
            eng.push("s", rows, b)
        await rt.heartbeat(100)
        eng.heartbeat(100)
        eng.run()
        await settle(rt)
        exp = [(e.ts, e.sign, tuple(sorted(e.row.items()))) for e in eq.drain()]
        assert sorted(flat(rt.states[qid].ring)) == sorted(exp)
        await rt.stop()
    run(main())


def test_heartbeats_get_the_engines_verdicts(tmp_path: Path) -> None:
    values = [5, 6.0, "1970-01-01T00:00:00.007Z", 1.5, True, "soon", 2**62 + 1, 2.0**60]

    def verdicts(heartbeat) -> list[bool]:
        out = []
        for v in values:
            try:
                heartbeat(v)
                out.append(True)
            except InputError:
                out.append(False)
        return out

    eng = Engine()
    eng.execute("REGISTER STREAM s (a INT)")
    want = verdicts(lambda v: eng.heartbeat(v, "s"))
    assert want == [True, True, True, False, False, False, False, True]

    async def main():
        rt = make(tmp_path)
        await rt.start()
        rt.execute("REGISTER STREAM s (a INT)")
        got = []
        for v in values:
            try:
                await rt.heartbeat(v, "s")
                got.append(True)
            except InputError:
                got.append(False)
        assert got == want
        assert rt.source_stats("s")["frontier"] == 2**60
        await rt.stop()
    run(main())
