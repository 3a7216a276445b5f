"""The server runtime: one Engine driven from asyncio, the input archive, catalog persistence and result
fan-out (SPEC sections 7, 9 and 10).

Why it looks the way it does:

* The engine is synchronous and not thread-safe, so every engine call happens here, on the event loop
  thread. It runs in time slices (``eng.run(max_steps=k)``) with ``k`` adapted from the measured cost of a step
  so one slice stays near ``results.slice_ms`` and the loop keeps serving requests.
* Input is validated in full first (all or nothing), appended to the archive, then pushed into the engine, in
  one synchronous block: archive order and engine order are the same. The request is acknowledged once the
  archive frame is durable (``fsync = "always"``: at once; ``"group"``: after the next group commit, within
  ``archive.group_delay_ms``).
* The catalog is a log of every catalog change (CQL statements, drops, knob writes), each stamped with the
  archive position (per-input frame sequence numbers) at which it happened. Recovery re-executes the log and
  replays the archive between its entries, so the engine sees the same statements interleaved with the same
  input as the live run did, and entity ids (``q3``, ``op:7``) come out the same. Before a catalog change the
  engine is run to quiescence, live and in replay alike, so unprocessed input never straddles a change.
* Results are read from each query's output after every slice and offered to a retention ring and to every
  subscriber. A subscriber's buffer is bounded; what does not fit becomes a gap marker, so a slow reader never
  slows the engine or other readers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dsms.archive import Archive, ArchiveError
from dsms.batch import Batch, Element, Heartbeat
from dsms.config import Config, load_config
from dsms.cql import ast
from dsms.cql.parser import parse
from dsms.engine import Engine, Query
from dsms.errors import ConflictError, CQLError, DsmsError, InputError, SchemaError
from dsms.formats import Decoded
from dsms.validate import check_timestamps, typed_columns

log = logging.getLogger("dsms.runtime")

__all__ = ["Runtime", "Subscriber", "ResultChunk", "Gap", "HeartbeatMark", "Overloaded", "LimitExceeded",
           "NotFound", "Conflict", "NotSupported", "RuntimeFailure", "CATALOG_NAME", "held_tuples"]

CATALOG_NAME = "catalog.json"
CATALOG_VERSION = 1


# ---------------------------------------------------------------- errors the HTTP layer maps to statuses


class Overloaded(DsmsError):
    """Input refused because the engine's input backlog is over its limit (HTTP 503 + Retry-After)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LimitExceeded(DsmsError):
    """A configured limit (statement length, number of queries) would be passed (HTTP 413 or 409)."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


class NotFound(DsmsError):
    """No stream, relation, query or entity of that name (HTTP 404)."""


class Conflict(DsmsError):
    """A change refused because of the catalog's state, e.g. dropping what another query reads (HTTP 409)."""


class NotSupported(DsmsError):
    """The engine in use does not offer this yet (HTTP 501)."""


class RuntimeFailure(DsmsError):
    """Something failed that is not the client's fault (archive I/O); HTTP 500 with the reason."""


# ---------------------------------------------------------------- what flows to subscribers


class ResultChunk:
    """One result batch, shared by the retention ring and every subscriber; the bytes of each output format
    are computed once and cached, however many readers want them.

    ``ts``, ``sign`` and each column are the engine's numpy arrays as produced (never copied into Python
    lists: the encoders work column-wise on them), or plain lists (tests, tools); both behave the same."""

    __slots__ = ("names", "ts", "sign", "cols", "_enc")

    def __init__(self, names: list[str], ts: Any, sign: Any, cols: list[Any]) -> None:
        self.names = names
        self.ts = ts
        self.sign = sign
        self.cols = cols
        self._enc: dict[str, bytes] = {}

    @classmethod
    def from_batch(cls, names: list[str], b: Batch) -> ResultChunk:
        return cls(names, b.ts, b.sign, list(b.cols))

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def first_ts(self) -> int:
        return int(self.ts[0])

    @property
    def last_ts(self) -> int:
        return int(self.ts[-1])

    def since(self, from_ts: int) -> ResultChunk | None:
        """The elements with ts >= from_ts (None when there are none); timestamps never decrease."""
        if self.first_ts >= from_ts:
            return self
        i = int(np.searchsorted(np.asarray(self.ts), from_ts, side="left"))
        if i >= len(self):
            return None
        return self.cut(i)

    def cut(self, i: int) -> ResultChunk:
        """The elements from position ``i`` on (numpy slices are views: no element is copied)."""
        return ResultChunk(self.names, self.ts[i:], self.sign[i:], [c[i:] for c in self.cols])

    def encode(self, encoder: Any) -> bytes:
        data = self._enc.get(encoder.name)
        if data is None:
            data = encoder.elements(self.names, self.ts, self.sign, self.cols)
            self._enc[encoder.name] = data
        return data

    def elements(self) -> list[Element]:
        ts, sign, cols = _plain(self.ts), _plain(self.sign), [_plain(c) for c in self.cols]
        return [Element(t, s, dict(zip(self.names, vals))) for t, s, *vals in zip(ts, sign, *cols)]


def _plain(values: Any) -> list:
    """A column as a list of Python values."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


@dataclass
class Gap:
    """``missed`` elements with timestamps ``from_ts..to_ts`` were not delivered to this reader."""

    missed: int
    from_ts: int | None
    to_ts: int | None


@dataclass(frozen=True)
class HeartbeatMark:
    """The query's output has passed ``ts``: results below it are final."""

    ts: int


@dataclass(frozen=True)
class Closed:
    """The stream ends: the query was dropped or the server is stopping."""

    reason: str


