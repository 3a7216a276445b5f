"""Result fan-out: what flows from a query's output to its readers (SPEC section 7).

Results are read from each query's output after every engine slice and offered to a retention ring (what
``?from=`` replays) and to every subscriber. A subscriber's buffer is bounded, in elements and in bytes; what
does not fit becomes a gap marker, so a slow reader never slows the engine or other readers. All readers
together hold at most ``results.reader_memory`` bytes unread (``ReaderBudget``): past it, the reader furthest
behind is disconnected with a final message saying why and where to resume (issue 18: three readers that never
read pinned 630 MB). Each result batch is shared by the ring and every reader and encoded once per output
format, however many want it.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsms.approx import Approx
from dsms.batch import ApproxElement, Batch, Element, Heartbeat, column_bytes
from dsms.engine import Query
from dsms.formats import iso_text, mark_approx


class ResultChunk:
    """One result batch, shared by the retention ring and every subscriber; the bytes of each output format
    are computed once and cached, however many readers want them.

    ``ts``, ``sign`` and each column are the engine's numpy arrays as produced (never copied into Python
    lists: the encoders work column-wise on them), or plain lists (tests, tools); both behave the same."""

    __slots__ = ("names", "ts", "sign", "cols", "_enc", "_nbytes", "seq", "snapshot", "approx")

    def __init__(self, names: list[str], ts: Any, sign: Any, cols: list[Any], seq: int | None = None,
                 snapshot: bool = False, approx: Approx | None = None) -> None:
        self.names = names
        self.ts = ts
        self.sign = sign
        self.cols = cols
        self._enc: dict[str, bytes] = {}
        self._nbytes: int | None = None
        # ``seq``: the id of the first element (the k-th result element of the query has id k; SSE ``id:``);
        # for a snapshot (a relation's contents, ``snapshot``), the id of the last element it includes
        self.seq = seq
        self.snapshot = snapshot
        self.approx = approx              # produced while the query was approximate (None: exact)

    @property
    def nbytes(self) -> int:
        """The memory this batch holds, roughly (arrays, plus the strings of object columns), computed once."""
        if self._nbytes is None:
            self._nbytes = sum(_col_bytes(c) for c in (self.ts, self.sign, *self.cols))
        return self._nbytes

    @classmethod
    def from_batch(cls, names: list[str], b: Batch, approx: Approx | None = None) -> ResultChunk:
        """The engine's batch as a chunk; its bytes are the batch's (the same arrays, counted the same way by
        ``column_bytes``, and already counted when the batch was queued), not counted again."""
        chunk = cls(names, b.ts, b.sign, list(b.cols), approx=approx)
        chunk._nbytes = b.nbytes
        return chunk

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def first_ts(self) -> int:
        return int(self.ts[0])

    @property
    def last_ts(self) -> int:
        return int(self.ts[-1])

    def since(self, from_ts: int) -> ResultChunk | None:
        """The elements with ts >= from_ts (None when there are none); timestamps never decrease."""
        if self.first_ts >= from_ts:
            return self
        i = int(np.searchsorted(np.asarray(self.ts), from_ts, side="left"))
        if i >= len(self):
            return None
        return self.cut(i)

    def cut(self, i: int) -> ResultChunk:
        """The elements from position ``i`` on (numpy slices are views: no element is copied)."""
        seq = self.seq + i if self.seq is not None and not self.snapshot else self.seq
        return ResultChunk(self.names, self.ts[i:], self.sign[i:], [c[i:] for c in self.cols], seq, self.snapshot,
                           self.approx)

    def encode(self, encoder: Any, iso: bool = False) -> bytes:
        """The elements in ``encoder``'s format; with ``iso``, timestamps as ISO 8601 text (``?ts=iso``)."""
        key = encoder.name + (":iso" if iso else "")
        data = self._enc.get(key)
        if data is None:
            ts = [iso_text(t) for t in _plain(self.ts)] if iso else self.ts
            data = encoder.elements(self.names, ts, self.sign, self.cols)
            if self.approx is not None:
                data = mark_approx(encoder.name, data, self.approx)
            if encoder.frame is not None:
                data = encoder.frame(data, self.seq, self.snapshot)
            self._enc[key] = data
        return data

    def elements(self) -> list[Element]:
        ts, sign, cols = _plain(self.ts), _plain(self.sign), [_plain(c) for c in self.cols]
        if self.approx is not None:
            return [ApproxElement(t, s, dict(zip(self.names, vals)), self.approx)
                    for t, s, *vals in zip(ts, sign, *cols)]
        return [Element(t, s, dict(zip(self.names, vals))) for t, s, *vals in zip(ts, sign, *cols)]


