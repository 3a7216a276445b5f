"""``POST /cql``: run CQL statements, given as a text body or ``{"cql": ...}`` (SPEC section 7)."""

from __future__ import annotations

from aiohttp import web

from dsms.errors import InputError
from web.handlers.common import read_json_object, runtime, with_warnings


async def cql_text(request: web.Request) -> str:
    """The CQL of a request: ``{"cql": "..."}`` for a JSON body, the body itself otherwise."""
    ctype = request.content_type.lower()
    if ctype in ("application/json", "text/json"):
        doc = await read_json_object(request)
        text = doc.get("cql")
        if not isinstance(text, str):
            raise InputError("the JSON body needs 'cql': a string of CQL statements")
        extra = set(doc) - {"cql"}
        if extra:
            raise InputError(f"unknown field '{sorted(extra)[0]}' (expected only 'cql')")
        return text
    body = await request.read()
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("the CQL text is not UTF-8") from None


async def post_cql(request: web.Request) -> web.Response:
    """Run the statements in order; 200 with what each created, dropped, showed or explained. A bare query
    is refused before anything runs (docs/http-api.md: it would be a query nobody can name or read)."""
    text = await cql_text(request)
    rt = runtime(request)
    results = await rt.execute_async(text, bare_queries=False)
    return web.json_response({"results": await with_warnings(rt, results)})
