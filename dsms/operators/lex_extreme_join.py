"""The join that the planner proved to be a lexicographic extreme (``dsms/plan/lex_extreme.py``): the rows of a
relation that never deletes at their group's extreme of a first value, ties broken by the second's (NEXMark
q9's answer: per auction, the bids at the highest price and, at it, the earliest bidtime), as one operator
reading that relation alone.

Source: SPEC section 3 (a relation's value at each instant). The join's answer at every instant is a function
of the relation's rows so far (docs/architecture.md, "Lexicographic extremes"), so the operator reads neither
the aggregates it joins with nor their frontiers: its input is the relation, its output frontier the
relation's. The release is ``ArgExtremeRelease``'s with several values ranked as one code each. It releases
whole instants only (``FinalInstantsOperator``: those below the input frontier), so each instant's change is
emitted once; within one instant the rows that leave are below the new extreme and the rows that enter are
at it, so when the columns kept hold every value ranked no equal row both leaves and enters, and the relation
sink above passes the changes through (``PhysicalPlanner._net_lex``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsms.batch import Batch
from dsms.operators.arg_extreme import ArgExtremeRelease
from dsms.operators.base import FinalInstantsOperator
from dsms.queues import Queue
from synopses.state import StateSynopsis

if TYPE_CHECKING:
    from dsms.plan.lex_extreme import LexExtreme


class LexExtremeJoinOp(FinalInstantsOperator):
    """The rows of the input at their group's lexicographic extreme, as the join's output columns (see the
    module)."""

    kind = "lex_extreme_join"

    def __init__(self, inp: Queue, out: Queue, spec: LexExtreme) -> None:
        names = getattr(spec.source, "names", ()) or ()
        by = ", then ".join(f"{fn} {names[c] if c < len(names) else f'${c}'}" for c, fn in spec.values)
        group = names[spec.group] if spec.group < len(names) else f"${spec.group}"
        super().__init__([inp], out, f"rows at {by} per {group} [from the relation below alone]")
        self.spec = spec
        self.release = ArgExtremeRelease(spec)
        self.synopses = [StateSynopsis("rows at their group's extreme", self.release.__len__,
                                       self.release.nbytes)]

    def process(self, batch: Batch) -> None:
        self.release.apply(self, {0: batch})
