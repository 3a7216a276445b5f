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
C_VALUES = ["a", "ab", "b", "Ba", "abc", "", "a_"]
D_VALUES = [-1.5, 0.0, 0.5, 1.0, 2.25, 3.0]     # 0.0 / 0 is NaN
E_VALUES = ["x", "y", "zz"]
G_VALUES = [0, 1, 2]


@dataclass
class Workload:
    """Everything one run needs. ``actions``: ("push", stream, rows, ts list) | ("update", relation, inserts,
    deletes, ts) | ("heartbeat", h) | ("heartbeat", h, input) | ("run",). ``until``: the final heartbeat."""

    statements: tuple
    query: str
    actions: tuple
    until: int

    def __repr__(self) -> str:   # readable in hypothesis' falsifying-example report
        lines = ["Workload("] + [f"  {s};" for s in self.statements] + [f"  QUERY: {self.query}"]
        lines += [f"  {a}" for a in self.actions] + [f"  heartbeat({self.until})", ")"]
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:   # hypothesis' (IPython-style) pretty printer
        p.text(repr(self))


def apply(target, a) -> None:
    """One workload action on the engine or the reference evaluator (which has no ``run``: it is exact at
    every instant, so a "run" action means nothing to it)."""
    if a[0] == "push":
        target.push(a[1], a[2], ts=a[3])
    elif a[0] == "update":
        target.update(a[1], insert=a[2], delete=a[3], ts=a[4])
    elif a[0] == "heartbeat":
        target.heartbeat(*a[1:])                 # (h,) for every input, (h, name) for one
    elif a[0] == "run" and hasattr(target, "run"):
        target.run()


def run_reference(w: Workload, dense: bool = False, info: dict | None = None):
    """The oracle's result for a workload: [(ts, sign, row)] for every instant below ``w.until``.

    If ``info`` is a dict, the result's "kind" and "schema" are stored in it."""
    from oracle.reference import Reference

    ref = Reference(dense=dense)
    for s in w.statements:
        ref.execute(s)
    name = ref.execute(w.query)
    for a in w.actions:
        apply(ref, a)
    if info is not None:
        info["kind"], info["schema"] = ref.kind(name), ref.schema(name)
    return ref.results(name, w.until)


def run_engine(w: Workload, info: dict | None = None, policy: str | None = None, switch_to: str | None = None,
               slice_steps: int | None = None):
    """The engine's result for a workload, through the public API only (docs/contract-engine-api.md).

    If ``info`` is a dict, the query's "kind" ("stream" or "relation") and "schema" are stored in it.
    ``policy`` picks the scheduling policy, ``switch_to`` switches it halfway through the actions, and
    ``slice_steps`` cuts every run after each action short (work stays queued), as a server's time slices do.

    Only instants below ``w.until`` are returned: that is what the reference covers. The engine may rightly emit
    more (a window whose next boundary is past the last heartbeat can already know its value there), and
    comparing those against nothing was a false failure."""
    from dsms import Engine

    eng = Engine({"policy": policy} if policy else None)
    for s in w.statements:
        eng.execute(s)
    q = eng.execute(w.query)
    for i, a in enumerate(w.actions):
        apply(eng, a)
        if slice_steps is not None:
            eng.run(max_steps=slice_steps)
        if switch_to is not None and i == len(w.actions) // 2:
            eng.set("sys:0", "policy", switch_to)
    eng.heartbeat(w.until)
    eng.run()
    if info is not None:
        info["kind"], info["schema"] = q.kind, [tuple(c) for c in q.schema]
    return _below(q.drain(), w.until)


def _below(elements, until: int) -> list[tuple[int, int, dict]]:
    """(ts, sign, row) of the engine elements at instants the reference covers (below ``until``)."""
    return [(int(e.ts), int(e.sign), dict(e.row)) for e in elements if int(e.ts) < until]


def two_stream_actions(row_a, row_b, max_steps: int = 14, max_rows: int = 5):
    """A strategy of (actions, until) for tests of a join of streams ``A`` and ``B``: pushes of 1 to
    ``max_rows`` rows drawn from ``row_a`` or ``row_b`` (several rows at one instant, gaps of 0-2), runs and
    heartbeats in between; ``until`` is past every push and heartbeat."""

    @st.composite
    def actions(draw):
        t = {"A": 0, "B": 0}
        out = []
        for _ in range(draw(st.integers(1, max_steps))):
            kind = draw(st.sampled_from(["A", "A", "B", "B", "B", "run", "heartbeat"]))
            if kind == "run":
                out.append(("run",))
            elif kind == "heartbeat":
                h = max(t.values()) + draw(st.integers(0, 2))
                out.append(("heartbeat", h))
                t = {k: max(v, h) for k, v in t.items()}
            else:
                rows = draw(st.lists(row_a if kind == "A" else row_b, min_size=1, max_size=max_rows))
                ts = []
                for _ in rows:
                    t[kind] += draw(st.sampled_from([0, 0, 1, 2]))
                    ts.append(t[kind])
                out.append(("push", kind, rows, ts))
        return tuple(out), max(t.values()) + 3

    return actions()


