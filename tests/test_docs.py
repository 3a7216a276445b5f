"""Generated documentation stays current."""

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
