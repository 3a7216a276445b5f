"""The CQL parser: text -> dsms.cql.ast nodes, with errors that name the line, the column and what was expected.

Source: SPEC section 4 (the dialect) and section 3 (time units: one tick is a millisecond); the STREAM CQL
examples of digest-004 section E3 and the PIPES examples of digest-002a section 3.2. The grammar is
``grammar.lark`` beside this file; this module turns lark's parse tree into frozen AST nodes and lark's
exceptions into ``CQLError``.

The lark parser is built once at import (LALR, contextual lexer, about 0.1 s). It is not cached on disk: lark's
cache is a pickle in the shared temporary directory, which is not worth trusting for a tenth of a second.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import NamedTuple

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lark import PostLex
from lark.lexer import PatternStr

from dsms.cql import ast
from dsms.errors import CQLError
from dsms.types import INT64_MAX

__all__ = ["parse", "parse_query", "parse_expr", "KEYWORDS", "SCALAR_FUNCTIONS", "AGGREGATES", "APPROX_AGGREGATES",
           "TIME_UNITS", "COLUMN_TYPES"]

# ---------------------------------------------------------------- vocabulary checked here, not in the grammar

#: Ticks (milliseconds, SPEC section 3) per time unit; singular and plural, matched case-insensitively.
TIME_UNITS: dict[str, int] = {}
for _unit, _ms in (("MILLISECOND", 1), ("SECOND", 1_000), ("MINUTE", 60_000), ("HOUR", 3_600_000),
                   ("DAY", 86_400_000)):
    TIME_UNITS[_unit] = TIME_UNITS[_unit + "S"] = _ms

#: Column types accepted in REGISTER STREAM/RELATION and the type each one stands for.
COLUMN_TYPES: dict[str, str] = {
    "INT": "INT", "INTEGER": "INT", "BIGINT": "INT",
    "FLOAT": "FLOAT", "REAL": "FLOAT", "DOUBLE": "FLOAT",
    "STRING": "STRING", "VARCHAR": "STRING", "CHAR": "STRING", "TEXT": "STRING",
    "BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMP",
}
_SIZED_TYPES = frozenset({"CHAR", "VARCHAR"})

#: Scalar functions and their number of arguments (SPEC section 4).
SCALAR_FUNCTIONS: dict[str, int] = {"LOWER": 1, "UPPER": 1, "LENGTH": 1, "ABS": 1}
#: Approximate aggregates (issue 14 item 4, docs/cql.md) and the kind of their second, constant argument.
APPROX_AGGREGATES: dict[str, str | None] = {"APPROX_COUNT_DISTINCT": None, "APPROX_QUANTILE": "fraction",
                                            "APPROX_TOP_K": "count"}
AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX", *APPROX_AGGREGATES})
MQTT_FORMATS = frozenset({"JSON", "MSGPACK"})
SHOW_KINDS = ("STREAMS", "RELATIONS", "VIEWS", "QUERIES")


# Words that may never be used as a name, even where lark's contextual lexer would read them as one. Without
# this, `SELECT FROM S` would read FROM as a column and S as its alias, and the error would come too late.
_RESERVED = frozenset({
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "UNION", "EXCEPT", "INTERSECT", "AND", "OR", "NOT", "AS",
    "IN", "BETWEEN", "LIKE", "EXISTS", "CASE", "WHEN", "THEN", "ELSE", "END", "DISTINCT", "ALL", "ANY", "SOME",
    "TRUE", "FALSE", "ISTREAM", "DSTREAM", "RSTREAM",
})


class _ReserveWords(PostLex):
    """Turns a reserved word that the contextual lexer read as an identifier back into its keyword, so that the
    parser rejects it where it stands. (A post-lexer rather than a lexer callback: lark 1.3 chains an IDENT
    callback behind its keyword check with a late-bound condition, and then never calls it.)"""

    always_accept = ()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        for token in stream:
            if token.type == "IDENT" and token.value.upper() in _RESERVED:
                token.type = token.value.upper()
            yield token


def _open_comment(token: Token) -> Token:
    raise CQLError("unterminated comment: '/*' has no closing '*/'", token.line, token.column)


_LARK = Lark.open(
    str(Path(__file__).with_name("grammar.lark")),
    parser="lalr",
    lexer="contextual",
    start=["start", "query_only", "expr_only"],
    propagate_positions=True,
    maybe_placeholders=False,
    postlex=_ReserveWords(),
    lexer_callbacks={"OPEN_COMMENT": _open_comment},
)

_TERMINALS = {t.name: t.pattern for t in _LARK.terminals}

#: Every keyword of the grammar, upper-case (used for "did you mean" suggestions).
KEYWORDS: frozenset[str] = frozenset(
    p.value.upper() for p in _TERMINALS.values() if isinstance(p, PatternStr) and p.value.isalpha()
)

# ---------------------------------------------------------------- public functions


def parse(text: str) -> list[ast.Statement]:
    """Parse one or more CQL statements separated by ``;`` (a trailing ``;`` is optional).

    This is the entry point of the engine, the HTTP API and the CLI: every input string either yields
    statements or raises ``CQLError`` with a line, a column and what was expected, never another exception.

    >>> [stmt] = parse("REGISTER STREAM S (a INT, b VARCHAR(10))")
    >>> stmt.name, [(c.name, c.type) for c in stmt.columns]
    ('S', [('a', 'INT'), ('b', 'STRING')])
    >>> [type(s).__name__ for s in parse("SELECT * FROM S [RANGE 5 SECONDS]; DROP QUERY q;")]
    ['QueryStatement', 'Drop']
    >>> parse("SELCT a FROM S")
    Traceback (most recent call last):
    ...
    dsms.errors.CQLError: line 1, column 1: unexpected identifier 'SELCT'; expected a query, CREATE, DESC, DESCRIBE, DROP, EXPLAIN, REGISTER, SHOW or ';'; did you mean SELECT?
    """
    return _run(text, "start")


def parse_query(text: str) -> ast.Query:
    """Parse a single bare query; the tests and the reference evaluator use it to skip the statement wrapper.

    >>> q = parse_query("SELECT ISTREAM(a, COUNT(*) AS n) FROM S [ROWS 10] GROUP BY a")
    >>> q.stream_op, q.from_[0].window.rows, q.items[1].alias
    ('ISTREAM', 10, 'n')
    """
    return _run(text, "query_only")


def parse_expr(text: str) -> ast.Expr:
    """Parse a single expression, as it would appear in a WHERE clause; for testing the expression compiler.

    >>> parse_expr("a + 2 * b")
    BinaryOp(op='+', left=ColumnRef(name='a', qualifier=None), right=BinaryOp(op='*', left=Literal(value=2, type='INT'), right=ColumnRef(name='b', qualifier=None)))
    """
    return _run(text, "expr_only")


def _run(text: str, start: str):
    if not isinstance(text, str):
        raise CQLError(f"CQL text must be a string, not {type(text).__name__}")
    bad = _SURROGATE.search(text)
    if bad is not None:
        # a lone surrogate (from a JSON "\ud800" escape) is not a character: persisted in the catalog it made
        # every later page that shows the text fail to encode, so it is refused before anything is registered
        raise CQLError(f"U+{ord(bad.group()):04X} is a lone surrogate, not a character; CQL text must be valid "
                       "Unicode", *_line_col(text, bad.start()))
    try:
        tree = _LARK.parse(text, start=start)
        return _ToAst().transform(tree)
    except CQLError:
        raise
    except VisitError as e:
        if isinstance(e.orig_exc, CQLError):
            raise e.orig_exc from None
        if isinstance(e.orig_exc, RecursionError):
            raise CQLError("statement is nested too deeply") from None
        raise
    except UnexpectedInput as e:
        raise _syntax_error(e, text, start) from None
    except RecursionError:
        raise CQLError("statement is nested too deeply") from None
    except LarkError as e:  # pragma: no cover - lark raises nothing else on input, but never let it escape
        raise CQLError(f"cannot parse: {e}") from None


# ---------------------------------------------------------------- syntax errors in plain words

_CLASSES = {
    "IDENT": "an identifier",
    "INT": "an integer",
    "DECIMAL": "a number",
    "STRING": "a string",
    "$END": "end of input",
}
_EXPR_START = {"IDENT", "INT", "DECIMAL", "STRING", "LPAR", "MINUS", "PLUS", "NOT", "TRUE", "FALSE", "CASE",
               "EXISTS"}
_QUERY_START = {"SELECT", "LPAR", "ISTREAM", "DSTREAM", "RSTREAM"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "EQUAL", "LESSTHAN", "MORETHAN", "AND", "OR", "NOT",
              "IN", "BETWEEN", "LIKE"} | {n for n, p in _TERMINALS.items() if p.value in ("<>", "!=", "<=", ">=")}
_WORD = re.compile(r"[^\W\d]\w*")
_TOKENS = re.compile(r"--[^\n]*|/\*[\s\S]*?(?:\*/|\Z)|'(?:[^']|'')*'?|[\u2018\u2019][^\u2018\u2019]*[\u2018\u2019]?"
                     r"|[^\W\d]\w*|\S")


def _describe(name: str) -> str:
    """A terminal name as the user would write it: a keyword, a quoted symbol, or a class of token."""
    if name in _CLASSES:
        return _CLASSES[name]
    pattern = _TERMINALS.get(name)
    if isinstance(pattern, PatternStr):
        return pattern.value.upper() if pattern.value.isalpha() else f"'{pattern.value}'"
    return name.lower()


def _describe_expected(names: set[str]) -> list[str]:
    names = set(names)
    phrases: list[str] = []
    if {"IDENT", "INT", "STRING", "LPAR"} <= names:
        phrases.append("an expression")
        names -= _EXPR_START
    if "SELECT" in names and "LPAR" in names:
        phrases.append("a query")
        names -= _QUERY_START
    if {"PLUS", "STAR", "EQUAL"} <= names:
        phrases.append("an operator")
        names -= _OPERATORS
    described = sorted({_describe(n) for n in names})
    words = [d for d in described if d[:1].isalpha() and d.isupper()]
    classes = [d for d in described if d[:1].isalpha() and not d.isupper() and d != "end of input"]
    symbols = [d for d in described if not d[:1].isalpha()]
    end = ["end of input"] if "end of input" in described else []
    return phrases + classes + words + symbols + end


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items) or "nothing"
    return ", ".join(items[:-1]) + " or " + items[-1]


def _suggest(word: str, expected: set[str]) -> str | None:
    """The keyword ``word`` is probably a misspelling of: one the parser expected, else any keyword that is
    very close (``SELEC`` read as a column inside ``IN (SELEC b FROM T)``)."""
    if len(word) < 3 or word.upper() in KEYWORDS:
        return None
    match = difflib.get_close_matches(word.upper(), sorted(expected), n=1, cutoff=0.7)
    if not match and len(word) >= 4:
        match = difflib.get_close_matches(word.upper(), sorted(KEYWORDS), n=1, cutoff=0.8)
    return match[0] if match else None


_SURROGATE = re.compile("[\ud800-\udfff]")


def mqtt_topic_problem(topic: str, *, publish: bool) -> str | None:
    """Why ``topic`` cannot work as an MQTT topic filter (FROM MQTT) or, with ``publish``, a topic name
    (PUBLISH TO MQTT), or None. MQTT 3.1.1 section 4.7: a topic is 1 to 65535 bytes of UTF-8 without NUL;
    in a filter ``#`` is a whole last level and ``+`` a whole level; a topic name holds no wildcard.

    >>> mqtt_topic_problem("sensors/+/temp", publish=False), mqtt_topic_problem("a/#/b", publish=False)
    (None, "'#' must be the last level of a topic filter, alone")
    """
    if not topic:
        return "an MQTT topic must not be empty"
    if "\0" in topic:
        return "an MQTT topic must not contain NUL"
    size = len(topic.encode("utf-8", "surrogatepass"))
    if size > 65535:
        return f"an MQTT topic is at most 65535 bytes of UTF-8, this one is {size}"
    if publish:
        if "+" in topic or "#" in topic:
            return "a topic to publish to must not contain the wildcards '+' or '#'"
        return None
    levels = topic.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            return "'#' must be the last level of a topic filter, alone"
        if "+" in level and level != "+":
            return "'+' must be a whole level of a topic filter"
    return None


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _last_token(text: str, end: int) -> re.Match | None:
    """The last token of ``text[:end]`` that is not a comment, by a rough tokenisation that is enough to find the
    word before an error (lark does not keep the tokens it has already consumed)."""
    last = None
    for m in _TOKENS.finditer(text, 0, end):
        if not m.group().startswith(("--", "/*")):
            last = m
    return last


def _previous_word(text: str, index: int) -> tuple[str, int] | None:
    """The token just before ``index`` if it is a word, with its offset."""
    last = _last_token(text, index)
    if last is not None and _WORD.fullmatch(last.group()):
        return last.group(), last.start()
    return None


def _describe_token(token: Token) -> str:
    value = token.value if len(token.value) <= 40 else token.value[:37] + "..."
    if token.type == "IDENT":
        return f"identifier {value!r}"
    if token.type in ("INT", "DECIMAL"):
        return f"number {value}"
    if token.type == "STRING":
        return f"string {value}"
    if token.value.upper() in KEYWORDS:
        return f"keyword {token.value.upper()}"
    return f"'{token.value}'"


def _syntax_error(e: UnexpectedInput, text: str, start: str) -> CQLError:
    if isinstance(e, UnexpectedCharacters):
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        if char in ("'", "\u2018", "\u2019"):
            return CQLError("unterminated string: the quote opened here is never closed", e.line, e.column,
                            ["a closing quote"])
        expected = _describe_expected(e.allowed or set())
        hint = "; strings use single quotes" if char == '"' else ""
        return CQLError(f"unexpected character {char!r}; expected {_join(expected)}{hint}", e.line, e.column,
                        expected)
    if not isinstance(e, UnexpectedToken):  # pragma: no cover - LALR raises only the two kinds above
        return CQLError(f"syntax error: {e}", getattr(e, "line", None), getattr(e, "column", None))

    token = e.token
    expected = _describe_expected(set(e.accepts or e.expected or ()))
    if token.type == "$END":
        last = _last_token(text, len(text))
        if last is None:
            what = {"start": "a statement", "query_only": "a query", "expr_only": "an expression"}[start]
            return CQLError(f"empty input: expected {what}", 1, 1, expected)
        line, column = _line_col(text, last.end())
        found = "end of input"
    else:
        line, column = token.line, token.column
        found = _describe_token(token)
    message = f"unexpected {found}; expected {_join(expected)}"

    expected_words = {d for d in expected if d.isalpha() and d.isupper()}
    if "a query" in expected:
        expected_words.add("SELECT")
    if token.type == "IDENT" and (keyword := _suggest(token.value, expected_words)):
        return CQLError(f"{message}; did you mean {keyword}?", line, column, expected)
    offset = len(text) if token.type == "$END" or token.start_pos is None else token.start_pos
    previous = _previous_word(text, offset)
    if previous and (keyword := _suggest(previous[0], expected_words)):
        pl, pc = _line_col(text, previous[1])
        message += f"; did you mean {keyword}? ({previous[0]!r} at line {pl}, column {pc} was read as a name)"
    return CQLError(message, line, column, expected)


# ---------------------------------------------------------------- parse tree -> AST


def _pos(meta) -> ast.Pos:
    return None if meta.empty else (meta.line, meta.column)


def _tpos(token: Token) -> ast.Pos:
    return (token.line, token.column)


def _err(message: str, where) -> CQLError:
    """A CQLError at a token or at a node's (line, column)."""
    if isinstance(where, Token):
        return CQLError(message, where.line, where.column)
    if isinstance(where, tuple):
        return CQLError(message, where[0], where[1])
    return CQLError(message)


