"""``serve``: the HTTP server around a Runtime, as ``dsms serve`` runs it (SPEC section 10). ``dsms/cli.py``
reaches the server through this one function."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from dsms.archive import ArchiveError, ArchiveLocked
from dsms.config import Config
from dsms.runtime import Runtime, RuntimeFailure
from web.app import create_app
from web.malloc import keep_freed_memory
from web.middlewares import is_loopback

log = logging.getLogger("dsms")


KEEPALIVE_PROBES = ((getattr(socket, "TCP_KEEPIDLE", None), 60), (getattr(socket, "TCP_KEEPINTVL", None), 10),
                    (getattr(socket, "TCP_KEEPCNT", None), 6))
"""TCP keepalive on every connection: a peer that vanished without closing (a half-open connection, say a
result reader whose machine lost power) is noticed after about two minutes instead of the kernel's two hours."""


class JsonErrorsHandler(RequestHandler):
    """aiohttp's connection handler with the errors raised before any route (a request line over 8,190 bytes, a
    header too long, a malformed request or method) answered as JSON like every other error (SPEC section 7),
    logged in one line instead of a traceback (they are the client's fault), and keepalive probes on the socket.
    Idle connections, and ones that never finish their request headers, are closed after
    ``limits.idle_timeout_s`` (aiohttp's keepalive timeout)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                for opt, value in KEEPALIVE_PROBES:
                    if opt is not None:
                        sock.setsockopt(socket.IPPROTO_TCP, opt, value)

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            self.log_exception("error handling request", exc_info=exc)
        else:
            log.info("refused a malformed request (%d): %s", status, exc or message)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot send an error")
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "error"
        detail = (getattr(exc, "message", None) or str(exc or "")) or message or phrase
        detail = " ".join(str(detail).split())
        if status >= 500:
            detail = "the server log has the details"
        resp = web.json_response({"error": phrase.lower(), "detail": detail[:500]}, status=status)
        resp.force_close()
        return resp


class _JsonErrorsServer(Server):
    def __call__(self) -> RequestHandler:
        return JsonErrorsHandler(self, loop=self._loop, **self._kwargs)


class ServerRunner(web.AppRunner):
    """``web.AppRunner`` whose connections are handled by :class:`JsonErrorsHandler`."""

    async def _make_server(self) -> Server:
        srv = await super()._make_server()
        srv.__class__ = _JsonErrorsServer        # same object and state, only the handler it makes differs
        return srv


def _fail(message: str, code: int = 1) -> int:
    print(f"dsms: {message}", file=sys.stderr, flush=True)
    return code


async def serve(cfg: Config) -> int:
    """Run the server until SIGINT/SIGTERM: start the Runtime (recovering from the data directory), serve the
    HTTP API, then end result streams, stop the HTTP server and the Runtime. Returns the exit status; when
    it cannot start it prints one clear line on stderr and returns non-zero (``dsms serve``)."""
    keep_freed_memory()                      # web/malloc.py: no page faults for every result batch's buffers
    rt = Runtime(cfg)
    try:
        await rt.start()
    except ArchiveLocked as e:
        return _fail(f"cannot start: {e}")
    except (RuntimeFailure, ArchiveError) as e:
        return _fail(f"cannot start: {e}")
    except PermissionError as e:
        return _fail(f"cannot start: data directory {str(cfg.data_dir)!r} is not writable ({e.strerror})")
    except OSError as e:
        return _fail(f"cannot start: data directory {str(cfg.data_dir)!r}: {e.strerror or e}")
    app = create_app(rt, cfg)
    runner = ServerRunner(app, handle_signals=False, access_log=None, shutdown_timeout=2.0,
                          keepalive_timeout=cfg.get("limits.idle_timeout_s"))
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        await rt.stop()
        why = "address already in use" if e.errno == 98 else (e.strerror or str(e))
        return _fail(f"cannot listen on {cfg.host}:{cfg.port}: {why}")
    port = cfg.port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        port = server.sockets[0].getsockname()[1]
    if not is_loopback(cfg.host) and cfg.token is None:
        log.warning("listening on %s without a token: every mutating request will be refused (401)", cfg.host)
    print(f"dsms: serving http://{cfg.host}:{port}/ (data dir {cfg.data_dir}, fsync {rt.fsync})",
          file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("dsms: stopping", file=sys.stderr, flush=True)
    rt.close_readers("server stopping")        # end the result streams first, so the HTTP server can close
    await runner.cleanup()
    await rt.stop()
    return 0
