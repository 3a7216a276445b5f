"""``create_app``: the aiohttp Application of the HTTP API (SPEC section 7).

The app does not own the Runtime: the caller starts it before serving and stops it after (``web.server.serve``
and the tests do), so the same app can be tested against a runtime in any state. The AppKeys are in
``web/keys.py``.
"""

from __future__ import annotations

from aiohttp import web

from dsms.config import Config
from dsms.runtime import Runtime
from web.keys import CONFIG, RUNTIME
from web.middlewares import auth_middleware, catalog_middleware, error_middleware, size_middleware
from web.routes import setup_routes

__all__ = ["create_app", "RUNTIME", "CONFIG"]


def create_app(runtime: Runtime, config: Config | None = None) -> web.Application:
    """Build the application. ``client_max_size`` is the request size limit, so aiohttp itself refuses a
    larger body (413) before it is buffered."""
    config = config or runtime.config
    app = web.Application(
        client_max_size=config.get("limits.request_bytes"),
        middlewares=[error_middleware, size_middleware, auth_middleware, catalog_middleware],
    )
    app[RUNTIME] = runtime
    app[CONFIG] = config
    setup_routes(app)
    return app
