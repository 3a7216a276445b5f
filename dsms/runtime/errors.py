"""The errors the runtime raises beyond the engine's own (``dsms.errors``), one per HTTP status the web layer
maps them to (``web/middlewares.py``): each says what was refused and why, and none leaves anything
half-applied."""

from __future__ import annotations

from dsms.errors import DsmsError


class Overloaded(DsmsError):
    """Input refused because the engine's input backlog is over its limit (HTTP 503 + Retry-After)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LimitExceeded(DsmsError):
    """A configured limit (statement length, number of queries) would be passed (HTTP 413 or 409)."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


class NotFound(DsmsError):
    """No stream, relation, query or entity of that name (HTTP 404)."""


class Conflict(DsmsError):
    """A change refused because of the catalog's state, e.g. dropping what another query reads (HTTP 409)."""


class RuntimeFailure(DsmsError):
    """Something failed that is not the client's fault (archive I/O); HTTP 500 with the reason."""