def _col_bytes(values: Any) -> int:
    """A column's bytes: numpy columns as a batch counts them (strings estimated from a sample, not walked:
    a chunk is sized on every fan-out), plain lists (tests, tools) value by value."""
    if isinstance(values, np.ndarray):
        return column_bytes(values)
    return 8 * len(values) + sum(sys.getsizeof(v) for v in values)


def _plain(values: Any) -> list:
    """A column as a list of Python values."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


@dataclass
class Gap:
    """``missed`` elements with timestamps ``from_ts..to_ts`` were not delivered to this reader."""

    missed: int
    from_ts: int | None
    to_ts: int | None


@dataclass(frozen=True)
class HeartbeatMark:
    """The query's output has passed ``ts``: results below it are final."""

    ts: int


@dataclass(frozen=True)
class SnapshotMark:
    """A relation's current contents follow: ``rows`` elements at ``ts`` (then its changelog goes on)."""

    ts: int
    rows: int


@dataclass(frozen=True)
class Closed:
    """The stream ends: the query was dropped, the server is stopping, or the reader fell so far behind that
    it was disconnected (then ``resume_from`` is the first timestamp it did not get)."""

    reason: str
    resume_from: int | None = None


class ReaderBudget:
    """The bytes all the readers of a server hold unread, against ``limit`` (``results.reader_memory``).

    When a batch offered to a reader would take the total past the limit, the readers holding the most are
    disconnected (``Subscriber.evict``) until it fits: the one furthest behind goes, the others are untouched."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.disconnected = 0
        self.readers: set[Subscriber] = set()

    def make_room(self, nbytes: int) -> None:
        while self.used + nbytes > self.limit:
            held = [r for r in self.readers if r.bytes > 0]
            if not held:
                return
            max(held, key=lambda r: r.bytes).evict(self)

    def stats(self) -> dict[str, int]:
        return {"bytes": self.used, "peak_bytes": self.peak, "limit": self.limit,
                "disconnected": self.disconnected}


class Subscriber:
    """One reader of a query's results, with a buffer bounded in elements (``capacity``) and in bytes
    (``max_bytes``), inside the server-wide ``budget``.

    ``offer`` never blocks: when an element batch does not fit the reader's own bounds, it is counted into a gap
    marker placed where it would have been, so the reader learns exactly what it missed and where. One batch is
    always accepted into an empty buffer, so a batch larger than the buffer does not starve a reader that keeps
    up. When the server's readers together would hold more than the budget, the reader holding the most is
    disconnected instead (``evict``): its unread results are freed and it is closed with the reason and the
    timestamp to resume from (``?from=``)."""

    def __init__(self, query_id: str, capacity: int, max_bytes: int | None = None,
                 budget: ReaderBudget | None = None) -> None:
        self.query_id = query_id
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.budget = budget
        self.items: collections.deque[Any] = collections.deque()
        self.buffered = 0
        self.bytes = 0
        self.missed = 0
        self.delivered = 0
        self.closed: Closed | None = None
        self._event = asyncio.Event()
        if budget is not None:
            budget.readers.add(self)

    def _hold(self, chunk: ResultChunk) -> None:
        self.items.append(chunk)
        self.buffered += len(chunk)
        b = chunk.nbytes
        self.bytes += b
        if self.budget is not None:
            self.budget.used += b
            self.budget.peak = max(self.budget.peak, self.budget.used)

    def _release(self) -> None:
        if self.budget is not None:
            self.budget.used -= self.bytes
        self.bytes = 0
        self.buffered = 0

    def evict(self, budget: ReaderBudget) -> None:
        """Disconnect this reader to keep the server within its reader memory budget."""
        first = next((it.first_ts for it in self.items if isinstance(it, ResultChunk)), None)
        held = self.bytes
        self.items.clear()
        self._release()
        budget.disconnected += 1
        self.closed = Closed(
            f"disconnected: this reader fell too far behind. The server's readers may hold "
            f"{budget.limit} bytes of unread results (results.reader_memory) and this one held the most "
            f"({held} bytes); reconnect with ?from={first} to resume" if first is not None else
            "disconnected: the server's readers hold more unread results than results.reader_memory allows",
            resume_from=first)
        self._event.set()

    def discard(self) -> None:
        """The reader is gone: free what it held and leave the budget."""
        self.items.clear()
        self._release()
        if self.budget is not None:
            self.budget.readers.discard(self)
        self.close("unsubscribed")

    def offer(self, item: ResultChunk | HeartbeatMark) -> None:
        if self.closed is not None:
            return
        last = self.items[-1] if self.items else None
        if isinstance(item, HeartbeatMark):
            if isinstance(last, Gap):
                return                        # the gap already says how far the stream has gone
            if isinstance(last, HeartbeatMark):
                self.items[-1] = item
            else:
                self.items.append(item)
            self._event.set()
            return
        n = len(item)
        fits_bytes = self.max_bytes is None or self.bytes + item.nbytes <= self.max_bytes
        if self.buffered == 0 or (self.buffered + n <= self.capacity and fits_bytes):
            if self.budget is not None:
                self.budget.make_room(item.nbytes)
                if self.closed is not None:      # this reader was the one furthest behind
                    return
            self._hold(item)
        else:
            self.missed += n
            if isinstance(last, Gap):
                last.missed += n
                last.to_ts = item.last_ts
            else:
                self.items.append(Gap(n, item.first_ts, item.last_ts))
        self._event.set()

    def close(self, reason: str) -> None:
        if self.closed is None:
            self.closed = Closed(reason)
            self._event.set()

    def take(self) -> list[Any]:
        """Everything buffered, oldest first (and the close marker last, once closed and empty)."""
        out = list(self.items)
        self.items.clear()
        for it in out:
            if isinstance(it, ResultChunk):
                self.delivered += len(it)
        self._release()
        self._event.clear()
        if not out and self.closed is not None:
            return [self.closed]
        return out

    async def get(self, timeout: float | None = None) -> list[Any]:
        """Wait up to ``timeout`` seconds for something to read; returns [] on timeout. (``asyncio.timeout``
        rather than ``wait_for``: no task is made for every wait, and a reader waits once per result batch.)"""
        if not self.items and self.closed is None:
            try:
                async with asyncio.timeout(timeout):
                    await self._event.wait()
            except TimeoutError:
                return []
        return self.take()


class QueryResults:
    """What the runtime keeps for one registered query besides the engine's Query object: its retention
    ring, its readers and its output statistics."""

    def __init__(self, query: Query, retention: int) -> None:
        self.query = query
        self.names = [c for c, _ in query.schema]
        self.retention = retention
        self.ring: collections.deque[ResultChunk] = collections.deque()
        self.ring_elements = 0
        self.subscribers: set[Subscriber] = set()
        self.results_out = 0
        self.batches_out = 0
        self.last_heartbeat: int | None = None
        self.last_ts: int | None = None
        self.missed = 0
        self.publisher_task: asyncio.Task | None = None

    def retain(self, chunk: ResultChunk) -> None:
        if self.retention <= 0:
            return
        self.ring.append(chunk)
        self.ring_elements += len(chunk)
        while self.ring_elements - len(self.ring[0]) >= self.retention:
            self.ring_elements -= len(self.ring.popleft())
        if self.ring_elements > self.retention:          # cut the oldest chunk to fit exactly
            cut = self.ring_elements - self.retention
            self.ring[0] = self.ring[0].cut(cut)
            self.ring_elements -= cut

    def fan_out(self, b: Batch, deliver: bool = True, approx: Approx | None = None) -> None:
        """One result batch: counted, retained, offered to every reader (each gap counted as missed);
        ``approx`` when the query was approximate as it was produced."""
        chunk = ResultChunk.from_batch(self.names, b, approx)
        chunk.seq = self.results_out + 1
        self.results_out += len(chunk)
        self.batches_out += 1
        self.last_ts = chunk.last_ts
        self.retain(chunk)
        if not deliver:
            return
        for sub in self.subscribers:
            before = sub.missed
            sub.offer(chunk)
            self.missed += sub.missed - before

    def close(self, reason: str) -> None:
        """The query is gone (dropped, or the server stops): every reader hears why, the publisher stops."""
        for sub in list(self.subscribers):
            sub.close(reason)
        if self.publisher_task is not None:
            self.publisher_task.cancel()

    def approximation(self) -> dict[str, Any]:
        """Whether the query's results are exact now, and since when (application time; None: since it was
        registered), with the approximation in effect when they are not."""
        a = self.query.approx
        return {"exact": a is None, "since": self.query.approx_since, "approx": None if a is None else a.as_json()}

    def stats(self) -> dict[str, Any]:
        return {"results_out": self.results_out, "subscribers": len(self.subscribers),
                "retained": self.ring_elements, "retention": self.retention, "missed_by_readers": self.missed,
                "last_ts": self.last_ts, "last_heartbeat": self.last_heartbeat}

    def oldest_seq(self) -> int:
        """The id of the oldest element the ring holds (of the next one when it holds none)."""
        return self.ring[0].seq if self.ring else self.results_out + 1

    def can_resume(self, after: int) -> bool:
        """Whether a reader that has the elements up to id ``after`` can go on from the ring: a stream's
        always (what the ring no longer holds is reported as a gap), a relation's only while the ring holds
        every change since (else it starts afresh from a snapshot)."""
        return self.query.kind != "relation" or after + 1 >= self.oldest_seq()

    def subscribe(self, capacity: int, from_ts: int | None = None, *, after: int | None = None,
                  contents: list[tuple] | None = None, now: int = 0, max_bytes: int | None = None,
                  budget: ReaderBudget | None = None) -> Subscriber:
        """A new reader, its buffer bounded by ``capacity`` elements and ``max_bytes`` inside the server's
        ``budget``. With ``after`` (the id of the last element it has, SSE's Last-Event-ID), the retained
        elements after it are queued first, preceded by a gap for those the ring no longer holds; else with
        ``contents`` (a relation's current rows), a snapshot of them; else with ``from_ts``, retained results
        with ts >= from_ts (as much as the ring holds; replayed results are bounded by the ring, not the
        buffer, and shared with it)."""
        sub = Subscriber(self.query.id, capacity, max_bytes, budget)
        if after is not None:
            oldest = self.oldest_seq()
            if after + 1 < oldest:
                sub.items.append(Gap(oldest - after - 1, None, None))
            for chunk in self.ring:
                if chunk.seq + len(chunk) - 1 > after:
                    part = chunk.cut(max(after + 1 - chunk.seq, 0))
                    sub.items.append(part)
                    sub.buffered += len(part)
        elif contents is not None:
            self._snapshot_into(sub, contents, now)
        elif from_ts is not None:
            for chunk in self.ring:
                if chunk.last_ts < from_ts:
                    continue
                part = chunk.since(from_ts)
                if part is not None:
                    sub.items.append(part)
                    sub.buffered += len(part)
        self.subscribers.add(sub)
        return sub

    def _snapshot_into(self, sub: Subscriber, rows: list[tuple], now: int) -> None:
        """Queue ``rows`` (the query's contents once everything it produced has been fanned out, so the
        changelog the reader gets next starts right after them) as a snapshot at the latest known instant."""
        ts = max([t for t in (self.last_ts, None if self.last_heartbeat is None else self.last_heartbeat - 1)
                  if t is not None], default=now)
        sub.items.append(SnapshotMark(ts, len(rows)))
        if rows:
            cols = [list(c) for c in zip(*rows)]
            # a new copy of the rows, unlike the ring's shared batches: counted against the reader's bytes
            sub._hold(ResultChunk(self.names, [ts] * len(rows), [1] * len(rows), cols, self.results_out,
                                  snapshot=True))

    def set_retention(self, n: int) -> None:
        self.retention = n
        if n <= 0:
            self.ring.clear()
            self.ring_elements = 0
        elif self.ring:
            chunks = list(self.ring)
            self.ring.clear()
            self.ring_elements = 0
            for c in chunks:
                self.retain(c)


def collect(states: Iterable[QueryResults], deliver: bool = True) -> None:
    """Read what every query's output holds and hand it on: data to the ring and (unless ``deliver`` is
    false, as during recovery, when nobody is connected yet) to the readers, the newest heartbeat to the
    readers as a mark that results below it are final."""
    for st in list(states):
        hb: int | None = None
        approx = st.query.approximation()
        while True:
            item = st.query.reader.get()
            if item is None:
                break
            if isinstance(item, Batch):
                if len(item):
                    if approx is not None:
                        item = st.query.engine.shedder.scaled(st.query, item)
                    st.fan_out(item, deliver, approx)
            elif isinstance(item, Heartbeat):
                hb = item.ts
        if hb is not None and (st.last_heartbeat is None or hb > st.last_heartbeat):
            st.last_heartbeat = hb
            mark = HeartbeatMark(hb)
            for sub in st.subscribers:
                sub.offer(mark)


def iter_results(items: Iterable[Any]) -> list[Element]:
    """Flatten subscriber items into elements (tests and tools)."""
    out: list[Element] = []
    for it in items:
        if isinstance(it, ResultChunk):
            out.extend(it.elements())
    return out
