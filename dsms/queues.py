"""Inter-operator queues, shared by any number of readers (STREAM's shared queue, digest-004 R-SHR-02, E9).

The queue keeps one read position per reader; an item is dropped once every reader has passed it, so the queue
holds what its slowest reader has not read yet. Items are batches and heartbeats in timestamp order.
"""

from __future__ import annotations

from collections import deque

from dsms.batch import Batch, Heartbeat

Item = Batch | Heartbeat


class Queue:
    """A FIFO of batches and heartbeats with one cursor per reader."""

    def __init__(self, qid: str = "") -> None:
        self.id = qid
        self._items: deque[Item] = deque()
        self._base = 0                       # absolute index of _items[0]
        self._readers: list[QueueReader] = []
        self.tuples = 0                      # rows currently held
        self.bytes = 0                       # bytes currently held
        self.peak_bytes = 0
        self.tuples_in = 0
        self.last_ts: int | None = None      # largest timestamp or heartbeat written
        self.capacity: int | None = None     # rows; a full queue keeps its producer from being scheduled

    def reader(self) -> QueueReader:
        r = QueueReader(self, self._base + len(self._items))
        self._readers.append(r)
        return r

    def detach(self, reader: QueueReader) -> None:
        self._readers.remove(reader)
        self._trim()

    @property
    def readers(self) -> int:
        return len(self._readers)

    def put(self, item: Item) -> None:
        if isinstance(item, Batch):
            if len(item) == 0:
                return
            self.tuples += len(item)
            self.tuples_in += len(item)
            last = item.last_ts
        else:
            if self.last_ts is not None and item.ts <= self.last_ts:
                return                       # adds no information
            last = item.ts
        if not self._readers:
            self.last_ts = last
            return                           # nobody will ever read it
        nb = item.nbytes
        self.bytes += nb
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        self._items.append(item)
        self.last_ts = last

    def full(self) -> bool:
        return self.capacity is not None and self.tuples >= self.capacity

    def _trim(self) -> None:
        if not self._readers:
            low = self._base + len(self._items)
        else:
            low = min(r.pos for r in self._readers)
        while self._base < low:
            item = self._items.popleft()
            self._base += 1
            self.bytes -= item.nbytes
            self.tuples -= len(item)

    def __len__(self) -> int:
        return len(self._items)

    def oldest_ts(self) -> int | None:
        """Timestamp of the oldest held item (for FIFO tie-breaking in the scheduler)."""
        for item in self._items:
            if isinstance(item, Batch):
                return int(item.ts[0])
            return item.ts
        return None


class QueueReader:
    """One reader's cursor into a shared queue."""

    __slots__ = ("queue", "pos")

    def __init__(self, queue: Queue, pos: int) -> None:
        self.queue = queue
        self.pos = pos

    def pending(self) -> int:
        return self.queue._base + len(self.queue._items) - self.pos

    def get(self) -> Item | None:
        q = self.queue
        i = self.pos - q._base
        if i >= len(q._items):
            return None
        item = q._items[i]
        self.pos += 1
        if i == 0:
            q._trim()
        return item

    def peek_rows(self) -> int:
        """Rows not yet read by this reader."""
        q = self.queue
        start = self.pos - q._base
        return sum(len(q._items[i]) for i in range(start, len(q._items)))