class Subscriber:
    """One reader of a query's results, with a bounded buffer (in elements).

    ``offer`` never blocks: when an element batch does not fit, it is counted into a gap marker placed where
    it would have been, so the reader learns exactly what it missed and where. One batch is always accepted
    into an empty buffer, so a batch larger than the buffer does not starve a reader that keeps up."""

    def __init__(self, query_id: str, capacity: int) -> None:
        self.query_id = query_id
        self.capacity = capacity
        self.items: collections.deque[Any] = collections.deque()
        self.buffered = 0
        self.missed = 0
        self.delivered = 0
        self.closed: Closed | None = None
        self._event = asyncio.Event()

    def offer(self, item: ResultChunk | HeartbeatMark) -> None:
        if self.closed is not None:
            return
        last = self.items[-1] if self.items else None
        if isinstance(item, HeartbeatMark):
            if isinstance(last, Gap):
                return                        # the gap already says how far the stream has gone
            if isinstance(last, HeartbeatMark):
                self.items[-1] = item
            else:
                self.items.append(item)
            self._event.set()
            return
        n = len(item)
        if self.buffered == 0 or self.buffered + n <= self.capacity:
            self.items.append(item)
            self.buffered += n
        else:
            self.missed += n
            if isinstance(last, Gap):
                last.missed += n
                last.to_ts = item.last_ts
            else:
                self.items.append(Gap(n, item.first_ts, item.last_ts))
        self._event.set()

    def close(self, reason: str) -> None:
        if self.closed is None:
            self.closed = Closed(reason)
            self._event.set()

    def take(self) -> list[Any]:
        """Everything buffered, oldest first (and the close marker last, once closed and empty)."""
        out = list(self.items)
        self.items.clear()
        for it in out:
            if isinstance(it, ResultChunk):
                self.delivered += len(it)
        self.buffered = 0
        self._event.clear()
        if not out and self.closed is not None:
            return [self.closed]
        return out

    async def get(self, timeout: float | None = None) -> list[Any]:
        """Wait up to ``timeout`` seconds for something to read; returns [] on timeout."""
        if not self.items and self.closed is None:
            try:
                await asyncio.wait_for(self._event.wait(), timeout)
            except TimeoutError:
                return []
        return self.take()


class _QueryState:
    """What the runtime keeps for one registered query besides the engine's Query object."""

    def __init__(self, query: Query, retention: int) -> None:
        self.query = query
        self.names = [c for c, _ in query.schema]
        self.retention = retention
        self.ring: collections.deque[ResultChunk] = collections.deque()
        self.ring_elements = 0
        self.subscribers: set[Subscriber] = set()
        self.results_out = 0
        self.batches_out = 0
        self.last_heartbeat: int | None = None
        self.last_ts: int | None = None
        self.missed = 0
        self.publisher_task: asyncio.Task | None = None

    def retain(self, chunk: ResultChunk) -> None:
        if self.retention <= 0:
            return
        self.ring.append(chunk)
        self.ring_elements += len(chunk)
        while self.ring_elements - len(self.ring[0]) >= self.retention:
            self.ring_elements -= len(self.ring.popleft())
        if self.ring_elements > self.retention:          # cut the oldest chunk to fit exactly
            cut = self.ring_elements - self.retention
            self.ring[0] = self.ring[0].cut(cut)
            self.ring_elements -= cut

    def set_retention(self, n: int) -> None:
        self.retention = n
        if n <= 0:
            self.ring.clear()
            self.ring_elements = 0
        elif self.ring:
            chunks = list(self.ring)
            self.ring.clear()
            self.ring_elements = 0
            for c in chunks:
                self.retain(c)


# ---------------------------------------------------------------- the runtime


