"""Progress charts, lower envelopes, slopes and ties (BBDM03 sections 3-4; digest-004 2.G BACKGROUND)."""

from __future__ import annotations

import math
import random

import pytest
from schedsim import SimOp, SimQueue

from scheduler import Topology
from scheduler.progress_chart import (
    Block,
    Stage,
    chains,
    lower_envelope,
    paths,
    progress_points,
    slope,
    time_to_end,
    tree_blocks,
)


def summary(stages, leaf_width=1.0):
    return [(c.ops, c.slope) for c in chains(stages, leaf_width)]


def test_bbdm03_figure():
    """The Chain paper's example chart (0,1) (1,0.5) (4,0.25) (6,0): O1 alone, then O2+O3 as one chain."""
    stages = [Stage("O1", 1, 0.5), Stage("O2", 6, 0.5), Stage("O3", 8, 0.0)]
    assert progress_points(stages) == [(0, 1), (1, 0.5), (4, 0.25), (6, 0)]
    assert summary(stages) == [(("O1",), 0.5), (("O2", "O3"), 0.1)]


def test_convex_chart_gives_one_chain_per_operator():
    stages = [Stage("A", 1, 0.5), Stage("B", 2, 0.5), Stage("C", 8, 0.0)]
    assert summary(stages) == [(("A",), 0.5), (("B",), 0.25), (("C",), 0.125)]


def test_concave_chart_gives_one_chain():
    stages = [Stage("A", 1, 1.0), Stage("B", 1, 1.0), Stage("C", 1, 0.0)]
    assert summary(stages) == [(("A", "B", "C"), pytest.approx(1 / 3))]


def test_collinear_points_tie_to_the_longer_chain():
    """B and C lie on one line from A's end point: one chain, not two of equal priority."""
    stages = [Stage("A", 1, 0.5), Stage("B", 2, 0.5), Stage("C", 4, 0.0)]
    assert progress_points(stages) == [(0, 1), (1, 0.5), (2, 0.25), (3, 0)]
    assert summary(stages) == [(("A",), 0.5), (("B", "C"), 0.25)]


def test_every_operator_lies_on_exactly_one_segment():
    stages = [Stage(i, c, s) for i, (c, s) in enumerate([(2, 0.9), (1, 0.3), (3, 1.0), (1, 0.1), (2, 0.0)])]
    covered = [op for c in chains(stages) for op in c.ops]
    assert covered == list(range(5))
    slopes = [c.slope for c in chains(stages)]
    assert slopes == sorted(slopes, reverse=True)      # the lower envelope is convex


def test_selectivity_above_one_rides_along():
    """A join that multiplies tuples has a rising chart; the envelope goes straight to the sink."""
    stages = [Stage("J", 1, 3.0), Stage("S", 1, 0.0)]
    assert progress_points(stages) == [(0, 1), (1, 3), (4, 0)]
    assert summary(stages) == [(("J", "S"), 0.25)]


def test_zero_cost_step_is_infinitely_steep():
    assert slope((1, 1), (1, 0.5)) == math.inf
    assert slope((1, 1), (1, 1)) == 0.0
    assert summary([Stage("free", 0, 0.5), Stage("S", 1, 0.0)]) == [(("free",), math.inf), (("S",), 1.0)]


def test_widths_count_bytes():
    """A projection keeps every tuple but halves its size: in bytes it releases memory."""
    assert progress_points([Stage("P", 1, 1.0, width=4.0), Stage("S", 1, 0.0)], leaf_width=8.0) == \
        [(0, 8), (1, 4), (2, 0)]


def test_tree_blocks_are_the_envelope_on_a_path():
    """On a plain path, Horn's merge of steps gives the lower envelope's segments."""
    rng = random.Random(5)
    for _ in range(200):
        stages = [Stage(k, rng.choice([0.5, 1, 2, 5]), rng.choice([0.1, 0.5, 1.0, 2.0])) for k in range(5)]
        stages[-1] = Stage(4, stages[-1].cost, 0.0)
        pts = progress_points(stages)
        blocks: list[Block] = []
        for k in reversed(range(5)):
            step = Block((k,), pts[k][1] - pts[k + 1][1], pts[k + 1][0] - pts[k][0])
            blocks = tree_blocks(step, [blocks] if blocks else [])
        assert [(b.ops, b.slope) for b in blocks] == [(c.ops, pytest.approx(c.slope)) for c in chains(stages)]


def test_tree_blocks_merge_children_by_slope():
    """A step that grows memory (a window feeding two aggregates) is run as one block with the steeper of
    its subtrees; the less steep subtree follows as a block of its own."""
    window = Block(("win",), -1.0, 1.0)                 # 1 tuple in, 2 out: memory grows
    agg1, agg2 = [Block(("agg1",), 1.5, 1.0)], [Block(("agg2",), 0.5, 4.0)]
    blocks = tree_blocks(window, [agg2, agg1])
    assert [(b.ops, b.slope) for b in blocks] == [(("win", "agg1"), 0.25), (("agg2",), 0.125)]


def test_time_to_end():
    assert time_to_end([Stage("O1", 1, 0.2), Stage("O2", 5, 0.0)]) == 2.0
    assert time_to_end([Stage("O2", 5, 0.0)]) == 5.0
    assert time_to_end([]) == 0.0


def test_envelope_of_a_single_point():
    assert lower_envelope([(0, 1)]) == []


def test_paths_through_fan_out_and_join():
    s, t, qx, qb = SimQueue("S"), SimQueue("T"), SimQueue("qx"), SimQueue("qb")
    x = SimOp("X", [s], qx)
    a = SimOp("A", [qx])
    b = SimOp("B", [qx], qb)
    j = SimOp("J", [qb, t])
    got = sorted([(op.id, i) for op, i in p] for p in paths(Topology([x, a, b, j])))
    assert got == [[("J", 1)], [("X", 0), ("A", 0)], [("X", 0), ("B", 0), ("J", 0)]]
