"""Arrival order for the server: catalog changes and the input around them (docs/server.md, "Catalog changes").

A catalog change (a statement, a drop, an entity's knob write) must apply once everything pushed before it has
been processed, and input pushed after it must not be processed before it: that is what makes a query
registered after a push see exactly what it saw when the server ran the engine to idle on the spot, and what
makes recovery (which replays the same order) agree with the live run. Running the engine to idle on the
spot held the event loop for as long as the backlog took (seconds under a big join), so the server waits for
it instead: a change takes its *turn* in arrival order and, once the changes before it are done, waits for
the engine pump to find the engine idle (``EnginePump.drain``: the pump's normal slices, the loop served
between them) while input that arrives meanwhile takes its turn behind it and is held, then applied in
arrival order once the change is done.

Why a chain of futures rather than an ``asyncio.Lock`` for the changes and an event for the input: input that
arrives while a change waits must go before a change that arrives after it, so changes and held input share
one order; each turn waits for the one before it, and a turn given up (a cancelled request) still passes
the wait on, so nothing after it overtakes what came before it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


class ArrivalOrder:
    """Turns taken in arrival order: each waits until every turn taken before it has ended."""

    def __init__(self) -> None:
        self._tail: asyncio.Future | None = None     # done once every turn taken so far has ended
        self.changes = 0        # catalog changes waiting for their turn or for the engine
        self.inputs = 0         # input requests held behind a change
        self.rows = 0           # their elements (counted in the backlog that admission judges)

    def busy(self) -> bool:
        """A turn has not ended: input that arrives now must take a turn instead of going straight in."""
        return self._tail is not None and not self._tail.done()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait until every turn taken before this one has ended; the body runs in this turn, and later turns
        wait for it to end."""
        prev, mine = self._tail, asyncio.get_running_loop().create_future()
        self._tail = mine
        try:
            if prev is not None and not prev.done():
                await asyncio.wait([prev])          # not ``await prev``: a cancelled waiter must not cancel it
            yield
        finally:
            if prev is None or prev.done():
                _end(mine)
            else:                                   # given up while waiting: end after the one before it
                prev.add_done_callback(lambda _f: _end(mine))

    @contextlib.asynccontextmanager
    async def change(self) -> AsyncIterator[None]:
        """The turn of one catalog change (counted in ``stats`` while it waits and runs)."""
        self.changes += 1
        try:
            async with self.turn():
                yield
        finally:
            self.changes -= 1

    @contextlib.asynccontextmanager
    async def held(self, rows: int) -> AsyncIterator[None]:
        """The turn of input that arrived while a change waits (``rows`` elements, counted while held)."""
        self.inputs += 1
        self.rows += rows
        released = False
        try:
            async with self.turn():
                self.inputs -= 1
                self.rows -= rows
                released = True
                yield
        finally:
            if not released:
                self.inputs -= 1
                self.rows -= rows

    def stats(self) -> dict[str, Any]:
        return {"changes_waiting": self.changes, "inputs_held": self.inputs, "rows_held": self.rows}


def _end(f: asyncio.Future) -> None:
    if not f.done():
        f.set_result(None)
