"""The shell in a pseudo-terminal, for the client tests: ``Shell`` starts ``dsms shell`` with pexpect as a user
starts it, ``PROMPT`` matches a new prompt, ``plain`` strips escape sequences (a module of its own, not
a conftest.py: a second module named conftest in the test tree clashes with the doctest collection of
tests/conftest.py)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect

sys.path.insert(0, str(Path(__file__).parents[1] / "web"))

from httpkit import ROOT, Server  # noqa: E402

__all__ = ["PROMPT", "ROOT", "Server", "Shell", "plain"]

# a new prompt (not a redraw of the current one while typing): prompt_toolkit turns bracketed paste on first
PROMPT = r"\x1b\[\?2004h[^\n]*?dsms>"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>()][0-9A-Za-z]?")


def plain(text: str) -> str:
    """Terminal output without escape sequences and carriage returns."""
    return _ANSI.sub("", text).replace("\r", "")


class Shell:
    """``dsms shell`` in a pseudo-terminal; ``out`` is everything it printed so far, escape sequences removed."""

    def __init__(self, server: Server, home: Path, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(home), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
        env.pop("DSMS_URL", None)
        env.pop("DSMS_TOKEN", None)
        self.child = pexpect.spawn(sys.executable, ["-m", "dsms.cli", "shell", "--url",
                                                     f"http://127.0.0.1:{server.port}", *args],
                                   cwd=str(ROOT), env=env, encoding="utf-8", timeout=30, dimensions=(40, 140))
        self.raw = ""
        self.expect(PROMPT)

    def expect(self, pattern: str) -> str:
        """Wait for ``pattern`` (a regex over the raw output); returns the plain output up to it."""
        self.child.expect(pattern)
        self.raw += self.child.before + self.child.after
        return plain(self.child.before + self.child.after)

    def run(self, text: str, until: str = PROMPT) -> str:
        """Type ``text`` and Enter; the plain output until the next prompt (or ``until``)."""
        self.child.send(text + "\r")
        return self.expect(until)

    @property
    def out(self) -> str:
        return plain(self.raw)

    def close(self) -> int:
        if self.child.isalive():
            self.child.sendcontrol("c")           # whatever it was doing, back to an empty prompt
            self.child.send("\\q\r")
            try:
                self.child.expect(pexpect.EOF, timeout=10)
            except pexpect.TIMEOUT:
                self.child.terminate(force=True)
        self.child.close()
        return self.child.exitstatus
