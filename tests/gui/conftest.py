"""Fixtures of the GUI tests: one real ``dsms serve`` (with a token, so the GUI's token handling is always
exercised) and ONE headless Chromium for the whole session (Debian's /usr/bin/chromium driven by Playwright);
each test gets a fresh browser context and page, and fails if the page logged an unexpected console error."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))

from httpkit import ROOT, Server  # noqa: E402

TOKEN = "gui-test-token"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "docs" / "gui"
_names = itertools.count(1)
expect.set_options(timeout=10_000)       # a conditional wait, long enough for a loaded 2-core CI machine
# What Chromium logs for a fetch() the server refused; the tests that provoke a refusal allow its status.
_REFUSED = re.compile(r"Failed to load resource: the server responded with a status of (\d{3})")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("gui") / "data", token=TOKEN).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def uniq() -> str:
    return f"g{next(_names)}"


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


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def context(browser: Browser, console: Console, server: Server):
    """A browser context at 1280x800 whose pages already hold the token in sessionStorage (the dialog that
    asks for it is tested on its own, in a context without it)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=f"http://127.0.0.1:{server.port}")
    ctx.add_init_script(f"sessionStorage.setItem('dsms.token', {TOKEN!r})")
    ctx.set_default_timeout(10_000)
    yield ctx
    ctx.close()


def watch(page: Page, console: Console) -> Page:
    page.on("console", console.on_message)
    page.on("pageerror", lambda exc: console.errors.append(f"uncaught: {exc}"))
    return page


@pytest.fixture
def page(context, console: Console) -> Iterator[Page]:
    pg = watch(context.new_page(), console)
    yield pg
    assert console.unexpected() == [], console.errors


def screenshot(page: Page, name: str) -> Path:
    """Write docs/gui/<name>.png (the viewport, 1280x800) for docs/gui.md."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path))
    return path
