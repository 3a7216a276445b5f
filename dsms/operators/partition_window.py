"""Partitioned window ``[PARTITION BY a, b ROWS N]``: the N latest elements of each partition, unioned.

Source: SPEC section 3; digest-004 R-CQL-06 and pitfall P-2 (not a GROUP BY); digest-003 section 3.10
(expiry is not globally FIFO). State is one deque of rows per partition key.
"""

from __future__ import annotations

from collections import deque

from dsms.batch import Batch, from_rows
from dsms.operators.base import Operator
from dsms.queues import Queue
from synopses.base import deep_bytes
from synopses.state import StateSynopsis


class PartitionWindowOp(Operator):
    kind = "partition_window"

    def __init__(self, rows: int, partition: tuple[int, ...], inp: Queue, out: Queue) -> None:
        super().__init__([inp], out, f"PARTITION BY {', '.join(f'${p}' for p in partition)} ROWS {rows}")
        self.rows = rows
        self.partition = partition
        self.parts: dict[tuple, deque] = {}
        self.size = 0
        self.synopses = [StateSynopsis("partition windows", lambda: self.size,
                                       lambda: deep_bytes(self.parts))]

    def on_batch(self, i: int, batch: Batch) -> None:
        rows = batch.rows()
        ts_list = batch.ts.tolist()
        out_ts, out_sign, out_rows = [], [], []
        part, parts, n = self.partition, self.parts, self.rows
        for t, row in zip(ts_list, rows):
            key = tuple(row[p] for p in part)
            d = parts.get(key)
            if d is None:
                d = parts[key] = deque()
            d.append(row)
            out_ts.append(t)
            out_sign.append(1)
            out_rows.append(row)
            if len(d) > n:
                out_ts.append(t)
                out_sign.append(-1)
                out_rows.append(d.popleft())
            else:
                self.size += 1
        self.emit(from_rows(out_ts, out_sign, out_rows, [c.dtype for c in batch.cols]))
