"""A deterministic NEXMark event generator with numpy: Person, Auction and Bid columns for N events.

Source: shared/nexmark.md section 2 (Beam's generator, as nexmark-flink and nexmark-rs carry it). Ids, kinds,
timestamps, hot keys, id leads, auction lifetimes and price distribution follow its constants; the random draws
are not Java's ``Random``: each event's draws are ``splitmix64(eventId * 16 + k)``, so every event is still a
pure function of its id (Beam's property), and the whole stream is made with a few numpy passes instead of a
per-event Python loop (about 16 K events/s, shared/nexmark.md 2.3). Strings come from fixed pools picked by a
draw, which keeps their lengths near Beam's (a bid's ``extra`` averages about 68 characters).

    >>> ev = generate(100)
    >>> [len(ev[k]["ts"]) for k in ("Person", "Auction", "Bid")]
    [2, 6, 92]
"""

from __future__ import annotations

import numpy as np

RATE = 10_000                     # events per second of event time: 10 per ms (nexmark.md 2.1)
BASE_TIME = 1_436_918_400_000     # Beam's BASE_TIME, 2015-07-15T00:00:00Z, in ms
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
HOT_SELLERS_RATIO = 4
HOT_AUCTION_RATIO = 2
HOT_BIDDERS_RATIO = 4
NUM_IN_FLIGHT_AUCTIONS = 100
NUM_ACTIVE_PEOPLE = 1000

FIRST = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
          "Cheyenne"]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]

SCHEMAS = {
    "Person": [("id", "INT"), ("name", "STRING"), ("emailAddress", "STRING"), ("creditCard", "STRING"),
               ("city", "STRING"), ("state", "STRING"), ("dateTime", "TIMESTAMP"), ("extra", "STRING")],
    "Auction": [("id", "INT"), ("itemName", "STRING"), ("description", "STRING"), ("initialBid", "INT"),
                ("reserve", "INT"), ("dateTime", "TIMESTAMP"), ("expires", "TIMESTAMP"), ("seller", "INT"),
                ("category", "INT"), ("extra", "STRING")],
    "Bid": [("auction", "INT"), ("bidder", "INT"), ("price", "INT"), ("channel", "STRING"), ("url", "STRING"),
            ("dateTime", "TIMESTAMP"), ("extra", "STRING")],
}

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64 of each uint64 (wrapping arithmetic): the per-event, per-draw random word."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class _Draws:
    """The k-th random draw of each event: ints below a bound and doubles in [0, 1)."""

    def __init__(self, ids: np.ndarray) -> None:
        self.base = ids.astype(np.uint64) * np.uint64(16)
        self.k = 0

    def _word(self) -> np.ndarray:
        self.k += 1
        return _splitmix(self.base + np.uint64(self.k)) >> np.uint64(11)     # 53 random bits

    def below(self, bound) -> np.ndarray:
        return (self._word() % np.asarray(bound).astype(np.uint64)).astype(np.int64)

    def double(self) -> np.ndarray:
        return self._word().astype(np.float64) * 2.0**-53


def _pool(seed: int, count: int, lo: int, hi: int) -> np.ndarray:
    """``count`` strings of lowercase letters and blanks (1 in 13, as Beam's nextString) of lengths lo..hi."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    out = np.empty(count, dtype=object)
    for i in range(count):
        n = int(rng.integers(lo, hi + 1))
        chars = letters[rng.integers(0, 26, n)]
        chars[rng.integers(0, 13, n) == 0] = ord(" ")
        out[i] = chars.tobytes().decode().strip() or "x"
    return out


POOL = 4096
_POOLS: dict[str, np.ndarray] = {}


def _pools() -> dict[str, np.ndarray]:
    if not _POOLS:
        _POOLS.update(
            email=np.array([f"{a}@{b}.com" for a, b in zip(_pool(1, POOL, 3, 7), _pool(2, POOL, 3, 5))],
                           dtype=object),
            card=np.array([f"{i:04d} {(i * 7919) % 10000:04d} {(i * 104729) % 10000:04d} {(i * 31) % 10000:04d}"
                           for i in range(POOL)], dtype=object),
            item=_pool(3, POOL, 3, 20), desc=_pool(4, POOL, 3, 100),
            pextra=_pool(5, POOL, 100, 150), aextra=_pool(6, POOL, 300, 420), bextra=_pool(7, POOL, 54, 82),
            url=np.array([f"https://www.nexmark.com/{a}/{b}/{c}/item.htm?query=1&channel_id={i}".replace(" ", "_")
                          for i, (a, b, c) in enumerate(zip(_pool(8, POOL, 3, 5), _pool(9, POOL, 3, 5),
                                                            _pool(10, POOL, 3, 5)))], dtype=object),
            channel=np.array(CHANNELS + [f"channel-{i}" for i in range(POOL - len(CHANNELS))], dtype=object),
            name=np.array([f"{f} {la}" for f in FIRST for la in LAST], dtype=object),
        )
    return _POOLS


def timestamp(n: np.ndarray | int) -> np.ndarray | int:
    """Event time of event number n, exact integer arithmetic (nexmark.md 2.2): ``base + n * 1000 // rate``."""
    return BASE_TIME + (n * 1000) // RATE