def _close(word: str, choices) -> str:
    match = difflib.get_close_matches(word.upper(), sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


def like_pattern_ok(pattern: str, escape: str) -> bool:
    """Whether every escape character in ``pattern`` is followed by a character."""
    i = 0
    while i < len(pattern):
        i += 2 if pattern[i] == escape else 1
    return i == len(pattern)


def _is(token, type_: str) -> bool:
    return isinstance(token, Token) and token.type == type_


class _Clause(NamedTuple):
    """An optional part of a larger rule, tagged so that the rule can tell which parts are present."""

    kind: str
    value: object
    pos: ast.Pos = None


class _Source(NamedTuple):
    source: str | ast.Query
    stream_op: str | None


def _string_value(token: Token) -> str:
    body = token.value[1:-1]
    return body.replace("''", "'") if token.value[0] == "'" else body


def _int_value(token: Token) -> int:
    value = int(token.value)
    if value > INT64_MAX:
        raise _err(f"integer {token.value} is out of range (at most {INT64_MAX})", token)
    return value


def _positive_int(token: Token, what: str) -> int:
    if token.type != "INT" or int(token.value) <= 0:
        raise _err(f"{what} takes a positive integer, not {token.value}", token)
    return _int_value(token)


def _approx_aggregate(name: str, token, distinct: bool, values, pos) -> ast.Aggregate:
    """APPROX_COUNT_DISTINCT(x), APPROX_QUANTILE(x, q) with a constant q in [0, 1], APPROX_TOP_K(x, k) with a
    constant integer k >= 1: the second argument is a literal, so that it is part of the plan (and of what two
    queries share), not a value per row."""
    want = APPROX_AGGREGATES[name]
    if values is None or distinct:
        raise _err(f"{'*' if values is None else 'DISTINCT'} is not allowed in {name}; write {name}(x"
                   f"{'' if want is None else ', q' if want == 'fraction' else ', k'})", token)
    nargs = 1 if want is None else 2
    if len(values) != nargs:
        raise _err(f"{name} takes {nargs} argument(s), got {len(values)}", token)
    if want is None:
        return ast.Aggregate(name, values[0], pos=pos)
    lit = values[1]
    neg = isinstance(lit, ast.UnaryOp) and lit.op == "-" and isinstance(lit.operand, ast.Literal)
    if neg:
        lit = ast.Literal(-lit.operand.value, lit.operand.type, pos=lit.operand.pos)
    if want == "fraction":
        if not (isinstance(lit, ast.Literal) and lit.type in ("INT", "FLOAT") and 0 <= lit.value <= 1):
            raise _err(f"{name}'s second argument must be a constant fraction between 0 and 1 (0.5 for the "
                       "median)", token)
        return ast.Aggregate(name, values[0], pos=pos, param=float(lit.value))
    if not (isinstance(lit, ast.Literal) and lit.type == "INT" and 1 <= lit.value <= 1000):
        raise _err(f"{name}'s second argument must be a constant integer between 1 and 1000", token)
    return ast.Aggregate(name, values[0], pos=pos, param=int(lit.value))


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    """One method per grammar rule (or alias), each building the AST node of that rule."""

    # -------------------------------------------------------- statements

    def start(self, meta, children):
        return list(children)

    def query_only(self, meta, children):
        return children[0]

    def expr_only(self, meta, children):
        return children[0]

    def query_statement(self, meta, children):
        return ast.QueryStatement(children[0], pos=_pos(meta))

    def register_stream(self, meta, children):
        name, columns, *rest = children
        time = next((c for c in rest if isinstance(c, _Clause)), None)
        source = next((c for c in rest if isinstance(c, ast.MqttSource)), None)
        if time is not None and source is not None and (time.value == "ARRIVAL") == bool(source.timestamp_field):
            raise _err("TIME ARRIVAL stamps elements when they arrive, so it takes no TIMESTAMP field"
                       if time.value == "ARRIVAL" else
                       "TIME EVENT over MQTT needs TIMESTAMP field: the field of each message that holds its time",
                       time.pos)
        return ast.RegisterStream(name.value, columns, source, pos=_pos(meta),
                                  time=time.value if time is not None else None)

    def stream_time(self, meta, children):
        word = children[0].value.upper()
        if word not in ("ARRIVAL", "EVENT"):
            raise _err(f"TIME {children[0].value!r}: expected EVENT (the elements carry their time, the "
                       f"default) or ARRIVAL (the server stamps them){_close(word, ('ARRIVAL', 'EVENT'))}",
                       children[0])
        return _Clause("time", word, _tpos(children[0]))

    def register_relation(self, meta, children):
        name, columns = children
        return ast.RegisterRelation(name.value, columns, pos=_pos(meta))

    def register_query(self, meta, children):
        name, query, *rest = children
        approx = next((c for c in rest if isinstance(c, tuple)), ())
        publish = next((c for c in rest if isinstance(c, str)), None)
        return ast.RegisterQuery(name.value, query, publish, pos=_pos(meta), approximate=approx)

    def approximate(self, meta, children):
        seen = {}
        for what, value, token in children:
            if what in seen:
                raise _err(f"APPROXIMATE names {what} twice", token)
            seen[what] = value
        return tuple(seen.items())

    def reduction(self, meta, children):
        name, num = children
        what = name.value.upper()
        if what not in ("WINDOW", "SAMPLE"):
            raise _err(f"APPROXIMATE takes WINDOW and SAMPLE factors, not {name.value!r}", name)
        value = float(num.value)
        if not 0 < value <= 1:
            raise _err(f"the {what} factor must be in (0, 1] (0.5 halves the {what.lower()}), not {num.value}",
                       num)
        return (what, value, name)

    def register_view(self, meta, children):
        name, query = children
        return ast.RegisterView(name.value, query, pos=_pos(meta))

    def drop(self, meta, children):
        kind, name = children
        return ast.Drop(kind, name.value, pos=_pos(meta))

    def drop_kind(self, meta, children):
        return children[0].value.upper()

    def show(self, meta, children):
        word = children[0].value.upper()
        if word not in SHOW_KINDS:
            raise _err(f"SHOW {children[0].value!r}: expected STREAMS, RELATIONS, VIEWS or QUERIES"
                       f"{_close(word, SHOW_KINDS)}", children[0])
        return ast.Show(word, pos=_pos(meta))

    def describe(self, meta, children):
        return ast.Describe(children[0].value, pos=_pos(meta))

    def explain_query(self, meta, children):
        return ast.Explain(query=children[0], pos=_pos(meta))

    def explain_name(self, meta, children):
        return ast.Explain(name=children[0].value, pos=_pos(meta))

    def column_defs(self, meta, children):
        names: set[str] = set()
        for col in children:
            if col.name.upper() in names:
                raise _err(f"column {col.name!r} is declared twice", col.pos)
            names.add(col.name.upper())
        return tuple(children)

    def column_def(self, meta, children):
        name, type_token, *size = children
        word = type_token.value.upper()
        if word not in COLUMN_TYPES:
            raise _err(f"unknown type {type_token.value!r} for column {name.value!r}; expected one of "
                       f"{', '.join(sorted(COLUMN_TYPES))}{_close(word, COLUMN_TYPES)}", type_token)
        if size and word not in _SIZED_TYPES:
            raise _err(f"type {word} takes no length", size[0])
        if size:
            _positive_int(size[0], f"{word}(n)")
        return ast.ColumnDef(name.value, COLUMN_TYPES[word], pos=_pos(meta))

    def mqtt_source(self, meta, children):
        topic, *parts = children
        fmt, ts_field = "JSON", None
        for part in parts:
            if part.kind == "format":
                fmt = part.value
            else:
                ts_field = part.value
        problem = mqtt_topic_problem(_string_value(topic), publish=False)
        if problem is not None:
            raise _err(f"{problem}: {_string_value(topic)[:80]!r}", topic)
        return ast.MqttSource(_string_value(topic), fmt, ts_field, pos=_pos(meta))

    def mqtt_format(self, meta, children):
        word = children[0].value.upper()
        if word not in MQTT_FORMATS:
            raise _err(f"unknown format {children[0].value!r}; expected JSON or MSGPACK"
                       f"{_close(word, MQTT_FORMATS)}", children[0])
        return _Clause("format", word)

    def mqtt_timestamp(self, meta, children):
        return _Clause("timestamp", children[0].value)

    def publish(self, meta, children):
        problem = mqtt_topic_problem(_string_value(children[0]), publish=True)
        if problem is not None:
            raise _err(f"{problem}: {_string_value(children[0])[:80]!r}", children[0])
        return _string_value(children[0])

    # -------------------------------------------------------- queries

    def _set_op(self, op, meta, children):
        left, *rest = children
        right = rest[-1]
        return ast.SetOp(op, len(rest) == 2, left, right, pos=_pos(meta))

    def union(self, meta, children):
        return self._set_op("UNION", meta, children)

    def except_(self, meta, children):
        return self._set_op("EXCEPT", meta, children)

    def intersect(self, meta, children):
        return self._set_op("INTERSECT", meta, children)

    def stream_op(self, meta, children):
        return children[0].value.upper()

    def stream_op_query(self, meta, children):
        op, query = children
        return ast.StreamOp(op, query, pos=_pos(meta))

    def select(self, meta, children):
        spec, (from_, on), *clauses = children
        parts = {c.kind: c.value for c in clauses}
        where = parts.get("where")
        for cond in reversed(on):             # JOIN ... ON c: c comes before WHERE's conjuncts
            where = cond if where is None else ast.BinaryOp("AND", cond, where, pos=cond.pos)
        return ast.Select(
            items=spec["items"], from_=from_, where=where, group_by=parts.get("group_by", ()),
            having=parts.get("having"), distinct=spec["distinct"], stream_op=spec["stream_op"], pos=_pos(meta),
        )

    def select_spec(self, meta, children):
        return {"items": children[-1], "distinct": _is(children[0], "DISTINCT"), "stream_op": None}

    def stream_select(self, meta, children):
        return {"items": children[-1], "distinct": _is(children[1], "DISTINCT"), "stream_op": children[0]}

    def distinct_row(self, meta, children):
        items = tuple(ast.SelectItem(e, pos=getattr(e, "pos", None)) for e in children[1:])
        return {"items": items, "distinct": True, "stream_op": None}

    def select_items(self, meta, children):
        return tuple(children)

    def star(self, meta, children):
        return ast.SelectItem(ast.Star(pos=_pos(meta)), pos=_pos(meta))

    def qualified_star(self, meta, children):
        return ast.SelectItem(ast.Star(children[0].value, pos=_pos(meta)), pos=_pos(meta))

    def select_expr(self, meta, children):
        expr, *alias = children
        return ast.SelectItem(expr, alias[0].value if alias else None, pos=_pos(meta))

    def where(self, meta, children):
        return _Clause("where", children[0])

    def group_by(self, meta, children):
        return _Clause("group_by", tuple(children))

    def having(self, meta, children):
        return _Clause("having", children[0])

    # -------------------------------------------------------- FROM items

    def from_list(self, meta, children):
        """(FROM items, ON conditions): the items of every join, in order, as one comma join."""
        items, on = [], []
        for join_items, conds in children:
            items += join_items
            on += conds
        return tuple(items), on

    def from_join(self, meta, children):
        items, on = [children[0]], []
        for join_type, item, cond, pos in children[1:]:
            if join_type in ("INNER", None):
                if cond is None:
                    raise _err("JOIN needs ON and a condition (or write CROSS JOIN)", pos)
            elif join_type == "CROSS":
                if cond is not None:
                    raise _err("CROSS JOIN takes no ON condition; write JOIN ... ON", cond.pos or pos)
            else:
                raise _err(f"{join_type} JOIN is not supported: dsms has inner joins only (JOIN ... ON, or FROM a, "
                           "b WHERE ...)", pos)
            items.append(item)
            if cond is not None:
                on.append(cond)
        return items, on

    def join_clause(self, meta, children):
        join_type = children[0] if isinstance(children[0], str) else None
        rest = children[1:] if join_type is not None else children
        item, *cond = rest
        return join_type, item, cond[0] if cond else None, _pos(meta)

    def join_type(self, meta, children):
        return " ".join(t.value.upper() for t in children)

    def join_on(self, meta, children):
        return children[0]

    def from_item(self, meta, children):
        source, *parts = children
        alias = window = sample = None
        for part in parts:
            if isinstance(part, ast.Window):
                window = part
            elif part.kind == "sample":
                sample = part.value
            elif alias is not None:
                raise _err(f"this FROM item already has the alias {alias!r}; give it only one", part.pos)
            else:
                alias = part.value
        return ast.FromItem(source.source, alias, window, sample, source.stream_op, pos=_pos(meta))

    def named_source(self, meta, children):
        return _Source(children[0].value, None)

    def subquery_source(self, meta, children):
        return _Source(children[0], None)

    def stream_op_source(self, meta, children):
        return _Source(children[1].value, children[0])

    def stream_op_query_source(self, meta, children):
        return _Source(ast.StreamOp(children[0], children[1], pos=_pos(meta)), None)

    def alias(self, meta, children):
        return _Clause("alias", children[-1].value, _tpos(children[-1]))

    def sample(self, meta, children):
        token = children[0]
        percent = float(token.value)
        if not 0 < percent <= 100:
            raise _err(f"SAMPLE takes a percentage in (0, 100], not {token.value}", token)
        return _Clause("sample", percent)

    # -------------------------------------------------------- windows

    def window(self, meta, children):
        return replace(children[0], pos=_pos(meta))

    def window_spec(self, meta, children):
        fields: dict = {}
        for part in children:
            fields.update(part)
        if fields.get("partition_by") and fields["kind"] != "ROWS":
            raise _err(f"PARTITION BY needs a ROWS window, not {fields['kind']}", _pos(meta))
        return ast.Window(**fields)

    def partition(self, meta, children):
        return {"partition_by": tuple(children)}

    def range_size(self, meta, children):
        fields = {"kind": "RANGE", "range": children[0]}
        if len(children) > 1:
            fields["slide"] = children[1]
        return fields

    def slide(self, meta, children):
        return children[0]

    def unbounded_size(self, meta, children):
        return {"kind": "UNBOUNDED"}

    def now_size(self, meta, children):
        return {"kind": "NOW"}

    def rows_size(self, meta, children):
        return {"kind": "ROWS", "rows": _positive_int(children[0], "ROWS")}

    def window_where(self, meta, children):
        return {"where": children[0]}

    def duration(self, meta, children):
        """A number with an optional unit, in ticks (milliseconds; a bare number is ticks already)."""
        number, *unit = children
        scale = 1
        if unit:
            word = unit[0].value.upper()
            if word not in TIME_UNITS:
                raise _err(f"unknown time unit {unit[0].value!r}; expected MILLISECONDS, SECONDS, MINUTES, HOURS "
                           f"or DAYS{_close(word, TIME_UNITS)}", unit[0])
            scale = TIME_UNITS[word]
        try:
            ticks = Decimal(number.value) * scale
        except InvalidOperation:  # pragma: no cover - the grammar only lets numbers through
            raise _err(f"bad number {number.value}", number) from None
        if ticks <= 0:
            raise _err(f"a window size or slide must be positive, not {number.value}", number)
        if ticks != ticks.to_integral_value():
            raise _err(f"{number.value}{' ' + unit[0].value if unit else ''} is not a whole number of "
                       "milliseconds", number)
        if ticks > INT64_MAX:
            raise _err(f"duration {number.value} is out of range", number)
        return int(ticks)

    # -------------------------------------------------------- expressions

    def or_(self, meta, children):
        return ast.BinaryOp("OR", children[0], children[1], pos=_pos(meta))

    def and_(self, meta, children):
        return ast.BinaryOp("AND", children[0], children[1], pos=_pos(meta))

    def not_(self, meta, children):
        operand = children[-1]
        if isinstance(operand, ast.Exists) and not operand.negated:
            return ast.Exists(operand.query, negated=True, pos=_pos(meta))
        return ast.UnaryOp("NOT", operand, pos=_pos(meta))

    def comparison(self, meta, children):
        left, op, right = children
        return ast.BinaryOp(op, left, right, pos=_pos(meta))

    def comp_op(self, meta, children):
        op = children[0].value
        return "<>" if op == "!=" else op

    def quantified(self, meta, children):
        expr, op, quantifier, query = children
        return ast.Quantified(op, expr, quantifier, query, pos=_pos(meta))

    def quantifier(self, meta, children):
        word = children[0].value.upper()
        return "ANY" if word == "SOME" else word

    def in_list(self, meta, children):
        expr, *rest = children
        negated = _is(rest[0], "NOT")
        items = tuple(rest[1:] if negated else rest)
        return ast.InList(expr, items, negated, pos=_pos(meta))

    def in_subquery(self, meta, children):
        expr, *rest = children
        return ast.InSubquery(expr, rest[-1], _is(rest[0], "NOT"), pos=_pos(meta))

    def between(self, meta, children):
        expr, *rest = children
        return ast.Between(expr, rest[-2], rest[-1], _is(rest[0], "NOT"), pos=_pos(meta))

    def like(self, meta, children):
        expr, *rest = children
        negated = _is(rest[0], "NOT")
        pattern, *esc = rest[1:] if negated else rest
        if not (isinstance(pattern, ast.Literal) and pattern.type == "STRING"):
            raise _err("LIKE needs a string literal as its pattern", getattr(pattern, "pos", None) or _pos(meta))
        escape = None
        if esc:
            e = esc[0]
            if not (isinstance(e, ast.Literal) and e.type == "STRING" and len(e.value) <= 1):
                raise _err("ESCAPE needs a string literal of one character (or '' for none)",
                           getattr(e, "pos", None) or _pos(meta))
            escape = e.value or None
            if escape is not None and not like_pattern_ok(pattern.value, escape):
                raise _err(f"the LIKE pattern must not end with its escape character {escape!r}",
                           pattern.pos or _pos(meta))
        return ast.Like(expr, pattern, negated, pos=_pos(meta), escape=escape)

    def exists(self, meta, children):
        return ast.Exists(children[0], pos=_pos(meta))

    def binary(self, meta, children):
        left, op, right = children
        return ast.BinaryOp(op, left, right, pos=_pos(meta))

    def add_op(self, meta, children):
        return children[0].value

    mul_op = add_op
    concat_op = add_op

    def neg(self, meta, children):
        return ast.UnaryOp("-", children[0], pos=_pos(meta))

    def int_lit(self, meta, children):
        return ast.Literal(_int_value(children[0]), "INT", pos=_pos(meta))

    def float_lit(self, meta, children):
        value = float(children[0].value)
        if not math.isfinite(value):
            raise _err(f"number {children[0].value} is out of range", children[0])
        return ast.Literal(value, "FLOAT", pos=_pos(meta))

    def string_lit(self, meta, children):
        return ast.Literal(_string_value(children[0]), "STRING", pos=_pos(meta))

    def true_lit(self, meta, children):
        return ast.Literal(True, "BOOLEAN", pos=_pos(meta))

    def false_lit(self, meta, children):
        return ast.Literal(False, "BOOLEAN", pos=_pos(meta))

    def column_ref(self, meta, children):
        if len(children) == 2:
            return ast.ColumnRef(children[1].value, children[0].value, pos=_pos(meta))
        return ast.ColumnRef(children[0].value, pos=_pos(meta))

    def call(self, meta, children):
        name_token, *args = children
        name = name_token.value.upper()
        distinct, values = args[0] if args else (False, ())
        if name in APPROX_AGGREGATES:
            return _approx_aggregate(name, name_token, distinct, values, _pos(meta))
        if name in AGGREGATES:
            if values is None:
                if name != "COUNT":
                    raise _err(f"{name}(*) is not allowed; only COUNT takes *", name_token)
                return ast.Aggregate("COUNT", None, pos=_pos(meta))
            if len(values) != 1:
                raise _err(f"{name} takes one argument, got {len(values)}", name_token)
            return ast.Aggregate(name, values[0], distinct, pos=_pos(meta))
        if name not in SCALAR_FUNCTIONS:
            known = ", ".join(sorted(SCALAR_FUNCTIONS | dict.fromkeys(AGGREGATES)))
            raise _err(f"unknown function {name_token.value!r}; known functions are {known}"
                       f"{_close(name, SCALAR_FUNCTIONS.keys() | AGGREGATES)}", name_token)
        if values is None or distinct:
            raise _err(f"{'*' if values is None else 'DISTINCT'} is only allowed in aggregates, not in {name}",
                       name_token)
        if len(values) != SCALAR_FUNCTIONS[name]:
            raise _err(f"{name} takes {SCALAR_FUNCTIONS[name]} argument(s), got {len(values)}", name_token)
        return ast.FuncCall(name, tuple(values), pos=_pos(meta))

    def star_arg(self, meta, children):
        return (False, None)

    def expr_args(self, meta, children):
        distinct = _is(children[0], "DISTINCT")
        return (distinct, tuple(children[1:] if distinct else children))

    def case(self, meta, children):
        operand = None
        whens, else_ = [], None
        for child in children:
            if isinstance(child, _Clause) and child.kind == "when":
                whens.append(child.value)
            elif isinstance(child, _Clause) and child.kind == "else":
                else_ = child.value
            else:
                operand = child
        return ast.Case(operand, tuple(whens), else_, pos=_pos(meta))

    def when(self, meta, children):
        return _Clause("when", (children[0], children[1]))

    def else_(self, meta, children):
        return _Clause("else", children[0])

    def scalar_subquery(self, meta, children):
        return ast.ScalarSubquery(children[0], pos=_pos(meta))
