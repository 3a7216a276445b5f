"""Tests of dsms/cql/parser.py: one test per construct against a hand-built AST, the example queries of the
digests (STREAM Q1-Q3, digest-004 E3; PIPES, digest-002a section 3.2), durations, error positions and messages,
and a property: any text either parses or raises CQLError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsms.cql.ast import (
    Aggregate,
    Between,
    BinaryOp,
    Case,
    ColumnDef,
    ColumnRef,
    Drop,
    Exists,
    FromItem,
    FuncCall,
    InList,
    InSubquery,
    Like,
    Literal,
    MqttSource,
    Quantified,
    QueryStatement,
    RegisterQuery,
    RegisterRelation,
    RegisterStream,
    RegisterView,
    ScalarSubquery,
    Select,
    SelectItem,
    SetOp,
    Star,
    StreamOp,
    UnaryOp,
    Window,
)
from dsms.cql.parser import parse, parse_expr, parse_query
from dsms.errors import CQLError

# ---------------------------------------------------------------- builders for expected trees


def c(name: str, qualifier: str | None = None) -> ColumnRef:
    return ColumnRef(name, qualifier)


def i(value: int) -> Literal:
    return Literal(value, "INT")


def f(value: float) -> Literal:
    return Literal(value, "FLOAT")


def s(value: str) -> Literal:
    return Literal(value, "STRING")


def b(op: str, left, right) -> BinaryOp:
    return BinaryOp(op, left, right)


def item(expr, alias: str | None = None) -> SelectItem:
    return SelectItem(expr, alias)


def src(source, alias=None, window=None, sample=None, stream_op=None) -> FromItem:
    return FromItem(source, alias, window, sample, stream_op)


def sel(items, from_, **kw) -> Select:
    items = tuple(x if isinstance(x, SelectItem) else SelectItem(x) for x in items)
    from_ = tuple(x if isinstance(x, FromItem) else FromItem(x) for x in from_)
    return Select(items, from_, **kw)


COUNT_STAR = Aggregate("COUNT", None)
SELECT_A_FROM_S = sel([c("a")], ["S"])


def error_of(text: str) -> CQLError:
    with pytest.raises(CQLError) as info:
        parse(text)
    return info.value


# ---------------------------------------------------------------- statements


def test_register_stream_normalises_types():
    stmt = parse("register stream Bid (item_id INTEGER, price DOUBLE, bidder VARCHAR(20), ok BOOL, "
                 "n BIGINT, r REAL, t TEXT, ch CHAR(1), at TIMESTAMP, x float, y String, z boolean)")
    cols = (("item_id", "INT"), ("price", "FLOAT"), ("bidder", "STRING"), ("ok", "BOOLEAN"), ("n", "INT"),
            ("r", "FLOAT"), ("t", "STRING"), ("ch", "STRING"), ("at", "TIMESTAMP"), ("x", "FLOAT"),
            ("y", "STRING"), ("z", "BOOLEAN"))
    assert stmt == [RegisterStream("Bid", tuple(ColumnDef(n, t) for n, t in cols))]


def test_register_stream_from_mqtt():
    [stmt] = parse("REGISTER STREAM Temp (sensor STRING, celsius FLOAT) "
                   "FROM MQTT 'sensors/+/temp' FORMAT JSON TIMESTAMP ts")
    assert stmt == RegisterStream(
        "Temp", (ColumnDef("sensor", "STRING"), ColumnDef("celsius", "FLOAT")),
        MqttSource("sensors/+/temp", "JSON", "ts"),
    )
    [stmt] = parse("REGISTER STREAM T (a INT) FROM MQTT 'x' FORMAT msgpack")
    assert stmt.source == MqttSource("x", "MSGPACK", None)
    [stmt] = parse("REGISTER STREAM T (a INT) FROM MQTT 'x'")
    assert stmt.source == MqttSource("x", "JSON", None)


def test_create_stream_is_register_stream():
    # PIPES Example 7.1 without its SOURCE/ORDERED BY clause; `timestamp` is a column name here.
    [stmt] = parse("CREATE STREAM OpenAuction(itemID INT, sellerID INT,\n"
                   "                          start_price REAL, timestamp TIMESTAMP)")
    assert stmt == RegisterStream("OpenAuction", (
        ColumnDef("itemID", "INT"), ColumnDef("sellerID", "INT"), ColumnDef("start_price", "FLOAT"),
        ColumnDef("timestamp", "TIMESTAMP"),
    ))


def test_register_relation():
    assert parse("REGISTER RELATION Item (id INT, category STRING)") == [
        RegisterRelation("Item", (ColumnDef("id", "INT"), ColumnDef("category", "STRING")))
    ]


def test_register_query_with_publish():
    assert parse("REGISTER QUERY q AS SELECT a FROM S PUBLISH TO MQTT 'out/q'") == [
        RegisterQuery("q", SELECT_A_FROM_S, "out/q")
    ]


def test_create_stream_as_query_is_register_query():
    assert parse("CREATE STREAM q AS SELECT a FROM S") == [RegisterQuery("q", SELECT_A_FROM_S)]


def test_register_view():
    assert parse("REGISTER VIEW recent AS SELECT * FROM Bid [ROWS 100]") == [
        RegisterView("recent", sel([Star()], [src("Bid", window=Window("ROWS", rows=100))]))
    ]


@pytest.mark.parametrize("kind", ["QUERY", "STREAM", "RELATION", "VIEW"])
def test_drop(kind):
    assert parse(f"drop {kind.lower()} Foo") == [Drop(kind, "Foo")]


def test_bare_query_and_statement_list():
    stmts = parse(";SELECT a FROM S;\n  DROP QUERY hot;  DROP STREAM Bid;;")
    assert stmts == [QueryStatement(SELECT_A_FROM_S), Drop("QUERY", "hot"), Drop("STREAM", "Bid")]


def test_spec_section_4_example_script():
    script = """
    REGISTER STREAM Bid (item_id INT, price FLOAT, bidder STRING);
    REGISTER RELATION Item (id INT, category STRING);
    REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' FORMAT JSON TIMESTAMP ts;
    REGISTER QUERY hot AS
      SELECT ISTREAM(item_id, COUNT(*) AS n) FROM Bid [RANGE 1 HOUR SLIDE 1 MINUTE] GROUP BY item_id
      HAVING COUNT(*) > 10;
    REGISTER VIEW recent AS SELECT * FROM Bid [ROWS 100];     -- a named relation other queries can use
    DROP QUERY hot;  DROP STREAM Bid;                         -- refused while something depends on it
    """
    stmts = parse(script)
    assert [type(x).__name__ for x in stmts] == [
        "RegisterStream", "RegisterRelation", "RegisterStream", "RegisterQuery", "RegisterView", "Drop", "Drop",
    ]
    assert stmts[3] == RegisterQuery("hot", sel(
        [item(c("item_id")), item(COUNT_STAR, "n")],
        [src("Bid", window=Window("RANGE", range=3_600_000, slide=60_000))],
        group_by=(c("item_id"),), having=b(">", COUNT_STAR, i(10)), stream_op="ISTREAM",
    ))


# ---------------------------------------------------------------- SELECT


def test_select_star_and_qualified_star():
    assert parse_query("SELECT *, S.* FROM S") == sel([Star(), Star("S")], ["S"])


def test_select_aliases_with_and_without_as():
    assert parse_query("SELECT a AS x, b y FROM S") == sel([item(c("a"), "x"), item(c("b"), "y")], ["S"])


def test_select_distinct():
    assert parse_query("SELECT DISTINCT a, b FROM S") == sel([c("a"), c("b")], ["S"], distinct=True)


def test_select_distinct_pipes_row_form():
    assert parse_query("SELECT DISTINCT(P.id, P.name) FROM P") == sel(
        [c("id", "P"), c("name", "P")], ["P"], distinct=True
    )
    # a single parenthesised expression is just an expression
    assert parse_query("SELECT DISTINCT (a) FROM S") == sel([c("a")], ["S"], distinct=True)


def test_where_group_by_having():
    assert parse_query("SELECT a, SUM(b) FROM S WHERE b > 0 GROUP BY a, c HAVING SUM(b) >= 2") == sel(
        [c("a"), Aggregate("SUM", c("b"))], ["S"],
        where=b(">", c("b"), i(0)), group_by=(c("a"), c("c")), having=b(">=", Aggregate("SUM", c("b")), i(2)),
    )


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_stream_op_wrapping_the_select_list(op):
    assert parse_query(f"SELECT {op.lower()}(a, COUNT(*) AS n) FROM S GROUP BY a") == sel(
        [item(c("a")), item(COUNT_STAR, "n")], ["S"], group_by=(c("a"),), stream_op=op
    )


def test_stream_op_with_distinct_inside():
    assert parse_query("SELECT ISTREAM(DISTINCT a) FROM S") == sel([c("a")], ["S"], distinct=True,
                                                                  stream_op="ISTREAM")


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_stream_op_around_a_whole_query(op):
    assert parse_query(f"{op}(SELECT a FROM S)") == StreamOp(op, SELECT_A_FROM_S)
    assert parse_query(f"{op}((SELECT a FROM S) UNION (SELECT a FROM T))") == StreamOp(
        op, SetOp("UNION", False, SELECT_A_FROM_S, sel([c("a")], ["T"]))
    )


# ---------------------------------------------------------------- set operations


@pytest.mark.parametrize("op", ["UNION", "EXCEPT", "INTERSECT"])
def test_set_operations(op):
    left, right = SELECT_A_FROM_S, sel([c("a")], ["T"])
    assert parse_query(f"SELECT a FROM S {op} SELECT a FROM T") == SetOp(op, False, left, right)
    assert parse_query(f"SELECT a FROM S {op} ALL SELECT a FROM T") == SetOp(op, True, left, right)


def test_set_operations_are_left_associative_and_intersect_binds_tighter():
    a, bb, cc = (sel([c("x")], [n]) for n in ("A", "B", "C"))
    assert parse_query("SELECT x FROM A UNION SELECT x FROM B EXCEPT SELECT x FROM C") == SetOp(
        "EXCEPT", False, SetOp("UNION", False, a, bb), cc
    )
    assert parse_query("SELECT x FROM A UNION SELECT x FROM B INTERSECT SELECT x FROM C") == SetOp(
        "UNION", False, a, SetOp("INTERSECT", False, bb, cc)
    )
    assert parse_query("(SELECT x FROM A UNION SELECT x FROM B) INTERSECT SELECT x FROM C") == SetOp(
        "INTERSECT", False, SetOp("UNION", False, a, bb), cc
    )


def test_parenthesised_query():
    assert parse_query("((SELECT a FROM S))") == SELECT_A_FROM_S


# ---------------------------------------------------------------- FROM items and windows


def test_several_from_items_with_aliases():
    assert parse_query("SELECT a FROM S x, T AS y, U") == sel([c("a")], [src("S", "x"), src("T", "y"), "U"])


def test_alias_before_or_after_the_window():
    w = Window("RANGE", range=3_600_000)
    assert parse_query("SELECT a FROM Bid [RANGE 60 MINUTES] B1").from_ == (src("Bid", "B1", w),)
    assert parse_query("SELECT a FROM Bid B1 [RANGE 60 MINUTES]").from_ == (src("Bid", "B1", w),)
    assert parse_query("SELECT a FROM Bid AS B1 WINDOW(RANGE 60 MINUTES)").from_ == (src("Bid", "B1", w),)
    assert parse_query("SELECT a FROM Bid WINDOW(RANGE 60 MINUTES) AS B1").from_ == (src("Bid", "B1", w),)


@pytest.mark.parametrize("text, window", [
    ("[RANGE 5 SECONDS]", Window("RANGE", range=5000)),
    ("[Range 1 Day Preceding]", Window("RANGE", range=86_400_000)),
    ("[RANGE 10]", Window("RANGE", range=10)),
    ("[RANGE 10 MINUTES SLIDE 1 MINUTE]", Window("RANGE", range=600_000, slide=60_000)),
    ("[RANGE 10 PRECEDING SLIDE 5]", Window("RANGE", range=10, slide=5)),
    ("[ROWS 3]", Window("ROWS", rows=3)),
    ("[Rows 10 Preceding]", Window("ROWS", rows=10)),
    ("[PARTITION BY a, S.b ROWS 2]", Window("ROWS", rows=2, partition_by=(c("a"), c("b", "S")))),
    ("[NOW]", Window("NOW")),
    ("[RANGE UNBOUNDED]", Window("UNBOUNDED")),
    ("[Range Unbounded Preceding]", Window("UNBOUNDED")),
    ("[UNBOUNDED]", Window("UNBOUNDED")),
    ("[ROWS UNBOUNDED]", Window("UNBOUNDED")),
    ("[ROWS 5 WHERE a > 1]", Window("ROWS", rows=5, where=b(">", c("a"), i(1)))),
    ("WINDOW(RANGE 2 DAYS)", Window("RANGE", range=172_800_000)),
    ("WINDOW(RANGE 10 MINUTES SLIDE 10 MINUTES)", Window("RANGE", range=600_000, slide=600_000)),
    ("WINDOW(PARTITION BY sellerID ROWS 10)", Window("ROWS", rows=10, partition_by=(c("sellerID"),))),
    ("Window(Now)", Window("NOW")),
])
def test_windows(text, window):
    assert parse_query(f"SELECT a FROM S {text}").from_ == (src("S", window=window),)


@pytest.mark.parametrize("unit, ms", [
    ("MILLISECOND", 1), ("milliseconds", 1), ("Second", 1000), ("SECONDS", 1000), ("minute", 60_000),
    ("Minutes", 60_000), ("HOUR", 3_600_000), ("hours", 3_600_000), ("DAY", 86_400_000), ("days", 86_400_000),
])
def test_duration_units(unit, ms):
    assert parse_query(f"SELECT a FROM S [RANGE 3 {unit} SLIDE 1 {unit}]").from_[0].window == Window(
        "RANGE", range=3 * ms, slide=ms
    )


def test_fractional_duration_that_is_whole_milliseconds():
    assert parse_query("SELECT a FROM S [RANGE 1.5 SECONDS]").from_[0].window.range == 1500
    assert parse_query("SELECT a FROM S [RANGE 0.1 SECONDS]").from_[0].window.range == 100


def test_sample_with_and_without_window():
    assert parse_query("SELECT a FROM S Sample(2)").from_ == (src("S", sample=2.0),)
    assert parse_query("SELECT a FROM S [ROWS 5] SAMPLE(12.5) x").from_ == (
        src("S", "x", Window("ROWS", rows=5), 12.5),
    )
    assert parse_query("SELECT a FROM S x SAMPLE(50)").from_ == (src("S", "x", sample=50.0),)


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_stream_op_on_a_from_item(op):
    assert parse_query(f"SELECT P.id FROM {op}(Person) P").from_ == (src("Person", "P", stream_op=op),)
    assert parse_query(f"SELECT a FROM {op}(Person) [RANGE 5] P").from_ == (
        src("Person", "P", Window("RANGE", range=5), stream_op=op),
    )


def test_stream_op_around_a_subquery_in_from():
    assert parse_query("SELECT a FROM ISTREAM(SELECT a FROM S) X").from_ == (
        src(StreamOp("ISTREAM", SELECT_A_FROM_S), "X"),
    )


def test_subquery_in_from_with_alias_window_and_sample():
    assert parse_query("SELECT T.a FROM (SELECT a FROM S) T [RANGE 5] SAMPLE(10)").from_ == (
        src(SELECT_A_FROM_S, "T", Window("RANGE", range=5), 10.0),
    )
    assert parse_query("SELECT a FROM (SELECT a FROM S)").from_ == (src(SELECT_A_FROM_S),)


# ---------------------------------------------------------------- expressions


def test_literals():
    assert parse_expr("42") == i(42)
    assert parse_expr("4.5") == f(4.5)
    assert parse_expr("1e3") == f(1000.0)
    assert parse_expr(".5") == f(0.5)
    assert parse_expr("'it''s'") == s("it's")
    assert parse_expr("''") == s("")
    assert parse_expr("TRUE") == Literal(True, "BOOLEAN")
    assert parse_expr("false") == Literal(False, "BOOLEAN")


def test_typographic_quotes_delimit_strings():
    assert parse_expr("\u2018stanford.edu\u2019") == s("stanford.edu")
    assert parse_expr("\u2019commerce\u2019") == s("commerce")


def test_column_references_keep_their_spelling():
    assert parse_expr("Bid_Price") == c("Bid_Price")
    assert parse_expr("S.domain") == c("domain", "S")


def test_arithmetic_precedence_and_associativity():
    assert parse_expr("a + b * c - d / e % 2") == b(
        "-", b("+", c("a"), b("*", c("b"), c("c"))), b("%", b("/", c("d"), c("e")), i(2))
    )
    assert parse_expr("(a + b) * c") == b("*", b("+", c("a"), c("b")), c("c"))


def test_unary_minus_and_plus():
    assert parse_expr("-a * 2") == b("*", UnaryOp("-", c("a")), i(2))
    assert parse_expr("+a") == c("a")
    assert parse_expr("- -5") == UnaryOp("-", UnaryOp("-", i(5)))


@pytest.mark.parametrize("op, norm", [("=", "="), ("<>", "<>"), ("!=", "<>"), ("<", "<"), ("<=", "<="),
                                      (">", ">"), (">=", ">=")])
def test_comparisons(op, norm):
    assert parse_expr(f"a {op} b + 1") == b(norm, c("a"), b("+", c("b"), i(1)))


def test_boolean_precedence():
    assert parse_expr("a = 1 OR b = 2 AND NOT c = 3") == b(
        "OR", b("=", c("a"), i(1)), b("AND", b("=", c("b"), i(2)), UnaryOp("NOT", b("=", c("c"), i(3))))
    )
    assert parse_expr("NOT a AND b") == b("AND", UnaryOp("NOT", c("a")), c("b"))


def test_in_list():
    assert parse_expr("a IN (1, 2, 3)") == InList(c("a"), (i(1), i(2), i(3)))
    assert parse_expr("a NOT IN ('x')") == InList(c("a"), (s("x"),), negated=True)
    assert parse_expr("NOT a IN (1)") == UnaryOp("NOT", InList(c("a"), (i(1),)))


def test_in_subquery():
    assert parse_expr("a IN (SELECT a FROM S)") == InSubquery(c("a"), SELECT_A_FROM_S)
    assert parse_expr("a NOT IN (SELECT a FROM S)") == InSubquery(c("a"), SELECT_A_FROM_S, negated=True)
    assert parse_expr("a IN ((SELECT a FROM S))") == InSubquery(c("a"), SELECT_A_FROM_S)


def test_between():
    assert parse_expr("a BETWEEN 1 AND 2 + 3 AND b") == b(
        "AND", Between(c("a"), i(1), b("+", i(2), i(3))), c("b")
    )
    assert parse_expr("a NOT BETWEEN b AND c") == Between(c("a"), c("b"), c("c"), negated=True)


def test_like():
    assert parse_expr("u LIKE 'http://%'") == Like(c("u"), s("http://%"))
    assert parse_expr("u NOT LIKE '_x'") == Like(c("u"), s("_x"), negated=True)
    assert parse_expr("u LIKE '50!%' ESCAPE '!'") == Like(c("u"), s("50!%"), escape="!")
    assert parse_expr("u NOT LIKE '5%' ESCAPE ''") == Like(c("u"), s("5%"), negated=True)
    with pytest.raises(CQLError, match="ESCAPE needs a string literal of one character"):
        parse_expr("u LIKE 'a' ESCAPE '!!'")
    with pytest.raises(CQLError, match="must not end with its escape character"):
        parse_expr("u LIKE 'a!' ESCAPE '!'")


def test_exists():
    assert parse_expr("EXISTS (SELECT a FROM S)") == Exists(SELECT_A_FROM_S)
    assert parse_expr("NOT EXISTS (SELECT a FROM S)") == Exists(SELECT_A_FROM_S, negated=True)


@pytest.mark.parametrize("word, quantifier", [("ALL", "ALL"), ("any", "ANY"), ("SOME", "ANY")])
def test_quantified_comparison(word, quantifier):
    assert parse_expr(f"n >= {word} (SELECT a FROM S)") == Quantified(">=", c("n"), quantifier, SELECT_A_FROM_S)


def test_scalar_subquery():
    assert parse_expr("p = (SELECT MAX(p) FROM S)") == b(
        "=", c("p"), ScalarSubquery(sel([Aggregate("MAX", c("p"))], ["S"]))
    )
    assert parse_expr("((SELECT a FROM S)) + 1") == b("+", ScalarSubquery(SELECT_A_FROM_S), i(1))


@pytest.mark.parametrize("name", ["LOWER", "upper", "Length", "abs"])
def test_scalar_functions(name):
    assert parse_expr(f"{name}(x)") == FuncCall(name.upper(), (c("x"),))


def test_aggregates():
    assert parse_expr("count(*)") == COUNT_STAR
    assert parse_expr("COUNT(x)") == Aggregate("COUNT", c("x"))
    assert parse_expr("COUNT(DISTINCT x)") == Aggregate("COUNT", c("x"), distinct=True)
    assert parse_expr("sum(DISTINCT x)") == Aggregate("SUM", c("x"), distinct=True)
    assert parse_expr("Avg(x + 1)") == Aggregate("AVG", b("+", c("x"), i(1)))
    assert parse_expr("MIN(x) + MAX(y)") == b("+", Aggregate("MIN", c("x")), Aggregate("MAX", c("y")))


def test_case():
    assert parse_expr("CASE WHEN a > 1 THEN 'big' WHEN a > 0 THEN 'small' ELSE 'none' END") == Case(
        None, ((b(">", c("a"), i(1)), s("big")), (b(">", c("a"), i(0)), s("small"))), s("none")
    )
    assert parse_expr("case a when 1 then 'one' end") == Case(c("a"), ((i(1), s("one")),))


def test_comments_are_ignored():
    text = "SELECT a -- the column\nFROM /* a stream\n spanning lines */ S -- trailing"
    assert parse_query(text) == SELECT_A_FROM_S


def test_keywords_are_case_insensitive_and_unreserved_names_are_allowed():
    assert parse_query("sElEcT timestamp, type, count FROM s where range > 1") == sel(
        [c("timestamp"), c("type"), c("count")], ["s"], where=b(">", c("range"), i(1))
    )


# ---------------------------------------------------------------- positions


def test_positions_are_those_of_the_first_token():
    text = "SELECT a,\n  COUNT(*) AS n\nFROM S [RANGE 5]\nWHERE NOT a = 1"
    q = parse_query(text)
    assert q.pos == (1, 1)
    assert q.items[0].pos == (1, 8) and q.items[0].expr.pos == (1, 8)
    assert q.items[1].pos == (2, 3) and q.items[1].expr.pos == (2, 3)
    assert q.from_[0].pos == (3, 6)
    assert q.from_[0].window.pos == (3, 8)
    assert q.where.pos == (4, 7) and q.where.operand.pos == (4, 11) and q.where.operand.right.pos == (4, 15)
    [stmt1, stmt2] = parse("DROP VIEW v;\n  REGISTER STREAM S (a INT)")
    assert stmt1.pos == (1, 1) and stmt2.pos == (2, 3) and stmt2.columns[0].pos == (2, 22)


# ---------------------------------------------------------------- the digests' example queries

STREAM_Q1 = """Select Count(*)
From Requests S [Range 1 Day Preceding]
Where S.domain = \u2018stanford.edu\u2019"""

STREAM_Q2 = """Select Count(*)
From Requests S
[Partition By S.client_id
Rows 10 Preceding
Where S.domain = \u2018stanford.edu\u2019]
Where S.URL Like \u2018http://cs.stanford.edu/%\u2019"""

