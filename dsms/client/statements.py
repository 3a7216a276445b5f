"""Where CQL statements end: a ``;`` outside strings and comments (docs/cql.md, "Lexical rules"). The shell
uses it to know when Enter runs the input and when it starts another line, and both the shell and ``dsms run``
to send statements one at a time, each with its place in the input for error messages."""

from __future__ import annotations

import re
from typing import NamedTuple

_QUERY_WORDS = ("SELECT", "ISTREAM", "DSTREAM", "RSTREAM")
_WORD = re.compile(r"[^\W\d]\w*")


class Statement(NamedTuple):
    """One statement's text (without its ``;``) and the (line, column), 1-based, where it starts."""

    text: str
    line: int
    column: int


def _scan(text: str) -> tuple[list[tuple[int, int]], str]:
    """(spans of the statements' text, the state at the end: "" or the unclosed "'", "‘", "/*")."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return spans + ([(start, n)] if start is not None else []), "/*"
            i = j + 2
            continue
        if c == ";":
            if start is not None:
                spans.append((start, i))
            start = None
            i += 1
            continue
        if not c.isspace() and start is None:
            start = i
        if c == "'":
            j = i + 1
            while True:
                j = text.find("'", j)
                if j < 0:
                    return spans + [(start, n)], "'"
                if text.startswith("''", j):
                    j += 2
                    continue
                break
            i = j + 1
            continue
        if c in "\u2018\u2019":
            m = re.compile(r"[\u2018\u2019]").search(text, i + 1)
            if m is None:
                return spans + [(start, n)], "\u2018"
            i = m.end()
            continue
        i += 1
    if start is not None:
        spans.append((start, n))
    return spans, ""


def split_statements(text: str) -> list[Statement]:
    """The statements of ``text`` in order; blank ones (only spaces and comments) are left out. A ``;`` in a
    string or a comment ends nothing.

    >>> [(s.text, s.line, s.column) for s in split_statements("SHOW STREAMS;\\n  SELECT ';' FROM S -- x;\\n;")]
    [('SHOW STREAMS', 1, 1), ("SELECT ';' FROM S -- x;", 2, 3)]
    """
    out = []
    for a, b in _scan(text)[0]:
        piece = text[a:b].rstrip()
        if not _blank(piece):
            line = text.count("\n", 0, a) + 1
            out.append(Statement(piece, line, a - (text.rfind("\n", 0, a) + 1) + 1))
    return out


def _blank(piece: str) -> bool:
    return not re.sub(r"--[^\n]*|/\*.*?\*/|\s+", "", piece, flags=re.S)


def is_complete(text: str) -> bool:
    """Whether Enter should run ``text``: it is blank, a backslash command, or its last statement ends with
    ``;`` outside any string or comment.

    >>> is_complete("SELECT a"), is_complete("SELECT a;"), is_complete("SELECT ';"), is_complete("\\\\help")
    (False, True, False, True)
    """
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    spans, state = _scan(text)
    if state:
        return False
    if not spans:
        return True
    return text[spans[-1][1]:spans[-1][1] + 1] == ";"


def is_bare_query(text: str) -> bool:
    """Whether the statement is a query without REGISTER (``SELECT ...``, ``ISTREAM(...)``, ``(SELECT ...)``).

    >>> is_bare_query("  (SELECT a FROM S)"), is_bare_query("REGISTER QUERY q AS SELECT a FROM S")
    (True, False)
    """
    body = re.sub(r"--[^\n]*|/\*.*?\*/", " ", text, flags=re.S).lstrip(" \t\r\n(")
    m = _WORD.match(body)
    return m is not None and m.group().upper() in _QUERY_WORDS
