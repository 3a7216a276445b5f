"""Steps the GUI tests share: running CQL in the editor, opening a query page, pushing elements with the form,
reading the live tables, and the expected results from the reference evaluator (tests/oracle)."""

from __future__ import annotations

import json
from typing import Any

from httpkit import Server
from oracle.reference import Reference
from playwright.sync_api import Page, expect


def run_cql(page: Page, text: str) -> None:
    """Type ``text`` into the CQL editor and run it."""
    page.goto("/#/cql")
    page.fill("#cql-text", text)
    page.click("#cql-run")


def open_query(page: Page, server: Server, qid: str) -> dict[str, Any]:
    """Open the query page and wait for its plan graph; returns the plan as the HTTP API gives it."""
    page.goto(f"/#/query/{qid}")
    page.wait_for_selector("#plan-graph[data-nodes]")
    return server.get(f"/queries/{qid}/plan").json()


def op_of_kind(plan: dict[str, Any], kind: str) -> str:
    return next(op["id"] for op in plan["operators"] if op["kind"] == kind)


def cell(page: Page, eid: str, col: str):
    """The live statistics cell of entity ``eid`` in the query page's entity table."""
    return page.locator(f"#entity-table tr[data-entity='{eid}'] td[data-col='{col}']")


def push_with_form(page: Page, stream: str, items: list[dict]) -> None:
    """Send NDJSON items with the editor page's push form and wait for the server's acknowledgement."""
    page.goto("/#/cql")
    page.select_option("#push-stream", stream)
    page.fill("#push-text", "\n".join(json.dumps(i) for i in items))
    page.click("#push-send")
    n = sum(1 for i in items if "row" in i)
    expect(page.locator("#push-msg")).to_contain_text(f"accepted {n} element")


def result_rows(page: Page, columns: list[str]) -> list[tuple]:
    """The rows of the live results table as (ts, sign, *columns), oldest first."""
    rows = page.eval_on_selector_all(
        "#results-table tbody tr", "trs => trs.map(tr => [...tr.cells].map(td => td.textContent))")
    out = []
    for r in reversed(rows):
        ts, sign, *vals = r
        out.append((int(ts), -1 if sign == "−" else 1, *[_num(v) for v in vals[:len(columns)]]))
    return out


def _num(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def reference_rows(setup: str, query: str, feed: list[tuple[list[dict], list[int]]], until: int,
                   columns: list[str]) -> list[tuple]:
    """What the reference evaluator says ``query`` produces for ``feed`` (lists of rows with their timestamps),
    final below ``until``, as (ts, sign, *columns)."""
    ref = Reference()
    ref.execute(setup)
    name = ref.execute(query)
    stream = setup.split()[2]
    for rows, ts in feed:
        ref.push(stream, rows, ts=ts)
    return [(ts, sign, *[row[c] for c in columns]) for ts, sign, row in ref.results(name, until=until)]
