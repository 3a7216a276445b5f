"""NEXMark q0-q5, q7-q9 three ways: CQL for dsms, a plain-Python dict/deque loop, and DuckDB SQL.

Source: shared/nexmark.md section 3 (the dsms CQL forms and their caveats). Each query is a ``NexQuery``: its CQL
statements (views first, the query last), whether its answer is a stream (compared as the multiset of
(timestamp, row)) or a relation (compared as its final contents), the plain loop over the merged event list,
and the DuckDB query computing the same answer in one batch over the three tables.

Window semantics are dsms's (SPEC section 3): ``[RANGE T SLIDE S]`` at instant tau holds the elements with
timestamps in ``(floor(tau/S)*S - T, floor(tau/S)*S]``, so the window ending at kS changes at instant kS, and
ISTREAM emits at kS the rows of that window's answer that were not in the answer at kS - S (as a multiset).
The loop and the DuckDB queries implement exactly that; the window lengths are parameters (``Windows``) so that
a test on a few thousand events still sees windows close.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Windows:
    """Window lengths in ms: q5's hop (range, slide), q7's and q8's tumbling window."""

    q5_range: int = 10_000
    q5_slide: int = 2_000
    q7: int = 10_000
    q8: int = 10_000


@dataclass(frozen=True)
class NexQuery:
    name: str
    title: str
    cql: Callable[[Windows], list[str]]
    relation: bool                      # answer compared as final contents (else as a timestamped stream)
    loop: Callable                      # (events, Windows) -> list of (ts, row) or final rows
    sql: Callable[[Windows], str]       # DuckDB: columns ts (stream answers only), then the row
    reads: tuple[str, ...]              # the streams the query reads


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------------------------- stateless

def _loop_q0(events, w):
    out = []
    for kind, ts, row in events:
        if kind == 2:
            out.append((ts, row))
    return out


def _loop_q1(events, w):
    out = []
    for kind, ts, row in events:
        if kind == 2:
            a, b, p, _c, _u, dt, x = row
            out.append((ts, (a, b, p * 0.908, dt, x)))
    return out


def _loop_q2(events, w):
    out = []
    for kind, ts, row in events:
        if kind == 2 and row[0] % 123 == 0:
            out.append((ts, (row[0], row[2])))
    return out


# ------------------------------------------------------------------------------------------------- q3

Q3_STATES = ("OR", "ID", "CA")


def _loop_q3(events, w):
    """Symmetric unbounded hash join with both selections pushed below it."""
    people: dict = {}
    auctions: dict = defaultdict(list)
    out = []
    states = set(Q3_STATES)
    for kind, ts, row in events:
        if kind == 1:
            if row[8] == 10:
                aid, seller = row[0], row[7]
                auctions[seller].append(aid)
                p = people.get(seller)
                if p is not None:
                    out.append((ts, p + (aid,)))
        elif kind == 0:
            if row[5] in states:
                p = (row[1], row[4], row[5])
                people[row[0]] = p
                for aid in auctions.get(row[0], ()):
                    out.append((ts, p + (aid,)))
    return out


# ------------------------------------------------------------------------------------------------- q4, q9

def _valid_bids(events, on_bid):
    """Feeds ``on_bid(auction row, bid row)`` for every bid inside its auction's [dateTime, expires], bids that
    arrive before their auction included (they wait in ``pending``)."""
    auctions: dict = {}
    pending: dict = defaultdict(list)
    for kind, _ts, row in events:
        if kind == 2:
            a = auctions.get(row[0])
            if a is None:
                pending[row[0]].append(row)
            elif a[5] <= row[5] <= a[6]:
                on_bid(a, row)
        elif kind == 1:
            auctions[row[0]] = row
            for b in pending.pop(row[0], ()):
                if row[5] <= b[5] <= row[6]:
                    on_bid(row, b)


def _loop_q4(events, w):
    best: dict = {}
    cat_sum: dict = defaultdict(int)
    cat_cnt: dict = defaultdict(int)

    def on_bid(a, b):
        old = best.get(a[0])
        if old is None:
            best[a[0]] = b[2]
            cat_sum[a[8]] += b[2]
            cat_cnt[a[8]] += 1
        elif b[2] > old:
            best[a[0]] = b[2]
            cat_sum[a[8]] += b[2] - old
    _valid_bids(events, on_bid)
    return [(c, cat_sum[c] / cat_cnt[c]) for c in cat_cnt]