def uneven_actions(row_s, row_t):
    """A strategy of (actions, last push's time) for joins of S and T: pushes of several instants each, rows
    drawn from ``row_s`` or ``row_t``, in any interleaving (one input may run windows ahead of the other), runs
    after most and no heartbeat, so each operator sees its inputs advance unevenly."""

    @st.composite
    def actions(draw):
        per_input = []
        for name, row in (("S", row_s), ("T", row_t)):
            t, acts = draw(st.integers(0, 3)), []
            for _ in range(draw(st.integers(1, 8))):
                ts = []
                for _ in range(draw(st.integers(1, 5))):
                    t += draw(st.integers(0, 3))
                    ts.append(t)
                acts.append(("push", name, [draw(row) for _ in ts], ts))
                t += draw(st.integers(0, 6))
            per_input.append(acts)
        order = draw(st.permutations([i for i, acts in enumerate(per_input) for _ in acts]))
        runs = draw(st.lists(st.integers(0, 3), min_size=len(order), max_size=len(order)))
        out = []
        for i, r in zip(order, runs):
            out.append(per_input[i].pop(0))
            if r:
                out.append(("run",))
        return tuple(out), max(a[3][-1] for a in out if a[0] == "push")

    return actions()


def check_query(statements: tuple, query: str, actions, until: int):
    """Run ``query`` after ``statements`` through the reference evaluator and the engine, apply ``actions``
    to both, heartbeat ``until``, compare the results, and return the engine (for tests that then look at
    its operators)."""
    from dsms import Engine
    from oracle.reference import Reference

    ref = Reference()
    for s in statements:
        ref.execute(s)
    name = ref.execute(query)
    eng = Engine()
    for s in statements:
        eng.execute(s)
    q = eng.execute(query)
    for a in actions:
        apply(ref, a)
        apply(eng, a)
    eng.heartbeat(until)
    eng.run()
    compare(ref.results(name, until), _below(q.drain(), until))
    return eng


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


# ------------------------------------------------------------------------------------------------ input


ROWS = {
    "S": st.fixed_dictionaries({"a": st.sampled_from(A_VALUES), "b": st.sampled_from(B_VALUES),
                                "c": st.sampled_from(C_VALUES)}),
    "T": st.fixed_dictionaries({"a": st.sampled_from(A_VALUES), "d": st.sampled_from(D_VALUES)}),
    "R": st.fixed_dictionaries({"a": st.sampled_from(A_VALUES), "e": st.sampled_from(E_VALUES)}),
    "P": st.fixed_dictionaries({"e": st.sampled_from(E_VALUES), "g": st.sampled_from(G_VALUES)}),
}


def _stream_actions(draw, name, instants, max_events):
    """Push actions for one stream: elements at the workload's instants (repeats give several elements per
    instant; shared instants make joins hit; the spaces between instants are quiet periods), in nondecreasing
    ts order, cut into calls of 1..4 elements (a call may span instants)."""
    n = draw(st.integers(0, max_events))
    elems = draw(st.lists(st.tuples(st.sampled_from(instants), ROWS[name]), min_size=n, max_size=n))
    elems.sort(key=lambda e: e[0])           # stable: equal timestamps keep their drawn (arrival) order
    cuts = draw(st.lists(st.integers(1, 4), min_size=len(elems), max_size=len(elems)))
    out, i, k = [], 0, 0
    while i < len(elems):
        chunk = elems[i:i + cuts[k]]
        out.append(("push", name, [r for _, r in chunk], [t for t, _ in chunk]))
        i += cuts[k]
        k += 1
    return out


def _relation_actions(draw, name, instants, max_updates):
    """Update actions for one relation at distinct instants; deletes only remove rows that are present."""
    tss = sorted(draw(st.sets(st.sampled_from(instants), max_size=max_updates)))
    bag: list[dict] = []
    out = []
    for t in tss:
        ins = draw(st.lists(ROWS[name], max_size=2))
        picks = draw(st.lists(st.integers(0, 99), max_size=2))
        dels = [bag.pop(p % len(bag)) for p in picks if bag]
        if not ins and not dels:
            ins = [draw(ROWS[name])]
        bag.extend(ins)
        shape = draw(st.integers(0, 5))
        if shape == 0 and ins and dels:      # the same changes in two calls at one instant: deletes first
            out += [("update", name, [], dels, t), ("update", name, ins, [], t)]
        elif shape == 1 and bag:             # a present row deleted and inserted again at one instant: no change
            again = bag[draw(st.integers(0, len(bag) - 1))]
            out += [("update", name, ins, dels, t), ("update", name, [], [again], t), ("update", name, [again], [], t)]
        else:
            out.append(("update", name, ins, dels, t))
    return out


def _first_ts(action):
    return action[3][0] if action[0] == "push" else action[4]


