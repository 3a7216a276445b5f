"""The engine pump: drives the synchronous Engine from asyncio in time slices (SPEC section 10).

The engine is synchronous and not thread-safe, so every engine call happens on the event loop thread. It runs
in slices (``eng.run(max_steps=k)``) with ``k`` adapted from the measured cost of a step so one slice stays
near ``results.slice_ms`` and the loop keeps serving requests; after each slice what the queries produced is
handed to their readers (``collect``).

A catalog change needs the engine idle first (everything pushed before it processed). ``quiesce`` runs it to
idle on the spot (recovery, and the in-process API without a server); ``drain`` is the same barrier for the
server: it waits for the pump's own slices to find the engine idle, serving the loop between them, then
ends with ``quiesce`` (nothing left by then, since input that arrives meanwhile is held, see barrier.py).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import Any

from dsms.engine import Engine
from dsms.runtime.errors import RuntimeFailure
from dsms.runtime.ingest import release

log = logging.getLogger("dsms.runtime")


class EnginePump:
    """Runs the engine while it has work, one slice at a time, and counts what it did."""

    def __init__(self, engine: Engine, slice_target: float, collect: Callable[[], None],
                 errors: collections.Counter) -> None:
        self.engine = engine
        self.slice_target = slice_target
        self.collect = collect
        self.errors = errors
        self.steps = 16                 # operator runs allowed per slice (adapted)
        self.step_cost = 0.0005         # seconds per operator run (smoothed)
        self.slices = 0
        self.slice_seconds = 0.0
        self.slice_max = 0.0
        self.steps_total = 0
        self.work: asyncio.Event | None = None
        self.running = False            # the pump task is running its loop (``drain`` can wait for it)
        self._idle: list[asyncio.Future] = []      # ``drain`` calls waiting for a slice that does nothing

    def wake(self) -> None:
        """Input arrived: the pump runs the engine until it is idle again."""
        if self.work is not None:
            self.work.set()

    def run_slice(self) -> int:
        """One engine time slice, then fan-out of what it produced. Returns operator runs done (0: the engine
        is idle); ``k`` adapts so a slice takes about ``results.slice_ms``."""
        t0 = time.perf_counter()
        steps = self.engine.run(max_steps=self.steps, deadline=t0 + self.slice_target)
        dt = time.perf_counter() - t0
        if steps:
            self.step_cost = 0.8 * self.step_cost + 0.2 * (dt / steps)
            self.steps = int(min(4096, max(1, self.slice_target / max(self.step_cost, 1e-7))))
        self.slices += 1
        self.steps_total += steps
        self.slice_seconds += dt
        self.slice_max = max(self.slice_max, dt)
        self.collect()
        return steps

    def quiesce(self) -> None:
        """Run the engine until it has nothing left to do, synchronously (before a catalog change: recovery,
        the in-process API, and the end of ``drain``)."""
        while True:
            steps = self.engine.run(max_steps=4096)
            self.steps_total += steps
            self.collect()
            if steps == 0:
                return

    async def drain(self) -> None:
        """``quiesce`` without holding the loop: wait until one of the pump's slices finds the engine idle
        (the backlog is worked off in the pump's normal slices, the loop served between them), then
        ``quiesce``, which finds nothing left unless input was added meanwhile. An engine failure in a slice
        is raised here, as ``quiesce`` raises it; a pump that is not running (no server) quiesces at once.
        An engine that is idle already (one slice does nothing) is not waited for: a request of many
        statements then gives the loop back only every few statements, as before."""
        if self.running and self.run_slice() != 0:
            fut = asyncio.get_running_loop().create_future()
            self._idle.append(fut)
            self.wake()
            await fut
        self.quiesce()

    def _release(self, exc: BaseException | None) -> None:
        waiters, self._idle = self._idle, []
        release(waiters, exc)

    async def run(self) -> None:
        self.work = self.work or asyncio.Event()
        self.running = True
        try:
            while True:
                await self.work.wait()
                self.work.clear()
                try:
                    while True:
                        # Only a slice that did nothing proves the engine idle: fan-out after a slice can free
                        # a full output queue and make its producer ready again.
                        if self.run_slice() == 0:
                            break
                        await asyncio.sleep(0)
                except Exception as e:  # noqa: BLE001 - the engine must not take the server down; say so loudly
                    self.errors["engine"] += 1
                    log.exception("engine slice failed")
                    self._release(e)            # a change waiting for idle fails as quiesce would have
                    await asyncio.sleep(0.01)
                    self.work.set()
                    continue
                self._release(None)
        finally:
            self.running = False
            self._release(RuntimeFailure("the server is stopping"))

    def stats(self) -> dict[str, Any]:
        return {"slices": self.slices, "steps": self.steps_total, "steps_per_slice": self.steps,
                "slice_ms_max": round(self.slice_max * 1000, 3), "slice_seconds_total": self.slice_seconds,
                "slice_ms_mean": round(self.slice_seconds * 1000 / max(self.slices, 1), 3)}
