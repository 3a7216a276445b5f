"""Middlewares of the HTTP API: JSON errors, size limits, bearer-token auth (SPEC sections 7 and 10).

Every refusal is ``{"error": <short kind>, "detail": <what and why>, ...}`` with the matching status, so a
client never has to parse HTML or guess: 400 bad input (with the element ``index``), 401 token, 404 unknown
name, 405 method, 409 conflict or limit, 413 too large, 415 content type, 503
overloaded (with Retry-After). Anything unexpected is logged and becomes a 500 JSON body, never a traceback.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from control_tables.errors import ControlTableError, NoSuchAttributeError, NoSuchEntityError
from dsms.archive import ArchiveValueError
from dsms.errors import CQLError, InputError, SchemaError
from dsms.formats import UnsupportedMediaType, jsonable
from dsms.runtime import Conflict, LimitExceeded, NotFound, Overloaded, RuntimeFailure
from web.describe import describe_result
from web.keys import CONFIG, RUNTIME

log = logging.getLogger("dsms.web")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def json_error(status: int, error: str, detail: str, headers: dict[str, str] | None = None,
               **extra: Any) -> web.Response:
    """The JSON error body every refusal uses."""
    body = {"error": error, "detail": detail}
    body.update({k: v for k, v in extra.items() if v is not None})
    return web.json_response(body, status=status, headers=headers)


def _count(request: web.Request, kind: str) -> None:
    rt = request.app.get(RUNTIME)
    if rt is not None:
        rt.count_error(f"http_{kind}")


def error_response(exc: BaseException) -> web.Response:
    """Map an exception to its JSON error response."""
    if isinstance(exc, InputError):
        detail = str(exc)
        if exc.index is not None and detail.startswith(f"element {exc.index}: "):
            detail = detail[len(f"element {exc.index}: "):]
        return json_error(400, "bad input", detail, index=exc.index)
    if isinstance(exc, CQLError):
        extra: dict[str, Any] = {"line": exc.line, "column": exc.column}
        if exc.expected:
            extra["expected"] = exc.expected
        return json_error(400, "CQL error", str(exc), **extra, **_partial(exc))
    if isinstance(exc, NotFound):
        return json_error(404, "not found", str(exc), **_partial(exc))
    if isinstance(exc, Conflict):
        return json_error(409, "conflict", str(exc), **_partial(exc))
    if isinstance(exc, LimitExceeded):
        return json_error(exc.status, "limit exceeded", str(exc), **_partial(exc))
    if isinstance(exc, Overloaded):
        return json_error(503, "overloaded", str(exc), headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, SchemaError):
        return json_error(400, "schema error", str(exc), line=getattr(exc, "line", None),
                          column=getattr(exc, "column", None), **_partial(exc))
    if isinstance(exc, NoSuchEntityError):
        return json_error(404, "not found", str(exc), **_ct_extra(exc))
    if isinstance(exc, NoSuchAttributeError):       # a bad body for an entity that exists: 400, as a read-only
        return json_error(400, "refused", str(exc), **_ct_extra(exc))     # or out-of-range write is
    if isinstance(exc, ControlTableError):
        return json_error(400, "refused", str(exc), **_ct_extra(exc))
    if isinstance(exc, UnsupportedMediaType):
        return json_error(415, "unsupported media type", str(exc))
    if isinstance(exc, ArchiveValueError | ValueError):
        return json_error(400, "bad request", str(exc))
    if isinstance(exc, RuntimeFailure):
        return json_error(500, "server failure", str(exc))
    return json_error(500, "internal error", f"{type(exc).__name__}; the server log has the details")


def _partial(exc: BaseException) -> dict[str, Any]:
    """For a multi-statement request: which statement failed and what the ones before it created."""
    if getattr(exc, "statement", None) is None:
        return {}
    return {"statement": exc.statement, "done": [describe_result(r) for r in getattr(exc, "done", [])]}


def _ct_extra(exc: ControlTableError) -> dict[str, Any]:
    d = exc.to_dict()
    d.pop("error", None)
    return {k: jsonable(v) if isinstance(v, int | float | str | bool | type(None)) else repr(v) for k, v in d.items()}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        _count(request, str(e.status))
        if e.content_type == "application/json":
            return web.Response(status=e.status, body=e.body, content_type="application/json",
                                headers={k: v for k, v in e.headers.items() if k.lower() not in
                                         ("content-type", "content-length")})
        headers = {k: v for k, v in e.headers.items() if k.lower() in ("allow", "retry-after")}
        detail = e.text if e.text and not e.text.startswith(f"{e.status}:") else e.reason
        if e.status == 413:
            detail = f"request body too large: {e.text or e.reason} (limits.request_bytes)"
        return json_error(e.status, e.reason.lower(), detail, headers=headers or None)
    except (ConnectionResetError, ConnectionError) as e:
        log.info("client went away during %s %s: %s", request.method, request.path, e)
        raise
    except Exception as e:  # noqa: BLE001 - turned into a JSON error, unexpected ones logged with traceback
        resp = error_response(e)
        if resp.status >= 500:
            log.exception("error while serving %s %s", request.method, request.path)
        _count(request, str(resp.status))
        return resp


@web.middleware
async def size_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a declared Content-Length over the limit before reading a byte of the body."""
    limit = request.app[CONFIG].get("limits.request_bytes")
    if request.content_length is not None and request.content_length > limit:
        return json_error(413, "request entity too large",
                          f"request body is {request.content_length} bytes; the limit is {limit} bytes "
                          "(limits.request_bytes)")
    return await handler(request)


@web.middleware
async def catalog_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A request that changed the catalog (a statement, a drop, a knob write) is answered once the change is
    on disk: the runtime writes the catalog off the event loop, many changes per fsync, and this waits for
    it (also when the request failed part way, as the statements before the failing one stay applied)."""
    if request.method not in MUTATING:
        return await handler(request)
    try:
        return await handler(request)
    finally:
        rt = request.app.get(RUNTIME)
        fut = rt.catalog_durable() if rt is not None else None
        if fut is not None:
            await fut


@functools.lru_cache(maxsize=64)
def is_loopback(host: str) -> bool:
    """Whether the server's listening address only admits local clients (cached: asked on every request)."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Mutating requests need ``Authorization: Bearer <token>`` when a token is configured, and are refused
    outright when the server listens beyond loopback without one; with ``protect_reads`` every request does
    (the catalog, the query texts, the results and the statistics are then private too). The token is
    compared in constant time and never logged or echoed."""
    cfg = request.app[CONFIG]
    if request.method not in MUTATING and not cfg.get("protect_reads"):
        return await handler(request)
    token = cfg.token
    if token is None:
        if is_loopback(cfg.host):
            return await handler(request)
        return json_error(401, "unauthorized", f"the server listens on {cfg.host}, beyond loopback, without a "
                          "token; configure one (--token or DSMS_TOKEN) to allow changes",
                          headers={"WWW-Authenticate": 'Bearer realm="dsms"'})
    got = request.headers.get("Authorization", "")
    scheme, _, value = got.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
        return json_error(401, "unauthorized", "this request needs a valid 'Authorization: Bearer <token>' header"
                          if got else "missing 'Authorization: Bearer <token>' header",
                          headers={"WWW-Authenticate": 'Bearer realm="dsms"'})
    return await handler(request)
