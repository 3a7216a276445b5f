"""The rewrite rules against their fixture files (sqlglot's optimizer fixtures): tests/fixtures/rules/<rule>.cql
holds cases of a query and the logical plan after the rules up to and including <rule>, as
``dsms.plan.explain.logical_text`` writes it. A case marked ``-- execute`` also runs the plan before the rule
and the plan after it (loaded as plan files, so nothing else rewrites them) on generated input, and both must
give the reference evaluator's result (sqlglot checks its rewrites against DuckDB the same way). Format and how
to add a case: docs/testing.md, "Rule fixtures"."""

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from oracle.generators import CATALOG, Workload, apply, compare, inputs, run_reference

from dsms import Engine
from dsms.cql.parser import parse_query
from dsms.plan import logical as L
from dsms.plan.binder import Binder
from dsms.plan.explain import logical_text
from dsms.plan.rules import RULES
from dsms.plan.xml_plan import plan_to_xml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rules"
RULE_NAMES = [r.__name__ for r in RULES]


@dataclass(frozen=True)
class Case:
    rule: str
    title: str
    query: str
    expected: str
    execute: bool
    line: int

    def __str__(self) -> str:
        return f"{self.rule}: {self.title}"


def read_cases(path: Path) -> list[Case]:
    """The cases of one fixture file: ``-- title:``, optional ``-- execute``, the query up to its ``;``, then
    the expected plan up to the next title. Other ``--`` lines are comments."""
    cases, block, start = [], None, 0
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines + ["-- title: <end>"], 1):
        if line.startswith("-- title:"):
            if block is not None:
                cases.append(_case(path, block, start))
            block, start = [line], i
        elif block is not None and line.strip() and (not line.startswith("--") or line == "-- execute"):
            block.append(line)
    return cases


def _case(path: Path, block: list[str], line: int) -> Case:
    title, body = block[0].removeprefix("-- title:").strip(), block[1:]
    execute = bool(body) and body[0] == "-- execute"
    body = body[1:] if execute else body
    end = next((k for k, b in enumerate(body) if b.rstrip().endswith(";")), None)
    if end is None or end + 1 == len(body):
        raise ValueError(f"{path.name}:{line}: case '{title}' needs a query ending in ';' and a plan after it")
    query = " ".join(b.strip() for b in body[:end + 1]).rstrip(";")
    return Case(path.stem, title, query, "\n".join(body[end + 1:]), execute, line)


CASES = [c for p in sorted(FIXTURES.glob("*.cql")) for c in read_cases(p)]


def catalog_engine() -> Engine:
    eng = Engine()
    for s in CATALOG:
        eng.execute(s)
    return eng


def plans(case: Case):
    """(kind, plan before the case's rule, plan after it), each after the rules that come before it."""
    eng = catalog_engine()
    bound = Binder(eng.catalog, {}).bind_statement_query(parse_query(case.query))
    node = bound.node
    k = RULE_NAMES.index(case.rule)
    for rule in RULES[:k]:
        node = rule(node)
    return bound, node, RULES[k](node)


def test_every_rule_has_a_fixture_file_and_every_file_a_rule():
    assert sorted(p.stem for p in FIXTURES.glob("*.cql")) == sorted(RULE_NAMES)
    for name in RULE_NAMES:
        assert sum(c.rule == name for c in CASES) >= 5, f"{name}: too few fixture cases"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_rule_gives_the_fixture_plan(case):
    _, _, after = plans(case)
    got = logical_text(after)
    assert got == case.expected, (f"tests/fixtures/rules/{case.rule}.cql:{case.line} ({case.title}): the plan "
                                  f"after the rule is\n{got}\nexpected\n{case.expected}")


def run_plan(node, bound, w: Workload) -> list:
    """The result of a logical plan, loaded as a plan file into a fresh engine (no rule runs on it)."""
    root = node if bound.kind == L.STREAM else L.Changelog(node, names=bound.names)
    eng = catalog_engine()
    q = eng.load_plan(plan_to_xml(root, "fixture", bound.kind))
    for a in w.actions:
        apply(eng, a)
    eng.heartbeat(w.until)
    eng.run()
    return [(int(e.ts), int(e.sign), e.row) for e in q.drain()]


def positional(result: list) -> list:
    """Rows keyed by position: a plan file's columns are named by the plan, the oracle's by the query."""
    return [(ts, sign, {f"${i}": v for i, v in enumerate(row.values())}) for ts, sign, row in result]


@pytest.mark.parametrize("case", [c for c in CASES if c.execute], ids=str)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(data=inputs(max_events=10, max_ts=40))
def test_rule_keeps_the_result(case, data):
    actions, until = data
    bound, before, after = plans(case)
    w = Workload(CATALOG, case.query, actions, until)
    expected = positional(run_reference(w))
    compare(expected, positional(run_plan(before, bound, w)))
    compare(expected, positional(run_plan(after, bound, w)))
