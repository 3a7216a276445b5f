"""The web GUI's page and static files (SPEC sections 1 and 7): ``GET /`` serves ``web/static/index.html``,
``/static/`` the scripts, styles and vendored libraries it loads. Everything comes from the package; the
Content-Security-Policy admits no other origin, so the page works without the internet (docs/gui.md)."""

from __future__ import annotations

import functools
from pathlib import Path

from aiohttp import web

from web.keys import RUNTIME
from web.telemetry import install

STATIC = Path(__file__).resolve().parent.parent / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


@functools.lru_cache(maxsize=1)
def _template() -> str:
    return (STATIC / "index.html").read_text(encoding="utf-8")


def page(plain: str) -> web.Response:
    """The GUI page, with ``plain`` (an HTML listing of the catalog) shown to browsers without scripts."""
    html = _template().replace("<!--PLAIN-->", plain)
    return web.Response(text=html, content_type="text/html",
                        headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache"})


def setup(app: web.Application) -> None:
    """Serve ``/static/`` and run the statistics sampler the GUI's plots read while the app runs."""
    app.router.add_static("/static/", STATIC)
    install(app, RUNTIME)
