"""Scheduling policies (FIFO, round-robin, greedy, Chain, Chain-Flush) and the progress-chart machinery.

Source: digest-004 section 2.G (R-SCH-01..06), BBDM03 (Chain). ``POLICIES`` maps a policy's name to its class,
the one list the engine and the system control table choose from (R-SCH-06: switchable at run time)::

    policy = POLICIES["chain"](budget=1)
    policy.plan_changed(ops)
    op = policy.pick([o for o in ops if o.ready()])
"""

from __future__ import annotations

from .base import Policy, SchedOperator, Topology, drive
from .chain import ChainPolicy
from .chain_flush import ChainFlushPolicy
from .fifo import FifoPolicy
from .greedy import GreedyPolicy
from .round_robin import RoundRobinPolicy

POLICIES: dict[str, type[Policy]] = {
    p.name: p for p in (FifoPolicy, RoundRobinPolicy, GreedyPolicy, ChainPolicy, ChainFlushPolicy)
}

__all__ = [
    "POLICIES", "ChainFlushPolicy", "ChainPolicy", "FifoPolicy", "GreedyPolicy", "Policy", "RoundRobinPolicy",
    "SchedOperator", "Topology", "drive",
]
