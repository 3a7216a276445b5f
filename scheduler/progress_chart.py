"""Progress charts, their lower envelopes, and the chains and priorities they give (Chain scheduling).

Source: Babcock, Babu, Datar, Motwani, "Chain: operator scheduling for memory minimization in data stream
systems", SIGMOD 2003 (BBDM03), sections 3-4, as summarised in digest-004 section 2.G (BACKGROUND box) and
worked examples E1 and E2; P-12 for shared queues.

A path is a sequence of operators from a leaf input queue to an operator whose output leaves the plan. Follow
one input tuple along it: before operator i it is ``n_{i-1}`` tuples (the product of the selectivities
before i), which take ``cost_i * n_{i-1}`` time to process. The chart's points are (cumulative time, memory
still held): ``p_0 = (0, w_0)`` and ``p_i = (x_{i-1} + c_i n_{i-1}, held_i + n_i w_i)``, where ``w_i`` is
the size of one tuple in operator i's output queue (1 when counting tuples) and a sink has selectivity 0.

Shared queues (P-12). An item stays queued until its slowest reader has read it, so on a queue with several
readers one reader alone frees nothing: the chart takes all of them as one step (``Stage.group``). The step
costs the sum of their costs, frees the queue's tuples, and produces the outputs of all readers; the outputs
of the other readers (``Stage.side``) are left to their own paths and stay in this chart as ``held``, a
constant offset for the remaining points, which changes no later slope.

The lower envelope starts at ``p_0`` and repeatedly jumps to the later point with the steepest descent
``(y_a - y_b) / (x_b - x_a)``; on a tie it takes the furthest such point, so collinear operators form one
chain. Each segment is a chain and its slope (memory released per unit time) is the chain's priority.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

Point = tuple[float, float]
MAX_PATHS = 4096        # plans are small; a pathological DAG is cut off here rather than enumerated


@dataclass(frozen=True)
class Stage:
    """One step of a path: cost per input tuple, output tuples per input tuple on the path (0 for a sink),
    the size of one output tuple, and for a shared queue the other readers that read it in the same step
    (``group``) with the memory their outputs add per input tuple (``side``). A step's cost includes them."""

    op: Hashable
    cost: float
    selectivity: float
    width: float = 1.0
    side: float = 0.0
    group: tuple[Hashable, ...] = ()


@dataclass(frozen=True)
class Segment:
    """A segment of the lower envelope: the chain of operators it covers (a shared step contributes all its
    readers), its end points and its slope."""

    ops: tuple[Hashable, ...]
    start: Point
    end: Point
    slope: float
    span: tuple[int, int] = (0, 0)      # the stages it covers, stages[span[0]:span[1]]


def progress_points(stages: Sequence[Stage], leaf_width: float = 1.0) -> list[Point]:
    """The progress chart of one input tuple along ``stages``.

    >>> progress_points([Stage("O1", 1.0, 0.2), Stage("O2", 5.0, 0.0)])   # digest-004 E1, per n tuples
    [(0.0, 1.0), (1.0, 0.2), (2.0, 0.0)]
    """
    x, n, held, w_in = 0.0, 1.0, 0.0, float(leaf_width)
    points = [(0.0, n * w_in)]
    for s in stages:
        x += s.cost * n
        held += n * s.side
        n *= s.selectivity
        w_in = s.width
        points.append((x, held + n * w_in))
    return points


def slope(a: Point, b: Point) -> float:
    """Memory released per unit time from ``a`` to ``b``; a step that takes no time is infinitely steep."""
    dx, dy = b[0] - a[0], a[1] - b[1]
    if dx > 0:
        return dy / dx
    return math.inf if dy > 0 else (0.0 if dy == 0 else -math.inf)


def lower_envelope(points: Sequence[Point]) -> list[tuple[int, int, float]]:
    """Segments ``(a, b, slope)`` of the lower envelope, as indexes into ``points``.

    >>> lower_envelope([(0, 1), (1, 1), (2, 0.2), (3, 0)])                  # digest-004 E2
    [(0, 2, 0.4), (2, 3, 0.2)]
    """
    segs = []
    a = 0
    while a < len(points) - 1:
        best, best_slope = a + 1, -math.inf
        for b in range(a + 1, len(points)):
            s = slope(points[a], points[b])
            tol = 1e-12 * max(1.0, abs(best_slope)) if math.isfinite(best_slope) else 0.0
            if s >= best_slope - tol:       # ">=": a tie goes to the later point, one longer chain
                best, best_slope = b, max(s, best_slope)
        segs.append((a, best, _clean(best_slope)))
        a = best
    return segs


def _clean(x: float) -> float:
    """Round away binary noise (0.39999999999999997 -> 0.4) so that equal slopes compare equal."""
    return float(f"{x:.12g}") if math.isfinite(x) else x


def chains(stages: Sequence[Stage], leaf_width: float = 1.0) -> list[Segment]:
    """The chains of one path, in path order, each with its priority (the slope of its segment).

    >>> [(c.ops, c.slope) for c in chains([Stage("O1", 1, 1.0), Stage("O2", 1, 0.2), Stage("O3", 5, 0.0)])]
    [(('O1', 'O2'), 0.4), (('O3',), 0.2)]
    """
    pts = progress_points(stages, leaf_width)
    return [Segment(tuple(op for s in stages[a:b] for op in (s.op, *s.group)), pts[a], pts[b], sl, (a, b))
            for a, b, sl in lower_envelope(pts)]


def time_to_end(stages: Sequence[Stage]) -> float:
    """Processing time one tuple waiting before ``stages[0]`` still needs to leave the plan.

    >>> time_to_end([Stage("O1", 1.0, 0.2), Stage("O2", 5.0, 0.0)])
    2.0
    """
    return progress_points(stages)[-1][0] if stages else 0.0


def paths(topology: Any) -> Iterator[list[tuple[Any, int]]]:
    """Every path from a leaf input to a sink, as ``[(op, input index), ...]`` (``topology``: ``base.Topology``).

    A leaf input is an input queue no operator of the plan writes (a stream or relation source). A path stops
    at an operator whose output no operator reads. At most ``MAX_PATHS`` paths are produced.
    """
    count = 0
    writers = {id(op.output) for op in topology.ops}

    def walk(op: Any, i: int, prefix: list[tuple[Any, int]]) -> Iterator[list[tuple[Any, int]]]:
        nonlocal count
        here = [*prefix, (op, i)]
        nexts = [(c, j) for c, r in topology.readers_of.get(id(op.output), ())
                 for j, rr in enumerate(c.readers) if rr is r]
        nexts = [(c, j) for c, j in nexts if all(c is not p for p, _ in here)]   # never loop
        if not nexts:
            count += 1
            yield here
            return
        for c, j in nexts:
            if count >= MAX_PATHS:
                return
            yield from walk(c, j, here)

    for op in topology.ops:
        for i, q in enumerate(op.input_queues):
            if id(q) not in writers and count < MAX_PATHS:
                yield from walk(op, i, [])
