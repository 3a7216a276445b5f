"""Fixtures of the GUI tests: one real ``dsms serve`` (with a token, so the GUI's token handling is always
exercised) and ONE headless Chromium for all of them (Debian's /usr/bin/chromium driven by Playwright);
each test gets a fresh browser context and page, and fails if the page logged an unexpected console error."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))

from guikit import ONE_BROWSER, TOKEN, Console, watch  # noqa: E402
from httpkit import Server  # noqa: E402

_names = itertools.count(1)
expect.set_options(timeout=10_000)       # a conditional wait, long enough for a loaded 2-core CI machine


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("gui") / "data", token=TOKEN).start()
    yield srv
    srv.stop()


@pytest.fixture
def browser() -> Browser:
    return ONE_BROWSER.get()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last GUI test in a row (and its fixtures' teardown), close the browser and Playwright's event
    loop with it."""
    if nextitem is None or Path(nextitem.path).parent != Path(__file__).parent:
        ONE_BROWSER.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    ONE_BROWSER.close()


@pytest.fixture
def uniq() -> str:
    return f"g{next(_names)}"


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


@pytest.fixture
def page(context, console: Console) -> Iterator[Page]:
    pg = watch(context.new_page(), console)
    yield pg
    assert console.unexpected() == [], console.errors


