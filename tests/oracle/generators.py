"""Hypothesis strategies for engine-vs-reference property tests: a small catalog, legal input workloads, and CQL
query texts covering every window kind crossed with every operator; plus the drivers and the comparison.

* ``CATALOG``: streams ``S(a INT, b INT, c STRING)``, ``T(a INT, d FLOAT)``; relations ``R(a INT, e STRING)``,
  ``P(e STRING, g INT)``. Small value domains so that joins and groups hit.
* ``queries(family)`` draws CQL text; ``workloads(family)`` draws a ``Workload``: catalog statements (plus views
  and named derived streams the query reads), the query, input actions legal for the engine (per input,
  timestamps never go backwards; inputs interleave freely; heartbeats only promise what is true) and a final
  heartbeat ``until``.
* ``run_engine(workload)`` drives the public Engine API (contract); ``run_reference(workload)`` the oracle;
  ``compare(expected, actual)`` compares them per instant as bags and explains the first differing instant.

Families: ``window`` (every window kind with select/project), ``join``, ``aggregate``, ``setop``, ``streamop``,
``subquery``; ``any`` mixes them. docs/testing.md has the coverage table.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from hypothesis import strategies as st

# ------------------------------------------------------------------------------------------------ workloads

CATALOG = (
    "REGISTER STREAM S (a INT, b INT, c STRING)",
    "REGISTER STREAM T (a INT, d FLOAT)",
    "REGISTER RELATION R (a INT, e STRING)",
    "REGISTER RELATION P (e STRING, g INT)",
)
STREAMS = {"S": ("a", "b", "c"), "T": ("a", "d")}
RELATIONS = {"R": ("a", "e"), "P": ("e", "g")}

A_VALUES = [0, 1, 2, 3]
B_VALUES = [-3, -1, 0, 1, 2, 5]
C_VALUES = ["a", "ab", "b", "Ba", "abc", ""]
D_VALUES = [-1.5, 0.5, 1.0, 2.25, 3.0]
E_VALUES = ["x", "y", "zz"]
G_VALUES = [0, 1, 2]


@dataclass
class Workload:
    """Everything one run needs. ``actions``: ("push", stream, rows, ts list) | ("update", relation, inserts,
    deletes, ts) | ("heartbeat", h) | ("run",). ``until``: the final heartbeat."""

    statements: tuple
    query: str
    actions: tuple
    until: int

    def __repr__(self) -> str:   # readable in hypothesis' falsifying-example report
        lines = ["Workload("] + [f"  {s};" for s in self.statements] + [f"  QUERY: {self.query}"]
        lines += [f"  {a}" for a in self.actions] + [f"  heartbeat({self.until})", ")"]
        return "\n".join(lines)


def run_reference(w: Workload, dense: bool = False):
    """The oracle's result for a workload: [(ts, sign, row)] for every instant below ``w.until``."""
    from oracle.reference import Reference

    ref = Reference(dense=dense)
    for s in w.statements:
        ref.execute(s)
    name = ref.execute(w.query)
    for a in w.actions:
        if a[0] == "push":
            ref.push(a[1], a[2], ts=a[3])
        elif a[0] == "update":
            ref.update(a[1], insert=a[2], delete=a[3], ts=a[4])
        elif a[0] == "heartbeat":
            ref.heartbeat(a[1])
    return ref.results(name, w.until)


def run_engine(w: Workload, kind: list | None = None):
    """The engine's result for a workload, through the public API only (docs/contract-engine-api.md).

    If ``kind`` is a list, the query's kind ("stream" or "relation") is appended to it."""
    from dsms import Engine

    eng = Engine()
    for s in w.statements:
        eng.execute(s)
    q = eng.execute(w.query)
    for a in w.actions:
        if a[0] == "push":
            eng.push(a[1], a[2], ts=a[3])
        elif a[0] == "update":
            eng.update(a[1], insert=a[2], delete=a[3], ts=a[4])
        elif a[0] == "heartbeat":
            eng.heartbeat(a[1])
        elif a[0] == "run":
            eng.run()
    eng.heartbeat(w.until)
    eng.run()
    if kind is not None:
        kind.append(q.kind)
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in q.drain()]


# ------------------------------------------------------------------------------------------------ comparison


def _norm(v):
    """Python value of an engine value (numpy scalars), floats rounded so that summation order does not matter."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return ("float", "nan")
        return ("float", float(f"{v:.9g}") + 0.0)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    return (type(v).__name__, v)


def _key(sign, row):
    return (sign, tuple(sorted((k, _norm(v)) for k, v in row.items())))


def _show(key):
    sign, items = key
    row = ", ".join(f"{k}: {v!r}" if t != "float" else f"{k}: {v}" for k, (t, v) in items)
    return f"{'+' if sign > 0 else '-'} {{{row}}}"


def _by_instant(elements):
    out: dict[int, Counter] = {}
    for ts, sign, row in elements:
        out.setdefault(int(ts), Counter())[_key(sign, row)] += 1
    return out


def diff(expected, actual) -> str | None:
    """None when equal per instant as bags (values typed: an INT 2 is not a FLOAT 2.0); else a readable report
    of the first instant that differs."""
    exp, act = _by_instant(expected), _by_instant(actual)
    for tau in sorted(set(exp) | set(act)):
        e, a = exp.get(tau, Counter()), act.get(tau, Counter())
        if e != a:
            lines = [f"first difference at instant {tau}:"]
            for k, n in sorted((e - a).items(), key=repr):
                lines.append(f"  missing   {n} x {_show(k)}")
            for k, n in sorted((a - e).items(), key=repr):
                lines.append(f"  unexpected {n} x {_show(k)}")
            lines.append(f"  expected at {tau}: " + "; ".join(f"{n} x {_show(k)}" for k, n in sorted(e.items(), key=repr)))
            lines.append(f"  actual at {tau}:   " + "; ".join(f"{n} x {_show(k)}" for k, n in sorted(a.items(), key=repr)))
            before = [t for t in sorted(exp) if t < tau]
            lines.append(f"  ({len(before)} earlier instants agree; expected instants: {sorted(exp)[:30]})")
            return "\n".join(lines)
    return None


def compare(expected, actual) -> None:
    """Assert that two results agree per instant as bags; on mismatch print and raise a readable diff."""
    d = diff(expected, actual)
    if d is not None:
        print(d)
        raise AssertionError(d)
