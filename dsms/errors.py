"""The exceptions the engine raises (SPEC section 5): each says what was wrong and where, and none leaves the
engine in a half-applied state."""

from __future__ import annotations

import re

_WHERE = re.compile(r"line (\d+), column (\d+): ")


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
    something still depends on.

    ``line`` and ``column`` (1-based, or None) say where in the statement, as for ``CQLError``. The binder and
    the expression compiler write the place as the message's ``line L, column C:`` prefix, and it is read back
    from there, so that every one of their many raises keeps reading as one sentence."""

    def __init__(self, message: str = "", line: int | None = None, column: int | None = None) -> None:
        m = _WHERE.match(message) if line is None else None
        if m is not None:
            line, column, message = int(m.group(1)), int(m.group(2)), message[m.end():]
        self.message = message
        self.line = line
        self.column = column
        super().__init__((f"line {line}, column {column}: " if line is not None else "") + message)


class ConflictError(SchemaError):
    """A name that is already registered, or a drop refused because something still reads the object (HTTP
    409)."""


class InputError(DsmsError):
    """Input that cannot be accepted (a missing column, a wrong type, a timestamp that goes backwards). ``index``
    is the position of the first offending element in the refused batch."""

    def __init__(self, message: str, index: int | None = None) -> None:
        self.index = index
        super().__init__(message if index is None else f"element {index}: {message}")


def relocate(exc: CQLError | SchemaError, start: tuple[int, int] | None) -> None:
    """Make ``exc``'s position count from the start of a multi-statement body rather than from the start of
    its statement, which begins at ``start`` (line, column) of the body. Errors without a position, and other
    exceptions, are left alone.

    >>> e = SchemaError("line 1, column 8: unknown column 'x'")
    >>> relocate(e, (3, 5)); (e.line, e.column, str(e))
    (3, 12, "line 3, column 12: unknown column 'x'")
    """
    line = getattr(exc, "line", None)
    if start is None or line is None or not isinstance(exc, CQLError | SchemaError):
        return
    column = exc.column or 1
    exc.line, exc.column = line + start[0] - 1, column + start[1] - 1 if line == 1 else column
    exc.args = (f"line {exc.line}, column {exc.column}: {exc.message}",)


class ResultOverflowError(DsmsError):
    """An INT result outside int64 (SPEC section 4: a SUM that overflows is an error naming the query and the
    column, never a wrapped value). ``Query.drain`` raises it; the rows concerned are left out of the result
    (dsms/operators/int_sums.py)."""