@st.composite
def inputs(draw, max_events: int = 20, max_ts: int = 60):
    """(actions, until): input for every catalog stream and relation, interleaved across inputs in any order
    that keeps each input's timestamps nondecreasing, with occasional legal heartbeats (on every input, or on
    one input) and ``run()`` calls. Instants may start below 0 (timestamps may be negative: contract)."""
    low = draw(st.sampled_from([0, 0, 0, -20]))
    instants = sorted(draw(st.lists(st.integers(low, max_ts), min_size=1, max_size=14, unique=True)))
    per_input = [_stream_actions(draw, "S", instants, max_events), _stream_actions(draw, "T", instants, max_events),
                 _relation_actions(draw, "R", instants, max_events // 3),
                 _relation_actions(draw, "P", instants, max_events // 3)]
    # the interleaving: a permutation of input tags (shrinks towards "all S, then all T, ...")
    order = draw(st.permutations([i for i, acts in enumerate(per_input) for _ in acts]))
    extras = draw(st.lists(st.sampled_from([None] * 8 + ["heartbeat", "run", "heartbeat1"]), min_size=len(order),
                           max_size=len(order)))
    actions, hb = [], low
    for i, extra in zip(order, extras):
        if extra == "heartbeat":
            # a heartbeat h promises no element below h on any input: h = the smallest pending timestamp
            h = min(_first_ts(acts[0]) for acts in per_input if acts)
            if h > hb:
                actions.append(("heartbeat", h))
                hb = h
        elif extra == "heartbeat1":
            # the same promise for the input about to send: its own next timestamp
            h = _first_ts(per_input[i][0])
            if h > hb:
                actions.append(("heartbeat", h, per_input[i][0][1]))
        elif extra == "run":
            actions.append(("run",))
        actions.append(per_input[i].pop(0))
    last = max([_first_ts(a) if a[0] == "update" else a[3][-1] for a in actions if a[0] in ("push", "update")],
               default=low)
    until = max(last + draw(st.integers(1, 25)), hb + 1)
    return tuple(actions), until


# ------------------------------------------------------------------------------------------------ expressions
# An environment is a list of (column reference text, TYPE) that an expression may use.

_LIKE = ["'a%'", "'%b'", "'_b%'", "'%'", "'a_c'", "'B%'", "''", "'a!_%' ESCAPE '!'", "'%!%' ESCAPE '!'"]


def _cols(env, typ):
    return [r for r, t in env if t == typ]


def int_expr(draw, env, depth=2):
    ints, strs = _cols(env, "INT"), _cols(env, "STRING")
    options = ["lit"] + (["col"] * 3 if ints else [])
    if depth > 0:
        options += ["arith", "arith", "abs", "neg", "case"] + (["length"] if strs else [])
    k = draw(st.sampled_from(options))
    if k == "col":
        return draw(st.sampled_from(ints))
    if k == "lit":
        v = draw(st.integers(-2, 5))
        return f"({v})" if v < 0 else str(v)       # never '--': that starts a comment
    if k == "arith":
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        return f"({int_expr(draw, env, depth - 1)} {op} {int_expr(draw, env, depth - 1)})"
    if k == "abs":
        return f"ABS({int_expr(draw, env, depth - 1)})"
    if k == "neg":
        return f"-({int_expr(draw, env, depth - 1)})"
    if k == "length":
        return f"LENGTH({draw(st.sampled_from(strs))})"
    if draw(st.booleans()) and ints:     # simple CASE
        whens = " ".join(f"WHEN {draw(st.integers(0, 3))} THEN {int_expr(draw, env, 0)}"
                         for _ in range(draw(st.integers(1, 2))))
        els = f" ELSE {int_expr(draw, env, 0)}" if draw(st.booleans()) else ""
        return f"CASE {draw(st.sampled_from(ints))} {whens}{els} END"
    els = f" ELSE {int_expr(draw, env, depth - 1)}" if draw(st.booleans()) else ""
    return f"CASE WHEN {pred(draw, env, depth - 1)} THEN {int_expr(draw, env, depth - 1)}{els} END"


def float_expr(draw, env, depth=2):
    floats = _cols(env, "FLOAT")
    options = ["from_int"] + (["col", "col"] if floats else [])
    if depth > 0:
        options += ["arith", "half", "case", "div"]
    k = draw(st.sampled_from(options))
    if k == "col":
        return draw(st.sampled_from(floats))
    if k == "div":                       # by an INT that may be 0: IEEE infinities and NaN (contract)
        return f"({float_expr(draw, env, depth - 1)} / {int_expr(draw, env, 0)})"
    if k == "from_int":
        return f"({int_expr(draw, env, 1)} * {draw(st.sampled_from(['1.5', '0.5', '2.0']))})"
    if k == "arith":
        op = draw(st.sampled_from(["+", "-", "*"]))
        return f"({float_expr(draw, env, depth - 1)} {op} {int_expr(draw, env, depth - 1)})"
    if k == "half":                      # division by a nonzero literal only: no IEEE infinities
        return f"({float_expr(draw, env, depth - 1)} / {draw(st.sampled_from(['2', '4.0', '-0.5']))})"
    els = f" ELSE {float_expr(draw, env, depth - 1)}" if draw(st.booleans()) else ""
    return f"CASE WHEN {pred(draw, env, depth - 1)} THEN {float_expr(draw, env, depth - 1)}{els} END"


def str_expr(draw, env, depth=2):
    strs = _cols(env, "STRING")
    options = ["lit"] + (["col"] * 3 if strs else [])
    if depth > 0:
        options += (["lower", "upper"] if strs else []) + ["case", "concat"]
    k = draw(st.sampled_from(options))
    if k == "col":
        return draw(st.sampled_from(strs))
    if k == "concat":
        return f"({str_expr(draw, env, depth - 1)} || {str_expr(draw, env, 0)})"
    if k == "lit":
        return draw(st.sampled_from(["'a'", "'ab'", "'x'", "'zz'", "''"]))
    if k in ("lower", "upper"):
        return f"{k.upper()}({draw(st.sampled_from(strs))})"
    els = f" ELSE {str_expr(draw, env, depth - 1)}" if draw(st.booleans()) else ""
    return f"CASE WHEN {pred(draw, env, depth - 1)} THEN {str_expr(draw, env, depth - 1)}{els} END"


def pred(draw, env, depth=2):
    """A boolean expression over env."""
    strs, floats = _cols(env, "STRING"), _cols(env, "FLOAT")
    options = ["cmp_int", "cmp_int"] + (["cmp_str", "like"] if strs else []) + (["cmp_float"] if floats else [])
    options += ["in", "between"]
    if depth > 0:
        options += ["and", "or", "not"]
    k = draw(st.sampled_from(options))
    cmp = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "!="]))
    if k == "cmp_int":
        return f"{int_expr(draw, env, min(depth, 1))} {cmp} {int_expr(draw, env, 0)}"
    if k == "cmp_float":
        return f"{float_expr(draw, env, min(depth, 1))} {cmp} {draw(st.sampled_from(['0.5', '1.0', '2.25', '-1']))}"
    if k == "cmp_str":
        return f"{str_expr(draw, env, min(depth, 1))} {cmp} {str_expr(draw, env, 0)}"
    if k == "like":
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{str_expr(draw, env, min(depth, 1))} {neg}LIKE {draw(st.sampled_from(_LIKE))}"
    if k == "in":
        neg = "NOT " if draw(st.integers(0, 3)) == 0 else ""
        if strs and draw(st.booleans()):
            items = ", ".join(draw(st.lists(st.sampled_from(["'a'", "'b'", "'ab'", "'x'", "'y'"]), min_size=1,
                                            max_size=3)))
            return f"{draw(st.sampled_from(strs))} {neg}IN ({items})"
        items = ", ".join(str(v) for v in draw(st.lists(st.integers(-1, 4), min_size=1, max_size=3)))
        return f"{int_expr(draw, env, min(depth, 1))} {neg}IN ({items})"
    if k == "between":
        neg = "NOT " if draw(st.integers(0, 3)) == 0 else ""
        lo = draw(st.integers(-2, 3))
        return f"{int_expr(draw, env, min(depth, 1))} {neg}BETWEEN ({lo}) AND {lo + draw(st.integers(0, 3))}"
    if k == "not":
        return f"NOT ({pred(draw, env, depth - 1)})"
    op = "AND" if k == "and" else "OR"
    return f"({pred(draw, env, depth - 1)} {op} {pred(draw, env, depth - 1)})"