def last_person(e: np.ndarray) -> np.ndarray:
    """lastBase0PersonId: the base-0 id of the last person created up to event e."""
    return e // 50


def last_auction(e: np.ndarray) -> np.ndarray:
    """lastBase0AuctionId (nexmark.md 2.5)."""
    epoch, off = e // 50, e % 50
    person = off < 1
    epoch = np.where(person, epoch - 1, epoch)
    off = np.where(person | (off >= 4), 2, off - 1)
    return epoch * 3 + off


def _next_person(e: np.ndarray, d: _Draws) -> np.ndarray:
    num = last_person(e) + 1
    active = np.minimum(num, NUM_ACTIVE_PEOPLE)
    return num - active + d.below(active + PERSON_ID_LEAD)


def _next_auction(e: np.ndarray, d: _Draws) -> np.ndarray:
    mx = last_auction(e)
    mn = np.maximum(mx - NUM_IN_FLIGHT_AUCTIONS, 0)
    return mn + d.below(mx - mn + 1 + AUCTION_ID_LEAD)


def _price(d: _Draws) -> np.ndarray:
    """Log-uniform on [100, 10^8) cents, Java's Math.round (floor(x + 0.5))."""
    return np.floor(10.0 ** (d.double() * 6.0) * 100.0 + 0.5).astype(np.int64)


def generate(n_events: int, first: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Events ``first .. first + n_events - 1`` split by kind: per stream, ``ts`` (event time, ms), ``event``
    (the event id, to cut pushes by event count) and one array per column of ``SCHEMAS``."""
    pools = _pools()
    e = np.arange(first, first + n_events, dtype=np.int64)
    kind = e % 50
    out: dict[str, dict[str, np.ndarray]] = {}

    p = e[kind == 0]
    d = _Draws(p)
    ts = timestamp(p)
    out["Person"] = {
        "event": p, "ts": ts, "id": last_person(p) + FIRST_PERSON_ID,
        "name": pools["name"][d.below(len(pools["name"]))],
        "emailAddress": pools["email"][d.below(POOL)], "creditCard": pools["card"][d.below(POOL)],
        "city": np.array(CITIES, dtype=object)[d.below(len(CITIES))],
        "state": np.array(STATES, dtype=object)[d.below(len(STATES))],
        "dateTime": ts, "extra": pools["pextra"][d.below(POOL)],
    }

    a = e[(kind >= 1) & (kind <= 3)]
    d = _Draws(a)
    ts = timestamp(a)
    hot = d.below(HOT_SELLERS_RATIO) > 0
    cold = _next_person(a, d)
    seller = np.where(hot, (last_person(a) // 100) * 100, cold) + FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + d.below(NUM_CATEGORIES)
    initial = _price(d)
    horizon = timestamp(a + NUM_IN_FLIGHT_AUCTIONS * 50 // 3) - ts
    expires = ts + 1 + d.below(np.maximum(2 * horizon, 1))
    out["Auction"] = {
        "event": a, "ts": ts, "id": last_auction(a) + FIRST_AUCTION_ID,
        "itemName": pools["item"][d.below(POOL)], "description": pools["desc"][d.below(POOL)],
        "initialBid": initial, "reserve": initial + _price(d), "dateTime": ts, "expires": expires,
        "seller": seller, "category": category, "extra": pools["aextra"][d.below(POOL)],
    }

    b = e[kind >= 4]
    d = _Draws(b)
    ts = timestamp(b)
    hot = d.below(HOT_AUCTION_RATIO) > 0
    cold = _next_auction(b, d)
    auction = np.where(hot, (last_auction(b) // 100) * 100, cold) + FIRST_AUCTION_ID
    hot = d.below(HOT_BIDDERS_RATIO) > 0
    cold = _next_person(b, d)
    bidder = np.where(hot, (last_person(b) // 100) * 100 + 1, cold) + FIRST_PERSON_ID
    price = _price(d)
    ch = d.below(POOL)
    out["Bid"] = {
        "event": b, "ts": ts, "auction": auction, "bidder": bidder, "price": price,
        "channel": pools["channel"][ch], "url": pools["url"][ch], "dateTime": ts,
        "extra": pools["bextra"][d.below(POOL)],
    }
    return out


def columns(ev: dict[str, np.ndarray], stream: str) -> dict[str, np.ndarray]:
    """The columns of ``stream`` (without ``ts`` and ``event``), as ``Engine.push`` takes them."""
    return {c: ev[c] for c, _ in SCHEMAS[stream]}
