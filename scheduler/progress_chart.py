"""Progress charts, their lower envelopes, and the chains and priorities they give (Chain scheduling).

Source: Babcock, Babu, Datar, Motwani, "Chain: operator scheduling for memory minimization in data stream
systems", SIGMOD 2003 (BBDM03), sections 3-4, as summarised in digest-004 section 2.G (BACKGROUND box) and
worked examples E1 and E2; P-12 for shared queues.

Paths. A path is a sequence of operators from a leaf input queue to an operator whose output leaves the plan.
Follow one input tuple along it: before operator i it is ``n_{i-1}`` tuples (the product of the
selectivities before i), which take ``cost_i * n_{i-1}`` time. The chart's points are (cumulative time,
memory still held): ``p_0 = (0, w_0)`` and ``p_i = (x_{i-1} + c_i n_{i-1}, n_i w_i)``, with ``w_i`` the size
of one tuple in operator i's output queue (1 when counting tuples); a sink has selectivity 0. The lower
envelope starts at ``p_0`` and repeatedly jumps to the later point with the steepest descent
``(y_a - y_b) / (x_b - x_a)``; on a tie it takes the furthest such point, so collinear operators form one
chain. Each segment is a chain and its slope (memory released per unit time) is the chain's priority.

Trees (our extension for shared queues, P-12). A queue with several readers frees an item only once every
reader has read it, so the unit of work is a *step*: all readers of one queue reading one tuple; it takes the
sum of their costs and turns the queue's tuple into all their outputs, each of which starts a subtree of its
own. A plan is then an out-tree of steps per leaf queue, and the lower envelope generalises to the ratio rule
for out-trees (Horn 1972; Sidney's decomposition): the children's block lists are merged by decreasing slope,
the step goes in front, and while the front block is less steep than the next one they are merged. On a plain
path this gives exactly the lower envelope (``tree_blocks`` and ``chains`` agree on E1 and E2).
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
    """One operator on a path: cost per input tuple, output tuples per input tuple (0 for a sink) and the size
    of one output tuple (1 when counting tuples)."""

    op: Hashable
    cost: float
    selectivity: float
    width: float = 1.0


@dataclass(frozen=True)
class Segment:
    """A segment of a path's lower envelope: the chain of operators it covers, its end points, its slope."""

    ops: tuple[Hashable, ...]
    start: Point
    end: Point
    slope: float


def progress_points(stages: Sequence[Stage], leaf_width: float = 1.0) -> list[Point]:
    """The progress chart of one input tuple along ``stages``.

    >>> progress_points([Stage("O1", 1.0, 0.2), Stage("O2", 5.0, 0.0)])   # digest-004 E1, per n tuples
    [(0.0, 1.0), (1.0, 0.2), (2.0, 0.0)]
    """
    x, n = 0.0, 1.0
    points = [(0.0, float(leaf_width))]
    for s in stages:
        x += s.cost * n
        n *= s.selectivity
        points.append((x, n * s.width))
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
            if s >= best_slope - _tol(best_slope):     # a tie goes to the later point: one longer chain
                best, best_slope = b, max(s, best_slope)
        segs.append((a, best, _clean(best_slope)))
        a = best
    return segs


def _tol(x: float) -> float:
    return 1e-12 * max(1.0, abs(x)) if math.isfinite(x) else 0.0


def _clean(x: float) -> float:
    """Round away binary noise (0.39999999999999997 -> 0.4) so that equal slopes compare equal."""
    return float(f"{x:.12g}") if math.isfinite(x) else x


def chains(stages: Sequence[Stage], leaf_width: float = 1.0) -> list[Segment]:
    """The chains of one path, in path order, each with its priority (the slope of its segment).

    >>> [(c.ops, c.slope) for c in chains([Stage("O1", 1, 1.0), Stage("O2", 1, 0.2), Stage("O3", 5, 0.0)])]
    [(('O1', 'O2'), 0.4), (('O3',), 0.2)]
    """
    pts = progress_points(stages, leaf_width)
    return [Segment(tuple(s.op for s in stages[a:b]), pts[a], pts[b], sl) for a, b, sl in lower_envelope(pts)]


def time_to_end(stages: Sequence[Stage]) -> float:
    """Processing time one tuple waiting before ``stages[0]`` still needs to leave the plan.

    >>> time_to_end([Stage("O1", 1.0, 0.2), Stage("O2", 5.0, 0.0)])
    2.0
    """
    return progress_points(stages)[-1][0] if stages else 0.0


# ---------------------------------------------------------------------------------------------- trees of steps

class Block:
    """Consecutive steps run as one unit: the operators they run, memory freed (negative: grown), time, and
    the slope that follows from them (computed once: Chain's recompute compares slopes many times). A value:
    never changed after it is made."""

    __slots__ = ("ops", "freed", "time", "slope")

    def __init__(self, ops: tuple[Hashable, ...], freed: float, time: float) -> None:
        self.ops, self.freed, self.time = ops, freed, time
        if time > 0:
            x = freed / time
            self.slope = float(f"{x:.12g}") if x - x == 0 else x        # _clean(slope(..)), inlined
        else:
            self.slope = math.inf if freed > 0 else (0.0 if freed == 0 else -math.inf)

    def __add__(self, other: Block) -> Block:
        return Block(self.ops + other.ops, self.freed + other.freed, self.time + other.time)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Block) and (self.ops, self.freed, self.time) == (other.ops, other.freed, other.time)

    def __hash__(self) -> int:
        return hash((self.ops, self.freed, self.time))

    def __repr__(self) -> str:
        return f"Block(ops={self.ops!r}, freed={self.freed!r}, time={self.time!r})"


def tree_blocks(step: Block, children: Sequence[list[Block]]) -> list[Block]:
    """The blocks of a step followed by its children's subtrees, steepest first (Horn's rule).

    A path is a tree whose steps have one child each; then the blocks are the lower envelope's segments:

    >>> e2 = tree_blocks(Block(("O1",), 0.0, 1), [tree_blocks(Block(("O2",), 0.8, 1), [[Block(("O3",), 0.2, 1)]])])
    >>> [(b.ops, b.slope) for b in e2]
    [(('O1', 'O2'), 0.4), (('O3',), 0.2)]
    """
    if not children:
        return [step]
    if len(children) == 1:
        out = [step, *children[0]]         # a child's blocks are already steepest first
    else:
        out = [step, *sorted((b for blocks in children for b in blocks), key=_neg_slope)]
    while len(out) >= 2:
        s1 = out[1].slope
        if not out[0].slope <= s1 + (1e-12 * max(1.0, abs(s1)) if s1 - s1 == 0 else 0.0):     # _tol(s1)
            break
        out[0:2] = [out[0] + out[1]]
    return out


def _neg_slope(b: Block) -> float:
    return -b.slope


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
