"""Fixtures of the HTTP tests: one shared server for the tests that only add to the catalog (each uses its own
names), and a factory for tests that need their own server (limits, auth, crash)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from httpkit import Server  # noqa: E402

_names = itertools.count(1)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = Server(tmp_path_factory.mktemp("shared") / "data").start()
    yield srv
    srv.stop()


@pytest.fixture
def uniq() -> str:
    """A name no other test of the session uses."""
    return f"t{next(_names)}"


@pytest.fixture
def make_server(tmp_path: Path):
    started: list[Server] = []

    def make(*args: str, data_dir: Path | None = None, **kw) -> Server:
        srv = Server(data_dir or tmp_path / f"data{len(started)}", *args, **kw)
        started.append(srv)
        return srv

    yield make
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.kill()
