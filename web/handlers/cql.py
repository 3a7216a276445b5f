"""``POST /cql``: run CQL statements, given as a text body or ``{"cql": ...}`` (SPEC section 7)."""

from __future__ import annotations

from aiohttp import web

from dsms.errors import InputError
from web.handlers.common import describe_result, read_json_object, runtime


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
    """Run the statements in order; 200 with what each created or dropped."""
    text = await cql_text(request)
    results = await runtime(request).execute_async(text)
    return web.json_response({"results": [describe_result(r) for r in results]})
