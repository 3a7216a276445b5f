"""The runtime's MQTT adapters: one ingest adapter per stream declared ``FROM MQTT``, one publisher per query
declared ``PUBLISH TO MQTT`` (SPEC section 6, docs/mqtt.md).

Adapters are isolated from the server: one that cannot be created, loses its broker or fails is logged and
counted (``errors["mqtt"]``), never allowed to stop the runtime. An ingest adapter feeds the runtime's own
``ingest``, so MQTT input is validated, archived and acknowledged like HTTP input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from dsms.ingest.mqtt import MqttIngest, MqttPublisher
from dsms.runtime.results import Closed, QueryResults, ResultChunk, Subscriber

if TYPE_CHECKING:
    from dsms.runtime.runtime import Runtime

log = logging.getLogger("dsms.runtime")


class MqttAdapters:
    """The live adapters of one runtime, by stream key, and the background tasks that run them."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.sources: dict[str, Any] = {}
        self._first: dict[str, asyncio.Task] = {}       # each source's start: its first connection attempt
        self._bg: set[asyncio.Task] = set()

    def start_source(self, stream_def: Any) -> None:
        rt = self.rt
        key = stream_def.name.lower()
        dead = rt.data_dir / "dead-letter" / f"{key}.ndjson"
        try:
            dead.parent.mkdir(parents=True, exist_ok=True)
            adapter = MqttIngest(rt, stream_def.name, list(stream_def.columns), stream_def.source,
                                 rt.config.mqtt_url, dead)
        except Exception as e:  # noqa: BLE001 - an adapter failure must not stop the server
            log.error("MQTT adapter for %s could not be created: %s", stream_def.name, e)
            return
        self.sources[key] = adapter
        self._first[key] = self.spawn(self.guard(adapter.start(), f"MQTT adapter for {stream_def.name}"))

    async def stop_source(self, key: str, dropped: bool = False) -> None:
        """Stop one stream's adapter; after a DROP its broker session is discarded too."""
        adapter = self.sources.pop(key, None)
        self._first.pop(key, None)
        if adapter is not None:
            coro = adapter.stop(discard_session=True) if dropped else adapter.stop()
            await self.guard(coro, f"stopping the MQTT adapter of {key}")

    async def stop(self) -> None:
        for key in list(self.sources):
            await self.stop_source(key)
        for t in list(self._bg):
            t.cancel()
        for t in list(self._bg):
            with contextlib.suppress(BaseException):
                await t

    def start_publisher(self, st: QueryResults) -> None:
        topic = getattr(st.query.definition, "publish_topic", None)
        if topic is None or st.publisher_task is not None:
            return
        sub = Subscriber(st.query.id, self.rt.subscriber_buffer)
        st.subscribers.add(sub)
        st.publisher_task = asyncio.get_running_loop().create_task(self._publish(st, sub, topic))

    async def _publish(self, st: QueryResults, sub: Subscriber, topic: str) -> None:
        try:
            pub = MqttPublisher(self.rt.config.mqtt_url, topic)
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
                            self.rt.errors["mqtt_publish"] += 1
                            log.warning("MQTT publish of %s failed: %s", st.query.id, e)
        finally:
            st.subscribers.discard(sub)
            sub.discard()
            with contextlib.suppress(Exception):
                await pub.stop()

    async def guard(self, coro: Any, what: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - adapters are isolated from the server
            self.rt.errors["mqtt"] += 1
            log.error("%s failed: %s", what, e)

    def spawn(self, coro: Any) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)
        return t

    def stats(self) -> dict[str, dict]:
        return {k: dict(getattr(a, "stats", {}) or {}) for k, a in self.sources.items()}

    def connection(self, name: str) -> dict[str, Any] | None:
        """The state of a stream's source: ``broker`` (its URL without credentials), ``topic``, ``state``
        (connecting, connected or disconnected) and ``error`` (the last one); None for a stream without one."""
        key = name.lower()
        adapter = self.sources.get(key)
        if adapter is None:
            return None
        stats = dict(getattr(adapter, "stats", {}) or {})
        first = self._first.get(key)
        state = "connected" if stats.get("connected") else (
            "connecting" if first is not None and not first.done() else "disconnected")
        return {"broker": public_url(self.rt.config.mqtt_url), "topic": stats.get("topic"), "state": state,
                "error": stats.get("last_error")}

    async def warning(self, name: str, wait: float = 5.0) -> str | None:
        """After registering a stream read from MQTT: None once its first connection attempt succeeded, else
        a warning that names the broker and the error (the source keeps retrying meanwhile)."""
        first = self._first.get(name.lower())
        if first is not None and not first.done():
            await asyncio.wait({first}, timeout=wait)
        conn = self.connection(name)
        if conn is None or conn["state"] == "connected":
            return None
        why = conn["error"] or f"no connection after {wait:g} s"
        return (f"cannot connect to the MQTT broker {conn['broker']}: {why}; the stream is registered and its "
                f"source keeps retrying (GET /streams/{name} shows the connection state)")


def public_url(url: str) -> str:
    """A URL without its user and password, to show in messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))
