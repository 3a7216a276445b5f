"""EXPLAIN golden files (DataFusion's explain.slt): tests/fixtures/plans/<name>.explain holds a few statements
(planned after catalog.cql) and, below a ``----`` line, the EXPLAIN text of every query they register, in
order, one blank line apart. A change of plan shows as a diff of these files.

To regenerate after a deliberate planner change, then read the diff plan by plan before committing it:

    DSMS_REGENERATE_EXPLAIN=1 python3 -m pytest tests/plan/test_explain_golden.py
    git diff tests/fixtures/plans
"""

import os
from pathlib import Path

import pytest

from dsms import Engine

PLANS = Path(__file__).resolve().parents[1] / "fixtures" / "plans"
SEPARATOR = "----"
REGENERATE = bool(os.environ.get("DSMS_REGENERATE_EXPLAIN"))


def statements(text: str) -> str:
    """The CQL of a fixture part: its lines without ``--`` comments."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def explain_all(cql: str) -> str:
    """The EXPLAIN of every query ``cql`` registers, on a fresh engine with the golden catalog."""
    eng = Engine()
    eng.execute(statements((PLANS / "catalog.cql").read_text()))
    results = eng.execute(statements(cql))
    queries = [r for r in (results if isinstance(results, list) else [results]) if hasattr(r, "drain")]
    assert queries, "a golden file registers at least one query"
    return "\n\n".join(eng.explain(q.id) for q in queries)


def split(path: Path) -> tuple[str, str | None]:
    text = path.read_text()
    head, sep, expected = text.partition(f"\n{SEPARATOR}\n")
    return (head, expected.rstrip("\n")) if sep else (text.rstrip("\n"), None)


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.explain")), ids=lambda p: p.stem)
def test_explain_matches_the_golden_file(path):
    head, expected = split(path)
    got = explain_all(head)
    if REGENERATE:
        path.write_text(f"{head.rstrip()}\n{SEPARATOR}\n{got}\n")
        return
    assert expected is not None, f"{path.name} has no '{SEPARATOR}' line: regenerate it (see this module)"
    assert got == expected, (f"{path.name}: EXPLAIN changed. If the new plan is right, regenerate "
                             f"(DSMS_REGENERATE_EXPLAIN=1) and review the diff.\ngot:\n{got}")


def test_there_are_a_dozen_golden_plans():
    assert len(list(PLANS.glob("*.explain"))) >= 12
