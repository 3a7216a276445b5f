"""The typed keys under which the application holds the Runtime and the Config (aiohttp AppKeys).

They live apart from ``web/app.py`` so that handlers and middlewares, which ``app.py`` imports, can read them
without importing ``app.py`` back (no import cycle)."""

from __future__ import annotations

from aiohttp import web

from dsms.config import Config
from dsms.runtime import Runtime

RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)
CONFIG: web.AppKey[Config] = web.AppKey("config", Config)
