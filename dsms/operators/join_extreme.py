"""A grouped MIN/MAX over a join whose inputs never delete, as one operator: the join's pairs are folded into
per-group extremes as they are found, and never become rows of a queue (issue 15, NEXMark q4's
``MAX(B.price) .. GROUP BY A.id, A.category`` over the band join of Auction and Bid).

``dsms/plan/join_extreme.py`` checks the facts that make it exact (and argues it); this module is the operator.
It is a ``JoinOp`` (the insert-only release of ``append_join.py``: indexes, the band's lazy index, small
releases through dicts, bounded runs, all unchanged) with three differences:

- the rows of the input that holds every group column get one more column, their group id
  (``extreme_fold.GroupTable``), when they are read: a few hundred new auctions a push, where the aggregate
  above a plain join found the ids of every pair (two columns packed and looked up per bid);
- the pairs the join emits carry that id and the aggregated columns alone, and go to ``ExtremeFold.offer``,
  which holds them until their instants are final;
- what is forwarded is the aggregate's output: before the join forwards a heartbeat at ``f`` (every pair
  below ``f`` is out by then), the held pairs of the instants before ``f`` are folded and the changes emitted
  (``_Folded`` sits between the join and ``Operator`` in the method order for that).
"""

from __future__ import annotations

from control_tables import Stat
from dsms.batch import Batch
from dsms.expr.compile import CompiledExpr
from dsms.operators.base import Operator
from dsms.operators.extreme_fold import ExtremeFold, GroupTable
from dsms.operators.join import JoinOp
from dsms.queues import Queue
from synopses.state import StateSynopsis


class _Folded(Operator):
    """Below ``JoinOp`` in the method order of ``JoinExtremeOp``: the join's ``forward_heartbeat`` works out its
    output frontier and hands it on here, where the pairs before it are folded and the changes emitted first."""

    def forward_heartbeat(self, f: int | None = None) -> None:
        if f is None:
            f = self.frontier()
        out = self.fold.finish(f)
        if out is not None:
            Operator.emit(self, out)
        Operator.forward_heartbeat(self, f)


class JoinExtremeOp(JoinOp, _Folded):
    """A grouped MAX/MIN over a join whose inputs never delete, in one operator: the join's pairs are folded
    into one running extreme per group and only the aggregate's changes are output (its statistics count
    those; its synopses are the join's two indexes and the group extremes)."""

    kind = "join_extreme"
    groups_live = Stat(int, compute="_groups_live", name="groups", doc="groups with a value")

    def __init__(self, left: Queue, right: Queue, out: Queue, left_keys: tuple[int, ...],
                 right_keys: tuple[int, ...], predicate: CompiledExpr | None, pair_dtypes: list,
                 group_side: int, group: tuple[int, ...], funcs: list[str], keep: tuple[int, ...],
                 dtypes: list) -> None:
        """``group_side``'s rows get their group id (of their columns ``group``) as one more, last column;
        ``predicate`` and ``keep`` number the joined columns with it (``keep``: that id's position, then each
        aggregate's argument); ``funcs`` MAX or MIN per aggregate; ``dtypes`` the output's (group columns,
        then one per aggregate)."""
        super().__init__(left, right, out, left_keys, right_keys, predicate, pair_dtypes, insert_only=True,
                         keep=keep)
        self.group_side = group_side
        self.group = list(group)
        self.fold = ExtremeFold(funcs, GroupTable(len(group)), dtypes)
        self.synopses = [*self.sides, StateSynopsis("group extremes", self._groups_live, self._fold_bytes)]

    def _groups_live(self) -> int:
        return self.fold.live()

    def _fold_bytes(self) -> int:
        return self.fold.nbytes() + self.fold.groups.nbytes()

    def on_batch(self, i: int, batch: Batch) -> None:
        if i != self.group_side:
            super().on_batch(i, batch)
            return
        batch = self.selected(i, batch)          # a selection or projection run inside: its columns first
        if batch is None:
            return
        gid = self.fold.groups.ids([batch.cols[g] for g in self.group])
        self.pending[i].append(Batch(batch.ts, batch.sign, [*batch.cols, gid]))

    def emit(self, batch: Batch) -> None:
        """The join's pairs (group id, then the aggregates' arguments), to the fold."""
        self.fold.offer(batch.ts, batch.cols[0], batch.cols[1:])

    def held_rows(self) -> int:
        return super().held_rows() + self.fold.held_rows()

    def held_stamps(self) -> list[tuple[int, int]]:
        return super().held_stamps() + self.fold.held_stamps()

    def held_bytes(self) -> int:
        return super().held_bytes() + sum(t.nbytes for t, _, _ in self.fold.held)


def widened(pos: int, width: int, side: int) -> int:
    """Where joined column ``pos`` (left's ``width`` columns, then the right's) is once the input ``side`` has
    one more column at its end.

    >>> widened(1, 3, 0), widened(4, 3, 0), widened(4, 3, 1)
    (1, 5, 4)
    """
    return pos + 1 if side == 0 and pos >= width else pos

