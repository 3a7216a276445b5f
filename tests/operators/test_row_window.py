"""The ``[ROWS N]`` window keeps its rows as a list of chunks (views of the input batches) and takes each
batch's evictions from the front: its output equals a deque model's, element by element, for batches smaller
and larger than the window, windows of one row and of many batches, across many batches."""

from collections import deque

import numpy as np
import pytest

from dsms.batch import Batch
from dsms.operators.row_window import RowWindowOp
from dsms.queues import Queue


def model(rows: int, elements: list[tuple[int, int]]) -> list[tuple]:
    """Each element is inserted at its timestamp, then the element N places before it leaves (same instant)."""
    window: deque = deque()
    out = []
    for t, v in elements:
        out.append((t, 1, (v,)))
        window.append(v)
        if len(window) > rows:
            out.append((t, -1, (window.popleft(),)))
    return out


@pytest.mark.parametrize("rows", [1, 7, 1000, 5000])
def test_row_window_equals_a_deque(rows):
    rng = np.random.default_rng(rows)
    inp, out = Queue(), Queue()
    reader = out.reader()
    op = RowWindowOp(rows, inp, out)
    elements, got, t, v = [], [], 0, 0
    for _ in range(150):
        n = int(rng.choice([1, 3, 64, 1024, 3 * rows + 1]))
        ts = t + np.sort(rng.integers(0, 3, n))
        vals = np.arange(v, v + n)
        t, v = int(ts[-1]), v + n
        elements += zip(ts.tolist(), vals.tolist())
        op.on_batch(0, Batch(ts.astype(np.int64), np.ones(n, np.int8), [vals]))
        while (item := reader.get()) is not None:
            if isinstance(item, Batch):
                got += zip(item.ts.tolist(), item.sign.tolist(), item.rows())
        assert op.held == min(rows, len(elements)) == op.store.rows()
    assert got == model(rows, elements)