STREAM_Q3 = """Select T.URL
From
(Select client_id, URL
From Requests S, Domains R
Where S.domain = R.domain
And R.type = \u2019commerce\u2019) T Sample(10)
Where T.client_id Between 1 And 1000"""


def test_stream_q1():
    assert parse_query(STREAM_Q1) == sel(
        [COUNT_STAR], [src("Requests", "S", Window("RANGE", range=86_400_000))],
        where=b("=", c("domain", "S"), s("stanford.edu")),
    )


def test_stream_q2_window_where_inside_the_brackets():
    window = Window("ROWS", rows=10, partition_by=(c("client_id", "S"),),
                    where=b("=", c("domain", "S"), s("stanford.edu")))
    assert parse_query(STREAM_Q2) == sel(
        [COUNT_STAR], [src("Requests", "S", window)], where=Like(c("URL", "S"), s("http://cs.stanford.edu/%"))
    )


def test_stream_q3_sampled_subquery():
    inner = sel(
        [c("client_id"), c("URL")], [src("Requests", "S"), src("Domains", "R")],
        where=b("AND", b("=", c("domain", "S"), c("domain", "R")), b("=", c("type", "R"), s("commerce"))),
    )
    assert parse_query(STREAM_Q3) == sel(
        [c("URL", "T")], [src(inner, "T", sample=10.0)], where=Between(c("client_id", "T"), i(1), i(1000))
    )


