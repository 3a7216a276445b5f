"""A harness around one operator, the way bytewax tests a step with ``TestingSource`` and ``TestingSink``:
queues on its inputs and its output, ``push`` batches and ``heartbeat``s in, ``run`` it, and read back the
elements it wrote (as ``(ts, sign, row)``) and the frontier it passed on."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dsms.batch import Batch, Heartbeat
from dsms.cql.parser import parse_expr
from dsms.expr.compile import CompiledExpr, compile_expr
from dsms.operators.base import Operator
from dsms.queues import Queue

NUMPY = {"INT": np.dtype(np.int64), "FLOAT": np.dtype(np.float64), "STRING": np.dtype(object),
         "BOOLEAN": np.dtype(np.bool_), "TIMESTAMP": np.dtype(np.int64)}


def batch(ts: Sequence[int], rows: Sequence[tuple], types: Sequence[str], sign: Sequence[int] | None = None
          ) -> Batch:
    """A columnar batch of ``rows`` (tuples in the order of ``types``) stamped ``ts``; signs +1 unless given."""
    cols = []
    for j, t in enumerate(types):
        col = np.empty(len(rows), dtype=NUMPY[t])
        col[:] = [r[j] for r in rows] if rows else []
        cols.append(col)
    signs = np.ones(len(ts), np.int8) if sign is None else np.asarray(sign, np.int8)
    return Batch(np.asarray(ts, np.int64), signs, cols)


def compiled(text: str, schema: Sequence[tuple[str, str]]) -> CompiledExpr:
    """A CQL expression over the named columns of ``schema`` ((name, TYPE) pairs), compiled to read the
    positional columns an operator's input batch has."""
    names = [n for n, _ in schema]

    def resolve(ref):
        i = names.index(ref.name)
        return f"${i}", schema[i][1]

    return compile_expr(parse_expr(text), resolve)


class Harness:
    """``make(*input_queues, output_queue)`` builds the operator under test."""

    def __init__(self, make: Callable[..., Operator], inputs: int = 1) -> None:
        self.inputs = [Queue() for _ in range(inputs)]
        self.output = Queue()
        self.reader = self.output.reader()
        self.op = make(*self.inputs, self.output)
        self.frontier: int | None = None          # what the output has passed: its newest timestamp or heartbeat

    def push(self, ts: Sequence[int], rows: Sequence[tuple], types: Sequence[str],
             sign: Sequence[int] | None = None, side: int = 0) -> None:
        self.inputs[side].put(batch(ts, rows, types, sign))

    def heartbeat(self, ts: int, side: int | None = None) -> None:
        for q in self.inputs if side is None else [self.inputs[side]]:
            q.put(Heartbeat(ts))

    def run(self, budget: int = 1 << 30) -> list[tuple[int, int, tuple]]:
        """Run the operator while it has input, then drain its output: the elements written, in order."""
        while self.op.ready():
            if not self.op.run(budget):
                break
        out = []
        while (item := self.reader.get()) is not None:
            if isinstance(item, Batch):
                out += zip(item.ts.tolist(), item.sign.tolist(), item.rows())
            self.frontier = int(item.ts[-1]) if isinstance(item, Batch) else item.ts
        return out