class Runtime:
    """Owns the Engine, the Archive, the catalog file and result fan-out; every engine call goes through it.

    Use ``await rt.start()`` (recovers from the data directory) and ``await rt.stop()``. The public methods
    raise :class:`dsms.InputError`, :class:`dsms.CQLError`, :class:`dsms.SchemaError`, :class:`NotFound`,
    :class:`Conflict`, :class:`Overloaded`, :class:`LimitExceeded` or :class:`NotSupported` for the HTTP layer
    to map; nothing a client sends makes them leave the engine half-changed."""

    def __init__(self, config: Config | Mapping[str, Any] | None = None, engine_config: Mapping | None = None) -> None:
        self.config = config if isinstance(config, Config) else load_config(overrides=dict(config or {}))
        self.data_dir = Path(self.config.data_dir)
        self.engine = Engine(engine_config if engine_config is not None else
                             {"engine": self.config.values["engine"]})
        self.archive: Archive | None = None
        self.fsync = self.config.get("archive.fsync")
        self.group_delay = self.config.get("archive.group_delay_ms") / 1000.0
        self.default_retention = self.config.get("results.retention")
        self.subscriber_buffer = self.config.get("results.subscriber_buffer")
        self.slice_target = self.config.get("results.slice_ms") / 1000.0
        self.max_queries = self.config.get("limits.max_queries")
        self.statement_chars = self.config.get("limits.statement_chars")
        self.backlog_limit = self.config.get("limits.ingest_backlog")
        self.catalog_log: list[dict[str, Any]] = []
        self.states: dict[str, _QueryState] = {}
        self.started = False
        self.recovering = False
        self.recovery_info: dict[str, Any] = {}
        self.started_at = time.time()
        # engine driving
        self._steps = 16
        self._step_cost = 0.0005
        self._work: asyncio.Event | None = None
        self._pump_task: asyncio.Task | None = None
        self._sync_task: asyncio.Task | None = None
        self._tick_task: asyncio.Task | None = None
        self._sync_event: asyncio.Event | None = None
        self._sync_waiters: list[asyncio.Future] = []
        self._stopping = False
        self._mqtt: dict[str, Any] = {}
        self._bg: set[asyncio.Task] = set()
        # statistics
        self.counters: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.errors: collections.Counter = collections.Counter()
        self.slices = 0
        self.slice_seconds = 0.0
        self.slice_max = 0.0
        self.steps_total = 0
        self.punctuations = 0
        self.rates: dict[str, float] = {}
        self._rate_prev: dict[str, int] = {}
        self._rate_time = time.monotonic()

    # ------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Open the archive (truncating a torn tail), restore the catalog, replay the archive, start driving."""
        loop = asyncio.get_running_loop()
        self._work = asyncio.Event()
        self._sync_event = asyncio.Event()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _check_writable(self.data_dir)
        self.archive = Archive(self.data_dir, fsync=self.fsync,
                               retention_ms=self.config.get("archive.retention_ms") or None)
        for r in self.archive.recovery:
            log.warning("archive: cut %d torn byte(s) from %s (%s)", r.torn_bytes, r.segment, r.reason)
        try:
            self._recover()
        except Exception:
            self.archive.close()
            raise
        self.started = True
        self._pump_task = loop.create_task(self._pump(), name="dsms-pump")
        self._sync_task = loop.create_task(self._group_commit(), name="dsms-group-commit")
        self._tick_task = loop.create_task(self._ticker(), name="dsms-ticker")
        for s in self.engine.streams():
            if getattr(s, "source", None) is not None:
                self._start_mqtt(s)
        for st in self.states.values():
            self._start_publisher(st)
        self._work.set()

    async def stop(self) -> None:
        """Stop adapters and readers, make everything durable, write the catalog, release the archive."""
        if self._stopping:
            return
        self._stopping = True
        for name in list(self._mqtt):
            await self._stop_mqtt(name)
        for st in self.states.values():
            for sub in list(st.subscribers):
                sub.close("server stopping")
            if st.publisher_task is not None:
                st.publisher_task.cancel()
        for t in (self._pump_task, self._sync_task, self._tick_task, *self._bg):
            if t is not None:
                t.cancel()
        for t in (self._pump_task, self._sync_task, self._tick_task, *self._bg):
            if t is not None:
                with contextlib.suppress(BaseException):
                    await t
        if self.archive is not None and not self.archive.closed:
            try:
                self.archive.sync()
            finally:
                self._release_waiters(None)
                self.archive.close()
        if self.started:
            self._save_catalog()

    # ------------------------------------------------------------ recovery

    def _recover(self) -> None:
        path = self.data_dir / CATALOG_NAME
        entries: list[dict[str, Any]] = []
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise RuntimeFailure(f"catalog {path} cannot be read: {e}") from None
            if not isinstance(doc, dict) or doc.get("version") != CATALOG_VERSION or \
                    not isinstance(doc.get("log"), list):
                raise RuntimeFailure(f"catalog {path} is not a dsms catalog (version {CATALOG_VERSION})")
            entries = doc["log"]
        assert self.archive is not None
        readers = {name: self.archive.read(name) for name in self.archive.inputs()}
        pending: dict[str, Any] = {}
        replayed = {"frames": 0, "elements": 0, "skipped": 0, "entries": 0}
        self.recovering = True
        t0 = time.monotonic()
        try:
            for entry in entries:
                self._replay_until(readers, pending, entry.get("at") or {}, replayed)
                self._quiesce()
                try:
                    self._apply_entry(entry)
                    replayed["entries"] += 1
                except Exception as e:  # noqa: BLE001 - a log entry that no longer applies is skipped, loudly
                    log.error("catalog entry %s could not be re-applied: %s", entry, e)
                self.catalog_log.append(entry)
            self._replay_until(readers, pending, None, replayed)
            self._quiesce()
        finally:
            self.recovering = False
        replayed["seconds"] = round(time.monotonic() - t0, 3)
        replayed["truncated_bytes"] = self.archive.truncated_bytes
        self.recovery_info = replayed
        if entries or replayed["frames"]:
            log.info("recovered %d catalog entries and %d archived frames (%d elements) in %.2fs",
                     replayed["entries"], replayed["frames"], replayed["elements"], replayed["seconds"])

    def _replay_until(self, readers: dict[str, Any], pending: dict[str, Any], at: Mapping[str, int] | None,
                      stats: dict[str, int]) -> None:
        """Push archived frames into the engine, merged across inputs by timestamp, up to the positions ``at``
        (per input: frames with seq < at[input]; None: everything)."""
        heads: dict[str, Any] = {}
        for name, it in readers.items():
            rec = pending.pop(name, None)
            if rec is None:
                rec = next(it, None)
            if rec is not None:
                heads[name] = rec
        while heads:
            ready = {n: r for n, r in heads.items() if at is None or r.seq < at.get(n, 0)}
            if not ready:
                break
            name = min(ready, key=lambda n: (_record_ts(ready[n]), n))
            rec = heads[name]
            self._replay_record(rec, stats)
            nxt = next(readers[name], None)
            if nxt is None:
                del heads[name]
            else:
                heads[name] = nxt
            if stats["frames"] % 64 == 0:
                self._quiesce()
        pending.update(heads)

    def _replay_record(self, rec: Any, stats: dict[str, int]) -> None:
        eng = self.engine
        src = eng.sources.get(rec.input)
        stats["frames"] += 1
        try:
            if rec.is_heartbeat:
                if src is not None:
                    eng.heartbeat(int(rec.ts), rec.input)
                return
            if src is None:
                stats["skipped"] += 1
                return
            names = [c for c, _ in src.obj.columns]
            cols = {n: rec.cols[n] for n in names if n in rec.cols}
            if src.obj.kind == "stream":
                eng.push(rec.input, cols, rec.ts)
            else:
                ins = rec.sign > 0
                eng.update(rec.input, insert={n: c[ins] for n, c in cols.items()},
                           delete={n: c[~ins] for n, c in cols.items()}, ts=int(rec.ts[0]))
            stats["elements"] += len(rec)
        except DsmsError as e:
            stats["skipped"] += 1
            log.error("archived frame %s #%d could not be replayed: %s", rec.input, rec.seq, e)

    def _apply_entry(self, entry: Mapping[str, Any]) -> None:
        op = entry.get("op")
        if op == "cql":
            result = self.engine.execute(entry["cql"])
            self._after_statement(result)
        elif op == "drop":
            self._drop_now(entry["name"], entry.get("kind"))
        elif op == "set":
            ent = self._entity_obj(entry["entity"])
            self._set_entity(ent, entry["values"])
        elif op == "system":
            self._set_entity(self._system_obj(), entry["values"])
        elif op == "retention":
            st = self.states.get(entry["query"])
            if st is not None:
                st.set_retention(int(entry["value"]))
        else:
            raise ValueError(f"unknown catalog entry {op!r}")

    # ------------------------------------------------------------ catalog log

    def _positions(self) -> dict[str, int]:
        assert self.archive is not None
        return {name: r.next_seq for name, r in self.archive.ranges().items()}

    def _log(self, entry: dict[str, Any]) -> None:
        entry["at"] = self._positions()
        self.catalog_log.append(entry)
        self._save_catalog()

    def _save_catalog(self) -> None:
        """Write ``catalog.json`` atomically: a temporary file, fsync, rename, fsync of the directory."""
        path = self.data_dir / CATALOG_NAME
        tmp = path.with_name(f".{CATALOG_NAME}.{os.getpid()}.tmp")
        doc = {"version": CATALOG_VERSION, "saved_at": time.time(), "log": self.catalog_log}
        data = json.dumps(doc, indent=1).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        dfd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    # ------------------------------------------------------------ statements

    def execute(self, text: str) -> list[Any]:
        """Run CQL statements one by one, logging each that succeeds. Returns the engine's result of each.
        On an error, the statements before it stay applied; the exception carries ``done`` (their results)
        and ``statement`` (the 0-based index of the failing one)."""
        if not isinstance(text, str):
            raise CQLError("a statement must be a string")
        if len(text) > self.statement_chars:
            raise LimitExceeded(f"statement text is {len(text)} characters; the limit is "
                                f"{self.statement_chars} (limits.statement_chars)", status=413)
        stmts = parse(text)
        if not stmts:
            raise CQLError("no statement to run")
        pieces = _split_statements(text, stmts)
        done: list[Any] = []
        for k, (stmt, piece) in enumerate(zip(stmts, pieces)):
            try:
                done.append(self._execute_one(stmt, piece))
            except DsmsError as e:
                e.done = done               # type: ignore[attr-defined]
                e.statement = k             # type: ignore[attr-defined]
                raise
        return done

    def _execute_one(self, stmt: Any, text: str) -> Any:
        creates_query = isinstance(stmt, ast.RegisterQuery | ast.RegisterView | ast.QueryStatement)
        if creates_query and len(self.engine.queries()) >= self.max_queries:
            raise LimitExceeded(f"{len(self.engine.queries())} queries are registered; the limit is "
                                f"{self.max_queries} (limits.max_queries)")
        if isinstance(stmt, ast.Drop):
            self.drop(stmt.name, stmt.kind)
            return {"dropped": stmt.name}
        if isinstance(stmt, ast.RegisterStream | ast.RegisterRelation):
            from dsms.archive import validate_input_name
            try:
                validate_input_name(stmt.name)
            except ValueError as e:
                raise SchemaError(f"'{stmt.name}' cannot be used as a stream or relation name: {e}") from None
        self._quiesce()
        try:
            result = self.engine.execute(text)
        except ConflictError as e:
            raise Conflict(str(e)) from None
        self._after_statement(result)
        self._log({"op": "cql", "cql": text})
        if isinstance(stmt, ast.RegisterStream) and stmt.source is not None and self.started:
            self._start_mqtt(self.engine.catalog.get(stmt.name))
        if isinstance(result, Query) and self.started:
            self._start_publisher(self.states[result.id])
        return result

    def _after_statement(self, result: Any) -> None:
        for r in result if isinstance(result, list) else [result]:
            if isinstance(r, Query):
                self.states[r.id] = _QueryState(r, self.default_retention)

    def drop(self, name: str, kind: str | None = None) -> str:
        """Drop a query (by id or name), view, stream or relation; NotFound or Conflict when it cannot be."""
        key = name.lower() if isinstance(name, str) else name
        if not self._exists(name):
            raise NotFound(f"nothing named '{name}' to drop")
        self._quiesce()
        try:
            dropped = self._drop_now(name, kind)
        except ConflictError as e:
            raise Conflict(str(e)) from None
        self._log({"op": "drop", "name": name, "kind": kind})
        if key in self._mqtt:
            self._spawn(self._stop_mqtt(key, dropped=True))
        return dropped

    def _drop_now(self, name: str, kind: str | None) -> str:
        q = None
        if name.lower() not in self.engine.sources:
            with contextlib.suppress(SchemaError):
                q = self.engine.query(name)
        dropped = self.engine.drop(name, kind)
        if q is not None:
            st = self.states.pop(q.id, None)
            if st is not None:
                for sub in list(st.subscribers):
                    sub.close("query dropped")
                if st.publisher_task is not None:
                    st.publisher_task.cancel()
        return dropped

    def _exists(self, name: str) -> bool:
        if not isinstance(name, str):
            return False
        if name.lower() in self.engine.sources:
            return True
        try:
            self.engine.query(name)
            return True
        except SchemaError:
            return False

    # ------------------------------------------------------------ catalog reads

    def query(self, name_or_id: str) -> Query:
        try:
            return self.engine.query(name_or_id)
        except SchemaError:
            raise NotFound(f"no query '{name_or_id}'") from None

    def queries(self) -> list[Query]:
        return self.engine.queries()

    def source(self, name: str, kind: str) -> Any:
        """The stream or relation definition called ``name``; NotFound otherwise."""
        src = self.engine.sources.get(name.lower()) if isinstance(name, str) else None
        if src is None or src.obj.kind != kind:
            raise NotFound(f"no {kind} named '{name}'")
        return src.obj

    def source_stats(self, name: str) -> dict[str, Any]:
        key = name.lower()
        src = self.engine.sources.get(key)
        c = self.counters[key]
        out = {"elements_in": int(c["elements"]), "requests": int(c["requests"]), "bytes_in": int(c["bytes"]),
               "refused": int(c["refused"]), "heartbeats": int(c["heartbeats"]),
               "frontier": None if src is None else src.frontier,
               "backlog": 0 if src is None else held_tuples(src.queue),
               "rate_per_s": round(self.rates.get(key, 0.0), 1)}
        if key in self._mqtt:
            out["mqtt"] = dict(getattr(self._mqtt[key], "stats", {}) or {})
        return out

    def query_stats(self, qid: str) -> dict[str, Any]:
        st = self.states.get(qid)
        if st is None:
            return {}
        return {"results_out": st.results_out, "subscribers": len(st.subscribers), "retained": st.ring_elements,
                "retention": st.retention, "missed_by_readers": st.missed, "last_ts": st.last_ts,
                "last_heartbeat": st.last_heartbeat}

    def set_query_retention(self, qid: str, n: Any) -> None:
        """Knob ``retention`` of one query: how many recent result elements ``?from=`` can replay."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 100_000_000:
            raise InputError(f"retention must be an integer between 0 and 100000000, not {n!r}")
        st = self.states.get(self.query(qid).id)
        assert st is not None
        st.set_retention(n)
        self._log({"op": "retention", "query": st.query.id, "value": n})

    # ------------------------------------------------------------ input

    def backlog(self) -> int:
        """Input tuples pushed but not yet consumed by every operator reading them."""
        return sum(held_tuples(s.queue) for s in self.engine.sources.values())

    def _check_backlog(self, key: str) -> None:
        if self.recovering:
            return
        b = self.backlog()
        if b > self.backlog_limit:
            self.counters[key]["refused"] += 1
            self.errors["overloaded"] += 1
            raise Overloaded(f"input backlog is {b} tuples, over the limit of {self.backlog_limit} "
                             "(limits.ingest_backlog); retry later", retry_after=1)

    async def ingest(self, stream: str, rows: Sequence[Mapping] | Mapping[str, Sequence],
                     ts: int | Sequence[int] | None = None, *, heartbeat: int | None = None,
                     nbytes: int = 0) -> int:
        """Append elements to a stream, all or nothing; returns how many. ``rows`` is a list of dicts or
        columnar ``{col: values}``; ``ts`` one timestamp, one per row, or None (stamped with the wall clock,
        never below what the stream has passed). Returns once the elements are durable in the archive."""
        if isinstance(rows, Mapping):
            n = len(next(iter(rows.values()))) if rows else 0
            decoded = Decoded(cols=dict(rows), n=n)
        else:
            rows = list(rows)
            decoded = Decoded(rows=rows, n=len(rows))
        if ts is not None:
            decoded.ts = np.full(decoded.n, ts, dtype=np.int64) if isinstance(ts, int | np.integer) and \
                not isinstance(ts, bool) else ts
        decoded.heartbeat = heartbeat
        return await self.ingest_decoded(stream, decoded, nbytes=nbytes)

    async def ingest_decoded(self, stream: str, d: Decoded, *, nbytes: int = 0) -> int:
        """:meth:`ingest` for a decoded request body (the HTTP path)."""
        fut = self._apply_stream(stream, d, nbytes)
        if fut is not None:
            await fut
        return d.n

    def _refused(self, c: dict, d: Decoded, e: InputError) -> InputError:
        """Count a refused request; the error's index is mapped back to the request's own numbering."""
        c["refused"] += 1
        self.errors["bad_input"] += 1
        if e.index is not None and d.index is not None:
            return InputError(str(e).split(": ", 1)[-1], index=d.item_of(e.index))
        return e

    def _apply_stream(self, stream: str, d: Decoded, nbytes: int) -> asyncio.Future | None:
        obj = self.source(stream, "stream")
        key = obj.name.lower()
        c = self.counters[key]
        c["requests"] += 1
        c["bytes"] += nbytes
        self.punctuations += d.punctuations
        try:
            self._check_backlog(key)
            cols, n = typed_columns(obj.columns, d.rows, d.cols)
            src = self.engine.sources[key]
            ts = _timestamps(obj.name, d, n, src.frontier)
            if d.sign is not None and any(s != 1 for s in d.sign):
                raise InputError("a stream element is always an insert (sign 1)",
                                 index=d.item_of(next(k for k, s in enumerate(d.sign) if s != 1)))
            if isinstance(d.heartbeat, bool) or (d.heartbeat is not None and not isinstance(d.heartbeat, int)):
                raise InputError(f"a heartbeat takes an integer timestamp, not {d.heartbeat!r}")
        except InputError as e:
            raise self._refused(c, d, e) from None
        hb = _new_heartbeat(d, src.frontier, ts)
        if n == 0 and hb is None:
            return None
        names = [cn for cn, _ in obj.columns]
        try:
            if n:
                self.archive.append_batch(key, ts, None, dict(zip(names, cols)))
            if hb is not None:
                self.archive.append_heartbeat(key, hb)
        except (ArchiveError, OSError) as e:
            self.errors["archive"] += 1
            log.error("archive append for %s failed: %s", key, e)
            raise RuntimeFailure(f"the input could not be archived, nothing was accepted: {e}") from None
        try:
            if n:   # validated above by the engine's own rules (typed_columns, check_timestamps): apply as is
                self.engine.apply(obj.name, Batch(ts, np.ones(n, dtype=np.int8), cols))
            if hb is not None:
                self.engine.heartbeat(hb, obj.name)
        except DsmsError as e:   # validated above, so this is a disagreement between runtime and engine
            self.errors["engine_refused"] += 1
            log.error("engine refused archived input of %s: %s", key, e)
            raise RuntimeFailure(f"the engine refused input the runtime had accepted: {e}") from None
        c["elements"] += n
        if hb is not None:
            c["heartbeats"] += 1
        self._wake()
        return self._durable()

    async def update(self, relation: str, d: Decoded, *, nbytes: int = 0) -> int:
        """Relation inserts and deletes (``d.sign``), grouped by timestamp, all or nothing over the request:
        every delete must match a row present at its instant. Returns the number of changes."""
        fut = self._apply_relation(relation, d, nbytes)
        if fut is not None:
            await fut
        return d.n

    async def update_rows(self, relation: str, insert: Sequence[Mapping] = (), delete: Sequence[Mapping] = (),
                          ts: int | None = None) -> int:
        """``Engine.update`` through the runtime: inserts and deletes at one instant, archived first."""
        rows = list(insert) + list(delete)
        d = Decoded(rows=rows, n=len(rows), sign=[1] * len(insert) + [-1] * len(delete))
        if ts is not None:
            d.ts = np.full(len(rows), ts, dtype=np.int64)
        return await self.update(relation, d)

    def _apply_relation(self, relation: str, d: Decoded, nbytes: int) -> asyncio.Future | None:
        obj = self.source(relation, "relation")
        key = obj.name.lower()
        c = self.counters[key]
        c["requests"] += 1
        c["bytes"] += nbytes
        src = self.engine.sources[key]
        try:
            self._check_backlog(key)
            cols, n = typed_columns(obj.columns, d.rows, d.cols)
            ts = _timestamps(obj.name, d, n, src.frontier)
            sign = np.asarray(d.sign if d.sign is not None else [1] * n, dtype=np.int8)
            groups = _validate_updates(obj, src.contents, cols, ts, sign)
        except InputError as e:
            raise self._refused(c, d, e) from None
        hb = _new_heartbeat(d, src.frontier, ts)
        if n == 0 and hb is None:
            return None
        names = [cn for cn, _ in obj.columns]
        try:
            for lo, hi in groups:
                self.archive.append_batch(key, ts[lo:hi], sign[lo:hi], {nm: col[lo:hi] for nm, col in zip(names, cols)})
            if hb is not None:
                self.archive.append_heartbeat(key, hb)
        except (ArchiveError, OSError) as e:
            self.errors["archive"] += 1
            raise RuntimeFailure(f"the update could not be archived, nothing was accepted: {e}") from None
        try:
            for lo, hi in groups:
                ins = sign[lo:hi] > 0
                part = {nm: col[lo:hi] for nm, col in zip(names, cols)}
                self.engine.update(obj.name, insert={k: v[ins] for k, v in part.items()},
                                   delete={k: v[~ins] for k, v in part.items()}, ts=int(ts[lo]))
            if hb is not None:
                self.engine.heartbeat(hb, obj.name)
        except DsmsError as e:
            self.errors["engine_refused"] += 1
            log.error("engine refused archived update of %s: %s", key, e)
            raise RuntimeFailure(f"the engine refused an update the runtime had accepted: {e}") from None
        c["elements"] += n
        self._wake()
        return self._durable()

    async def heartbeat(self, ts: int, name: str | None = None) -> None:
        """No element with a timestamp below ``ts`` will arrive on ``name`` (or on every input); archived."""
        if isinstance(ts, bool) or not isinstance(ts, int | np.integer):
            raise InputError(f"a heartbeat takes an integer timestamp, not {ts!r}")
        ts = int(ts)
        if name is not None:
            src = self.engine.sources.get(name.lower()) if isinstance(name, str) else None
            if src is None:
                raise NotFound(f"no stream or relation named '{name}'")
            targets = [src]
        else:
            targets = list(self.engine.sources.values())
        moved = [s for s in targets if s.frontier is None or ts > s.frontier]
        if not moved:
            return
        try:
            for s in moved:
                self.archive.append_heartbeat(s.obj.name.lower(), ts)
        except (ArchiveError, OSError) as e:
            raise RuntimeFailure(f"the heartbeat could not be archived: {e}") from None
        for s in moved:
            self.engine.heartbeat(ts, s.obj.name)
            self.counters[s.obj.name.lower()]["heartbeats"] += 1
        self._wake()
        fut = self._durable()
        if fut is not None:
            await fut

    # ------------------------------------------------------------ durability

    def _durable(self) -> asyncio.Future | None:
        """A future that completes when what was just appended is fsynced (None when it already is)."""
        if self.fsync != "group":
            return None
        fut = asyncio.get_running_loop().create_future()
        self._sync_waiters.append(fut)
        assert self._sync_event is not None
        self._sync_event.set()
        return fut

    async def _group_commit(self) -> None:
        """fsync at most once every ``group_delay`` and acknowledge every request appended before it began.

        A commit starts as soon as something waits for it and ``group_delay`` has passed since the previous one
        began: an idle server acknowledges after one fsync, a busy one gathers into each fsync what arrived
        during the previous one and the delay, and the rate of fsyncs stays bounded either way."""
        assert self._sync_event is not None
        loop = asyncio.get_running_loop()
        last = -float("inf")
        while True:
            await self._sync_event.wait()
            wait = last + self.group_delay - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)   # gather the requests of the next few ms into this fsync
            last = loop.time()
            self._sync_event.clear()
            waiters, self._sync_waiters = self._sync_waiters, []
            try:
                await asyncio.to_thread(self.archive.sync)
            except Exception as e:  # noqa: BLE001 - every waiter hears about it
                self.errors["archive"] += 1
                log.error("group commit failed: %s", e)
                self._release(waiters, RuntimeFailure(f"archive fsync failed: {e}"))
                continue
            self._release(waiters, None)

    @staticmethod
    def _release(waiters: list[asyncio.Future], exc: BaseException | None) -> None:
        for f in waiters:
            if not f.done():
                if exc is None:
                    f.set_result(None)
                else:
                    f.set_exception(exc)

    def _release_waiters(self, exc: BaseException | None) -> None:
        waiters, self._sync_waiters = self._sync_waiters, []
        self._release(waiters, exc)

    # ------------------------------------------------------------ driving the engine

    def _wake(self) -> None:
        if self._work is not None:
            self._work.set()

    def run_slice(self) -> int:
        """One engine time slice, then fan-out of what it produced. Returns operator runs done (0: the engine
        is idle); ``k`` adapts so a slice takes about ``results.slice_ms``."""
        t0 = time.perf_counter()
        steps = self.engine.run(max_steps=self._steps)
        dt = time.perf_counter() - t0
        if steps:
            self._step_cost = 0.8 * self._step_cost + 0.2 * (dt / steps)
            self._steps = int(min(4096, max(1, self.slice_target / max(self._step_cost, 1e-7))))
        self.slices += 1
        self.steps_total += steps
        self.slice_seconds += dt
        self.slice_max = max(self.slice_max, dt)
        self._collect()
        return steps

    def _quiesce(self) -> None:
        """Run the engine until it has nothing left to do (before a catalog change, and during recovery)."""
        while True:
            steps = self.engine.run(max_steps=4096)
            self.steps_total += steps
            self._collect()
            if steps == 0:
                return

    async def _pump(self) -> None:
        assert self._work is not None
        while True:
            await self._work.wait()
            self._work.clear()
            try:
                while True:
                    # Only a slice that did nothing proves the engine idle: fan-out after a slice can free a
                    # full output queue and make its producer ready again.
                    if self.run_slice() == 0:
                        break
                    await asyncio.sleep(0)
            except Exception:  # noqa: BLE001 - the engine must not take the server down; say so loudly
                self.errors["engine"] += 1
                log.exception("engine slice failed")
                await asyncio.sleep(0.01)
                self._work.set()

    def _collect(self) -> None:
        for st in list(self.states.values()):
            reader = getattr(st.query, "reader", None)
            hb: int | None = None
            while True:
                if reader is not None:
                    item = reader.get()
                    if item is None:
                        break
                else:   # an engine without readers: data only
                    batches = st.query.drain_batches()
                    for b in batches:
                        self._fan_out(st, b)
                    break
                if isinstance(item, Batch):
                    if len(item):
                        self._fan_out(st, item)
                elif isinstance(item, Heartbeat):
                    hb = item.ts
            if hb is not None and (st.last_heartbeat is None or hb > st.last_heartbeat):
                st.last_heartbeat = hb
                mark = HeartbeatMark(hb)
                for sub in st.subscribers:
                    sub.offer(mark)

    def _fan_out(self, st: _QueryState, b: Batch) -> None:
        chunk = ResultChunk.from_batch(st.names, b)
        st.results_out += len(chunk)
        st.batches_out += 1
        st.last_ts = chunk.last_ts
        st.retain(chunk)
        if self.recovering:
            return
        for sub in st.subscribers:
            before = sub.missed
            sub.offer(chunk)
            st.missed += sub.missed - before

    async def _ticker(self) -> None:
        """Once a second: ingest rates, retention of the archive."""
        n = 0
        while True:
            await asyncio.sleep(1.0)
            n += 1
            now = time.monotonic()
            dt = max(now - self._rate_time, 1e-3)
            for key, c in list(self.counters.items()):
                cur = int(c["elements"])
                prev = self._rate_prev.get(key, cur)
                self.rates[key] = 0.5 * self.rates.get(key, 0.0) + 0.5 * (cur - prev) / dt
                self._rate_prev[key] = cur
            self._rate_time = now
            if n % 60 == 0 and self.archive is not None and self.archive.retention_ms is not None:
                try:
                    await asyncio.to_thread(self.archive.enforce_retention)
                except Exception as e:  # noqa: BLE001
                    log.warning("archive retention failed: %s", e)

    # ------------------------------------------------------------ readers

    def subscribe(self, query: str, from_ts: int | None = None, buffer: int | None = None) -> Subscriber:
        """A new reader of ``query``'s results; with ``from_ts``, retained results with ts >= from_ts are
        queued first (as much as fits the buffer; the rest is reported as a gap)."""
        q = self.query(query)
        st = self.states[q.id]
        sub = Subscriber(q.id, buffer or self.subscriber_buffer)
        if from_ts is not None:
            for chunk in st.ring:
                if chunk.last_ts < from_ts:
                    continue
                part = chunk.since(from_ts)
                if part is not None:
                    sub.items.append(part)      # replayed results are bounded by the ring, not the buffer
                    sub.buffered += len(part)
        st.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        st = self.states.get(sub.query_id)
        if st is not None:
            st.subscribers.discard(sub)
        sub.close("unsubscribed")

    # ------------------------------------------------------------ entities, plans, system

    def explain(self, query: str, fmt: str = "json") -> Any:
        q = self.query(query)
        fn = getattr(self.engine, "explain", None)
        if fn is None:
            raise NotSupported("this engine has no explain() yet: query plans are not available")
        return fn(q.id, fmt=fmt)

    def entities(self, query: str | None = None) -> list[dict]:
        fn = getattr(self.engine, "entities", None)
        if fn is None:
            raise NotSupported("this engine has no entities() yet: control tables are not available")
        if query is not None:
            query = self.query(query).id
        return fn(query=query) if query is not None else fn()

    def _entity_obj(self, eid: str) -> Any:
        fn = getattr(self.engine, "entity", None)
        if fn is None:
            raise NotSupported("this engine has no entity() yet: control tables are not available")
        try:
            ent = fn(eid)
        except LookupError:
            raise NotFound(f"no entity '{eid}'") from None
        except SchemaError:
            raise NotFound(f"no entity '{eid}'") from None
        if ent is None:
            raise NotFound(f"no entity '{eid}'")
        return ent

    def entity(self, eid: str) -> dict:
        return self._entity_obj(eid).get()

    def entity_history(self, eid: str) -> list[dict]:
        ent = self._entity_obj(eid)
        return [_change_dict(c) for c in ent.history()]

    @staticmethod
    def _set_entity(ent: Any, values: Mapping[str, Any]) -> None:
        if hasattr(ent, "set_many"):
            ent.set_many(dict(values))
        else:
            for k, v in values.items():
                ent.set(k, v)

    def set_entity(self, eid: str, values: Mapping[str, Any]) -> dict:
        """Write knobs of one entity (all or nothing when the entity supports it); logged in the catalog so
        they survive a restart. ValueError (400) says why a write is refused."""
        ent = self._entity_obj(eid)
        self._quiesce()
        self._set_entity(ent, values)
        self._log({"op": "set", "entity": eid, "values": dict(values)})
        return ent.get()

    def _system_obj(self) -> Any:
        ent = getattr(self.engine, "system", None)
        if ent is None:
            raise NotSupported("this engine has no system control table yet")
        return ent

    def system(self) -> dict:
        """The system control table (when the engine has one) and the runtime's global statistics."""
        out: dict[str, Any] = {}
        ent = getattr(self.engine, "system", None)
        if ent is not None:
            try:
                out.update(ent.get())
            except Exception as e:  # noqa: BLE001
                out["error"] = str(e)
        out["runtime"] = self.runtime_stats()
        return out

    def set_system(self, values: Mapping[str, Any]) -> dict:
        ent = self._system_obj()
        self._quiesce()
        self._set_entity(ent, values)
        self._log({"op": "system", "values": dict(values)})
        return self.system()

    def runtime_stats(self) -> dict[str, Any]:
        arch = self.archive.stats() if self.archive is not None and not self.archive.closed else {}
        return {
            "uptime_s": round(time.time() - self.started_at, 3),
            "streams": len(self.engine.streams()), "relations": len(self.engine.relations()),
            "queries": len(self.engine.queries()),
            "elements_in": sum(int(c["elements"]) for c in self.counters.values()),
            "backlog": self.backlog(), "backlog_limit": self.backlog_limit,
            "subscribers": sum(len(s.subscribers) for s in self.states.values()),
            "results_out": sum(s.results_out for s in self.states.values()),
            "engine": {"slices": self.slices, "steps": self.steps_total, "steps_per_slice": self._steps,
                       "slice_ms_max": round(self.slice_max * 1000, 3),
                       "slice_ms_mean": round(self.slice_seconds * 1000 / max(self.slices, 1), 3)},
            "archive": {"fsync": self.fsync, **arch},
            "recovery": self.recovery_info,
            "punctuations_ignored": self.punctuations,
            "errors": dict(self.errors),
        }

    # ------------------------------------------------------------ MQTT

    def _start_mqtt(self, stream_def: Any) -> None:
        try:
            from dsms.ingest.mqtt import MqttIngest
        except ImportError as e:
            log.warning("stream %s reads MQTT topic %r but the MQTT adapter is not available: %s",
                        stream_def.name, stream_def.source.topic, e)
            return
        key = stream_def.name.lower()
        dead = self.data_dir / "dead-letter" / f"{key}.ndjson"
        try:
            dead.parent.mkdir(parents=True, exist_ok=True)
            adapter = MqttIngest(self, stream_def.name, list(stream_def.columns), stream_def.source,
                                 self.config.mqtt_url, dead)
        except Exception as e:  # noqa: BLE001 - an adapter failure must not stop the server
            log.error("MQTT adapter for %s could not be created: %s", stream_def.name, e)
            return
        self._mqtt[key] = adapter
        self._spawn(self._guard(adapter.start(), f"MQTT adapter for {stream_def.name}"))

    async def _stop_mqtt(self, key: str, dropped: bool = False) -> None:
        """Stop one stream's adapter; after a DROP its broker session is discarded too."""
        adapter = self._mqtt.pop(key, None)
        if adapter is not None:
            coro = adapter.stop(discard_session=True) if dropped else adapter.stop()
            await self._guard(coro, f"stopping the MQTT adapter of {key}")

    def _start_publisher(self, st: _QueryState) -> None:
        topic = getattr(st.query.definition, "publish_topic", None)
        if topic is None or st.publisher_task is not None:
            return
        try:
            from dsms.ingest import mqtt
            mqtt.MqttPublisher  # noqa: B018 - fail here, not in the task, when the adapter lacks it
        except (ImportError, AttributeError) as e:
            log.warning("query %s publishes to MQTT topic %r but the MQTT adapter is not available: %s",
                        st.query.id, topic, e)
            return
        sub = Subscriber(st.query.id, self.subscriber_buffer)
        st.subscribers.add(sub)
        st.publisher_task = asyncio.get_running_loop().create_task(self._publish(st, sub, topic))

    async def _publish(self, st: _QueryState, sub: Subscriber, topic: str) -> None:
        from dsms.ingest.mqtt import MqttPublisher
        try:
            pub = MqttPublisher(self.config.mqtt_url, topic)
            if hasattr(pub, "start"):
                await pub.start()
        except Exception as e:  # noqa: BLE001
            log.error("MQTT publisher for %s could not start: %s", st.query.id, e)
            st.subscribers.discard(sub)
            return
        try:
            while True:
                for item in await sub.get(None):
                    if isinstance(item, Closed):
                        return
                    if isinstance(item, ResultChunk):
                        try:
                            await pub.publish(item.elements())
                        except Exception as e:  # noqa: BLE001 - keep publishing later results
                            self.errors["mqtt_publish"] += 1
                            log.warning("MQTT publish of %s failed: %s", st.query.id, e)
        finally:
            st.subscribers.discard(sub)
            if hasattr(pub, "stop"):
                with contextlib.suppress(Exception):
                    await pub.stop()

    async def _guard(self, coro: Any, what: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - adapters are isolated from the server
            self.errors["mqtt"] += 1
            log.error("%s failed: %s", what, e)

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    def mqtt_stats(self) -> dict[str, dict]:
        return {k: dict(getattr(a, "stats", {}) or {}) for k, a in self._mqtt.items()}


# ---------------------------------------------------------------- helpers


def held_tuples(queue: Any) -> int:
    """Tuples a queue holds (not yet read by every reader)."""
    return int(queue.tuples)


def _check_writable(d: Path) -> None:
    probe = d / f".write-probe.{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise RuntimeFailure(f"data directory {str(d)!r} is not writable: {e.strerror}") from None


def _record_ts(rec: Any) -> int:
    if rec.is_heartbeat:
        return int(rec.ts)
    return int(rec.ts[0]) if len(rec.ts) else -(2**63)


def _split_statements(text: str, stmts: Sequence[Any]) -> list[str]:
    """The source text of each statement, cut at the start positions the parser reports."""
    if len(stmts) == 1:
        return [text]
    starts = []
    line_offsets = [0]
    for line in text.split("\n"):
        line_offsets.append(line_offsets[-1] + len(line) + 1)
    for s in stmts:
        pos = getattr(s, "pos", None)
        if pos is None:
            return [text] if len(stmts) == 1 else _fallback_split(text, len(stmts))
        starts.append(line_offsets[pos[0] - 1] + pos[1] - 1)
    pieces = []
    for i, a in enumerate(starts):
        b = starts[i + 1] if i + 1 < len(starts) else len(text)
        piece = text[a:b]
        for i in range(len(piece) - 1, -1, -1):       # cut at the ';' after which only comments follow
            if piece[i] == ";" and _BLANK.fullmatch(piece, i + 1):
                piece = piece[:i]
                break
        pieces.append(piece.rstrip())
    return pieces


_BLANK = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.S)