def test_pipes_q2_selection():
    q = parse_query("SELECT Bid.*\nFROM Bid\nWHERE itemID = 1007 OR itemID = 1020\n"
                    "      OR itemID = 2001 OR itemID = 2019\n      OR itemID = 1087;")
    where = b("=", c("itemID"), i(1007))
    for n in (1020, 2001, 2019, 1087):
        where = b("OR", where, b("=", c("itemID"), i(n)))
    assert q == sel([Star("Bid")], ["Bid"], where=where)


def test_pipes_q3_short_auctions():
    q = parse_query("SELECT OpenAuction.*\nFROM OpenAuction O WINDOW(RANGE 5 HOURS),\n      ClosedAuction C\n"
                    "WHERE O.itemID = C.itemID;")
    assert q == sel([Star("OpenAuction")],
                    [src("OpenAuction", "O", Window("RANGE", range=5 * 3_600_000)), src("ClosedAuction", "C")],
                    where=b("=", c("itemID", "O"), c("itemID", "C")))


def test_pipes_q5_closing_price():
    # The digest's typo (a trailing comma in `FROM CurrentPrice P,`) is fixed.
    stmts = parse("""
    CREATE STREAM CurrentPrice AS
        SELECT P.itemID, P.price, O.sellerID AS sellerID
        FROM ((SELECT itemID, bid_price AS price
                FROM Bid WINDOW(RANGE 2 DAYS))
              UNION ALL
            (SELECT itemID, start_price AS price
                FROM OpenAuction WINDOW(RANGE 2 DAYS))) P,
                  ClosedAuction C,
                  OpenAuction O WINDOW(RANGE 2 DAYS)
        WHERE P.itemID = C.itemID AND C.itemID = O.itemID;

    CREATE STREAM ClosingPriceStream AS
        SELECT itemID, sellerID, MAX(P.price) AS price
        FROM CurrentPrice P
        GROUP BY P.itemID, P.sellerID;""")
    two_days = Window("RANGE", range=172_800_000)
    union = SetOp(
        "UNION", True,
        sel([item(c("itemID")), item(c("bid_price"), "price")], [src("Bid", window=two_days)]),
        sel([item(c("itemID")), item(c("start_price"), "price")], [src("OpenAuction", window=two_days)]),
    )
    assert stmts == [
        RegisterQuery("CurrentPrice", sel(
            [item(c("itemID", "P")), item(c("price", "P")), item(c("sellerID", "O"), "sellerID")],
            [src(union, "P"), src("ClosedAuction", "C"), src("OpenAuction", "O", two_days)],
            where=b("AND", b("=", c("itemID", "P"), c("itemID", "C")), b("=", c("itemID", "C"), c("itemID", "O"))),
        )),
        RegisterQuery("ClosingPriceStream", sel(
            [item(c("itemID")), item(c("sellerID")), item(Aggregate("MAX", c("price", "P")), "price")],
            [src("CurrentPrice", "P")], group_by=(c("itemID", "P"), c("sellerID", "P")),
        )),
    ]