def any_expr(draw, env, depth=2):
    """(text, TYPE) of an expression of any type."""
    typ = draw(st.sampled_from(["INT", "INT", "FLOAT", "STRING", "BOOLEAN"]))
    gen = {"INT": int_expr, "FLOAT": float_expr, "STRING": str_expr, "BOOLEAN": pred}[typ]
    return gen(draw, env, depth), typ


# ------------------------------------------------------------------------------------------------ queries

WINDOW_KINDS = ("RANGE", "SLIDE", "ROWS", "PARTITION", "NOW", "UNBOUNDED", "none")
_SCHEMA = {"S": [("a", "INT"), ("b", "INT"), ("c", "STRING")], "T": [("a", "INT"), ("d", "FLOAT")],
           "R": [("a", "INT"), ("e", "STRING")], "P": [("e", "STRING"), ("g", "INT")]}


def window(draw, cols, kind=None, allow_where=True):
    """Window text for a stream with columns ``cols`` [(name, TYPE)]: every kind of SPEC section 3, sometimes
    with a window-internal WHERE (referring to the stream's own columns, unqualified)."""
    kind = kind or draw(st.sampled_from(WINDOW_KINDS))
    if kind == "none":
        return ""
    if kind == "RANGE":
        spec = f"RANGE {draw(st.integers(1, 20))}"
    elif kind == "SLIDE":
        spec = f"RANGE {draw(st.integers(1, 20))} SLIDE {draw(st.integers(1, 10))}"
    elif kind == "ROWS":
        spec = f"ROWS {draw(st.integers(1, 5))}"
    elif kind == "PARTITION":
        keys = [c for c, t in cols if t != "FLOAT"]
        part = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=2, unique=True))
        spec = f"PARTITION BY {', '.join(part)} ROWS {draw(st.integers(1, 3))}"
    elif kind == "NOW":
        spec = "NOW"
    else:
        spec = "RANGE UNBOUNDED"
    if allow_where and kind != "UNBOUNDED" and draw(st.integers(0, 3)) == 0:
        spec += f" WHERE {pred(draw, [(c, t) for c, t in cols], 1)}"
    return f" [{spec}]"


def _stream_item(draw, name, alias, kind=None, sample=True):
    """FROM text for a stream with a window and alias, and the env its columns give."""
    w = window(draw, _SCHEMA[name], kind)
    smp = " SAMPLE(100)" if sample and draw(st.integers(0, 9)) == 0 else ""
    env = [(f"{alias}.{c}", t) for c, t in _SCHEMA[name]]
    return f"{name} {alias}{w}{smp}", env


def _items(draw, env, n_max=3, star=True):
    """A select list over env: column references, expressions, with and without aliases."""
    if star and draw(st.integers(0, 5)) == 0:
        return "*"
    out = []
    for i in range(draw(st.integers(1, n_max))):
        k = draw(st.integers(0, 4))
        if k <= 1:
            out.append(draw(st.sampled_from([r for r, _ in env])))
        else:
            text, _ = any_expr(draw, env, 2)
            alias = f" AS x{i}" if draw(st.integers(0, 2)) else ""
            out.append(text + alias)
    return ", ".join(out)


@st.composite
def window_queries(draw):
    """Every window kind with select/project over one stream."""
    name = draw(st.sampled_from(["S", "T"]))
    alias = draw(st.sampled_from(["X", name]))
    item, env = _stream_item(draw, name, alias)
    where = f" WHERE {pred(draw, env)}" if draw(st.booleans()) else ""
    if draw(st.integers(0, 4)) == 0:
        items = f"{alias}.*"
    else:
        items = _items(draw, env)
    return (), f"SELECT {items} FROM {item}{where}"


