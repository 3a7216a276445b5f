"""A real mosquitto broker for the MQTT tests (SPEC section 1: input arrives over MQTT); the fixtures are
re-exported by tests/conftest.py for every test directory.

The broker listens on a free port on 127.0.0.1, with a generated config file (anonymous access, persistence off
unless a test asks for it). It can be stopped and started again on the same port, which is how the tests break
the connection under a running source. A missing mosquitto fails the tests with what to install: MQTT input is
part of the product, so its tests must not silently skip.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _find_mosquitto() -> str | None:
    return shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if os.access(p, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Mosquitto:
    """One broker process; ``stop()`` and ``start()`` keep the port, so clients can reconnect to it."""

    def __init__(self, binary: str, workdir: Path, persistence: bool = False) -> None:
        self.binary = binary
        self.workdir = workdir
        self.persistence = persistence
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "mosquitto.log"
        self.conf = workdir / "mosquitto.conf"
        self._started_once = False     # after the first start the port is fixed: clients reconnect to it

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def _write_conf(self) -> None:
        # mosquitto started as root drops to the 'mosquitto' user, which cannot write into pytest's private
        # tmp directory (log, persistence file); naming the current user keeps it (ignored when not root).
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous true",
                 f"user {pwd.getpwuid(os.geteuid()).pw_name}"]
        if self.persistence:
            lines += ["persistence true", f"persistence_location {self.workdir}/",
                      "persistence_file mosquitto.db", "autosave_interval 0"]
        else:
            lines += ["persistence false"]
        lines += [f"log_dest file {self.log}", "log_type error", "log_type warning", "log_type notice",
                  "log_type information", "connection_messages true"]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 10.0) -> None:
        """Start on ``self.port`` and wait (up to ``timeout``) until it accepts connections. The first start
        picks another free port if the chosen one was taken in the meantime; a restart must keep its port."""
        assert self.proc is None, "already running"
        for _ in range(3):
            self._write_conf()
            self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)], stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if _accepts(self.port):
                    self._started_once = True
                    return
                time.sleep(0.02)
            out = self._reap()
            if self._started_once:
                break
            self.port = _free_port()
        log = self.log.read_text() if self.log.exists() else ""
        pytest.fail(f"mosquitto did not start on 127.0.0.1:{self.port} within {timeout} s\n{out}\n{log}")

    def _reap(self) -> str:
        out = ""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            out = (self.proc.communicate(timeout=5)[0] or b"").decode(errors="replace")
            self.proc = None
        return out

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (mosquitto saves its persistence file then, when it has one) and wait for the port to be
        free again, so that a following start() can take it."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
        deadline = time.monotonic() + timeout
        while _accepts(self.port):
            if time.monotonic() > deadline:
                pytest.fail(f"port {self.port} still accepts connections after mosquitto stopped")
            time.sleep(0.02)

    def restart(self) -> None:
        self.stop()
        self.start()


def _binary() -> str:
    binary = _find_mosquitto()
    if binary is None:
        pytest.fail("mosquitto is not installed (looked on PATH and in /usr/sbin): the MQTT tests need a real "
                    "broker. Install it with `apt-get install -y mosquitto` (Debian/Ubuntu) or run .ci/run.")
    return binary


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A running broker without persistence; stopped after the test."""
    broker = Mosquitto(_binary(), tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def mosquitto_persistent(tmp_path: Path) -> Iterator[Mosquitto]:
    """A running broker that saves sessions and queued messages across its own restarts."""
    broker = Mosquitto(_binary(), tmp_path, persistence=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
