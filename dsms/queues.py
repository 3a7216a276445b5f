"""Inter-operator queues, shared by any number of readers (STREAM's shared queue, digest-004 R-SHR-02, E9).

The queue keeps one read position per reader; an item is dropped once every reader has passed it, so the queue
holds what its slowest reader has not read yet. Items are batches and heartbeats in timestamp order.
"""

from __future__ import annotations

from collections import deque

from control_tables import Entity, Knob, Stat
from dsms.batch import Batch, Heartbeat

Item = Batch | Heartbeat


class Queue(Entity):
    """A FIFO of batches and heartbeats with one cursor per reader."""

    prefix = "queue"
    kind = "queue"
    tuples = Stat(int, default=0, unit="tuples", doc="rows held (not yet read by every reader)")
    bytes = Stat(int, default=0, unit="bytes", doc="bytes held")
    peak_bytes = Stat(int, default=0, unit="bytes", doc="largest bytes held so far")
    tuples_in = Stat(int, default=0, unit="tuples", doc="rows ever written")
    items = Stat(int, compute="__len__", unit="items", doc="batches and heartbeats held")
    reader_count = Stat(int, compute="_reader_count", name="readers", doc="operators (and result readers) "
                        "reading this queue; more than one means the queue is shared")
    last_ts = Stat(int | None, default=None, unit="ticks", doc="largest timestamp or heartbeat written")
    capacity = Knob(int | None, default=None, ge=1, unit="tuples", doc="when the queue holds this many rows "
                    "its producer is not scheduled (None: unbounded)")

    def __init__(self, qid: str | None = None) -> None:
        if qid:
            self.id = qid
        self._items: deque[Item] = deque()
        self._base = 0                       # absolute index of _items[0]
        self._readers: list[QueueReader] = []

    def _reader_count(self) -> int:
        return len(self._readers)

    def reader(self) -> QueueReader:
        r = QueueReader(self, self._base + len(self._items))
        self._readers.append(r)
        return r

    def detach(self, reader: QueueReader) -> None:
        self._readers.remove(reader)
        self._trim()

    def put(self, item: Item) -> None:
        if type(item) is Batch:
            n = len(item.ts)
            if n == 0:
                return
            self.tuples_in += n
            last = item.ts.item(-1)
        else:
            if self.last_ts is not None and item.ts <= self.last_ts:
                return                       # adds no information
            n = 0
            last = item.ts
        if not self._readers:
            self.last_ts = last
            return                           # nobody will ever read it
        self.tuples += n
        self.bytes += item.nbytes
        if self.bytes > self.peak_bytes:
            self.peak_bytes = self.bytes
        self._items.append(item)
        self.last_ts = last

    def has_readers(self) -> bool:
        return bool(self._readers)

    def put_unread(self, rows: int, last_ts: int) -> None:
        """What ``put`` records of a batch of ``rows`` rows ending at ``last_ts`` when the queue has no reader
        (the batch itself is dropped, so the caller need not build it): an input stream no query reads."""
        if self._readers:
            raise RuntimeError(f"{self.id} has readers: put the batch")
        if rows:
            self.tuples_in += rows
            self.last_ts = last_ts

    def full(self) -> bool:
        cap = self._knob_capacity      # the knob's stored value, read without its descriptor: asked of every
        return cap is not None and self.tuples >= cap     # ready operator's output at every step of a run

    def _trim(self) -> None:
        readers = self._readers
        if not readers:
            low = self._base + len(self._items)
        elif len(readers) == 1:
            low = readers[0].pos
        elif len(readers) == 2:             # a stream read by two operators (NEXMark q7's Bid): no generator
            a, b = readers[0].pos, readers[1].pos
            low = a if a < b else b
        else:
            low = min(r.pos for r in readers)
        items = self._items
        while self._base < low:
            item = items.popleft()
            self._base += 1
            self.bytes -= item.nbytes
            self.tuples -= len(item.ts) if type(item) is Batch else len(item)

    def __len__(self) -> int:
        return len(self._items)

    def oldest_ts(self) -> int | None:
        """Timestamp of the oldest held item (for FIFO tie-breaking in the scheduler)."""
        for item in self._items:
            if isinstance(item, Batch):
                return int(item.ts[0])
            return item.ts
        return None


assert Queue.capacity.slot == "_knob_capacity"      # where ``full`` reads the knob


class QueueReader:
    """One reader's cursor into a shared queue."""

    __slots__ = ("queue", "pos", "shed")

    def __init__(self, queue: Queue, pos: int) -> None:
        self.queue = queue
        self.pos = pos
        self.shed = None             # a load shedder's random drop on this edge (dsms/operators/shed.py)

    def pending(self) -> int:
        return self.queue._base + len(self.queue._items) - self.pos

    def get(self) -> Item | None:
        q = self.queue
        items = q._items
        i = self.pos - q._base
        if i >= len(items):
            return None
        item = items[i]
        self.pos += 1
        if i == 0:
            readers = q._readers
            if len(readers) == 1 and readers[0] is self:    # _trim inlined: the item was the oldest
                items.popleft()
                q._base += 1
                if type(item) is Batch:                     # its byte count was taken when it was put
                    nb = item._nbytes
                    q.bytes -= item.nbytes if nb is None else nb
                    q.tuples -= len(item.ts)
                else:
                    q.bytes -= item.nbytes
                    q.tuples -= len(item)
            else:
                q._trim()
        if self.shed is not None:
            return self.shed.thin(item)
        return item

    def oldest_ts(self) -> int | None:
        """Timestamp of the oldest item this reader has not read (FIFO order for the scheduler)."""
        q = self.queue
        i = self.pos - q._base
        if i >= len(q._items):
            return None
        item = q._items[i]
        return int(item.ts[0]) if isinstance(item, Batch) else item.ts

    def stamps(self) -> list[tuple[int, int]]:
        """(first timestamp, rows) of each unread item: how long each has waited, for Chain-Flush."""
        q = self.queue
        out = []
        for k in range(self.pos - q._base, len(q._items)):
            item = q._items[k]
            out.append((int(item.ts[0]), len(item)) if isinstance(item, Batch) else (item.ts, 0))
        return out

    def peek_rows(self) -> int:
        """Rows not yet read by this reader."""
        q = self.queue
        start = self.pos - q._base
        return sum(len(q._items[i]) for i in range(start, len(q._items)))
