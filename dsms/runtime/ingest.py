"""Input through the runtime: validated by the engine, archived, applied, acknowledged once durable (SPEC
sections 6, 9 and 10).

Why it looks the way it does: input is validated in full first (all or nothing) by the engine's own
``prepare``/``prepare_update``, appended to the archive, then applied to the engine with ``apply``/
``apply_update``, in one synchronous block, so archive order and engine order are the same and there is one
set of input rules. A request is acknowledged once its archive frame is durable (``fsync = "always"``: at
once; ``"group"``: after the next group commit, within ``archive.group_delay_ms``, see ``GroupCommit``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsms.archive import ArchiveError
from dsms.errors import DsmsError, InputError
from dsms.formats import Decoded, iso_text
from dsms.runtime.errors import NotFound, Overloaded, RuntimeFailure
from dsms.types import to_ticks

if TYPE_CHECKING:
    from dsms.runtime.runtime import Runtime

log = logging.getLogger("dsms.runtime")
MEMORY_EVERY = 0.1         # seconds a memory figure is reused for admission


class GroupCommit:
    """fsync at most once every ``delay`` seconds and acknowledge every request appended before it began.

    A commit starts as soon as something waits for it and ``delay`` has passed since the previous one began:
    an idle server acknowledges after one fsync, a busy one gathers into each fsync what arrived during the
    previous one and the delay, and the rate of fsyncs stays bounded either way."""

    def __init__(self, sync: Callable[[], None], delay: float, on_error: Callable[[Exception], None]) -> None:
        self.sync = sync
        self.delay = delay
        self.on_error = on_error
        self.waiters: list[asyncio.Future] = []
        self.event = asyncio.Event()
        self.inflight: asyncio.Future | None = None    # the fsync running in a thread, if any

    def durable(self) -> asyncio.Future:
        """A future that completes when what was appended so far is fsynced."""
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.event.set()
        return fut

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        last = -float("inf")
        while True:
            await self.event.wait()
            wait = last + self.delay - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)   # gather the requests of the next few ms into this fsync
            last = loop.time()
            self.event.clear()
            waiters, self.waiters = self.waiters, []
            try:
                # Shielded: cancelling this task (server stop) must not leave an fsync running in its thread
                # while the archive closes its files under it; stop waits for ``inflight`` instead.
                self.inflight = loop.run_in_executor(None, self.sync)
                await asyncio.shield(self.inflight)
            except Exception as e:  # noqa: BLE001 - every waiter hears about it
                self.on_error(e)
                release(waiters, RuntimeFailure(f"archive fsync failed: {e}"))
                continue
            release(waiters, None)

    def release_all(self, exc: BaseException | None) -> None:
        waiters, self.waiters = self.waiters, []
        release(waiters, exc)


def release(waiters: list[asyncio.Future], exc: BaseException | None) -> None:
    """Wake every waiter not woken yet: with ``exc`` raised in it, or with None (the pump's idle waiters too)."""
    for f in waiters:
        if not f.done():
            if exc is None:
                f.set_result(None)
            else:
                f.set_exception(exc)


class InputPath:
    """Everything between a decoded request and the engine: the backlog limit, validation by the engine,
    archiving, application, durability, and the per-input counters and rates ``source_stats`` reports."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.backlog_limit = rt.config.get("limits.ingest_backlog")
        self.counters: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.punctuations = 0
        self.rates: dict[str, float] = {}
        self._rate_prev: dict[str, int] = {}
        self._rate_time = time.monotonic()
        self._memory = 0
        self._memory_at = -MEMORY_EVERY

    # ------------------------------------------------------------ limits and statistics

    def backlog(self) -> int:
        """Tuples not yet fully processed: in every queue (input and between operators) and held inside
        operators (``Engine.backlog``), and input held behind a catalog change (barrier.py)."""
        return self.rt.engine.backlog() + self.rt.order.rows

    def memory(self) -> int:
        """``Engine.memory_bytes``, recomputed at most every ``MEMORY_EVERY`` seconds (counting string
        columns walks their objects; one request need not pay that, and the figure moves slowly)."""
        now = time.monotonic()
        if now - self._memory_at >= MEMORY_EVERY:
            self._memory = self.rt.engine.memory_bytes()
            self._memory_at = now
        return self._memory

    def forget_memory(self) -> None:
        """Measure again at the next admission: a new ``memory_budget`` is judged against the memory held now,
        not a figure taken before it was written."""
        self._memory_at = -MEMORY_EVERY

    def overloaded(self) -> str | None:
        """Why the engine is over its limits (the backlog limit, the system's ``memory_budget``), or None.
        Over the memory budget, the memory governor (``mem:0``, when its ``auto_kind`` is on) switches
        synopses to approximate kinds first; while switches it asked for are not in effect yet, the input
        is accepted (they apply to it and bring memory down)."""
        b = self.backlog()
        if b > self.backlog_limit:
            return f"backlog is {b} tuples, over the limit of {self.backlog_limit} (limits.ingest_backlog)"
        budget = self.rt.engine.system.memory_budget
        if budget is not None:
            m = self.memory()
            if m > budget and not self.rt.engine.governor.relieve(m):
                return f"memory held is {m} bytes, over the system's memory_budget of {budget}"
        return None

    def check_backlog(self, key: str) -> None:
        """503 + Retry-After when over the limits and shedding is off; with shedding on the input is
        accepted and the load shedder drops what the engine cannot keep up with (docs/approximation.md),
        unless no query can be shed (none has an error bound): then it is refused as well."""
        if self.rt.recovering:
            return
        why = self.overloaded()
        if why is None:
            return
        if self.rt.engine.system.shedding and self.rt.engine.shedder.can_shed():
            self.rt.engine.overloaded(why)
            return
        self.counters[key]["refused"] += 1
        self.rt.errors["overloaded"] += 1
        raise Overloaded(f"input refused: {why}; retry later (or turn the system's shedding on)",
                         retry_after=1)

    def update_rates(self) -> None:
        """Elements per second per input, smoothed (called once a second)."""
        now = time.monotonic()
        dt = max(now - self._rate_time, 1e-3)
        for key, c in list(self.counters.items()):
            cur = int(c["elements"])
            prev = self._rate_prev.get(key, cur)
            self.rates[key] = 0.5 * self.rates.get(key, 0.0) + 0.5 * (cur - prev) / dt
            self._rate_prev[key] = cur
        self._rate_time = now

    def _refused(self, c: collections.Counter, d: Decoded, e: InputError) -> InputError:
        """Count a refused request; the error's index is mapped back to the request's own numbering."""
        c["refused"] += 1
        self.rt.errors["bad_input"] += 1
        if e.index is not None and d.index is not None:
            return InputError(str(e).split(": ", 1)[-1], index=d.item_of(e.index))
        return e

    def _begin(self, name: str, kind: str, d: Decoded, nbytes: int) -> tuple[Any, collections.Counter]:
        obj = self.rt.source(name, kind)
        c = self.counters[obj.name.lower()]
        c["requests"] += 1
        c["bytes"] += nbytes
        return obj, c

    # ------------------------------------------------------------ streams and relations

    def apply_stream(self, stream: str, d: Decoded, nbytes: int, client: bool = False) -> asyncio.Future | None:
        """Validate (the engine's ``prepare``), archive, apply; a future for durability (None: durable).
        ``client``: the input came over HTTP, where the stream's time decides whether elements carry ``ts``
        (an MQTT source knows its stream's time itself)."""
        obj, c = self._begin(stream, "stream", d, nbytes)
        key = obj.name.lower()
        eng = self.rt.engine
        self.punctuations += d.punctuations
        try:
            self.check_backlog(key)
            frontier = eng.frontier(obj.name)
            if d.sign is not None and any(s != 1 for s in d.sign):
                raise InputError("a stream element is always an insert (sign 1)",
                                 index=d.item_of(next(k for k, s in enumerate(d.sign) if s != 1)))
            given_hb = None if d.heartbeat is None else heartbeat_ticks(d.heartbeat)
            wrong_time = stream_time_error(obj, d) if client else None
            # with the wrong kind of time, the values are still checked first (a bad value is named first),
            # against the wall clock rather than timestamps the stream does not take
            ts = _timestamps(d, frontier) if wrong_time is None else _now(frontier)
            batch = eng.prepare(obj.name, _rows(d), ts, show=_show(d))
            if wrong_time is not None:
                raise wrong_time
        except InputError as e:
            raise self._refused(c, d, e) from None
        n = 0 if batch is None else len(batch)
        hb = _new_heartbeat(given_hb, frontier, None if batch is None else int(batch.ts[-1]))
        if n == 0 and hb is None:
            return None
        names = [cn for cn, _ in obj.columns]
        self._archive(key, [] if batch is None else [(batch.ts, None, dict(zip(names, batch.cols)))], hb)
        try:
            if batch is not None:
                eng.apply(obj.name, batch)
            if hb is not None:
                eng.heartbeat(hb, obj.name)
        except DsmsError as e:   # prepared by the engine itself, so this is a bug worth a loud 500
            self.rt.errors["engine_refused"] += 1
            log.error("engine refused archived input of %s: %s", key, e)
            raise RuntimeFailure(f"the engine refused input it had accepted: {e}") from None
        c["elements"] += n
        if hb is not None:
            c["heartbeats"] += 1
        return self._done()

    def apply_relation(self, relation: str, d: Decoded, nbytes: int) -> asyncio.Future | None:
        """Relation inserts and deletes (``d.sign``): validated by the engine's ``prepare_update`` (every
        delete matches a row live at its instant), archived one frame per instant, applied."""
        obj, c = self._begin(relation, "relation", d, nbytes)
        key = obj.name.lower()
        eng = self.rt.engine
        try:
            self.check_backlog(key)
            frontier = eng.frontier(obj.name)
            given_hb = None if d.heartbeat is None else heartbeat_ticks(d.heartbeat)
            change = eng.prepare_update(obj.name, _rows(d), _timestamps(d, frontier), d.sign, show=_show(d))
        except InputError as e:
            raise self._refused(c, d, e) from None
        n = 0 if change is None else len(change)
        hb = _new_heartbeat(given_hb, frontier, None if change is None else int(change.batches[-1].ts[-1]))
        if n == 0 and hb is None:
            return None
        names = [cn for cn, _ in obj.columns]
        frames = [] if change is None else [(b.ts, b.sign, dict(zip(names, b.cols))) for b in change.batches]
        self._archive(key, frames, hb)
        try:
            if change is not None:
                eng.apply_update(obj.name, change)
            if hb is not None:
                eng.heartbeat(hb, obj.name)
        except DsmsError as e:
            self.rt.errors["engine_refused"] += 1
            log.error("engine refused archived update of %s: %s", key, e)
            raise RuntimeFailure(f"the engine refused an update it had accepted: {e}") from None
        c["elements"] += n
        return self._done()

    def apply_heartbeat(self, ts: int, name: str | None) -> asyncio.Future | None:
        """No element below ``ts`` will arrive on ``name`` (or on every input); archived, then applied."""
        ts = heartbeat_ticks(ts)
        eng = self.rt.engine
        inputs = [s.name for s in (*eng.streams(), *eng.relations())]
        if name is not None:
            inputs = [t for t in inputs if isinstance(name, str) and t.lower() == name.lower()]
            if not inputs:
                raise NotFound(f"no stream or relation named '{name}'")
        targets = inputs
        moved = [t for t in targets if (f := eng.frontier(t)) is None or ts > f]
        if not moved:
            return None
        try:
            for t in moved:
                self.rt.archive.append_heartbeat(t.lower(), ts)
        except (ArchiveError, OSError) as e:
            raise RuntimeFailure(f"the heartbeat could not be archived: {e}") from None
        for t in moved:
            eng.heartbeat(ts, t)
            self.counters[t.lower()]["heartbeats"] += 1
        return self._done()

    # ------------------------------------------------------------ archive and durability

    def _archive(self, key: str, frames: list[tuple[Any, Any, dict]], hb: int | None) -> None:
        try:
            for ts, sign, cols in frames:
                self.rt.archive.append_batch(key, ts, sign, cols)
            if hb is not None:
                self.rt.archive.append_heartbeat(key, hb)
        except (ArchiveError, OSError) as e:
            self.rt.errors["archive"] += 1
            log.error("archive append for %s failed: %s", key, e)
            raise RuntimeFailure(f"the input could not be archived, nothing was accepted: {e}") from None

    def _done(self) -> asyncio.Future | None:
        self.rt.pump.wake()
        return self.rt.durable()


def heartbeat_ticks(hb: Any) -> int:
    """A heartbeat's timestamp by the rules of every timestamp (``dsms.types.to_ticks``)."""
    try:
        return to_ticks(hb)
    except (TypeError, ValueError) as e:
        raise InputError(f"heartbeat: {e}") from None


def _rows(d: Decoded) -> Any:
    return d.cols if d.cols is not None else (d.rows or [])


def _timestamps(d: Decoded, frontier: int | None) -> Any:
    """The timestamps given, or the wall clock in milliseconds when none were (arrival time), never below
    what the input has passed."""
    if d.ts is not None:
        return d.ts
    return _now(frontier)


def _now(frontier: int | None) -> int:
    """The wall clock in milliseconds, never below what the input has passed."""
    now = int(time.time() * 1000)
    return now if frontier is None or now >= frontier else frontier


def _show(d: Decoded) -> Callable[[int], str]:
    """How a message writes a timestamp: ISO 8601 to a client that sent ISO, else the number."""
    return iso_text if d.iso else str


def stream_time_error(obj: Any, d: Decoded) -> InputError | None:
    """An event-time stream's elements carry ``ts``; an arrival-time stream's do not (the server stamps them):
    input that mixes the two up is refused rather than stamped and then found late (issue 17)."""
    time_kind = getattr(obj, "time", "event")
    if time_kind == "event" and d.ts is None and d.n:
        return InputError(f"stream '{obj.name}' takes event time: every element needs \"ts\" (milliseconds or "
                          "ISO 8601); a stream registered with TIME ARRIVAL is stamped by the server instead",
                          index=0)
    if time_kind == "arrival" and d.ts is not None and d.n:
        return InputError(f"stream '{obj.name}' takes arrival time (TIME ARRIVAL): the server stamps each element "
                          "as it arrives, so elements must not carry \"ts\"", index=0)
    return None


def _new_heartbeat(hb: int | None, frontier: int | None, last_ts: int | None) -> int | None:
    """The request's heartbeat when it tells the engine something new (past the input's frontier and past the
    request's own elements), else None."""
    if hb is None or (frontier is not None and hb <= frontier) or (last_ts is not None and hb <= last_ts):
        return None
    return hb