def _loop_q9(events, w):
    """Per auction, the valid bids with the highest price and, among them, the earliest dateTime (all ties)."""
    best: dict = {}

    def on_bid(a, b):
        key = (b[2], -b[5])
        cur = best.get(a[0])
        row = (a[0], a[7], a[8], b[1], b[2], b[5])
        if cur is None or key > cur[0]:
            best[a[0]] = (key, [row])
        elif key == cur[0]:
            cur[1].append(row)
    _valid_bids(events, on_bid)
    return [r for _, rows in best.values() for r in rows]


# ------------------------------------------------------------------------------------------------- windows

class _Istream:
    """ISTREAM of a window's answer: emit at each window end the rows not in the previous window's answer."""

    def __init__(self, out: list) -> None:
        self.out = out
        self.prev: Counter = Counter()

    def window(self, end: int, rows: list) -> None:
        cur = Counter(rows)
        for r, c in (cur - self.prev).items():
            self.out.extend([(end, r)] * c)
        self.prev = cur


def _loop_q5(events, w):
    """Bids per auction in a hopping window; at each window end, the auctions with the most bids."""
    rng, slide = w.q5_range, w.q5_slide
    win: deque = deque()
    counts: dict = defaultdict(int)
    out: list = []
    ist = _Istream(out)
    nxt = None                                   # the next window end to close

    def close(end):
        while win and win[0][0] <= end - rng:
            _, a = win.popleft()
            c = counts[a] - 1
            if c:
                counts[a] = c
            else:
                del counts[a]
        if counts:
            m = max(counts.values())
            ist.window(end, [(a, c) for a, c in counts.items() if c == m])
        else:
            ist.window(end, [])

    for kind, ts, row in events:
        if kind != 2:
            continue
        if nxt is None:
            nxt = _ceil_div(ts, slide) * slide
        while ts > nxt:
            close(nxt)
            nxt += slide
        win.append((ts, row[0]))
        counts[row[0]] += 1
    while win:
        close(nxt)
        nxt += slide
    return out


def _loop_q7(events, w):
    """The highest bids of each tumbling window."""
    size = w.q7
    out: list = []
    ist = _Istream(out)
    end = None
    top = None
    rows: list = []
    for kind, ts, row in events:
        if kind != 2:
            continue
        if end is None:
            end = _ceil_div(ts, size) * size
        if ts > end:
            ist.window(end, rows)
            if ts > end + size:                  # an empty window between: nothing to compare with
                ist.window(end + size, [])
            end = _ceil_div(ts, size) * size
            top, rows = None, []
        p = row[2]
        if top is None or p > top:
            top, rows = p, [(row[0], p, row[1], row[5], row[6])]
        elif p == top:
            rows.append((row[0], p, row[1], row[5], row[6]))
    if end is not None:
        ist.window(end, rows)
    return out


def _loop_q8(events, w):
    """People who opened an auction in the tumbling window in which they registered."""
    size = w.q8
    out: list = []
    ist = _Istream(out)
    end = None
    people: dict = {}
    sellers: set = set()

    def close(e):
        ist.window(e, list({(i, people[i]) for i in sellers if i in people}))

    for kind, ts, row in events:
        if kind == 2:
            continue
        if end is None:
            end = _ceil_div(ts, size) * size
        if ts > end:
            close(end)
            if ts > end + size:
                ist.window(end + size, [])
            end = _ceil_div(ts, size) * size
            people, sellers = {}, set()
        if kind == 0:
            people[row[0]] = row[1]
        else:
            sellers.add(row[7])
    if end is not None:
        close(end)
    return out


# ------------------------------------------------------------------------------------------------- CQL and SQL

Q3_WHERE = " OR ".join(f"P.state = '{s}'" for s in Q3_STATES)
_VALID = "A.id = B.auction AND B.dateTime >= A.dateTime AND B.dateTime <= A.expires"


