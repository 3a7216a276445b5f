"""Streaming result responses: NDJSON, server-sent events and XML, written and flushed per batch while the
query runs (SPEC sections 6 and 7).

A response owns one ``Subscriber`` of the runtime. It waits for what the engine produced, encodes it (the
bytes of each format are computed once per batch, whoever reads it) and writes it; while it waits on a slow
client the subscriber's bounded buffer fills and the rest becomes a gap marker, so the engine never waits for a
reader. A disconnected client is noticed within a second and its subscriber is removed.
"""

from __future__ import annotations

import asyncio
import time
from xml.sax.saxutils import quoteattr

from aiohttp import web

from dsms.errors import InputError
from dsms.formats import ENCODERS, Encoder, iso_text
from dsms.formats.json_codec import dumps
from dsms.runtime import Closed, Gap, HeartbeatMark, ResultChunk, Runtime, SnapshotMark

KEEPALIVE_S = 15.0
POLL_S = 1.0

_ACCEPT = (
    ("text/event-stream", "sse"),
    ("application/xml", "xml"),
    ("text/xml", "xml"),
    ("application/x-ndjson", "ndjson"),
    ("application/ndjson", "ndjson"),
    ("application/jsonl", "ndjson"),
)


def pick_format(request: web.Request) -> Encoder:
    """``?format=`` wins; otherwise the first Accept type we can produce; NDJSON by default."""
    fmt = request.query.get("format")
    if fmt:
        enc = ENCODERS.get(fmt.lower())
        if enc is None:
            raise InputError(f"format {fmt!r} is not one of {', '.join(ENCODERS)}")
        return enc
    accept = request.headers.get("Accept", "")
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        for m, name in _ACCEPT:
            if media == m:
                return ENCODERS[name]
    return ENCODERS["ndjson"]


def _encode(enc: Encoder, items: list, iso: bool = False) -> tuple[bytes, bool]:
    """The bytes of ``items``; with ``iso`` every timestamp is ISO 8601 text (``?ts=iso``)."""
    show = iso_text if iso else (lambda t: t)
    parts = []
    closed = False
    for it in items:
        if isinstance(it, ResultChunk):
            parts.append(it.encode(enc, iso))
        elif isinstance(it, HeartbeatMark):
            parts.append(enc.heartbeat(show(it.ts)))
        elif isinstance(it, Gap):
            parts.append(enc.gap(it.missed, *(None if t is None else show(t) for t in (it.from_ts, it.to_ts))))
        elif isinstance(it, SnapshotMark):
            parts.append(enc.snapshot(show(it.ts), it.rows))
        elif isinstance(it, Closed):
            parts.append(closed_message(enc, it))
            closed = True
    return b"".join(parts), closed


def closed_message(enc: Encoder, c: Closed) -> bytes:
    """The last item of a stream the server ends, saying why: ``{"closed": {"reason": ..., "resume_from":
    ts}}`` (SSE: the same as an event; XML: ``<closed reason=".." resume_from=".."/>``). ``resume_from`` is
    there when the reader was disconnected for falling behind: the ``?from=`` that continues where it stopped.

    >>> closed_message(ENCODERS["ndjson"], Closed("query dropped"))
    b'{"closed":{"reason":"query dropped"}}\\n'
    """
    body: dict = {"reason": c.reason}
    if c.resume_from is not None:
        body["resume_from"] = c.resume_from
    if enc.name == "xml":
        attrs = " ".join(f"{k}={quoteattr(str(v))}" for k, v in body.items())
        return f"<closed {attrs}/>\n".encode()
    line = dumps({"closed": body})
    return f"data: {line}\n\n".encode() if enc.name == "sse" else f"{line}\n".encode()


async def stream_results(request: web.Request, rt: Runtime, query_id: str, label: str, *, from_ts: int | None,
                         follow: bool, buffer: int | None, after: int | None = None,
                         snapshot: bool = False, iso: bool = False) -> web.StreamResponse:
    """Serve one query's results until the client leaves, the query is dropped or (``follow=false``) the
    retained and already produced results have been sent. ``after`` resumes after an element id (SSE's
    Last-Event-ID); ``snapshot`` starts a relation's reader with its current contents."""
    enc = pick_format(request)
    sub = rt.subscribe(query_id, from_ts=from_ts, buffer=buffer, after=after, snapshot=snapshot)
    resp = web.StreamResponse(headers={"Content-Type": f"{enc.content_type}; charset=utf-8",
                                       "X-Dsms-Query": query_id, **enc.extra_headers})
    try:
        await resp.prepare(request)
        await resp.write(enc.head(label))
        last_write = time.monotonic()
        while True:
            items = await sub.get(timeout=0 if not follow else POLL_S)
            if items:
                data, closed = _encode(enc, items, iso)
                if data:
                    await resp.write(data)
                    last_write = time.monotonic()
                if closed:
                    break
                if not follow and not sub.items:
                    break
                continue
            if not follow:
                break
            transport = request.transport
            if transport is None or transport.is_closing():
                return resp
            if enc.name == "sse" and time.monotonic() - last_write > KEEPALIVE_S:
                await resp.write(b": keepalive\n\n")
                last_write = time.monotonic()
        await resp.write(enc.tail())
        await resp.write_eof()
    except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        rt.unsubscribe(sub)
    return resp