@st.composite
def join_queries(draw):
    """Stream-stream windowed joins, stream-relation, relation-relation, self-joins, three-way joins."""
    k = draw(st.sampled_from(["ss", "ss", "sr", "rr", "self", "three", "cross"]))
    if k == "ss":
        i1, e1 = _stream_item(draw, "S", "X")
        i2, e2 = _stream_item(draw, "T", "Y")
        from_, env, cond = f"{i1}, {i2}", e1 + e2, "X.a = Y.a"
    elif k == "sr":
        name = draw(st.sampled_from(["S", "T"]))
        i1, e1 = _stream_item(draw, name, "X")
        from_, env, cond = f"{i1}, R", e1 + [("R.a", "INT"), ("R.e", "STRING")], "X.a = R.a"
    elif k == "rr":
        from_ = "R, P"
        env = [("R.a", "INT"), ("R.e", "STRING"), ("P.e", "STRING"), ("P.g", "INT")]
        cond = draw(st.sampled_from(["R.e = P.e", "R.a = P.g", "R.e = P.e AND R.a >= P.g"]))
    elif k == "self":
        i1, e1 = _stream_item(draw, "S", "X")
        i2, e2 = _stream_item(draw, "S", "Y")
        from_, env = f"{i1}, {i2}", e1 + e2
        cond = draw(st.sampled_from(["X.a = Y.a AND X.b < Y.b", "X.c = Y.c", "X.a = Y.b"]))
    elif k == "three":
        i1, e1 = _stream_item(draw, "S", "X")
        i2, e2 = _stream_item(draw, "T", "Y", kind=draw(st.sampled_from(["RANGE", "ROWS", "NOW", "SLIDE"])))
        from_ = f"{i1}, {i2}, R"
        env = e1 + e2 + [("R.a", "INT"), ("R.e", "STRING")]
        cond = "X.a = Y.a AND Y.a = R.a"
    else:
        i1, e1 = _stream_item(draw, "S", "X", kind=draw(st.sampled_from(["ROWS", "NOW", "RANGE"])))
        from_, env, cond = f"{i1}, R", e1 + [("R.a", "INT"), ("R.e", "STRING")], None
    extra = pred(draw, env, 1) if draw(st.booleans()) else None
    conds = [c for c in (cond, extra) if c]
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    items = _items(draw, env, 4)
    return (), f"SELECT {items} FROM {from_}{where}"


_AGGS_S = ["COUNT(*)", "COUNT(X.b)", "COUNT(DISTINCT X.c)", "SUM(X.b)", "AVG(X.b)", "MIN(X.c)", "MAX(X.b)",
           "MIN(X.b)", "SUM(X.b * 2)", "MAX(LENGTH(X.c))", "COUNT(DISTINCT X.a)", "MAX(X.c)"]
_AGGS_T = ["COUNT(*)", "SUM(X.d)", "AVG(X.d)", "MIN(X.d)", "MAX(X.d)", "SUM(X.a)", "AVG(X.a)", "COUNT(DISTINCT X.d)",
           "SUM(X.d / X.a)", "MAX(X.d / X.a)", "COUNT(DISTINCT X.d / X.a)"]     # X.a = 0: inf, -inf, NaN
_STRING_AGGS = ("MIN(X.c)", "MAX(X.c)")


@st.composite
def aggregate_queries(draw):
    """GROUP BY with every aggregate and HAVING, aggregates without GROUP BY, DISTINCT; over every window."""
    k = draw(st.sampled_from(["group", "group", "global", "distinct", "join", "relation"]))
    if k == "relation":
        aggs = ["COUNT(*)", "SUM(R.a)", "MIN(R.a)", "MAX(R.e)", "AVG(R.a)"]
        sel = draw(st.lists(st.sampled_from(aggs), min_size=1, max_size=3, unique=True))
        having = " HAVING COUNT(*) > 1" if draw(st.booleans()) else ""
        return (), f"SELECT R.e, {', '.join(sel)} FROM R GROUP BY R.e{having}"
    name = draw(st.sampled_from(["S", "T"]))
    item, env = _stream_item(draw, name, "X")
    where = f" WHERE {pred(draw, env, 1)}" if draw(st.integers(0, 2)) == 0 else ""
    if k == "distinct":
        cols = draw(st.lists(st.sampled_from([r for r, t in env if t != "FLOAT"] + ["X.a % 2"]), min_size=1,
                             max_size=2, unique=True))
        return (), f"SELECT DISTINCT {', '.join(cols)} FROM {item}{where}"
    if k == "join":
        item2 = ", R"
        where = " WHERE X.a = R.a" + (f" AND {pred(draw, env, 0)}" if where else "")
        group = ["R.e"]
    else:
        # keys: columns, or expressions (an INT one and a BOOLEAN one), selected or not
        group = [] if k == "global" else draw(st.lists(
            st.sampled_from([r for r, t in env if t != "FLOAT"] + ["X.a % 2", "X.a > 1"]), min_size=1, max_size=2,
            unique=True))
        item2 = ""
    pool = _AGGS_S if name == "S" else _AGGS_T
    aggs = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    sel = [g for g in group if draw(st.integers(0, 3))] or group[:1]
    for i, a in enumerate(aggs):
        form = draw(st.integers(0, 4))
        if form == 0:
            sel.append(a)                                # unaliased: named count / sum / ...
        elif form == 1 and a not in _STRING_AGGS:
            sel.append(f"{a} + 1 AS y{i}")
        else:
            sel.append(f"{a} AS y{i}")
    having = ""
    if draw(st.integers(0, 2)) == 0:
        h = draw(st.sampled_from(["COUNT(*) > 1", "COUNT(*) >= 2 OR " + pool[3] + " > 1", pool[6] + " <> 0"
                                  if name == "S" else "MAX(X.d) > 0.5", "SUM(X.a) >= 2"]))
        having = f" HAVING {h}"
    # a selected key may be written as its position in the select list (PostgreSQL's GROUP BY 1, contract)
    keys = [str(sel.index(g) + 1) if g in sel and draw(st.integers(0, 3)) == 0 else g for g in group]
    group_by = f" GROUP BY {', '.join(keys)}" if group else ""
    distinct = "DISTINCT " if draw(st.integers(0, 5)) == 0 else ""
    return (), f"SELECT {distinct}{', '.join(sel)} FROM {item}{item2}{where}{group_by}{having}"


