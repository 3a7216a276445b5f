"""docgen: Markdown attribute tables generated from Stat/Knob declarations (STYLE.md, SPEC section 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

from control_tables import Entity, Knob, Stat, SystemEntity, attribute_table, document
from control_tables.docgen import load, main

ROOT = Path(__file__).resolve().parents[2]


class SelectOp(Entity):
    """Keep the elements whose predicate holds.

    Second paragraph, not shown.
    """

    prefix = "op"
    kind = "select"
    tuples_in = Stat(int, default=0, unit="tuples", doc="tuples consumed")
    selectivity = Stat(float, default=0.0, doc="output/input tuples, EWMA")
    queued = Stat(int, compute=lambda self: 0, doc="computed on read")
    priority = Knob(int, default=0, ge=0, le=1000, doc="scheduler hint; higher runs first")
    memory = Knob(int | None, default=None, ge=0, unit="bytes", doc="memory budget | None = unbounded")
    kind_knob = Knob(Literal["exact", "reservoir", "bloom"], default="exact", name="kind", doc="synopsis kind")
    policy = Knob(str, default="chain", choices=("fifo", "chain"), doc="scheduling policy")


EXPECTED = """\
| attribute | stat/knob | type | unit | writable | default | range/choices | doc |
|---|---|---|---|---|---|---|---|
| `tuples_in` | stat | `int` | tuples | no | `0` |  | tuples consumed |
| `selectivity` | stat | `float` |  | no | `0.0` |  | output/input tuples, EWMA |
| `queued` | stat | `int` |  | no |  |  | computed on read |
| `priority` | knob | `int` |  | yes | `0` | `0 <= value <= 1000` | scheduler hint; higher runs first |
| `memory` | knob | `int \\| None` | bytes | yes | `None` | `value >= 0` | memory budget \\| None = unbounded |
| `kind` | knob | `str` |  | yes | `'exact'` | `'exact'`, `'reservoir'`, `'bloom'` | synopsis kind |
| `policy` | knob | `str` |  | yes | `'chain'` | `'fifo'`, `'chain'` | scheduling policy |"""


def test_attribute_table_has_one_row_per_attribute():
    table = attribute_table(SelectOp)
    assert table == EXPECTED
    for name in SelectOp.control_attributes():
        assert f"| `{name}` |" in table


def test_document_has_heading_kind_summary_and_table():
    doc = document([SelectOp, SystemEntity], title="Control tables")
    assert doc.startswith("# Control tables\n\n## SelectOp\n\nKind `select`, ids `op:N`.\n\n"
                          "Keep the elements whose predicate holds.\n\n| attribute |")
    assert "Second paragraph" not in doc
    assert "## SystemEntity\n\nKind `system`, ids `sys:N`.\n" in doc
    assert "| `history_limit` | knob | `int` | changes | yes | `1000` | `value >= 0` |" in doc


def test_load_names_a_class_or_every_entity_of_a_module():
    assert load("control_tables.registry:SystemEntity") == [SystemEntity]
    assert load("control_tables.registry") == [SystemEntity]


def test_main_prints_markdown(capsys):
    assert main(["control_tables.registry:SystemEntity"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## SystemEntity\n")
    assert "`history_limit`" in out


def test_main_refuses_a_bad_target(capsys):
    assert main(["control_tables.registry:Registry"]) == 2
    assert "is not an Entity class" in capsys.readouterr().err
    assert main(["control_tables.nowhere"]) == 2


def test_runs_as_a_module():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-W", "error", "-m", "control_tables.docgen", "--title", "CT",
                           "control_tables.registry:SystemEntity"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# CT\n\n## SystemEntity\n")
    assert "| `history_limit` | knob |" in proc.stdout