def _fallback_split(text: str, n: int) -> list[str]:
    raise CQLError("cannot split the statements of this request; send them one at a time")


def _new_heartbeat(d: Decoded, frontier: int | None, ts: np.ndarray) -> int | None:
    """The request's heartbeat when it tells the engine something new (past the input's frontier and past the
    request's own elements), else None."""
    hb = d.heartbeat
    if hb is None or (frontier is not None and hb <= frontier) or (len(ts) and hb <= int(ts[-1])):
        return None
    return hb


def _timestamps(name: str, d: Decoded, n: int, frontier: int | None) -> np.ndarray:
    """Per-row int64 timestamps: given ones checked by the engine's rules, or the wall clock in
    milliseconds when none was given (arrival time)."""
    if d.ts is None:
        now = int(time.time() * 1000)
        if frontier is not None and now < frontier:
            now = frontier
        return np.full(n, now, dtype=np.int64)
    return check_timestamps(name, d.ts, n, frontier)


def _validate_updates(obj: Any, contents: Mapping[tuple, int], cols: list[np.ndarray], ts: np.ndarray,
                      sign: np.ndarray) -> list[tuple[int, int]]:
    """Check relation deletes against the contents the relation will have at their instant, over the whole
    request; returns the [lo, hi) row ranges of each instant."""
    n = len(ts)
    groups: list[tuple[int, int]] = []
    lo = 0
    for k in range(1, n + 1):
        if k == n or ts[k] != ts[lo]:
            groups.append((lo, k))
            lo = k
    if not n or not (sign < 0).any():
        return groups
    names = [c for c, _ in obj.columns]
    rows = list(zip(*[c.tolist() for c in cols]))
    after: dict[tuple, int] = {}
    for lo, hi in groups:
        for k in range(lo, hi):                       # inserts of an instant come before its deletes
            if sign[k] > 0:
                after[rows[k]] = after.get(rows[k], 0) + 1
        for k in range(lo, hi):
            if sign[k] < 0:
                r = rows[k]
                have = _multiplicity(contents.get(r)) + after.get(r, 0)
                if have <= 0:
                    raise InputError(f"delete of a row that is not in '{obj.name}': {dict(zip(names, r))}",
                                     index=k)
                after[r] = after.get(r, 0) - 1
    return groups


def _multiplicity(v: Any) -> int:
    """Copies of a row in a relation's contents (a count, or the list of their insert times)."""
    if v is None:
        return 0
    return len(v) if isinstance(v, list | tuple) else int(v)


def _change_dict(c: Any) -> dict:
    if hasattr(c, "to_dict"):
        return c.to_dict()
    if isinstance(c, Mapping):
        return dict(c)
    return {"change": repr(c)}


def iter_results(items: Iterable[Any]) -> list[Element]:
    """Flatten subscriber items into elements (tests and tools)."""
    out: list[Element] = []
    for it in items:
        if isinstance(it, ResultChunk):
            out.extend(it.elements())
    return out
