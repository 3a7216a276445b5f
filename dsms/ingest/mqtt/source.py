"""The MQTT source: a stream fed from a broker topic (``REGISTER STREAM ... FROM MQTT``).

Source: SPEC section 1 ("input arrives over HTTP and MQTT"), section 4 (``REGISTER STREAM ... FROM MQTT 'topic'
FORMAT JSON|MSGPACK [TIMESTAMP field]`` and ``PUBLISH TO MQTT 'topic'``), section 6 (the JSON and msgpack element
formats, timestamps as integers or ISO 8601 strings) and section 10 ("bad input never crashes the server or loses
accepted data: it is refused with a clear error, or counted and routed to a dead-letter log (MQTT, where there is
no one to answer)"). The user-facing description, including what is and is not recovered after a disconnection,
is docs/mqtt.md.

Design, in short:

- The network side and the engine side are decoupled by a bounded in-process queue. aiomqtt hands every received
  message to that queue (through its public ``queue_type`` hook), stamped with its arrival time. A consumer task
  turns the queued messages into rows and timestamps and gives them to the sink in batches, one ``ingest`` call
  per drained chunk, so that the engine runs once per chunk and not once per message.
- Acknowledgement after archiving (issue 18 item 7): messages are received with QoS 1 and acknowledged by hand
  (``manual_ack``), only once the sink has returned for their chunk (the server's sink returns once the elements
  are archived and fsynced by the group commit) or once they are dead-lettered. A crash before that leaves them
  with the broker, which delivers them again to the next connection of the persistent session: nothing the
  broker considers delivered is lost. The price is at-least-once: a message archived just before a crash, whose
  acknowledgement did not leave, is taken twice (as with any QoS 1 redelivery).
- A message is all or nothing: when the sink refuses a batch with ``InputError`` naming an element, the message
  holding that element is dead-lettered and the rest of the batch is offered again.
- Time is application time (SPEC section 2): the timestamp comes from the payload, or, when the stream names no
  TIMESTAMP field, from ``clock()`` at arrival, the one place wall time enters, by definition of arrival time.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as _dt
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import aiomqtt

from dsms.cql.ast import MqttSource
from dsms.errors import InputError
from dsms.ingest.mqtt.connection import Client, Link, describe, keep_connected
from dsms.ingest.mqtt.payloads import Malformed, decode_payload, json_default, parse_timestamp
from dsms.ingest.mqtt.url import client_kwargs, parse_mqtt_url

log = logging.getLogger("dsms.ingest.mqtt")

_ELEMENT_PREFIX = re.compile(r"^element \d+: ")     # InputError's own position, which is the batch's, not ours


class Sink(Protocol):
    """What MqttIngest feeds: the server's Runtime, or in tests a thin wrapper over an Engine (push + run).
    It must be all or nothing per call and raise ``dsms.errors.InputError`` (with ``index`` when it can) for
    input it refuses; that is how column and type validation reaches the dead-letter file. An exception with a
    ``retry_after`` attribute (seconds; the server's ``Overloaded``) means "not now": the source waits and
    offers the same batch again, leaving its messages unacknowledged meanwhile, so the broker holds back what
    follows (its in-flight window is full) instead of anything being dead-lettered."""

    async def ingest(self, stream: str, rows: list[dict], ts: list[int]) -> int: ...


def _wall_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _default_clock() -> int:
    """Arrival time in milliseconds since the epoch (SPEC section 3: one tick is a millisecond)."""
    return time.time_ns() // 1_000_000


class _DeadLetters:
    """The dead-letter file: JSON lines ``{"at", "topic", "reason", "payload", "encoding"[, "index"]}``.

    Opened lazily (most streams never write one) and flushed per line so that an operator tailing it sees bad
    input as it happens. Payloads larger than ``max_payload`` bytes are cut, and the line says so, so that one
    huge bad message cannot fill the disk."""

    def __init__(self, path: str | Path, max_payload: int) -> None:
        self.path = Path(path)
        self.max_payload = max_payload
        self._fh: IO[str] | None = None
        self.lines = 0
        self.write_errors = 0

    def write(self, topic: str, reason: str, payload: bytes | str, index: int | None = None) -> None:
        raw = payload.encode("utf-8", "backslashreplace") if isinstance(payload, str) else bytes(payload)
        rec: dict[str, Any] = {"at": _wall_iso(), "topic": topic, "reason": reason}
        if index is not None:
            rec["index"] = index
        cut = raw[: self.max_payload]
        try:
            rec["payload"], rec["encoding"] = cut.decode("utf-8"), "text"
        except UnicodeDecodeError:
            rec["payload"], rec["encoding"] = base64.b64encode(cut).decode("ascii"), "base64"
        if len(raw) > self.max_payload:
            rec["truncated"], rec["size"] = True, len(raw)
        try:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open across writes
            try:
                line = json.dumps(rec, ensure_ascii=False, default=repr)
                line.encode("utf-8")
            except (UnicodeEncodeError, ValueError, RecursionError):
                # A lone surrogate (from a JSON escape such as "\ud800" in a column name that the reason
                # quotes) cannot be written as UTF-8: escape everything instead of failing the whole batch.
                line = json.dumps(rec, ensure_ascii=True, default=repr)
            self._fh.write(line + "\n")
            self._fh.flush()
            self.lines += 1
        except OSError as e:
            # A full disk must not stop ingestion of good data: count it and say it once in the log.
            self.write_errors += 1
            if self.write_errors == 1:
                log.error("cannot write the MQTT dead-letter file %s: %s", self.path, e)

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
            self._fh = None


# ---------------------------------------------------------------------------------------------- aiomqtt glue


def _forwarding_queue(deliver: Callable[[aiomqtt.Message], None]) -> type[asyncio.Queue]:
    """A queue type for aiomqtt's ``queue_type`` hook whose ``put_nowait`` hands each message to ``deliver``.

    Why: aiomqtt keeps received messages in a queue owned by one Client object, and that object is thrown away
    with its connection. Handing messages straight to the ingest's own queue means a message the broker has
    delivered (and paho has acknowledged) survives a disconnection. The client's own queue stays empty, so
    iterating ``client.messages`` only ever ends with the disconnection, which is how the connection task
    notices it."""

    class _Forward(asyncio.Queue):
        def put_nowait(self, item: aiomqtt.Message) -> None:  # type: ignore[override]
            deliver(item)

    return _Forward


@dataclass
class _Received:
    topic: str
    payload: bytes
    arrival: int                  # clock() at receipt, ms
    mid: int = 0                  # the broker's message id, to acknowledge it
    qos: int = 0
    conn: int = 0                 # which connection delivered it (an ack only makes sense on that one)


@dataclass
class _Decoded:
    msg: _Received
    rows: list[dict]
    ts: list[int]
    raw: list[Any]                # the original elements, for per-element dead letters


class MqttIngest:
    """Feeds one stream from an MQTT topic filter (``REGISTER STREAM ... FROM MQTT``), forever, until stop().

    ``columns`` is the stream's schema; it is used to decide whether a TIMESTAMP field that is also a column
    stays in the row. ``clock`` returns the arrival time in ms (default: the wall clock) and is only used when
    the source names no TIMESTAMP field. ``client_id`` defaults to one derived from the stream name and the
    topic, so that a restarted server resumes the broker's persistent session for that stream; give each server
    its own ``client_id`` (or prefix) when several share a broker and register streams of the same name.
    """

    def __init__(self, sink: Sink, stream_name: str, columns: Sequence[tuple[str, str]], source: MqttSource,
                 url: str, dead_letter_path: str | Path, clock: Callable[[], int] | None = None, *,
                 client_id: str | None = None, keepalive: int = 15, max_pending: int = 10_000,
                 max_batch: int = 1000, max_dead_letter_payload: int = 1 << 20,
                 stop_timeout: float = 10.0) -> None:
        if source.format.upper() not in ("JSON", "MSGPACK"):
            raise ValueError(f"unknown MQTT payload format {source.format!r}; expected JSON or MSGPACK")
        self.sink = sink
        self.stream_name = stream_name
        self.columns = [(c, t) for c, t in columns]
        self.source = source
        self.url = parse_mqtt_url(url)
        self.clock = clock or _default_clock
        self.client_id = client_id or self.default_client_id(stream_name, source.topic)
        self.keepalive = keepalive
        self.max_batch = max_batch
        self.stop_timeout = stop_timeout
        self._format = source.format.upper()
        self._ts_field = source.timestamp_field
        self._ts_is_column = self._ts_field is not None and any(
            c.lower() == self._ts_field.lower() for c, _ in self.columns)
        self._dead = _DeadLetters(dead_letter_path, max_dead_letter_payload)
        self._pending: asyncio.Queue[_Received | None] | None = None
        self._max_pending = max_pending
        self._frontier: int | None = None        # the highest timestamp the sink accepted from this source
        self._last_arrival: int | None = None
        self._conn_task: asyncio.Task | None = None
        self._consumer: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._client: Client | None = None
        self._down_since: float | None = None     # monotonic; set when a live connection is lost
        self._n = {"received": 0, "accepted": 0, "malformed": 0, "late": 0, "dropped": 0, "ignored": 0,
                   "retained_skipped": 0, "sink_errors": 0, "session_lost": 0, "acked": 0,
                   "refused_overloaded": 0}
        self._link = Link()
        self._session_present: bool | None = None
        self._down_total = 0.0
        self._conn_gen = 0

    @staticmethod
    def default_client_id(stream_name: str, topic: str) -> str:
        """``dsms-<stream>-<8 hex of the topic>``: stable across restarts (so the persistent session is
        resumed) and different when the stream is re-registered on another topic (so an old session's
        subscription cannot leak messages from the old topic into the new stream)."""
        h = hashlib.sha1(topic.encode("utf-8")).hexdigest()[:8]
        return f"dsms-{stream_name.lower()}-{h}"

    # ------------------------------------------------------------------ public

    @property
    def stats(self) -> dict[str, Any]:
        """A snapshot. Counters: ``received`` messages, ``accepted`` elements, ``malformed`` messages, ``late``
        elements, ``dropped`` messages (pending queue full), ``ignored`` messages (topic outside the filter),
        ``retained_skipped``, ``sink_errors``, ``connects``, ``reconnects`` (successful connections after a lost
        one), ``failed_attempts``, ``session_lost`` (reconnects where the broker no longer had our session, so
        messages queued for it are gone). State: ``connected``, ``session_present``, ``disconnected_seconds``
        (total time without a connection after the first one), ``pending``, ``dead_lettered`` (lines written),
        ``last_error``."""
        down = self._down_total
        if self._down_since is not None:
            down += time.monotonic() - self._down_since
        n = {**self._n, **self._link.counters}
        return {**n, "connected": self._link.connected, "session_present": self._session_present,
                "disconnected_seconds": round(down, 3),
                "pending": self._pending.qsize() if self._pending is not None else 0,
                "dead_lettered": self._dead.lines, "last_error": self._link.last_error,
                "client_id": self.client_id, "topic": self.source.topic}

    async def start(self) -> None:
        """Spawn the connection and consumer tasks; return once the first connection attempt has finished
        (connected and subscribed, or failed and scheduled for retry). A broker that is down at start is not an
        error: the source keeps retrying, and ``stats`` says so."""
        if self._conn_task is not None:
            raise RuntimeError("MqttIngest already started")
        self._stop, self._first_attempt = asyncio.Event(), asyncio.Event()     # startable again after stop()
        self._pending = asyncio.Queue(maxsize=self._max_pending)
        self._consumer = asyncio.create_task(self._consume(), name=f"mqtt-consume-{self.stream_name}")
        self._conn_task = asyncio.create_task(self._run(), name=f"mqtt-ingest-{self.stream_name}")
        waiter = asyncio.create_task(self._first_attempt.wait())
        done, _ = await asyncio.wait({waiter, self._conn_task}, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()
            self._conn_task.result()     # re-raise what killed the connection task (a bug, not the network)

    async def stop(self, *, discard_session: bool = False) -> None:
        """Hand everything already received to the sink and acknowledge it while the connection is still up,
        then disconnect (what arrives meanwhile is not acknowledged: the broker delivers it again to the next
        connection of the session). With ``discard_session`` (for DROP STREAM) the subscription is removed
        first, so the broker stops queueing messages for a stream that no longer exists."""
        if self._conn_task is None:
            return
        self._stop.set()
        if discard_session and self._client is not None and self._link.connected:
            with contextlib.suppress(Exception):
                await self._client.unsubscribe(self.source.topic, timeout=2)
        assert self._pending is not None and self._consumer is not None
        try:
            await asyncio.wait_for(self._pending.put(None), self.stop_timeout)
            await asyncio.wait_for(asyncio.shield(self._consumer), self.stop_timeout)
        except TimeoutError:
            log.warning("MQTT ingest of %s: sink did not take the last %d messages within %.1f s",
                        self.stream_name, self._pending.qsize(), self.stop_timeout)
        finally:
            self._consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._consumer
            self._conn_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._conn_task
            self._dead.close()
            self._conn_task = None

    # ------------------------------------------------------------------ connection

    def _deliver(self, m: aiomqtt.Message) -> None:
        """Called by aiomqtt (in the event loop) for each received message: stamp and queue it."""
        self._n["received"] += 1
        if m.retain:
            # Retained messages are replays of an old element, sent again on every (re)subscription; taking
            # them would duplicate input after each reconnect. Live messages never carry the flag (MQTT 3.1.1
            # section 3.3.1.3).
            self._n["retained_skipped"] += 1
            self._ack_now(m.mid, m.qos)
            return
        if not m.topic.matches(self.source.topic):
            self._n["ignored"] += 1
            self._ack_now(m.mid, m.qos)
            return
        now = int(self.clock())
        if self._last_arrival is not None and now < self._last_arrival:
            now = self._last_arrival          # arrival time never goes backwards, even if the wall clock does
        self._last_arrival = now
        payload = m.payload if isinstance(m.payload, bytes | bytearray) else str(m.payload).encode()
        assert self._pending is not None
        try:
            self._pending.put_nowait(_Received(m.topic.value, bytes(payload), now, m.mid, m.qos, self._conn_gen))
        except asyncio.QueueFull:
            self._n["dropped"] += 1              # not acknowledged: the broker delivers it again after a reconnect

    def _ack_now(self, mid: int, qos: int) -> None:
        client = self._client
        if client is not None and qos > 0:
            with contextlib.suppress(Exception):
                client.ack(mid, qos)

    def _ack(self, chunk: list[_Received]) -> None:
        """Acknowledge a handled chunk (archived or dead-lettered) to the broker, on the connection that
        delivered it; messages of an earlier connection are delivered again by the broker (at least once)."""
        client = self._client
        if client is None:
            return
        for m in chunk:
            if m.qos > 0 and m.conn == self._conn_gen:
                try:
                    client.ack(m.mid, m.qos)
                except Exception as e:  # noqa: BLE001 - the broker will deliver it again
                    self._link.last_error = f"ack: {describe(e)}"
                    return
                self._n["acked"] += 1

    async def _run(self) -> None:
        await keep_connected(self._client_for_attempt, self._session, link=self._link, stop=self._stop,
                             first_attempt=self._first_attempt, what=f"MQTT ingest of {self.stream_name}",
                             after=self._after_attempt)

    def _client_for_attempt(self) -> Client:
        # A new connection: messages it delivers (a resumed session's queue comes right after CONNACK, before
        # the session code runs) are acknowledged on it, and those of an earlier one no more.
        self._conn_gen += 1
        self._client = Client(**client_kwargs(self.url), identifier=self.client_id, clean_session=False,
                              keepalive=self.keepalive, timeout=10, queue_type=_forwarding_queue(self._deliver),
                              manual_ack=True)
        return self._client

    async def _session(self, client: Client, reconnected: bool, ready: Callable[[], None]) -> None:
        self._client = client
        try:
            self._session_present = client.session_present
            if reconnected and client.session_present is False:
                self._n["session_lost"] += 1
            if self._down_since is not None:
                self._down_total += time.monotonic() - self._down_since
                self._down_since = None
            # Subscribe on every connection: after a broker restart without persistence the session, and with
            # it the subscription, is gone.
            granted = await client.subscribe(self.source.topic, qos=1)
            if any(int(getattr(g, "value", g)) >= 0x80 for g in granted):
                raise aiomqtt.MqttError(f"the broker refused the subscription to {self.source.topic!r}: {granted}")
            ready()
            log.info("MQTT ingest of %s subscribed to %r at %s:%d (connection %d)", self.stream_name,
                     self.source.topic, self.url.host, self.url.port, self._link.counters["connects"])
            if reconnected and client.session_present is False:
                log.warning("MQTT ingest of %s: the broker no longer had this source's session; messages "
                            "published while it was disconnected are lost", self.stream_name)
            async for _ in client.messages:     # ends only with the connection, see _forwarding_queue
                pass
        finally:
            self._client = None

    def _after_attempt(self, was_connected: bool) -> None:
        if was_connected and self._down_since is None:
            self._down_since = time.monotonic()

    # ------------------------------------------------------------------ consumer

    async def _consume(self) -> None:
        assert self._pending is not None
        while True:
            first = await self._pending.get()
            chunk: list[_Received] = []
            done = first is None
            if first is not None:
                chunk.append(first)
            while not done and len(chunk) < self.max_batch and not self._pending.empty():
                item = self._pending.get_nowait()
                if item is None:
                    done = True
                else:
                    chunk.append(item)
            if chunk:
                try:
                    await self._process(chunk)
                except Exception as e:  # noqa: BLE001 - the consumer must outlive any one bad chunk
                    self._link.last_error = describe(e)
                    log.exception("MQTT ingest of %s: unexpected error", self.stream_name)
                self._ack(chunk)
            if done:
                return

    def _decode(self, msg: _Received) -> _Decoded | None:
        """Payload to rows and timestamps, or None after dead-lettering it as malformed."""
        try:
            items = decode_payload(msg.payload, self._format)
            rows, ts = [], []
            for k, item in enumerate(items):
                row = dict(item)
                if self._ts_field is None:
                    t = msg.arrival
                else:
                    key = self._find_key(row, self._ts_field)
                    if key is None:
                        raise Malformed(f"element {k}: missing timestamp field {self._ts_field!r}")
                    try:
                        t = parse_timestamp(row[key])
                    except Malformed as e:
                        raise Malformed(f"element {k}: {e}") from None
                    if not self._ts_is_column:
                        del row[key]
                rows.append(row)
                ts.append(t)
        except Malformed as e:
            self._malformed(msg, str(e))
            return None
        except Exception as e:  # noqa: BLE001 - any decoder failure is this message's, never its batch's
            self._malformed(msg, f"cannot decode: {type(e).__name__}: {str(e)[:200]}")
            return None
        return _Decoded(msg, rows, ts, list(items))

    @staticmethod
    def _find_key(row: dict, name: str) -> Any:
        if name in row:
            return name
        low = name.lower()
        for k in row:
            if isinstance(k, str) and k.lower() == low:
                return k
        return None

    def _malformed(self, msg: _Received, reason: str) -> None:
        self._n["malformed"] += 1
        self._dead.write(msg.topic, reason, msg.payload)

    def _late(self, d: _Decoded, k: int, frontier: int) -> None:
        self._n["late"] += 1
        text = json.dumps(d.raw[k], default=json_default, ensure_ascii=False)
        self._dead.write(d.msg.topic, f"late: timestamp {d.ts[k]} is below {frontier}, which the stream has "
                                      f"already accepted", text, index=k)

    async def _process(self, chunk: list[_Received]) -> None:
        """Decode one chunk of messages and offer the good ones to the sink as one batch."""
        decoded = [d for d in (self._decode(m) for m in chunk) if d is not None]
        await self._offer(decoded)

    async def _offer(self, pending: list[_Decoded]) -> None:
        """Offer messages to the sink as one batch; on a refusal naming an element, dead-letter the message that
        holds it and offer the rest again (each message is all or nothing, and the good ones still get in).
        Elements below what this source already had accepted are late: dead-lettered one by one, never
        offered, because the engine refuses a batch whose time goes backwards."""
        while pending:
            frontier = self._frontier
            rows: list[dict] = []
            ts: list[int] = []
            owner: list[tuple[int, int]] = []       # batch position -> (message, element in the message)
            late: list[tuple[int, int, int]] = []
            for i, d in enumerate(pending):
                for k, (r, t) in enumerate(zip(d.rows, d.ts)):
                    if frontier is not None and t < frontier:
                        late.append((i, k, frontier))
                        continue
                    frontier = t
                    rows.append(r)
                    ts.append(t)
                    owner.append((i, k))
            if rows:
                try:
                    n = await self.sink.ingest(self.stream_name, rows, ts)
                except InputError as e:
                    if e.index is None or not 0 <= e.index < len(owner):
                        if len(pending) > 1:      # the sink did not say which element: one message at a time
                            for d in pending:
                                await self._offer([d])
                            return
                        bad, where = 0, ""
                    else:
                        bad, k = owner[e.index]
                        where = f"element {k}: " if len(pending[bad].rows) > 1 else ""
                    d = pending.pop(bad)
                    reason = where + _ELEMENT_PREFIX.sub("", str(e), count=1)
                    if "already passed" in reason:
                        # The stream's time moved past this message through another input (HTTP, a
                        # heartbeat): its elements are late, not malformed. The engine's InputError text is the
                        # only signal the sink interface carries.
                        self._n["late"] += len(d.rows)
                        self._dead.write(d.msg.topic, f"late: {reason}", d.msg.payload)
                    else:
                        self._malformed(d.msg, reason)
                    continue
                except Exception as e:  # noqa: BLE001 - a broken sink must not kill the source
                    retry = getattr(e, "retry_after", None)
                    if isinstance(retry, int | float) and not isinstance(retry, bool):
                        self._n["refused_overloaded"] += 1      # nothing was taken: offer it all again later
                        await asyncio.sleep(min(max(float(retry), 0.05), 5.0))
                        continue
                    if len(pending) > 1:
                        # Which message made it fail is unknown: offer them one at a time, so one poison
                        # message costs only itself and the rest of its batch still gets in.
                        for d in pending:
                            await self._offer([d])
                        return
                    self._n["sink_errors"] += 1
                    self._link.last_error = f"sink: {type(e).__name__}: {e}"
                    if self._n["sink_errors"] & (self._n["sink_errors"] - 1) == 0:   # 1st, 2nd, 4th, ...
                        log.error("MQTT ingest of %s: the sink failed: %s", self.stream_name, self._link.last_error)
                    for d in pending:
                        self._dead.write(d.msg.topic, f"sink error: {type(e).__name__}: {e}", d.msg.payload)
                    return
                self._n["accepted"] += n if isinstance(n, int) and not isinstance(n, bool) else len(rows)
                self._frontier = frontier
            for i, k, f in late:
                self._late(pending[i], k, f)
            return
