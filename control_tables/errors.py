"""The errors of the control-table layer (SPEC section 8: "an invalid write changes nothing and says why").

Source: digest-004 section 2.I (STREAM's Control Table interface, P1 section 6.1). Every error is a
``ControlTableError``, a ``ValueError``, so callers that only care about "bad request" catch one class; the
subclasses let the HTTP layer pick a status code (404 for a missing entity or attribute, 400 otherwise)
without parsing messages. Each error keeps the entity id, the attribute, the value given and what is allowed
as fields, so the HTTP layer can send them as the ``detail`` of its JSON error body.
"""

from __future__ import annotations

from typing import Any

_UNSET: Any = object()


class ControlTableError(ValueError):
    """A control-table request that was refused; nothing was changed.

    >>> e = ControlTableError("op:7: no such thing", entity_id="op:7")
    >>> isinstance(e, ValueError), e.entity_id, str(e)
    (True, 'op:7', 'op:7: no such thing')
    """

    def __init__(self, message: str, *, entity_id: str | None = None, attr: str | None = None,
                 value: Any = _UNSET, allowed: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.entity_id = entity_id
        self.attr = attr
        self.value = None if value is _UNSET else value
        self.has_value = value is not _UNSET
        self.allowed = allowed

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready map, for the HTTP layer's ``{"error": ..., "detail": ...}`` body.

        >>> ControlTableError("bad", entity_id="op:1", attr="priority", value=-1, allowed="int").to_dict()
        {'error': 'bad', 'entity': 'op:1', 'attribute': 'priority', 'value': -1, 'allowed': 'int'}
        """
        out: dict[str, Any] = {"error": self.message}
        if self.entity_id is not None:
            out["entity"] = self.entity_id
        if self.attr is not None:
            out["attribute"] = self.attr
        if self.has_value:
            out["value"] = self.value
        if self.allowed is not None:
            out["allowed"] = self.allowed
        return out


class NoSuchEntityError(ControlTableError, LookupError):
    """No entity has the id asked for (HTTP 404)."""


class NoSuchAttributeError(ControlTableError, LookupError):
    """The entity has no control-table attribute of that name (HTTP 404)."""


class ReadOnlyAttributeError(ControlTableError):
    """A write to a statistic: statistics are maintained by the entity itself and are read-only."""


class InvalidValueError(ControlTableError):
    """A knob value of the wrong type, out of range, not among the choices, or refused by a custom check."""


class HookError(ControlTableError):
    """The entity's ``on_set`` hook refused a new knob value; the old value was put back."""