def test_pipes_q4_highest_bid():
    # The digest's typo (a trailing comma before WHERE) is fixed; `BID` keeps its spelling.
    q = parse_query("""SELECT itemID, bid_price
    FROM   Bid WINDOW(RANGE 10 MINUTES)
    WHERE  bid_price = (SELECT MAX(bid_price)
                        FROM BID WINDOW(RANGE 10 MINUTES));""")
    ten = Window("RANGE", range=600_000)
    assert q == sel([c("itemID"), c("bid_price")], [src("Bid", window=ten)], where=b(
        "=", c("bid_price"), ScalarSubquery(sel([Aggregate("MAX", c("bid_price"))], [src("BID", window=ten)]))
    ))


def test_pipes_q6_hot_item():
    q = parse_query("""SELECT itemID
    FROM  (SELECT    B1.itemID AS itemID, COUNT(*) AS num
           FROM      Bid [RANGE 60 MINUTES] B1
           GROUP BY B1.itemID)
    WHERE num >= ALL(SELECT COUNT(*)
                      FROM Bid [RANGE 60 MINUTES] B2
                      GROUP BY B2.itemID);""")
    hour = Window("RANGE", range=3_600_000)
    inner = sel([item(c("itemID", "B1"), "itemID"), item(COUNT_STAR, "num")], [src("Bid", "B1", hour)],
                group_by=(c("itemID", "B1"),))
    counts = sel([COUNT_STAR], [src("Bid", "B2", hour)], group_by=(c("itemID", "B2"),))
    assert q == sel([c("itemID")], [src(inner)], where=Quantified(">=", c("num"), "ALL", counts))


