"""The exceptions the engine raises (SPEC section 5): each says what was wrong and where, and none leaves the
engine in a half-applied state."""

from __future__ import annotations


class DsmsError(Exception):
    """Base of every error the engine raises on bad input; the engine keeps working after one."""


class CQLError(DsmsError):
    """A statement that does not parse or bind. ``line`` and ``column`` are 1-based; ``expected`` lists what
    the parser would have accepted at that point, when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 expected: list[str] | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.expected = list(expected or [])
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(where + message)


class SchemaError(DsmsError):
    """A name that is not in the catalog, a name registered twice, a type that does not fit, or a drop that
    something still depends on."""


class ConflictError(SchemaError):
    """A name that is already registered, or a drop refused because something still reads the object (HTTP
    409)."""


class InputError(DsmsError):
    """Input that cannot be accepted (a missing column, a wrong type, a timestamp that goes backwards). ``index``
    is the position of the first offending element in the refused batch."""

    def __init__(self, message: str, index: int | None = None) -> None:
        self.index = index
        super().__init__(message if index is None else f"element {index}: {message}")


class ResultOverflowError(DsmsError):
    """An INT result outside int64 (SPEC section 4: a SUM that overflows is an error naming the query and the
    column, never a wrapped value). ``Query.drain`` raises it; the rows concerned are left out of the result
    (dsms/operators/int_sums.py)."""