def _branch(draw, shape):
    """One set-operation branch with the given shape: ("a",) or ("a", "s")."""
    src = draw(st.sampled_from(["S", "S", "T", "R", "Sagg", "Sstream"]))
    if src == "Sagg" and shape == ("a",):
        item, env = _stream_item(draw, "S", "X")
        return f"SELECT MAX(X.a) AS a FROM {item}"
    if src == "Sstream":            # a stream-valued branch: read through RANGE UNBOUNDED (contract)
        item, env = _stream_item(draw, "S", "X")
        op = draw(st.sampled_from(["ISTREAM", "DSTREAM", "RSTREAM"]))
        cols = "X.a, X.c" if shape == ("a", "s") else "X.a"
        if shape == ("a",) and draw(st.booleans()):
            return f"{op}(SELECT MAX(X.a) AS a FROM {item})"
        return f"SELECT {op}({cols}) FROM {item}"
    if src == "Sagg":
        src = "S"
    if src == "R":
        cols = "R.a, R.e" if shape == ("a", "s") else "R.a"
        where = f" WHERE {pred(draw, [('R.a', 'INT'), ('R.e', 'STRING')], 1)}" if draw(st.booleans()) else ""
        return f"SELECT {cols} FROM R{where}"
    item, env = _stream_item(draw, src, "X")
    if shape == ("a", "s"):
        cols = "X.a, X.c" if src == "S" else "X.a, 'x' AS c"
    else:
        cols = "X.a"
    where = f" WHERE {pred(draw, env, 1)}" if draw(st.booleans()) else ""
    return f"SELECT {cols} FROM {item}{where}"


@st.composite
def setop_queries(draw):
    """UNION, UNION ALL, EXCEPT, EXCEPT ALL, INTERSECT, INTERSECT ALL over windowed streams and relations."""
    shape = draw(st.sampled_from([("a",), ("a", "s")]))
    ops = ["UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL", "INTERSECT", "INTERSECT ALL"]
    text = _branch(draw, shape)
    for _ in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from(ops))
        right = _branch(draw, shape)
        if draw(st.integers(0, 3)) == 0:
            text = f"({text}) {op} {right}"
        else:
            text = f"{text} {op} {right}"
    return (), text


@st.composite
def streamop_queries(draw):
    """Explicit ISTREAM/DSTREAM/RSTREAM (around a query, SELECT op(...), on a FROM item) and the implicit one;
    named derived streams and views read by the query."""
    k = draw(st.sampled_from(["around", "around", "select", "item", "derived", "view"]))
    op = draw(st.sampled_from(["ISTREAM", "DSTREAM", "RSTREAM"]))
    if k in ("around", "select"):
        name = draw(st.sampled_from(["S", "T"]))
        item, env = _stream_item(draw, name, "X")
        agg = draw(st.booleans())
        if agg:
            pool = _AGGS_S if name == "S" else _AGGS_T
            items = f"X.a, {draw(st.sampled_from(pool))} AS n"
            tail = " GROUP BY X.a"
        else:
            items, tail = _items(draw, env, 2, star=False), ""
        where = f" WHERE {pred(draw, env, 1)}" if draw(st.booleans()) else ""
        if draw(st.integers(0, 3)) == 0:
            item += ", R"
            where = " WHERE X.a = R.a" + (f" AND {where[7:]}" if where else "")
        if k == "around":
            return (), f"{op}(SELECT {items} FROM {item}{where}{tail})"
        return (), f"SELECT {op}({items}) FROM {item}{where}{tail}"
    if k == "item":
        rel = draw(st.sampled_from(["R", "P"]))
        w = window(draw, _SCHEMA[rel], draw(st.sampled_from(["RANGE", "NOW", "ROWS", "UNBOUNDED", "none",
                                                             "SLIDE"])), allow_where=False)
        env = [(f"Z.{c}", t) for c, t in _SCHEMA[rel]]
        where = f" WHERE {pred(draw, env, 1)}" if draw(st.booleans()) else ""
        if draw(st.booleans()):
            return (), f"SELECT Z.{_SCHEMA[rel][0][0]}, COUNT(*) AS n FROM {op}({rel}) Z{w}{where} " \
                       f"GROUP BY Z.{_SCHEMA[rel][0][0]}"
        return (), f"SELECT {_items(draw, env, 2)} FROM {op}({rel}) Z{w}{where}"
    if k == "derived":
        item, env = _stream_item(draw, "S", "X")
        if draw(st.booleans()):
            setup = f"REGISTER QUERY ds AS SELECT X.a AS a, X.b AS b FROM {item} WHERE {pred(draw, env, 1)}"
        else:
            setup = f"REGISTER QUERY ds AS SELECT {op}(X.a AS a, COUNT(*) AS b) FROM {item} GROUP BY X.a"
        w = window(draw, [("a", "INT"), ("b", "INT")],
                   draw(st.sampled_from(["RANGE", "NOW", "UNBOUNDED", "none", "SLIDE", "ROWS", "PARTITION"])))
        denv = [("D.a", "INT"), ("D.b", "INT")]
        q = draw(st.sampled_from([
            f"SELECT * FROM ds{w} D",
            f"SELECT D.a, SUM(D.b) AS s FROM ds{w} D GROUP BY D.a",
            f"SELECT D.a, D.b FROM ds{w} D WHERE {pred(draw, denv, 1)}",
            f"{op}(SELECT D.a, COUNT(*) AS n FROM ds{w} D GROUP BY D.a)",
        ]))
        return (setup,), q
    # view
    item, env = _stream_item(draw, "S", "X")
    if draw(st.booleans()):
        setup = f"REGISTER VIEW v AS SELECT X.a AS a, COUNT(*) AS n FROM {item} GROUP BY X.a"
    else:
        setup = f"REGISTER VIEW v AS SELECT X.a AS a, X.b AS n FROM {item}"
    i2, e2 = _stream_item(draw, "T", "Y")
    q = draw(st.sampled_from([
        "SELECT * FROM v",
        f"{op}(SELECT * FROM v)",
        f"SELECT v.a, v.n, Y.d FROM v, {i2} WHERE v.a = Y.a",
        "SELECT v.n, COUNT(*) AS k FROM v GROUP BY v.n",
        "SELECT v.a, R.e FROM v, R WHERE v.a = R.a AND v.n > 0",
    ]))
    return (setup,), q