def test_pipes_example_12_2_partitioned_window():
    q = parse_query("SELECT sellerID, AVG(price)\nFROM ClosingPriceStream WINDOW(PARTITION BY sellerID ROWS 10)\n"
                    "GROUP BY sellerID;")
    assert q == sel([c("sellerID"), Aggregate("AVG", c("price"))],
                    [src("ClosingPriceStream", window=Window("ROWS", rows=10, partition_by=(c("sellerID"),)))],
                    group_by=(c("sellerID"),))


def test_pipes_example_17_1_tumbling_window():
    q = parse_query("""SELECT itemID, bid_price
      FROM Bid WINDOW(RANGE 10 MINUTES
                      SLIDE 10 MINUTES)
     WHERE bid_price = (SELECT MAX(bid_price)
                          FROM Bid WINDOW(RANGE 10 MINUTES
                                          SLIDE 10 MINUTES));""")
    w = Window("RANGE", range=600_000, slide=600_000)
    assert q == sel([c("itemID"), c("bid_price")], [src("Bid", window=w)], where=b(
        "=", c("bid_price"), ScalarSubquery(sel([Aggregate("MAX", c("bid_price"))], [src("Bid", window=w)]))
    ))


def test_pipes_example_17_7_new_users():
    # The digest's typo (the inner SELECT in FROM without parentheses) is fixed.
    stmts = parse("""CREATE STREAM NewPersonStream AS
        SELECT P.id, P.name
        FROM   Istream(Person) P;

        SELECT DISTINCT(P.id, P.name)
        FROM   (SELECT P.id, P.name
               FROM   NewPersonStream WINDOW(RANGE 12 HOURS) P, OpenAuction O
               WHERE  P.id = O.sellerID);""")
    inner = sel([c("id", "P"), c("name", "P")],
                [src("NewPersonStream", "P", Window("RANGE", range=12 * 3_600_000)), src("OpenAuction", "O")],
                where=b("=", c("id", "P"), c("sellerID", "O")))
    assert stmts == [
        RegisterQuery("NewPersonStream", sel([c("id", "P"), c("name", "P")],
                                             [src("Person", "P", stream_op="ISTREAM")])),
        QueryStatement(sel([c("id", "P"), c("name", "P")], [src(inner)], distinct=True)),
    ]


