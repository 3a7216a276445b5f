"""``GET /``: the web GUI (``web/handlers/gui.py``), with a plain HTML listing of streams, relations and queries
with links for browsers without scripts."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from aiohttp import web

from web.handlers import gui
from web.handlers.common import runtime


def _link(href: str, text: str) -> str:
    return f'<a href="{escape(href)}">{escape(text)}</a>'


async def index(request: web.Request) -> web.Response:
    rt = runtime(request)
    parts = ["<div class='plain'>"]
    parts.append("<h2>Streams</h2><table><tr><th>name</th><th>columns</th><th>elements in</th></tr>")
    for s in rt.streams():
        cols = ", ".join(f"{c} {t}" for c, t in s.columns)
        parts.append(f"<tr><td>{_link('/streams/' + quote(s.name), s.name)}</td><td><code>{escape(cols)}</code>"
                     f"</td><td>{rt.source_stats(s.name)['elements_in']}</td></tr>")
    parts.append("</table><h2>Relations</h2><table><tr><th>name</th><th>columns</th></tr>")
    for r in rt.relations():
        cols = ", ".join(f"{c} {t}" for c, t in r.columns)
        parts.append(f"<tr><td>{_link('/relations/' + quote(r.name), r.name)}</td>"
                     f"<td><code>{escape(cols)}</code></td></tr>")
    parts.append("</table><h2>Queries</h2><table><tr><th>id</th><th>name</th><th>kind</th><th>results</th>"
                 "<th>plan</th><th>text</th></tr>")
    for q in rt.queries():
        qid = quote(q.id)
        parts.append(f"<tr><td>{_link('/queries/' + qid, q.id)}</td><td>{escape(q.name or '')}</td>"
                     f"<td>{escape(q.kind)}</td><td>{_link(f'/queries/{qid}/results?follow=false', 'ndjson')} "
                     f"{_link(f'/queries/{qid}/results?format=xml&follow=false', 'xml')}</td>"
                     f"<td>{_link(f'/queries/{qid}/plan', 'plan')}</td><td><code>{escape(q.text)}</code></td></tr>")
    parts.append("</table><p>" + " · ".join(_link(h, h) for h in ("/system", "/entities", "/metrics",
                                                                   "/openapi.json")) + "</p></div>")
    return gui.page("".join(parts))
