"""A deterministic cost clock for scheduler tests on the real engine.

Every run of every operator is charged a fixed time per input item plus a time per input row, by operator
kind, and the operator's statistics (cost per row, selectivity) are fed that charge instead of the time the
machine measured. Chain and greedy read those statistics, so their decisions repeat exactly from run to run
whatever the machine's load (measured costs made such tests flaky: a first run's warm-up, a busy core).
"""

from __future__ import annotations

from dsms import Engine


def charge(eng: Engine, costs: dict[str, tuple[float, float]], now: list[float] | None = None) -> None:
    """Charge every operator of ``eng`` by ``costs`` ({kind: (us per input item, us per input row)}); when
    ``now`` is given, ``now[0]`` advances by each run's charge (a simulated clock in us)."""
    for op in eng.ops:
        per_item, per_row = costs[op.kind]
        held: list[tuple[int, int]] = []
        account, op._account = op._account, lambda r_in, r_out, ns, held=held: held.append((r_in, r_out))

        def timed(budget, inner=op.run, per_item=per_item, per_row=per_row, held=held, account=account):
            done = inner(budget)
            rows_in = sum(r for r, _ in held)
            cost = per_item * done + per_row * rows_in
            if now is not None:
                now[0] += cost
            if held:                          # the statistics see the clock's cost, not the machine's
                account(rows_in, sum(r for _, r in held), 1000.0 * cost)
            held.clear()
            return done
        op.run = timed