def test_pipes_section_15_rewrite_rule_both_sides():
    assert parse_query("SELECT Istream(L) FROM S [Range Unbounded] WHERE C") == sel(
        [c("L")], [src("S", window=Window("UNBOUNDED"))], where=c("C"), stream_op="ISTREAM"
    )
    assert parse_query("SELECT Rstream(L) FROM S [Now] WHERE C") == sel(
        [c("L")], [src("S", window=Window("NOW"))], where=c("C"), stream_op="RSTREAM"
    )


def test_pipes_q1_user_defined_function_is_refused_clearly():
    e = error_of("SELECT itemID, DolToEuro(bid_price), bidderID\nFROM Bid;")
    assert (e.line, e.column) == (1, 16)
    assert "unknown function 'DolToEuro'" in e.message


# ---------------------------------------------------------------- errors


def test_empty_text_is_an_error():
    for text in ("", "   \n", "-- nothing\n/* at all */", ";"):
        e = error_of(text)
        assert isinstance(e, CQLError) and e.line == 1
    assert "empty input" in error_of("").message


def test_misspelt_keyword_at_the_error_token():
    e = error_of("SELCT a FROM S")
    assert (e.line, e.column) == (1, 1)
    assert "unexpected identifier 'SELCT'" in e.message and "did you mean SELECT?" in e.message
    assert "a query" in e.expected


