"""Progress charts, lower envelopes, slopes and ties (BBDM03 sections 3-4; digest-004 2.G BACKGROUND)."""

from __future__ import annotations

import math

import pytest
from schedsim import SimOp, SimQueue

from scheduler import Topology
from scheduler.progress_chart import Stage, chains, lower_envelope, paths, progress_points, slope, time_to_end


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


def test_shared_step_and_side_outputs():
    """P-12: the readers of a shared queue are one step (its tuples are freed once all have read them); the
    outputs of the other readers stay in this path's chart as a constant offset, which changes no later
    slope, and the step's chain lists every reader."""
    alone = [Stage("X", 1, 1.0), Stage("A", 1, 0.5), Stage("S", 1, 0.0)]
    shared = [Stage("X", 1, 1.0), Stage("A", 2, 0.5, side=0.25, group=("B",)), Stage("S", 1, 0.0)]
    assert progress_points(alone) == [(0, 1), (1, 1), (2, 0.5), (2.5, 0)]
    assert progress_points(shared) == [(0, 1), (1, 1), (3, 0.75), (3.5, 0.25)]
    assert slope(*progress_points(alone)[2:]) == slope(*progress_points(shared)[2:])
    assert [c.ops for c in chains(shared)] == [("X", "A", "B", "S")]


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
