"""Markdown attribute tables generated from the ``Stat``/``Knob`` declarations of entity classes.

Source: SPEC section 8 and STYLE.md ("the attribute tables in docs/control-tables.md are generated from these
declarations, never written by hand"); digest-004 section 2.I R-ENT-06 (one generic control-table code path
serves every tool). Run it as::

    python -m control_tables.docgen dsms.operators.select:SelectOp synopses.window > table.md
    python -m control_tables.docgen --title "Control tables" some.module   # every Entity class in a module
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .attributes import Attribute, Knob
from .entity import Entity

COLUMNS = ("attribute", "stat/knob", "type", "unit", "writable", "default", "range/choices", "doc")


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _limits(a: Attribute) -> str:
    parts = []
    if isinstance(a, Knob) and a.range_text():
        parts.append(_code(a.range_text() or ""))
    choices = a.choices()
    if choices is not None:
        parts.append(", ".join(_code(repr(c)) for c in choices))
    return "; ".join(parts)


def attribute_table(cls: type[Entity]) -> str:
    """The Markdown table of ``cls``'s control table, one row per attribute in declaration order.

    >>> from control_tables import Knob, Stat
    >>> class Probe(Entity):
    ...     tuples_in = Stat(int, unit="tuples", doc="tuples consumed")
    ...     priority = Knob(int, default=0, ge=0, doc="higher runs first")
    >>> print(attribute_table(Probe))
    | attribute | stat/knob | type | unit | writable | default | range/choices | doc |
    |---|---|---|---|---|---|---|---|
    | `tuples_in` | stat | `int` | tuples | no | `0` |  | tuples consumed |
    | `priority` | knob | `int` |  | yes | `0` | `value >= 0` | higher runs first |
    """
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for a in cls.control_attributes().values():
        row = [_code(a.name), a.kind, _code(a.type_text), a.unit or "", "yes" if a.writable else "no",
               _code(repr(a.default)) if a.writable or getattr(a, "compute", None) is None else "",
               _limits(a), a.doc]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls)
    if not doc or cls.__doc__ is None:
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def document(classes: Iterable[type[Entity]], *, title: str | None = None, level: int = 2) -> str:
    """A Markdown document: an optional title, then per class a heading, its kind and id form, the first
    paragraph of its docstring and its attribute table."""
    hashes = "#" * level
    out: list[str] = [f"{'#' * (level - 1)} {title}\n"] if title and level > 1 else []
    for cls in classes:
        out.append(f"{hashes} {cls.__name__}\n")
        out.append(f"Kind `{cls.entity_kind()}`, ids `{cls.prefix}:N`.\n")
        summary = _summary(cls)
        if summary:
            out.append(summary + "\n")
        out.append(attribute_table(cls) + "\n")
    return "\n".join(out)


def load(spec: str) -> list[type[Entity]]:
    """The classes a command-line argument names: ``module:Class``, or ``module`` for every Entity subclass
    defined in that module (in definition order)."""
    module_name, _, cls_name = spec.partition(":")
    module = importlib.import_module(module_name)
    if cls_name:
        obj: Any = module
        for part in cls_name.split("."):
            obj = getattr(obj, part)
        if not (isinstance(obj, type) and issubclass(obj, Entity)):
            raise TypeError(f"{spec} is not an Entity class")
        return [obj]
    return [v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, Entity) and v.__module__ == module.__name__]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print the Markdown for the classes named; exit status 2 on a bad name."""
    parser = argparse.ArgumentParser(prog="python -m control_tables.docgen", description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="+", metavar="module[:Class]")
    parser.add_argument("--title", default=None, help="a top-level heading for the document")
    args = parser.parse_args(argv)
    classes: list[type[Entity]] = []
    for target in args.targets:
        try:
            classes.extend(load(target))
        except (ImportError, AttributeError, TypeError) as exc:
            print(f"docgen: cannot load {target!r}: {exc}", file=sys.stderr)
            return 2
    sys.stdout.write(document(classes, title=args.title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