def _sql_istream(windows: str, cols: str) -> str:
    """DuckDB: rows of ``windows`` (columns k, then ``cols``) not in window k - 1's answer, with multiplicity,
    emitted at ts = k * slide (the caller's select multiplies)."""
    return (f"WITH W AS ({windows}), N AS (SELECT k, {cols}, row_number() OVER (PARTITION BY k, {cols}) AS rn "
            f"FROM W) SELECT N.k, {', '.join('N.' + c.strip() for c in cols.split(','))} FROM N "
            f"WHERE NOT EXISTS (SELECT 1 FROM N P WHERE P.k = N.k - 1 AND P.rn = N.rn AND "
            + " AND ".join(f"P.{c.strip()} = N.{c.strip()}" for c in cols.split(",")) + ")")


def _sql_q5(w: Windows) -> str:
    s, r = w.q5_slide, w.q5_range
    # the window ending at kS holds ts in (kS - R, kS]: k from ceil(ts/S) to ceil((ts + R)/S) - 1
    cnt = (f"SELECT k, auction, count(*) AS num FROM (SELECT auction, unnest(range(CAST(ceil(ts / {s}) AS BIGINT), "
           f"CAST(ceil((ts + {r}) / {s}) AS BIGINT))) AS k FROM bid) GROUP BY k, auction")
    win = (f"SELECT C.k, C.auction, C.num FROM ({cnt}) C JOIN (SELECT k, max(num) AS m FROM ({cnt}) GROUP BY k) M "
           f"ON C.k = M.k AND C.num >= M.m")
    full = _sql_istream(win, "auction, num")
    return f"SELECT k * {s} AS ts, auction, num FROM ({full})"


def _sql_q7(w: Windows) -> str:
    s = w.q7
    win = (f"SELECT B.k, B.auction, B.price, B.bidder, B.dateTime, B.extra FROM "
           f"(SELECT CAST(ceil(ts / {s}) AS BIGINT) AS k, * FROM bid) B JOIN "
           f"(SELECT CAST(ceil(ts / {s}) AS BIGINT) AS k, max(price) AS m FROM bid GROUP BY 1) M "
           f"ON B.k = M.k AND B.price = M.m")
    full = _sql_istream(win, "auction, price, bidder, dateTime, extra")
    return f"SELECT k * {s} AS ts, auction, price, bidder, dateTime, extra FROM ({full})"


def _sql_q8(w: Windows) -> str:
    s = w.q8
    win = (f"SELECT DISTINCT P.k, P.id, P.name FROM (SELECT CAST(ceil(ts / {s}) AS BIGINT) AS k, id, name "
           f"FROM person) P JOIN (SELECT CAST(ceil(ts / {s}) AS BIGINT) AS k, seller FROM auction) A "
           f"ON P.k = A.k AND P.id = A.seller")
    full = _sql_istream(win, "id, name")
    return f"SELECT k * {s} AS ts, id, name FROM ({full})"


_SQL_AB = ("SELECT A.id, A.seller, A.category, B.bidder, B.price, B.dateTime AS bidtime FROM auction A "
           f"JOIN bid B ON {_VALID}")

