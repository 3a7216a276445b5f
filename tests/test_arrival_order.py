"""Catalog changes and the input around them in arrival order (dsms/runtime/barrier.py, EnginePump.drain):
the turns themselves, and the runtime in-process, where a REGISTER that waits for a backlog leaves the loop
free and its results equal those of the synchronous API run in the same order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsms.runtime import Overloaded, ResultChunk, Runtime
from dsms.runtime.barrier import ArrivalOrder


def test_turns_go_in_arrival_order_and_held_input_goes_before_a_later_change() -> None:
    async def main() -> list[str]:
        order = ArrivalOrder()
        log: list[str] = []
        gate = asyncio.Event()

        async def change(name: str, wait: asyncio.Event | None = None) -> None:
            async with order.change():
                if wait is not None:
                    await wait.wait()           # a change waiting for the engine
                log.append(name)

        async def push(name: str) -> None:
            if not order.busy():
                log.append(name)
                return
            async with order.held(3):
                log.append(name)

        await push("p0")                        # nothing pending: goes straight in
        tasks = [asyncio.create_task(change("c1", gate))]
        await asyncio.sleep(0)
        assert order.busy() and order.stats() == {"changes_waiting": 1, "inputs_held": 0, "rows_held": 0}
        tasks.append(asyncio.create_task(push("p1")))
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(change("c2")))
        tasks.append(asyncio.create_task(push("p2")))
        gone = asyncio.create_task(change("cancelled"))     # gives up while waiting
        tasks.append(asyncio.create_task(push("p3")))
        await asyncio.sleep(0)
        assert order.stats() == {"changes_waiting": 3, "inputs_held": 3, "rows_held": 9}
        gone.cancel()
        await asyncio.sleep(0)
        assert log == ["p0"]                    # nothing overtook c1, the cancelled turn passed the wait on
        gate.set()
        await asyncio.gather(*tasks)
        assert not order.busy() and order.stats() == {"changes_waiting": 0, "inputs_held": 0, "rows_held": 0}
        return log

    assert asyncio.run(main()) == ["p0", "c1", "p1", "c2", "p2", "p3"]


def _flat(items: list) -> list[tuple]:
    return [(e.ts, e.sign, tuple(sorted(e.row.items()))) for it in items if isinstance(it, ResultChunk)
            for e in it.elements()]


DDL = ("REGISTER STREAM S (a INT); REGISTER STREAM M (k INT); REGISTER QUERY big AS SELECT COUNT(*) AS n "
       "FROM S [RANGE 100000] X, S [RANGE 100000] Y WHERE X.a = Y.a")
LATE = "REGISTER QUERY late AS SELECT ISTREAM(k, COUNT(*) AS c) FROM M [RANGE 3] GROUP BY k"
N = 3000


async def _backlog(rt: Runtime) -> None:
    await rt.ingest("S", {"a": [t % 10 for t in range(N)]}, list(range(N)))
    await rt.heartbeat(N, "S")


def _retained(rt: Runtime) -> list[tuple]:
    """Every result of ``late`` the runtime retains (its whole output here)."""
    return _flat(rt.subscribe("late", from_ts=-(2**62)).take())


def _m_rows(t0: int) -> tuple[dict, list[int]]:
    return {"k": [t % 2 for t in range(8)]}, [t0 + t for t in range(8)]


def test_a_register_waiting_for_a_backlog_leaves_the_loop_free_and_holds_later_input(tmp_path: Path) -> None:
    async def concurrent() -> tuple[list, int]:
        rt = Runtime({"data_dir": str(tmp_path / "a"), "archive.fsync": "never", "results.slice_ms": 1})
        await rt.start()
        rt.execute(DDL)
        await _backlog(rt)
        ticks = 0
        reg = asyncio.create_task(rt.execute_async(LATE))
        while not rt.order.busy():
            await asyncio.sleep(0)
        cols, ts = _m_rows(N + 1)
        push = asyncio.create_task(rt.ingest("M", cols, ts))         # sent while the REGISTER waits
        while not reg.done():
            ticks += 1                          # the loop runs between the pump's slices
            await asyncio.sleep(0)
        await push
        await rt.heartbeat(N + 20)
        await rt.execute_async("DROP QUERY big")        # a change waits for everything before it
        out = _retained(rt)
        await rt.stop()
        return out, ticks

    async def sequential() -> list:
        rt = Runtime({"data_dir": str(tmp_path / "b"), "archive.fsync": "never"})
        await rt.start()
        rt.execute(DDL)
        await _backlog(rt)
        rt.execute(LATE)                        # the in-process API: the engine runs to idle on the spot
        cols, ts = _m_rows(N + 1)
        await rt.ingest("M", cols, ts)
        await rt.heartbeat(N + 20)
        rt.drop("big")
        out = _retained(rt)
        await rt.stop()
        return out

    got, ticks = asyncio.run(concurrent())
    want = asyncio.run(sequential())
    assert ticks > 5, ticks
    assert want and got == want
    assert {row for _, _, row in want} >= {(("c", 1), ("k", 0)), (("c", 1), ("k", 1))}


def test_input_held_behind_a_change_is_admitted_with_what_is_held_counted(tmp_path: Path) -> None:
    """Held input is not in the engine yet, but it is memory all the same: the backlog admission judges counts
    it, so a client cannot pile up input behind a change that waits; what was admitted is applied in order."""
    async def main() -> None:
        rt = Runtime({"data_dir": str(tmp_path / "d"), "archive.fsync": "never", "limits.ingest_backlog": 5})
        await rt.start()
        rt.execute("REGISTER STREAM M (k INT); REGISTER QUERY q AS SELECT k FROM M")
        release = asyncio.Event()

        async def change() -> None:
            async with rt.order.change():       # a change that waits (as one waiting for the engine does)
                await release.wait()
        c = asyncio.create_task(change())
        await asyncio.sleep(0)
        first = asyncio.create_task(rt.ingest("M", {"k": list(range(8))}, list(range(8))))
        await asyncio.sleep(0)
        assert rt.order.stats() == {"changes_waiting": 1, "inputs_held": 1, "rows_held": 8}
        assert rt.backlog() == 8
        try:
            await rt.ingest("M", {"k": [8]}, [8])
            raise AssertionError("input over the backlog limit was accepted")
        except Overloaded as e:
            assert "backlog is 8 tuples, over the limit of 5" in str(e)
        release.set()
        await c
        await first
        await rt.heartbeat(100)
        await rt.execute_async("REGISTER STREAM Z (a INT)")    # waits for the engine: q's output is all there
        got = _flat(rt.subscribe("q", from_ts=-(2**62)).take())
        assert got == [(t, 1, (("k", t),)) for t in range(8)]   # the held input, and nothing refused
        await rt.stop()
    asyncio.run(main())


def test_an_engine_failure_while_a_change_waits_fails_the_change_not_the_order(tmp_path: Path) -> None:
    """A slice that raises fails the change waiting for it (as running the engine to idle on the spot raised
    into the request), ends its turn, and the next change applies once the engine runs again."""
    async def main() -> None:
        rt = Runtime({"data_dir": str(tmp_path / "e"), "archive.fsync": "never"})
        await rt.start()
        rt.execute(DDL)
        await _backlog(rt)
        real = rt.engine.run
        failures = [RuntimeError("operator exploded")]
        runs: list[int] = []

        def failing_run(*args: object, **kw: object) -> int:
            """A fault injected into the pump's first slice while a change waits (the change's own first
            slice, which finds the backlog, runs before it waits)."""
            if rt.order.changes:
                runs.append(1)
                if failures and len(runs) == 2:
                    raise failures.pop()
            return real(*args, **kw)
        rt.engine.run = failing_run             # type: ignore[method-assign]
        try:
            await rt.execute_async("REGISTER QUERY a AS SELECT k FROM M")
            raise AssertionError("the change applied although the engine failed before it")
        except RuntimeError as e:
            assert "operator exploded" in str(e)
        assert not rt.order.busy() and rt.runtime_stats()["errors"]["engine"] == 1
        assert [q.name for q in rt.queries()] == ["big"]
        await rt.execute_async("REGISTER QUERY b AS SELECT k FROM M")
        assert [q.name for q in rt.queries()] == ["big", "b"] and rt.backlog() == 0
        await rt.stop()
    asyncio.run(main())
