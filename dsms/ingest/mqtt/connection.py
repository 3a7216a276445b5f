"""The MQTT connection both adapters keep: connect, run a session, and after any failure or loss wait (with
backoff and jitter) and connect again, until stopped. One loop for the source and the publisher, so both count,
log and back off alike."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

log = logging.getLogger("dsms.ingest.mqtt")

BACKOFF_START = 0.1          # seconds; the first retry after a failed or lost connection
BACKOFF_CAP = 5.0            # seconds; a broker that is down for long is still retried every few seconds


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter: 0.1 s, 0.2 s, ... capped at 5 s, each scaled by a random factor in
    [0.5, 1) so that many clients dropped by one broker restart do not all come back in the same instant."""
    return min(BACKOFF_CAP, BACKOFF_START * (2 ** min(attempt, 16))) * random.uniform(0.5, 1.0)


def describe(e: BaseException) -> str:
    """An error and its cause: aiomqtt's "Disconnected during message iteration" says nothing without the
    paho error behind it ("The connection was lost", "Connection refused")."""
    text = f"{type(e).__name__}: {e}"
    if e.__cause__ is not None and str(e.__cause__):
        text += f" ({type(e.__cause__).__name__}: {e.__cause__})"
    return text


class Client(aiomqtt.Client):
    """aiomqtt's client, also remembering CONNACK's session-present flag: it is the one signal the source has
    that the broker lost its session (and with it any QoS 1 messages queued while we were away).

    With ``manual_ack`` a received QoS 1 message is acknowledged only when :meth:`ack` is called (the source
    does so once the message is archived and fsynced, or dead-lettered): until then the broker still holds
    it and delivers it again to the next connection of the session. aiomqtt 2.5 has no option for it, so it
    is set on the paho client underneath (``manual_ack_set``, paho-mqtt 2)."""

    session_present: bool | None = None

    def __init__(self, *args: Any, manual_ack: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.manual_ack = manual_ack
        if manual_ack:
            self._client.manual_ack_set(True)

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await super().__aexit__(*exc_info)
        finally:
            # aiomqtt sets the loss of the connection on a future that nothing reads when the loss ends the
            # session by another path; asyncio then logs "Future exception was never retrieved" with a
            # traceback at garbage collection. keep_connected has already logged the loss in one line.
            for fut in (self._connected, self._disconnected):
                if fut.done() and not fut.cancelled():
                    fut.exception()

    def ack(self, mid: int, qos: int) -> None:
        """Acknowledge one received message (PUBACK for QoS 1) on this connection."""
        if self.manual_ack and qos > 0:
            self._client.ack(mid, qos)

    def _on_connect(self, client, userdata, flags, reason_code, properties=None):  # type: ignore[override]
        self.session_present = getattr(flags, "session_present", None)
        super()._on_connect(client, userdata, flags, reason_code, properties)


@dataclass
class Link:
    """What a connection loop reports: counters (``connects``, ``reconnects``, ``failed_attempts``), whether
    it is connected now, and the last error, for the adapter's ``stats``."""

    counters: dict[str, int] = field(default_factory=lambda: {"connects": 0, "reconnects": 0,
                                                               "failed_attempts": 0})
    connected: bool = False
    last_error: str | None = None


async def keep_connected(make_client: Callable[[], aiomqtt.Client],
                         session: Callable[[aiomqtt.Client, bool, Callable[[], None]], Awaitable[None]], *,
                         link: Link, stop: asyncio.Event, first_attempt: asyncio.Event, what: str,
                         after: Callable[[bool], None] | None = None) -> None:
    """Connect with ``make_client()`` and run ``session(client, reconnected, ready)`` until it ends or fails,
    again and again until ``stop`` is set. The session calls ``ready()`` once it is fully up (subscribed, say):
    that ends the first attempt (``first_attempt`` is also set when an attempt fails) and resets the backoff.
    ``after(was_connected)`` runs after every attempt. Failures are logged once per run of failures (a broker
    down for hours is not worth a warning every five seconds; ``failed_attempts`` keeps counting)."""
    attempt = 0
    ever = False

    def ready() -> None:
        nonlocal attempt
        attempt = 0
        first_attempt.set()

    while not stop.is_set():
        client = make_client()
        connected = False
        try:
            async with client:
                connected = link.connected = True
                link.counters["connects"] += 1
                if ever:
                    link.counters["reconnects"] += 1
                reconnected, ever = ever, True
                await session(client, reconnected, ready)
        except asyncio.CancelledError:
            link.connected = False
            raise
        except Exception as e:  # noqa: BLE001 - any failure means: wait, then connect again
            link.last_error = describe(e)
            if not connected:
                link.counters["failed_attempts"] += 1
            log.log(logging.WARNING if attempt == 0 else logging.DEBUG, "%s: %s", what, link.last_error)
        link.connected = False
        if after is not None:
            after(connected)
        first_attempt.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), backoff(attempt))
        attempt += 1
