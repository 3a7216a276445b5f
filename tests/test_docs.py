"""Generated documentation stays current."""

import tomllib
from pathlib import Path

from dsms.entity_docs import render

ROOT = Path(__file__).resolve().parents[1]


def test_control_tables_doc_is_current():
    text = (ROOT / "docs" / "control-tables.md").read_text()
    assert text == render(), "docs/control-tables.md is stale: run python3 -m dsms.entity_docs > docs/control-tables.md"


def test_control_tables_doc_lists_every_knob():
    text = render()
    for knob in ("`policy`", "`priority`", "`capacity`", "`range`", "`memory`"):
        assert knob in text


def test_the_readme_test_command_runs_every_packages_doctests():
    """`python3 -m pytest` (README, .ci/run) collects the docstring examples of every package of SPEC section 2."""
    opts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in opts["addopts"].split()
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert packages == {"dsms", "scheduler", "synopses", "control_tables", "web"}
    assert packages <= set(opts["testpaths"])
