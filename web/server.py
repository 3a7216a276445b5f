"""``serve``: the HTTP server around a Runtime, as ``dsms serve`` runs it (SPEC section 10). ``dsms/cli.py``
reaches the server through this one function."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from aiohttp import web

from dsms.archive import ArchiveError, ArchiveLocked
from dsms.config import Config
from dsms.runtime import Runtime, RuntimeFailure
from web.app import create_app
from web.middlewares import is_loopback

log = logging.getLogger("dsms")


def _fail(message: str, code: int = 1) -> int:
    print(f"dsms: {message}", file=sys.stderr, flush=True)
    return code


async def serve(cfg: Config) -> int:
    """Run the server until SIGINT/SIGTERM: start the Runtime (recovering from the data directory), serve the
    HTTP API, then end result streams, stop the HTTP server and the Runtime. Returns the exit status; when
    it cannot start it prints one clear line on stderr and returns non-zero (``dsms serve``)."""
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
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=2.0)
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