def test_misspelt_keyword_read_as_an_alias():
    e = error_of("SELECT a\nFORM S")
    assert (e.line, e.column) == (2, 6)
    assert "did you mean FROM?" in e.message and "'FORM' at line 2, column 1" in e.message
    assert set(e.expected) == {"FROM", "','"}


def test_syntax_error_names_line_column_token_and_expected_in_plain_words():
    e = error_of("SELECT a FROM S;\nSELECT a FROM S [RANGE 5 SECONDS WHERE]")
    assert (e.line, e.column) == (2, 39)
    assert "unexpected ']'" in e.message and "expected an expression" in e.message
    assert "__ANON" not in str(e) and "LSQB" not in str(e) and "RSQB" not in str(e)
    e = error_of("SELECT a FROM S [ROWS 5")
    assert "unexpected end of input" in e.message and "']'" in e.expected


def test_reserved_word_as_a_name_is_refused_where_it_stands():
    e = error_of("SELECT FROM S")
    assert (e.line, e.column) == (1, 8) and "unexpected keyword FROM" in e.message
    assert "an expression" in e.expected


@pytest.mark.parametrize("text, line, column, words", [
    ("SELECT 'abc FROM S", 1, 8, "unterminated string"),
    ("SELECT a FROM S\n/* never closed", 2, 1, "unterminated comment"),
    ("SELECT a # b FROM S", 1, 10, "unexpected character '#'"),
    ('SELECT "a" FROM S', 1, 8, "single quotes"),
    ("SELECT a FROM S [RANGE 5 WEEKZ]", 1, 26, "unknown time unit 'WEEKZ'"),
    ("SELECT a FROM S [RANGE 0]", 1, 24, "positive"),
    ("SELECT a FROM S [RANGE 0 SECONDS]", 1, 24, "positive"),
    ("SELECT a FROM S [RANGE 5 SLIDE 0]", 1, 32, "positive"),
    ("SELECT a FROM S [ROWS 0]", 1, 23, "positive integer"),
    ("SELECT a FROM S [ROWS 2.5]", 1, 23, "positive integer"),
    ("SELECT a FROM S [RANGE 0.5 MILLISECONDS]", 1, 24, "whole number"),
    ("SELECT a FROM S [PARTITION BY a RANGE 5]", 1, 18, "PARTITION BY needs a ROWS window"),
    ("SELECT a FROM S SAMPLE(0)", 1, 24, "percentage"),
    ("SELECT a FROM S SAMPLE(101)", 1, 24, "percentage"),
    ("SELECT a FROM S x [ROWS 1] y", 1, 28, "alias"),
    ("REGISTER STREAM S (a INTGER)", 1, 22, "unknown type 'INTGER'"),
    ("REGISTER STREAM S (a INT(3))", 1, 26, "takes no length"),
    ("REGISTER STREAM S (a INT, A FLOAT)", 1, 27, "declared twice"),
    ("REGISTER STREAM S (a INT) FROM MQTT 't' FORMAT XML", 1, 48, "unknown format 'XML'"),
    ("SELECT SUM(*) FROM S", 1, 8, "only COUNT takes *"),
    ("SELECT SUM(a, b) FROM S", 1, 8, "one argument"),
    ("SELECT LOWER(a, b) FROM S", 1, 8, "takes 1 argument"),
    ("SELECT LOWER(DISTINCT a) FROM S", 1, 8, "DISTINCT"),
    ("SELECT LOWR(a) FROM S", 1, 8, "did you mean LOWER?"),
    ("SELECT a FROM S WHERE a LIKE b", 1, 30, "string literal"),
    ("SELECT 99999999999999999999 FROM S", 1, 8, "out of range"),
    ("SELECT 1e999 FROM S", 1, 8, "out of range"),
    ("DROP TABLE x", 1, 6, "expected QUERY, RELATION, STREAM or VIEW"),
])
def test_error_positions_and_messages(text, line, column, words):
    e = error_of(text)
    assert (e.line, e.column) == (line, column), str(e)
    assert words in e.message, str(e)
    assert str(e).startswith(f"line {line}, column {column}: ")


