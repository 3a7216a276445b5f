"""The ``Runtime``: one Engine served from asyncio, with the input archive, catalog persistence and result
fan-out (SPEC sections 7, 9 and 10). It owns the parts and is the one door the web layer (and the MQTT
adapters) go through; each concern lives in its own module of this package:

* ``pump.py``: drives the synchronous engine in time slices on the event loop;
* ``barrier.py``: catalog changes and the input around them, in arrival order, without holding the loop;
* ``ingest.py``: input validated by the engine, archived, applied, acknowledged once durable (group commit);
* ``catalog_log.py`` and ``recovery.py``: the log of catalog changes and the replay that rebuilds the engine;
* ``results.py``: the retention ring and the bounded readers of each query's results;
* ``mqtt_adapters.py``: MQTT sources and publishers, isolated from the server;
* ``errors.py``: what the HTTP layer maps to statuses.

Every engine call happens on the event loop thread, here; nothing a client sends leaves the engine
half-changed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dsms.archive import Archive, validate_input_name
from dsms.config import Config, load_config
from dsms.cql import ast
from dsms.cql.parser import parse
from dsms.engine import Engine, Query
from dsms.errors import ConflictError, CQLError, DsmsError, InputError, SchemaError, relocate
from dsms.formats import Decoded
from dsms.ingest.mqtt.url import parse_mqtt_url
from dsms.runtime.barrier import ArrivalOrder
from dsms.runtime.catalog_log import CatalogLog, check_writable, split_statements
from dsms.runtime.errors import Conflict, LimitExceeded, NotFound, RuntimeFailure
from dsms.runtime.ingest import GroupCommit, InputPath
from dsms.runtime.mqtt_adapters import MqttAdapters
from dsms.runtime.pump import EnginePump
from dsms.runtime.recovery import recover
from dsms.runtime.results import QueryResults, ReaderBudget, Subscriber, collect

log = logging.getLogger("dsms.runtime")
SHED_EVERY = 0.2       # seconds between two decisions of the load shedder


class Runtime:
    """Owns the Engine, the Archive, the catalog file and result fan-out; every engine call goes through it.

    Use ``await rt.start()`` (recovers from the data directory) and ``await rt.stop()``. The public methods
    raise :class:`dsms.InputError`, :class:`dsms.CQLError`, :class:`dsms.SchemaError`, :class:`NotFound`,
    :class:`Conflict`, :class:`Overloaded` or :class:`LimitExceeded` for the HTTP layer to map; nothing a
    client sends makes them leave the engine half-changed."""

    def __init__(self, config: Config | Mapping[str, Any] | None = None, engine_config: Mapping | None = None) -> None:
        self.config = config if isinstance(config, Config) else load_config(overrides=dict(config or {}))
        self.data_dir = Path(self.config.data_dir)
        self.engine = Engine(engine_config if engine_config is not None else
                             {"engine": self.config.values["engine"]})
        self.archive: Archive | None = None
        self.fsync = self.config.get("archive.fsync")
        self.default_retention = self.config.get("results.retention")
        self.subscriber_buffer = self.config.get("results.subscriber_buffer")
        self.reader_bytes = self.config.get("results.reader_buffer_bytes")
        self.readers = ReaderBudget(self.config.get("results.reader_memory"))
        self.max_queries = self.config.get("limits.max_queries")
        self.statement_chars = self.config.get("limits.statement_chars")
        self.catalog_log = CatalogLog(self.data_dir, self.config.get("catalog_recovery"))
        self.states: dict[str, QueryResults] = {}
        self.started = False
        self.recovering = False
        self.recovery_info: dict[str, Any] = {}
        self.started_at = time.time()
        self.errors: collections.Counter = collections.Counter()
        self.pump = EnginePump(self.engine, self.config.get("results.slice_ms") / 1000.0, self._collect,
                               self.errors)
        self.order = ArrivalOrder()     # catalog changes and the input held behind them (barrier.py)
        self.input = InputPath(self)
        self.mqtt = MqttAdapters(self)
        self.group_commit: GroupCommit | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopping = False

    # ------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Open the archive (truncating a torn tail), restore the catalog, replay the archive, start driving."""
        loop = asyncio.get_running_loop()
        try:
            parse_mqtt_url(self.config.mqtt_url)      # a bad broker URL stops the start, not every adapter later
        except ValueError as e:
            raise RuntimeFailure(f"setting 'mqtt_url': {e}") from None
        self.pump.work = asyncio.Event()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        check_writable(self.data_dir)
        self.archive = Archive(self.data_dir, fsync=self.fsync,
                               retention_ms=self.config.get("archive.retention_ms") or None)
        for r in self.archive.recovery:
            log.warning("archive: cut %d torn byte(s) from %s (%s)", r.torn_bytes, r.segment, r.reason)
        try:
            self.recovery_info = recover(self)
            self.catalog_log.after_recovery()
        except Exception:
            self.archive.close()
            raise
        self.started = True
        self.group_commit = GroupCommit(self.archive.sync, self.config.get("archive.group_delay_ms") / 1000.0,
                                        self._sync_failed)
        self._tasks = [loop.create_task(self.pump.run(), name="dsms-pump"),
                       loop.create_task(self.group_commit.run(), name="dsms-group-commit"),
                       loop.create_task(self._ticker(), name="dsms-ticker"),
                       loop.create_task(self._shed_loop(), name="dsms-load-shedder"),
                       loop.create_task(self.catalog_log.run(), name="dsms-catalog-writer")]
        for s in self.engine.streams():
            if s.source is not None:
                self.mqtt.start_source(s)
        for st in self.states.values():
            self.mqtt.start_publisher(st)
        self.pump.wake()

    async def stop(self) -> None:
        """Stop adapters and readers, make everything durable, write the catalog, release the archive."""
        if self._stopping:
            return
        self._stopping = True
        await self.mqtt.stop()
        for st in self.states.values():
            st.close("server stopping")
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(BaseException):
                await t
        inflight = self.group_commit.inflight if self.group_commit is not None else None
        if inflight is not None:
            with contextlib.suppress(BaseException):
                await inflight                  # an fsync still running in its thread: never close under it
        if self.archive is not None and not self.archive.closed:
            try:
                self.archive.sync()
            finally:
                if self.group_commit is not None:
                    self.group_commit.release_all(None)
                self.archive.close()
        if self.started:
            if self.catalog_log.inflight is not None:
                with contextlib.suppress(BaseException):
                    await self.catalog_log.inflight
            self.catalog_log.stop()

    def _sync_failed(self, e: Exception) -> None:
        self.errors["archive"] += 1
        log.error("group commit failed: %s", e)

    def durable(self) -> asyncio.Future | None:
        """A future that completes when what was just appended is fsynced (None when it already is)."""
        if self.fsync != "group" or self.group_commit is None:
            return None
        return self.group_commit.durable()

    async def _ticker(self) -> None:
        """Once a second: ingest rates; once a minute: retention of the archive."""
        n = 0
        while True:
            await asyncio.sleep(1.0)
            n += 1
            self.input.update_rates()
            if n % 60 == 0 and self.archive is not None and self.archive.retention_ms is not None:
                try:
                    await asyncio.to_thread(self.archive.enforce_retention)
                except Exception as e:  # noqa: BLE001
                    log.warning("archive retention failed: %s", e)

    async def _shed_loop(self) -> None:
        """Every ``SHED_EVERY`` seconds the memory governor compares the memory held with the budget, and
        while the system's ``shedding`` knob is on, the load shedder measures and decides
        (docs/approximation.md)."""
        while True:
            await asyncio.sleep(SHED_EVERY)
            try:
                if self.engine.governor.armed():
                    self.engine.governor.step(self.input.memory())
            except Exception:  # noqa: BLE001 - as the shedder's step below
                self.errors["governor"] += 1
                log.exception("memory governor step failed")
            if self.engine.system.shedding:
                try:
                    self.engine.shedder.step()
                except Exception:  # noqa: BLE001 - shedding must not take the server down; say so loudly
                    self.errors["shedder"] += 1
                    log.exception("load shedder step failed")

    def set_query_weight(self, qid: str, w: Any) -> None:
        """Knob ``weight`` of one query (the load shedder's weighting of its error), logged."""
        q = self.query(qid)
        self.engine.set_query_weight(q.id, w)
        self._log({"op": "weight", "query": q.id, "value": w})

    # ------------------------------------------------------------ the catalog log

    def _log(self, entry: dict[str, Any]) -> None:
        assert self.archive is not None
        self.catalog_log.append(entry, {name: r.next_seq for name, r in self.archive.ranges().items()},
                                self.engine.id_counters())

    def catalog_durable(self) -> asyncio.Future | None:
        """A future done once every catalog change made so far is on disk (None: it already is); the HTTP
        layer waits for it before answering a request that changed the catalog."""
        return self.catalog_log.durable()

    def apply_entry(self, entry: Mapping[str, Any]) -> None:
        """Re-apply one catalog log entry (recovery)."""
        op = entry.get("op")
        if op == "cql":
            self._after_statement(self.engine.execute(entry["cql"]))
        elif op == "drop":
            self._drop_now(entry["name"], entry.get("kind"))
        elif op == "set":
            self._entity_obj(entry["entity"]).set_many(dict(entry["values"]))
        elif op == "system":
            self.engine.system.set_many(dict(entry["values"]))
        elif op == "weight":
            if entry["query"] in self.engine.query_list:
                self.engine.set_query_weight(entry["query"], entry["value"])
        elif op == "materialise":
            if entry["query"] in self.engine.query_list:
                self.engine.materialise(entry["query"])
        elif op == "retention":
            st = self.states.get(entry["query"])
            if st is not None:
                st.set_retention(int(entry["value"]))
        else:
            raise ValueError(f"unknown catalog entry {op!r}")

    # ------------------------------------------------------------ statements

    STATEMENT_KINDS = {ast.RegisterStream: "stream", ast.RegisterRelation: "relation", ast.RegisterQuery: "query",
                       ast.QueryStatement: "query", ast.RegisterView: "view", ast.Drop: "drop"}

    def execute(self, text: str, expect: Sequence[str] | None = None, *, bare_queries: bool = True) -> list[Any]:
        """Run CQL statements one by one, logging each that succeeds. Returns the engine's result of each
        (SHOW, DESCRIBE and EXPLAIN answer without changing anything). On an error, the statements before it
        stay applied; the exception carries ``done`` (their results) and ``statement`` (the 0-based index of
        the failing one); a position in it counts from the start of ``text``.

        ``expect`` (kinds among ``stream``, ``relation``, ``query``, ``view``, ``drop``): the text must be
        exactly one statement of one of these kinds, else InputError before anything runs (an endpoint that
        registers one kind of object uses it, so CQL is parsed once, here). ``bare_queries=False`` refuses a
        bare ``SELECT`` before anything runs (``POST /cql``: its results could be read only by an id the
        sender would have to look up, and it would run until dropped)."""
        done: list[Any] = []
        stmts, pieces = self._parse(text, expect, bare_queries)
        for k, (stmt, piece) in enumerate(zip(stmts, pieces)):
            try:
                done.append(self._execute_one(stmt, piece))
            except DsmsError as e:
                _failed_at(e, k, stmt, done, len(stmts) > 1)
                raise
        return done

    async def execute_async(self, text: str, expect: Sequence[str] | None = None, *,
                            bare_queries: bool = True) -> list[Any]:
        """:meth:`execute` for the HTTP layer: the text is parsed in a thread and the event loop is given back
        between statements, so one request of a thousand statements does not hold up every other request.
        A request that changes the catalog takes its turn in arrival order (barrier.py) and each change waits
        for the engine to be idle without holding the loop (``EnginePump.drain``); input that arrives
        meanwhile waits for the request. One of only SHOW, DESCRIBE and EXPLAIN waits for nothing."""
        done: list[Any] = []
        stmts, pieces = await asyncio.to_thread(self._parse, text, expect, bare_queries)
        read_only = all(isinstance(stmt, ast.READ_ONLY) for stmt in stmts)
        async with contextlib.nullcontext() if read_only else self.order.change():
            for k, (stmt, piece) in enumerate(zip(stmts, pieces)):
                if k and k % 8 == 0:
                    await asyncio.sleep(0)
                try:
                    if isinstance(stmt, ast.READ_ONLY):
                        done.append(self.engine.execute(piece))
                        continue
                    self._check_statement(stmt)
                    await self.pump.drain()
                    done.append(self._apply_statement(stmt, piece))
                except DsmsError as e:
                    _failed_at(e, k, stmt, done, len(stmts) > 1)
                    raise
        return done

    def _parse(self, text: str, expect: Sequence[str] | None,
               bare_queries: bool = True) -> tuple[list[Any], list[str]]:
        """The statements of ``text`` and the source text of each, checked against the limits, ``expect`` and
        ``bare_queries``."""
        if not isinstance(text, str):
            raise CQLError("a statement must be a string")
        if len(text) > self.statement_chars:
            raise LimitExceeded(f"statement text is {len(text)} characters; the limit is "
                                f"{self.statement_chars} (limits.statement_chars)", status=413)
        stmts = parse(text)
        if not stmts:
            raise CQLError("no statement to run")
        if expect is not None:
            got = [self.STATEMENT_KINDS.get(type(s), type(s).__name__) for s in stmts]
            if len(got) != 1 or got[0] not in expect:
                what = " or ".join("query (SELECT ... or REGISTER QUERY ...)" if k == "query" else
                                   f"{k.upper()} statement" if k == "drop" else f"REGISTER {k.upper()} ..."
                                   for k in expect)
                raise InputError(f"expected exactly one {what}; got {len(got)} statement(s): {', '.join(got)}")
        if not bare_queries:
            _refuse_bare_queries(stmts)
        return stmts, split_statements(text, stmts)

    def _execute_one(self, stmt: Any, text: str) -> Any:
        """One statement, synchronously: checked, the engine run to idle on the spot, applied."""
        if isinstance(stmt, ast.READ_ONLY):     # SHOW, DESCRIBE, EXPLAIN: nothing to log, start or count
            return self.engine.execute(text)
        self._check_statement(stmt)
        self.pump.quiesce()
        return self._apply_statement(stmt, text)

    def _check_statement(self, stmt: Any) -> None:
        """What refuses a catalog change before the engine is run for it (limits, names, a drop of nothing)."""
        creates_query = isinstance(stmt, ast.RegisterQuery | ast.RegisterView | ast.QueryStatement)
        if creates_query and len(self.engine.queries()) >= self.max_queries:
            raise LimitExceeded(f"{len(self.engine.queries())} queries are registered; the limit is "
                                f"{self.max_queries} (limits.max_queries)")
        if isinstance(stmt, ast.Drop):
            self._check_drop(stmt.name)
        if isinstance(stmt, ast.RegisterStream | ast.RegisterRelation):
            try:
                validate_input_name(stmt.name)
            except ValueError as e:
                raise SchemaError(f"'{stmt.name}' cannot be used as a stream or relation name: {e}") from None

    def _apply_statement(self, stmt: Any, text: str) -> Any:
        """A checked catalog change, once the engine is idle: applied, logged, its adapters started."""
        if isinstance(stmt, ast.Drop):
            self._drop_applied(stmt.name, stmt.kind)
            return {"dropped": stmt.name}
        try:
            result = self.engine.execute(text)
        except ConflictError as e:
            raise Conflict(str(e)) from None
        self._after_statement(result)
        self._log({"op": "cql", "cql": text})
        if isinstance(stmt, ast.RegisterStream) and stmt.source is not None and self.started:
            self.mqtt.start_source(self.engine.catalog.get(stmt.name))
        if isinstance(result, Query) and self.started:
            self.mqtt.start_publisher(self.states[result.id])
        return result

    def _after_statement(self, result: Any) -> None:
        for r in result if isinstance(result, list) else [result]:
            if isinstance(r, Query):
                self.states[r.id] = QueryResults(r, self.default_retention)

    def drop(self, name: str, kind: str | None = None) -> str:
        """Drop a query (by id or name), view, stream or relation; NotFound or Conflict when it cannot be."""
        self._check_drop(name)
        self.pump.quiesce()
        return self._drop_applied(name, kind)

    async def drop_async(self, name: str, kind: str | None = None) -> str:
        """:meth:`drop` for the HTTP layer: in its turn, once the engine is idle, without holding the loop."""
        async with self.order.change():
            self._check_drop(name)
            await self.pump.drain()
            return self._drop_applied(name, kind)

    def _check_drop(self, name: str) -> None:
        if not self._exists(name):
            raise NotFound(f"nothing named '{name}' to drop")

    def _drop_applied(self, name: str, kind: str | None) -> str:
        key = name.lower() if isinstance(name, str) else name
        try:
            dropped = self._drop_now(name, kind)
        except ConflictError as e:
            raise Conflict(str(e)) from None
        self._log({"op": "drop", "name": name, "kind": kind})
        if key in self.mqtt.sources:
            self.mqtt.spawn(self.mqtt.stop_source(key, dropped=True))
        return dropped

    def _drop_now(self, name: str, kind: str | None) -> str:
        q = None
        if not self._is_input(name):
            with contextlib.suppress(SchemaError):
                q = self.engine.query(name)
        dropped = self.engine.drop(name, kind)
        if q is not None:
            st = self.states.pop(q.id, None)
            if st is not None:
                st.close("query dropped")
        return dropped

    def _is_input(self, name: str) -> bool:
        return any(s.name.lower() == name.lower() for s in (*self.engine.streams(), *self.engine.relations()))

    def _exists(self, name: str) -> bool:
        if not isinstance(name, str):
            return False
        if self._is_input(name):
            return True
        try:
            self.engine.query(name)
            return True
        except SchemaError:
            return False

    # ------------------------------------------------------------ catalog reads

    def streams(self) -> list[Any]:
        """The registered streams (definitions: ``name``, ``columns``, ``source``)."""
        return self.engine.streams()

    def relations(self) -> list[Any]:
        """The registered relations (definitions: ``name``, ``columns``)."""
        return self.engine.relations()

    def used_by(self, name: str) -> list[str]:
        """The queries and views (by name, else id) that read the stream, relation or view ``name``."""
        return self.engine.catalog.dependents(name)

    def query(self, name_or_id: str) -> Query:
        try:
            return self.engine.query(name_or_id)
        except SchemaError:
            raise NotFound(f"no query '{name_or_id}'") from None

    def queries(self) -> list[Query]:
        return self.engine.queries()

    def source(self, name: str, kind: str) -> Any:
        """The stream or relation definition called ``name``; NotFound otherwise."""
        found = self.engine.streams() if kind == "stream" else self.engine.relations()
        for obj in found:
            if isinstance(name, str) and obj.name.lower() == name.lower():
                return obj
        raise NotFound(f"no {kind} named '{name}'")

    def set_query_retention(self, qid: str, n: Any) -> None:
        """Knob ``retention`` of one query: how many recent result elements ``?from=`` can replay."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 100_000_000:
            raise InputError(f"retention must be an integer between 0 and 100000000, not {n!r}")
        st = self.states[self.query(qid).id]
        st.set_retention(n)
        self._log({"op": "retention", "query": st.query.id, "value": n})

    # ------------------------------------------------------------ input

    def backlog(self) -> int:
        """Input tuples pushed but not yet consumed by every operator reading them."""
        return self.input.backlog()

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
        await self._in_order(stream, decoded.n, lambda: self.input.apply_stream(stream, decoded, nbytes))
        return decoded.n

    async def ingest_decoded(self, stream: str, d: Decoded, *, nbytes: int = 0) -> int:
        """:meth:`ingest` for a decoded request body (the HTTP path), where the stream's time decides whether
        the elements carry ``ts`` (docs/http-api.md)."""
        await self._in_order(stream, d.n, lambda: self.input.apply_stream(stream, d, nbytes, client=True))
        return d.n

    async def update(self, relation: str, d: Decoded, *, nbytes: int = 0) -> int:
        """Relation inserts and deletes (``d.sign``), grouped by timestamp, all or nothing over the request:
        every delete must match a row present at its instant. Returns the number of changes."""
        await self._in_order(relation, d.n, lambda: self.input.apply_relation(relation, d, nbytes))
        return d.n

    async def update_rows(self, relation: str, insert: Sequence[Mapping] = (), delete: Sequence[Mapping] = (),
                          ts: int | None = None) -> int:
        """``Engine.update`` through the runtime: inserts and deletes at one instant, archived first."""
        rows = list(insert) + list(delete)
        d = Decoded(rows=rows, n=len(rows), sign=[1] * len(insert) + [-1] * len(delete))
        if ts is not None:
            d.ts = np.full(len(rows), ts, dtype=np.int64)
        return await self.update(relation, d)

    async def heartbeat(self, ts: int, name: str | None = None) -> None:
        """No element with a timestamp below ``ts`` will arrive on ``name`` (or on every input); archived."""
        await self._in_order(None, 0, lambda: self.input.apply_heartbeat(ts, name))

    async def _in_order(self, name: str | None, rows: int, apply: Callable[[], asyncio.Future | None]) -> None:
        """Apply input now, or, while a catalog change waits for its turn or for the engine, hold it behind
        the change (elements of ``name`` admitted first, with what is held counted in the backlog; a heartbeat,
        ``name`` None, is never refused) and apply it in arrival order once the change is done; then wait
        until it is durable (barrier.py)."""
        if self.order.busy():
            if name is not None:
                self.input.check_backlog(name.lower())
            async with self.order.held(rows):
                fut = apply()
        else:
            fut = apply()
        if fut is not None:
            await fut

    # ------------------------------------------------------------ results

    def _collect(self) -> None:
        collect(self.states.values(), deliver=not self.recovering)

    def subscribe(self, query: str, from_ts: int | None = None, buffer: int | None = None, *,
                  after: int | None = None, snapshot: bool = False) -> Subscriber:
        """A new reader of ``query``'s results; with ``from_ts``, retained results with ts >= from_ts are
        queued first (as much as fits the buffer; the rest is reported as a gap). With ``after`` (the id of
        the last element the reader has, SSE's Last-Event-ID), the retained elements after it. With
        ``snapshot``, a relation-valued query's reader first gets its current contents (docs/http-api.md)."""
        q = self.query(query)
        st = self.states[q.id]
        if q.deferred:
            # a view computed when read (dsms/plan/view_demand.py): built now, logged so that recovery builds
            # it at the same point (the same entity ids), and run, so that its results so far are retained
            self.engine.materialise(q.id)
            self._log({"op": "materialise", "query": q.id})
            self.pump.quiesce()
        capacity = buffer or self.subscriber_buffer
        bounds = {"max_bytes": self.reader_bytes, "budget": self.readers}
        if after is not None:
            if st.can_resume(after):
                return st.subscribe(capacity, after=after, **bounds)
            snapshot = True                     # a relation's changes since are gone: start it afresh
        if snapshot and q.kind == "relation" and from_ts is None:
            # the sink's contents once everything it has produced is fanned out, so the changelog the reader
            # gets next starts right after them
            self._collect()
            return st.subscribe(capacity, contents=self.engine.contents(q.id), now=self.engine.now() or 0,
                                **bounds)
        return st.subscribe(capacity, from_ts, **bounds)

    def close_readers(self, reason: str) -> None:
        """End every result stream (the server is stopping: the HTTP server can then close them)."""
        for st in self.states.values():
            for sub in list(st.subscribers):
                sub.close(reason)

    def unsubscribe(self, sub: Subscriber) -> None:
        st = self.states.get(sub.query_id)
        if st is not None:
            st.subscribers.discard(sub)
        sub.discard()

    # ------------------------------------------------------------ entities, plans, system

    def explain(self, query: str, fmt: str = "json") -> Any:
        return self.engine.explain(self.query(query).id, fmt=fmt)

    def entities(self, query: str | None = None) -> list[dict]:
        if query is not None:
            return self.engine.entities(query=self.query(query).id)
        return self.engine.entities()

    def _entity_obj(self, eid: str) -> Any:
        try:
            return self.engine.entity(eid)
        except LookupError:
            raise NotFound(f"no entity '{eid}'") from None

    def entity(self, eid: str) -> dict:
        return self._entity_obj(eid).get()

    def entity_attributes(self, eid: str) -> list[dict]:
        """Each attribute of the entity's control table with its metadata (type, unit, range, writable,
        description): what an editor of the table needs to know before a write."""
        return self._entity_obj(eid).describe()

    def entity_history(self, eid: str) -> list[dict]:
        return [c.to_dict() for c in self._entity_obj(eid).history()]

    def set_entity(self, eid: str, values: Mapping[str, Any]) -> dict:
        """Write knobs of one entity, all or nothing; logged in the catalog so they survive a restart.
        A ControlTableError (400) says why a write is refused. The write lands once the input before it is
        processed, as a catalog change does (recovery replays it at the same point)."""
        ent = self._entity_obj(eid)
        self.pump.quiesce()
        return self._set_entity_applied(ent, eid, values)

    async def set_entity_async(self, eid: str, values: Mapping[str, Any]) -> dict:
        """:meth:`set_entity` for the HTTP layer: in its turn, once the engine is idle, without holding the
        loop. The system entity (``sys:0``) is written at once, as :meth:`set_system` does."""
        if self._entity_obj(eid) is self.engine.system:
            self.set_system(values)
            return self.engine.system.get()
        async with self.order.change():
            ent = self._entity_obj(eid)
            await self.pump.drain()
            return self._set_entity_applied(ent, eid, values)

    def _set_entity_applied(self, ent: Any, eid: str, values: Mapping[str, Any]) -> dict:
        ent.set_many(dict(values))
        self._log({"op": "set", "entity": eid, "values": dict(values)})
        return ent.get()

    def system(self) -> dict:
        """The system control table and the runtime's global statistics (``runtime``)."""
        return {**self.engine.system.get(), "runtime": self.runtime_stats()}

    def set_system(self, values: Mapping[str, Any]) -> dict:
        """Write system knobs. No knob of ``sys:0`` changes a result (the policy never does; the memory
        budget, shedding and the load threshold act on input still to be read), so the engine is not run to
        idle first: turning shedding on while a long backlog is worked off must not freeze the server."""
        self.engine.system.set_many(dict(values))
        self.input.forget_memory()
        self._log({"op": "system", "values": dict(values)})
        return self.system()

    # ------------------------------------------------------------ statistics (the read API of docs/server.md)
    # What the web layer (handlers, GUI, metrics) reads, so it needs no engine or runtime internals:
    # streams(), relations(), queries(), query(), source(), used_by(), source_stats(), query_stats(),
    # runtime_stats(), system(), entities(), entity(), entity_history(), explain(), mqtt_stats(),
    # mqtt_connection().

    def source_stats(self, name: str) -> dict[str, Any]:
        """Ingest statistics of one stream or relation: elements, requests, bytes, refusals, heartbeats,
        frontier, backlog (tuples not yet read by the engine), smoothed rate, and its MQTT adapter's."""
        key = name.lower()
        eng = self.engine
        c = self.input.counters[key]
        exists = self._is_input(name)
        out = {"elements_in": int(c["elements"]), "requests": int(c["requests"]), "bytes_in": int(c["bytes"]),
               "refused": int(c["refused"]), "heartbeats": int(c["heartbeats"]),
               "frontier": eng.frontier(name) if exists else None,
               "backlog": next((v for k, v in eng.input_backlog().items() if k.lower() == key), 0),
               "rate_per_s": round(self.input.rates.get(key, 0.0), 1)}
        if exists and any(r.name.lower() == key for r in eng.relations()):
            out["size"] = eng.relation_size(name)
        if key in self.mqtt.sources:
            out["mqtt"] = dict(self.mqtt.sources[key].stats)
        return out

    def query_stats(self, qid: str) -> dict[str, Any]:
        """Result statistics of one query (by id): results out, readers, retained, retention, missed by
        readers, last result and heartbeat timestamps; {} for an unknown id."""
        st = self.states.get(qid)
        return {} if st is None else st.stats()

    def query_approximation(self, qid: str) -> dict[str, Any]:
        """Whether a query's results are exact now and since when (application time), and the
        approximation in effect (docs/approximation.md); {} for an unknown id."""
        st = self.states.get(qid)
        if st is None:
            return {}
        st.query.approximation()
        return st.approximation()

    def count_error(self, kind: str) -> None:
        """Count one error of ``kind`` (``http_404``, ...) in ``runtime.errors`` and the metrics."""
        self.errors[kind] += 1

    def mqtt_stats(self) -> dict[str, dict]:
        """The statistics of every MQTT ingest adapter, by stream."""
        return self.mqtt.stats()

    def mqtt_connection(self, name: str) -> dict[str, Any] | None:
        """The state of a stream's MQTT source: ``broker`` (its URL without credentials), ``topic``, ``state``
        (connecting, connected or disconnected) and ``error`` (the last one); None for a stream without one."""
        return self.mqtt.connection(name)

    async def mqtt_warning(self, name: str, wait: float = 5.0) -> str | None:
        """After registering a stream read from MQTT: None once its first connection attempt succeeded, else
        a warning that names the broker and the error (the source keeps retrying meanwhile)."""
        return await self.mqtt.warning(name, wait)

    def runtime_stats(self) -> dict[str, Any]:
        """Global statistics: catalog sizes, ingest, backlog, readers, engine slices, archive, recovery,
        errors by kind."""
        arch = self.archive.stats() if self.archive is not None and not self.archive.closed else {}
        eng = self.engine
        return {
            "uptime_s": round(time.time() - self.started_at, 3),
            "streams": len(eng.streams()), "relations": len(eng.relations()), "queries": len(eng.queries()),
            "elements_in": sum(int(c["elements"]) for c in self.input.counters.values()),
            "backlog": self.backlog(), "backlog_limit": self.input.backlog_limit,
            "subscribers": sum(len(s.subscribers) for s in self.states.values()),
            "readers": self.readers.stats(),
            "results_out": sum(s.results_out for s in self.states.values()),
            "engine": self.pump.stats(),
            "barrier": self.order.stats(),
            "archive": {"fsync": self.fsync, **arch},
            "recovery": self.recovery_info,
            "catalog": self.catalog_log.stats(),
            "punctuations_ignored": self.input.punctuations,
            "errors": dict(self.errors),
        }


def _failed_at(e: DsmsError, k: int, stmt: Any, done: list[Any], several: bool) -> None:
    """Mark the error of statement ``k`` with which statement it was and what the ones before it did."""
    if several:                 # positions count from the start of the body, not the statement
        relocate(e, stmt.pos)
    e.done = done               # type: ignore[attr-defined]
    e.statement = k             # type: ignore[attr-defined]


def _refuse_bare_queries(stmts: Sequence[Any]) -> None:
    """A bare ``SELECT`` is refused with how to register it (``execute(..., bare_queries=False)``)."""
    for k, stmt in enumerate(stmts):
        if isinstance(stmt, ast.QueryStatement):
            line, column = stmt.pos or (None, None)
            e = CQLError("a bare query is not run by POST /cql: register it with a name (REGISTER QUERY name AS "
                         "SELECT ...) and read GET /queries/name/results, or POST it to /queries "
                         '({"cql": "SELECT ..."}) for an id', line, column)
            e.statement, e.done = k, []           # type: ignore[attr-defined]
            raise e
