"""How the client shows what the server answered: a line for what a statement created or dropped, a table for
SHOW and DESCRIBE, the plan text for EXPLAIN, and an error with the offending line and a caret under the place
the server named (rich for the tables; no markup is ever read from the server's text)."""

from __future__ import annotations

import re
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsms.client.http import ServerError
from dsms.client.statements import Statement

_WHERE = re.compile(r"^line \d+, column \d+: ")


def cell(value: Any) -> Text:
    """A value as a table cell (never read as rich markup: ``[RANGE 5]`` stays text)."""
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text("TRUE" if value else "FALSE")
    return Text(str(value))


def columns_text(cols: list[dict[str, str]] | None) -> str:
    return ", ".join(f"{c['name']} {c['type']}" for c in cols or [])


def table(header: list[str], rows: list[list[Any]], title: str | None = None) -> Table:
    t = Table(*header, box=box.SIMPLE_HEAD, title=title, title_justify="left", show_edge=False)
    for r in rows:
        t.add_row(*(cell(v) for v in r))
    return t


def render_result(console: Console, r: dict[str, Any]) -> None:
    """One statement's outcome, as ``POST /cql`` or ``POST /queries`` describes it (docs/http-api.md)."""
    if "show" in r:
        header = r.get("header") or (list(r["rows"][0]) if r["rows"] else ["name"])
        console.print(table(header, [[row.get(h) for h in header] for row in r["rows"]]))
        console.print(Text(f"({len(r['rows'])} {r['show'] if len(r['rows']) != 1 else r['show'][:-1]})",
                           style="dim"))
    elif "describe" in r:
        what = r["kind"] + (f" {r['id']}" if r.get("id") and r["id"] != r["describe"] else "")
        extra = f", result: {r['result']}" if r.get("result") else ""
        console.print(Text(f"{r['describe']} ({what}{extra})", style="bold"))
        console.print(table(["column", "type"], [[c["name"], c["type"]] for c in r["columns"]]))
        for key in ("source", "text", "used_by"):
            if r.get(key):
                console.print(Text(f"{key.replace('_', ' ')}: {r[key]}"))
    elif "explain" in r:
        console.print(Text(r["explain"]))
    elif "dropped" in r:
        console.print(Text(f"dropped {r['dropped']}"))
    elif r.get("created") in ("stream", "relation"):
        source = r.get("source") or None
        via = f" from MQTT '{source['mqtt']}'" if isinstance(source, dict) and source.get("mqtt") else ""
        console.print(Text(f"{r['created']} {r['name']} registered ({columns_text(r['columns'])}){via}"))
    elif "id" in r and "schema" in r:
        what = r.get("created", "query")
        named = f"{r['name']} as {r['id']}" if r.get("name") else r["id"]
        console.print(Text(f"{what} {named} registered ({r['kind']}: {columns_text(r['schema'])})"))
    else:
        console.print(Text(str(r)))
    if r.get("warning"):
        console.print(Text(f"warning: {r['warning']}", style="yellow"))


def error_lines(err: ServerError, stmt: Statement | None, source_text: str | None,
                source_name: str | None = None) -> list[Text]:
    """The error as lines to print: ``where: kind: message``, then the offending source line with a caret
    under the column. The server counts the position within the statement it was sent; ``stmt`` says where
    that statement starts in ``source_text`` (the shell's input or the file), so the place shown is in it."""
    kind = err.body.get("error") or f"HTTP {err.status}"
    message = _WHERE.sub("", str(err))
    line, column = err.line, err.column
    if line is not None and stmt is not None:
        column = (column or 1) + (stmt.column - 1 if line == 1 else 0)
        line = line + stmt.line - 1
    where = ""
    if source_name:
        where = f"{source_name}:{line}:{column}: " if line is not None else f"{source_name}: "
    elif line is not None:
        where = f"line {line}, column {column}: "
    out = [Text(f"{where}{kind}: {message}", style="bold red")]
    if line is not None and source_text is not None:
        lines = source_text.split("\n")
        if 1 <= line <= len(lines):
            code = lines[line - 1].replace("\t", " ")
            gutter = f"{line:>4} | "
            out.append(Text(gutter + code))
            out.append(Text(" " * (len(gutter) + max((column or 1) - 1, 0)) + "^", style="bold red"))
    if "statement" in err.body and err.body.get("done"):
        out.append(Text(f"(the {len(err.body['done'])} statement(s) before it in the request stay applied)",
                        style="dim"))
    return out


def print_error(console: Console, err: ServerError, stmt: Statement | None, source_text: str | None,
                source_name: str | None = None) -> None:
    for t in error_lines(err, stmt, source_text, source_name):
        console.print(t)