def test_unknown_unit_and_type_suggest_a_close_match():
    assert "did you mean SECOND" in error_of("SELECT a FROM S [RANGE 5 SECONDZ]").message
    assert "did you mean VARCHAR?" in error_of("REGISTER RELATION R (a VARCHR)").message


def test_parse_query_and_parse_expr_refuse_other_input():
    with pytest.raises(CQLError):
        parse_query("DROP QUERY q")
    with pytest.raises(CQLError):
        parse_query("SELECT a FROM S; SELECT b FROM T")
    with pytest.raises(CQLError):
        parse_expr("a +")
    with pytest.raises(CQLError):
        parse_expr("*")


def test_deep_nesting_does_not_exhaust_the_stack():
    expr = parse_expr("- " * 5000 + "a")
    depth = 0
    while isinstance(expr, UnaryOp):
        expr, depth = expr.operand, depth + 1
    assert depth == 5000 and expr == c("a")


def test_long_tokens_are_shortened_in_messages():
    e = error_of("x" * 1000)
    assert len(str(e)) < 300 and "xxx..." in e.message


# ---------------------------------------------------------------- no input makes parse raise anything else

VALID = [
    STREAM_Q1, STREAM_Q2, STREAM_Q3,
    "REGISTER STREAM Temp (sensor STRING, celsius FLOAT) FROM MQTT 'sensors/+/temp' FORMAT JSON TIMESTAMP ts",
    "REGISTER QUERY hot AS SELECT ISTREAM(item_id, COUNT(*) AS n) FROM Bid [RANGE 1 HOUR SLIDE 1 MINUTE] "
    "GROUP BY item_id HAVING COUNT(*) > 10 PUBLISH TO MQTT 'out'",
    "SELECT CASE WHEN a IN (1, 2) THEN LOWER(b) ELSE 'x''y' END FROM S [PARTITION BY a ROWS 3 WHERE b <> 'z']",
    "(SELECT a FROM S UNION ALL SELECT a FROM T) EXCEPT SELECT a FROM U WHERE NOT EXISTS (SELECT * FROM V)",
    "SELECT a FROM ISTREAM(R) x WINDOW(RANGE 2 DAYS SLIDE 1 DAY) SAMPLE(5) WHERE a >= ALL (SELECT b FROM T)",
]

TOKENS = ["SELECT", "FROM", "WHERE", "(", ")", "[", "]", ",", ";", "'", "a", "S", "1", "2.5", "RANGE", "ROWS",
          "SECONDS", "ISTREAM", "*", "=", "AND", "NOT", "IN", "--", "/*", "*/", "\n", " ", "\u2018", "WINDOW",
          "PARTITION", "BY", "UNION", "ALL", "CASE", "WHEN", "END", ".", "REGISTER", "STREAM", "INT", "#", "\"",
          "SAMPLE", "COUNT", "DISTINCT", "-", "BETWEEN", "EXISTS", "NOW", "UNBOUNDED", "PRECEDING", "0"]


def _parses_or_raises_cql_error(text: str) -> None:
    try:
        result = parse(text)
    except CQLError as e:
        assert e.message
        return
    assert isinstance(result, list) and result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_random_text_never_raises_anything_but_cql_error(text):
    _parses_or_raises_cql_error(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=30))
def test_random_token_soup_never_raises_anything_but_cql_error(tokens):
    _parses_or_raises_cql_error(" ".join(tokens))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6),
                                                  st.sampled_from(TOKENS + ["", "x", "0", "\u2019"])),
                                        min_size=1, max_size=4))
def test_mutated_statements_never_raise_anything_but_cql_error(text, edits):
    for at, length, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + length:]
    _parses_or_raises_cql_error(text)


@pytest.mark.parametrize("text", VALID)
def test_valid_corpus_parses(text):
    assert len(parse(text)) == 1
