"""The MQTT publisher: a query's results sent to a broker topic (``PUBLISH TO MQTT 'topic'``), one message per
element, QoS 1, without ever making the engine wait for the network."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import aiomqtt

from dsms.ingest.mqtt.connection import Client, Link, keep_connected
from dsms.ingest.mqtt.payloads import encode_element
from dsms.ingest.mqtt.url import client_kwargs, parse_mqtt_url


class MqttPublisher:
    """Publishes a query's results to a topic (``PUBLISH TO MQTT 'topic'``), one message per element, QoS 1.

    ``publish`` only appends to a bounded buffer and returns: the engine never waits for the network. A sender
    task empties the buffer whenever connected and reconnects with backoff when the broker goes away. Elements
    that do not fit in the buffer (``max_buffer``) are dropped and counted. Delivery to the broker is at least
    once: a message whose PUBACK was lost with the connection is sent again after reconnecting.
    """

    def __init__(self, url: str, topic: str, *, client_id: str | None = None, max_buffer: int = 10_000,
                 keepalive: int = 15, window: int = 64, publish_timeout: float = 10.0,
                 retain: bool = False) -> None:
        if not topic or "+" in topic or "#" in topic:
            raise ValueError(f"cannot publish to {topic!r}: a topic to publish to has no wildcards")
        self.url = parse_mqtt_url(url)
        self.topic = topic
        self.client_id = client_id or ""          # empty: the broker never keeps a session for us
        self.max_buffer = max_buffer
        self.keepalive = keepalive
        self.window = window
        self.publish_timeout = publish_timeout
        self.retain = retain
        self._buf: deque[bytes] = deque()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._n = {"published": 0, "dropped": 0}
        self._link = Link()

    @property
    def stats(self) -> dict[str, Any]:
        """``published`` (PUBACKed by the broker), ``dropped`` (buffer full, or unsent at stop), ``buffered``,
        ``connects``, ``reconnects``, ``failed_attempts``,
        ``connected``, ``last_error``."""
        return {**self._n, **self._link.counters, "buffered": len(self._buf), "connected": self._link.connected,
                "last_error": self._link.last_error, "topic": self.topic}

    async def start(self) -> None:
        """Spawn the sender; return once the first connection attempt has finished."""
        if self._task is not None:
            raise RuntimeError("MqttPublisher already started")
        self._stop, self._first_attempt = asyncio.Event(), asyncio.Event()     # startable again after stop()
        self._task = asyncio.create_task(self._run(), name=f"mqtt-publish-{self.topic}")
        waiter = asyncio.create_task(self._first_attempt.wait())
        done, _ = await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()
            self._task.result()

    async def publish(self, elements: Sequence[Any]) -> int:
        """Queue the elements for sending (SPEC section 6 JSON, one message each); returns how many were
        queued. Never blocks on the network; what does not fit is counted in ``dropped``."""
        if self._task is None or self._stop.is_set():
            raise RuntimeError("MqttPublisher is not running: call start() first")
        queued = 0
        for el in elements:
            data = encode_element(el)
            if len(self._buf) >= self.max_buffer:
                self._n["dropped"] += 1
                continue
            self._buf.append(data)
            queued += 1
        if queued:
            self._wake.set()
        return queued

    async def stop(self, flush_timeout: float = 5.0) -> None:
        """Give the sender up to ``flush_timeout`` seconds to empty the buffer (reconnecting if it has to), then
        disconnect; what is still buffered then is counted as dropped."""
        if self._task is None:
            return
        deadline = time.monotonic() + flush_timeout
        while self._buf and time.monotonic() < deadline and not self._task.done():
            self._wake.set()
            await asyncio.sleep(0.01)
        self._stop.set()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._n["dropped"] += len(self._buf)
        self._buf.clear()
        self._task = None

    async def _run(self) -> None:
        await keep_connected(self._client_for_attempt, self._session, link=self._link, stop=self._stop,
                             first_attempt=self._first_attempt, what=f"MQTT publisher to {self.topic}")

    def _client_for_attempt(self) -> Client:
        return Client(**client_kwargs(self.url), identifier=self.client_id or None, clean_session=True,
                      keepalive=self.keepalive, timeout=self.publish_timeout)

    async def _session(self, client: Client, reconnected: bool, ready: Callable[[], None]) -> None:
        ready()
        watcher = asyncio.create_task(self._watch(client))
        sender = asyncio.create_task(self._send(client))
        try:
            done, _ = await asyncio.wait({watcher, sender}, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()
        finally:
            for t in (watcher, sender):
                t.cancel()
            await asyncio.gather(watcher, sender, return_exceptions=True)

    @staticmethod
    async def _watch(client: aiomqtt.Client) -> None:
        """Ends (with MqttError) when the connection is lost, even while there is nothing to send."""
        async for _ in client.messages:
            pass

    async def _send(self, client: aiomqtt.Client) -> None:
        while True:
            if not self._buf:
                self._wake.clear()
                await self._wake.wait()
                continue
            chunk = [self._buf[i] for i in range(min(self.window, len(self._buf)))]
            results = await asyncio.gather(
                *(client.publish(self.topic, p, qos=1, retain=self.retain, timeout=self.publish_timeout)
                  for p in chunk), return_exceptions=True)
            for _ in chunk:
                self._buf.popleft()
            failed = [p for p, r in zip(chunk, results) if isinstance(r, BaseException)]
            self._n["published"] += len(chunk) - len(failed)
            if failed:
                # Put them back in front, in order, and reconnect: sent again, possibly twice (at least once).
                self._buf.extendleft(reversed(failed))
                err = next(r for r in results if isinstance(r, BaseException))
                raise aiomqtt.MqttError(f"publish failed: {err}")