QUERIES: list[NexQuery] = [
    NexQuery("q0", "pass-through", lambda w: ["SELECT * FROM Bid"], False, _loop_q0,
             lambda w: "SELECT ts, auction, bidder, price, channel, url, dateTime, extra FROM bid", ("Bid",)),
    NexQuery("q1", "currency conversion",
             lambda w: ["SELECT auction, bidder, price * 0.908 AS price, dateTime, extra FROM Bid"], False, _loop_q1,
             lambda w: "SELECT ts, auction, bidder, price * CAST(0.908 AS DOUBLE), dateTime, extra FROM bid",
             ("Bid",)),
    NexQuery("q2", "selection", lambda w: ["SELECT auction, price FROM Bid WHERE auction % 123 = 0"], False,
             _loop_q2, lambda w: "SELECT ts, auction, price FROM bid WHERE auction % 123 = 0", ("Bid",)),
    NexQuery("q3", "local item suggestion (unbounded join)",
             lambda w: [f"SELECT ISTREAM(P.name, P.city, P.state, A.id) FROM Auction [RANGE UNBOUNDED] A, "
                        f"Person [RANGE UNBOUNDED] P WHERE A.seller = P.id AND ({Q3_WHERE}) AND A.category = 10"],
             False, _loop_q3,
             lambda w: (f"SELECT greatest(A.ts, P.ts), P.name, P.city, P.state, A.id FROM auction A JOIN person P "
                        f"ON A.seller = P.id WHERE ({Q3_WHERE}) AND A.category = 10"), ("Auction", "Person")),
    NexQuery("q4", "average winning bid per category (relation)",
             lambda w: ["REGISTER VIEW Q4Win AS SELECT A.id AS id, A.category AS category, MAX(B.price) AS final "
                        f"FROM Auction [RANGE UNBOUNDED] A, Bid [RANGE UNBOUNDED] B WHERE {_VALID} "
                        "GROUP BY A.id, A.category",
                        "SELECT category, AVG(final) AS avg_final FROM Q4Win GROUP BY category"],
             True, _loop_q4,
             lambda w: (f"SELECT category, avg(final) FROM (SELECT A.id, A.category, max(B.price) AS final "
                        f"FROM auction A JOIN bid B ON {_VALID} GROUP BY A.id, A.category) GROUP BY category"),
             ("Auction", "Bid")),
    NexQuery("q5", "hot items (hopping count, MAX, join)",
             lambda w: [f"REGISTER VIEW Q5Cnt AS SELECT auction, COUNT(*) AS num FROM Bid "
                        f"[RANGE {w.q5_range} SLIDE {w.q5_slide}] GROUP BY auction",
                        "REGISTER VIEW Q5Max AS SELECT MAX(num) AS maxn FROM Q5Cnt",
                        "SELECT ISTREAM(C.auction, C.num) FROM Q5Cnt C, Q5Max M WHERE C.num >= M.maxn"],
             False, _loop_q5, _sql_q5, ("Bid",)),
    NexQuery("q7", "highest bid (tumbling MAX joined back)",
             lambda w: [f"SELECT ISTREAM(B.auction, B.price, B.bidder, B.dateTime, B.extra) "
                        f"FROM Bid [RANGE {w.q7} SLIDE {w.q7}] B, "
                        f"(SELECT MAX(price) AS maxprice FROM Bid [RANGE {w.q7} SLIDE {w.q7}]) M "
                        "WHERE B.price = M.maxprice"],
             False, _loop_q7, _sql_q7, ("Bid",)),
    NexQuery("q8", "monitor new users (windowed join)",
             lambda w: [f"SELECT ISTREAM(id, name) FROM (SELECT DISTINCT P.id AS id, P.name AS name "
                        f"FROM Person [RANGE {w.q8} SLIDE {w.q8}] P, Auction [RANGE {w.q8} SLIDE {w.q8}] A "
                        "WHERE P.id = A.seller) X"],
             False, _loop_q8, _sql_q8, ("Person", "Auction")),
    NexQuery("q9", "winning bids (relation)",
             lambda w: ["REGISTER VIEW Q9AB AS SELECT A.id AS id, A.seller AS seller, A.category AS category, "
                        "B.bidder AS bidder, B.price AS price, B.dateTime AS bidtime "
                        f"FROM Auction [RANGE UNBOUNDED] A, Bid [RANGE UNBOUNDED] B WHERE {_VALID}",
                        "REGISTER VIEW Q9M AS SELECT id, MAX(price) AS maxp FROM Q9AB GROUP BY id",
                        "REGISTER VIEW Q9T AS SELECT X.id AS id, MIN(X.bidtime) AS t FROM Q9AB X, Q9M M "
                        "WHERE X.id = M.id AND X.price = M.maxp GROUP BY X.id",
                        "SELECT X.id, X.seller, X.category, X.bidder, X.price, X.bidtime FROM Q9AB X, Q9T T, Q9M M "
                        "WHERE X.id = T.id AND X.bidtime = T.t AND X.id = M.id AND X.price = M.maxp"],
             True, _loop_q9,
             lambda w: (f"WITH AB AS ({_SQL_AB}), M AS (SELECT id, max(price) AS maxp FROM AB GROUP BY id), "
                        "T AS (SELECT AB.id, min(bidtime) AS t FROM AB JOIN M ON AB.id = M.id AND AB.price = M.maxp "
                        "GROUP BY AB.id) SELECT AB.* FROM AB JOIN M ON AB.id = M.id AND AB.price = M.maxp "
                        "JOIN T ON AB.id = T.id AND AB.bidtime = T.t"),
             ("Auction", "Bid")),
]

BY_NAME = {q.name: q for q in QUERIES}