@st.composite
def subquery_queries(draw):
    """Subqueries in FROM (relation-valued, and stream-valued with a window) and in WHERE: uncorrelated and
    correlated scalar, IN, NOT IN, EXISTS, NOT EXISTS, op ALL / ANY."""
    k = draw(st.sampled_from(["from_rel", "from_stream", "from_stream", "where", "where", "where", "outer_rel"]))
    if k == "from_rel":
        item, env = _stream_item(draw, draw(st.sampled_from(["S"])), "X")
        inner = f"SELECT X.a AS a, COUNT(*) AS n, MAX(X.b) AS m FROM {item} GROUP BY X.a"
        outer_env = [("Q.a", "INT"), ("Q.n", "INT"), ("Q.m", "INT")]
        where = f" WHERE {pred(draw, outer_env, 1)}" if draw(st.booleans()) else ""
        if draw(st.booleans()):
            return (), f"SELECT Q.a, Q.n + Q.m AS t FROM ({inner}) Q{where}"
        return (), f"ISTREAM(SELECT * FROM ({inner}) Q{where})"
    if k == "from_stream":
        name = draw(st.sampled_from(["S", "T"]))
        item, env = _stream_item(draw, name, "X")
        second = "X.b" if name == "S" else "X.d"
        inner = f"SELECT X.a AS a, {second} AS v FROM {item}"
        if draw(st.booleans()):
            inner += f" WHERE {pred(draw, env, 1)}"
        vt = "INT" if name == "S" else "FLOAT"
        w = window(draw, [("a", "INT"), ("v", vt)],
                   draw(st.sampled_from(["RANGE", "SLIDE", "NOW", "UNBOUNDED", "none", "ROWS", "PARTITION"])))
        oenv = [("Q.a", "INT"), ("Q.v", vt)]
        return (), draw(st.sampled_from([
            f"SELECT * FROM ({inner}) Q{w}",
            f"SELECT Q.a, COUNT(*) AS n, SUM(Q.v) AS s FROM ({inner}) Q{w} GROUP BY Q.a",
            f"SELECT Q.a, Q.v FROM ({inner}) Q{w} WHERE {pred(draw, oenv, 1)}",
            f"SELECT Q.a, R.e FROM ({inner}) Q{w}, R WHERE Q.a = R.a",
        ]))
    if k == "outer_rel":
        i2, _ = _stream_item(draw, "S", "Y")
        sub = draw(st.sampled_from([
            f"R.a IN (SELECT Y.a FROM {i2})",
            f"EXISTS (SELECT * FROM {i2} WHERE Y.a = R.a)",
            f"R.a NOT IN (SELECT Y.a FROM {i2})",
        ]))
        return (), f"SELECT R.a, R.e FROM R WHERE {sub}"
    # WHERE subqueries over an outer stream
    item, env = _stream_item(draw, "S", "X")
    i2, e2 = _stream_item(draw, draw(st.sampled_from(["S", "T"])), "Y")
    y_num = "Y.b" if e2[1][0] == "Y.b" else "Y.a"
    sub = draw(st.sampled_from([
        f"X.a IN (SELECT Y.a FROM {i2})",
        f"X.a NOT IN (SELECT Y.a FROM {i2})",
        "X.a IN (SELECT R.a FROM R)",
        "X.a NOT IN (SELECT R.a FROM R WHERE R.e = 'x')",
        f"EXISTS (SELECT * FROM {i2} WHERE Y.a = X.a)",
        f"NOT EXISTS (SELECT * FROM {i2} WHERE Y.a = X.a)",
        "EXISTS (SELECT * FROM R WHERE R.a = X.a AND R.e <> 'y')",
        f"X.b >= (SELECT MAX({y_num}) FROM {i2})",
        f"X.b = (SELECT MAX({y_num}) FROM {i2} WHERE Y.a = X.a)",
        f"X.b >= ALL (SELECT {y_num} FROM {i2})",
        f"X.b < ANY (SELECT {y_num} FROM {i2} WHERE Y.a <> X.a)",
        "X.a = ANY (SELECT R.a FROM R)",
        f"X.b > (SELECT COUNT(*) FROM {i2})",
    ]))
    if draw(st.integers(0, 3)) == 0:
        sub = f"{sub} AND {pred(draw, env, 0)}"
    shape = draw(st.integers(0, 5))     # under NOT, or OR-ed with a plain condition (either side)
    if shape == 0:
        sub = f"NOT ({sub})"
    elif shape == 1:
        sub = f"({sub} OR {pred(draw, env, 0)})"
    elif shape == 2:
        sub = f"({pred(draw, env, 0)} OR {sub})"
    if draw(st.integers(0, 3)) == 0:
        return (), f"SELECT X.a, COUNT(*) AS n FROM {item} WHERE {sub} GROUP BY X.a"
    return (), f"SELECT {_items(draw, env, 2, star=False)} FROM {item} WHERE {sub}"


