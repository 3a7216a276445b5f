"""What the GUI tests share: the one browser, the console watcher, screenshots, and the steps (running CQL in
the editor, opening a query page, pushing elements with the form, reading the live tables) with the expected
results from the reference evaluator (tests/oracle)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from httpkit import ROOT, Server
from oracle.reference import Reference
from playwright.sync_api import Browser, Page, expect, sync_playwright

TOKEN = "gui-test-token"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "docs" / "gui"
# What Chromium logs for a fetch() the server refused; the tests that provoke a refusal allow its status.
_REFUSED = re.compile(r"Failed to load resource: the server responded with a status of (\d{3})")


class OneBrowser:
    """The one Chromium of the session's GUI tests: started by the first GUI test, closed after the last one.

    Not a session-scoped fixture: while Playwright's sync API is open it keeps an asyncio event loop running in
    the main thread, and every later test of the session that calls ``asyncio.run()`` would fail under it."""

    def __init__(self) -> None:
        self.playwright = None
        self.browser: Browser | None = None

    def get(self) -> Browser:
        if self.browser is None:
            self.playwright = sync_playwright().start()
            self.browser = self.playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        return self.browser

    def close(self) -> None:
        if self.browser is not None:
            self.browser.close()
            self.playwright.stop()
            self.browser = self.playwright = None


ONE_BROWSER = OneBrowser()


class Console:
    """Console errors and uncaught exceptions of the pages of one test."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: set[int] = set()

    def on_message(self, msg) -> None:
        if msg.type == "error":
            self.errors.append(msg.text)

    def allow(self, *statuses: int) -> None:
        """Expect the server to refuse a request with these statuses (the test provokes it)."""
        self.allowed.update(statuses)

    def unexpected(self) -> list[str]:
        out = []
        for e in self.errors:
            m = _REFUSED.match(e)
            if m is None or int(m.group(1)) not in self.allowed:
                out.append(e)
        return out


def watch(page: Page, console: Console) -> Page:
    page.on("console", console.on_message)
    page.on("pageerror", lambda exc: console.errors.append(f"uncaught: {exc}"))
    return page


def screenshot(page: Page, name: str) -> Path:
    """Write docs/gui/<name>.png (the viewport, 1280x800) for docs/gui.md."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path))
    return path



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