FAMILIES = {
    "window": window_queries, "join": join_queries, "aggregate": aggregate_queries, "setop": setop_queries,
    "streamop": streamop_queries, "subquery": subquery_queries,
}


def queries(family: str = "any"):
    """Strategy of (setup statements, query text); setup registers the views/derived streams the query reads."""
    if family == "any":
        return st.one_of([f() for f in FAMILIES.values()])
    return FAMILIES[family]()


@st.composite
def workloads(draw, family: str = "any", max_events: int = 20, max_ts: int = 60):
    """A whole run: catalog + setup statements, one query, input actions, final heartbeat."""
    setup, query = draw(queries(family))
    actions, until = draw(inputs(max_events=max_events, max_ts=max_ts))
    return Workload(CATALOG + tuple(setup), query, actions, until)


# ------------------------------------------------------------------------------------------------ reduction


def mismatch(w: Workload) -> bool:
    """True when the engine and the reference disagree on ``w`` (an invalid or ambiguous workload is False)."""
    from oracle.reference import Ambiguous

    try:
        expected = run_reference(w)
    except (Ambiguous, Exception):
        return False
    try:
        return diff(expected, run_engine(w)) is not None
    except Exception:
        return True


def minimize(w: Workload, fails=mismatch) -> Workload:
    """Greedy reduction of a failing workload (hypothesis' shrinker can be slow on these): drop whole actions,
    then single rows, then lower the final heartbeat, while ``fails`` stays true. For bug reports."""

    def variants(w):
        acts = list(w.actions)
        for i in range(len(acts)):
            yield Workload(w.statements, w.query, tuple(acts[:i] + acts[i + 1:]), w.until)
        for i, a in enumerate(acts):
            if a[0] == "push" and len(a[2]) > 1:
                for j in range(len(a[2])):
                    b = ("push", a[1], a[2][:j] + a[2][j + 1:], a[3][:j] + a[3][j + 1:])
                    yield Workload(w.statements, w.query, tuple(acts[:i] + [b] + acts[i + 1:]), w.until)
            if a[0] == "update":
                for k in (2, 3):
                    for j in range(len(a[k])):
                        b = list(a)
                        b[k] = a[k][:j] + a[k][j + 1:]
                        yield Workload(w.statements, w.query, tuple(acts[:i] + [tuple(b)] + acts[i + 1:]), w.until)
        last = max([a[4] if a[0] == "update" else max(a[3]) for a in acts if a[0] in ("push", "update")
                    and (a[0] == "update" or a[3])], default=0)
        for u in range(w.until - 1, last, -1):       # the engine may finalise any instant all inputs passed
            yield Workload(w.statements, w.query, w.actions, u)

    changed = True
    while changed:
        changed = False
        for v in variants(w):
            if fails(v):
                w, changed = v, True
                break
    return w


def engine_problem(w: Workload) -> str | None:
    """What is wrong with the engine on ``w`` (its result kind, schema and results against the reference's),
    or None. Raises Ambiguous when the oracle cannot decide."""
    info: dict = {}
    expected = run_reference(w, info=info)
    einfo: dict = {}
    try:
        actual = run_engine(w, info=einfo)
    except Exception as e:  # the engine must not crash on a valid workload
        return f"engine raised {type(e).__name__}: {e}"
    out = []
    if einfo["kind"] != info["kind"]:
        out.append(f"result kind: engine {einfo['kind']}, reference {info['kind']}")
    if einfo["schema"] != info["schema"]:
        out.append(f"schema: engine {einfo['schema']}, reference {info['schema']}")
    d = diff(expected, actual)
    if d:
        out.append(d)
    return "\n".join(out) or None


def _problem_fails(w: Workload) -> bool:
    try:
        return engine_problem(w) is not None
    except Exception:
        return False                     # invalid after reduction (e.g. a delete of a row no longer inserted)


def check_workload(w: Workload) -> None:
    """Inside a hypothesis test: reject ``w`` when the oracle cannot decide it, else fail with the workload
    reduced (``minimize``) when the engine's answer differs from the reference's."""
    from hypothesis import reject

    from oracle.reference import Ambiguous

    try:
        problem = engine_problem(w)
    except Ambiguous:
        reject()
    if problem:
        small = minimize(w, _problem_fails)
        raise AssertionError(f"engine != reference on (reduced) workload:\n{small!r}\n{engine_problem(small)}")
