"""Crash safety (SPEC section 9): a writer killed with SIGKILL mid-write loses no frame whose append returned.

The child appends deterministic frames (some large, so the kill often lands inside a write and tears it) and
prints the number of appends that returned after each one. The parent waits for a count, with a deadline and
no sleeps, kills the child, reads the last count the child printed, reopens the archive and checks every
acknowledged frame, and nothing else, is there."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsms.archive import Archive

REPO = Path(__file__).resolve().parents[2]

# Shared by the child (pasted into its script) and the parent (exec'd): frame i of the run.
GEN = '''
import numpy as np

def frame(i):
    """(input, kind, ts, rows) of the i-th append: a heartbeat every 7th, otherwise a batch of 1 to 64K rows
    (up to about 1 MiB), so that the kill often lands inside a large os.write and tears it."""
    name = "T" if i % 5 == 4 else "S"
    if i % 7 == 6:
        return name, "hb", i, None
    n = 1 + (i * 7919) % 65536
    return name, "batch", i, n

def cols(i, n):
    out = {"v": np.arange(i, i + n, dtype=np.int64), "f": np.full(n, i / 7.0)}
    if n < 2000:
        out["s"] = ["row%d" % i] * n
    return out
'''

CHILD = GEN + '''
import os, sys, types
import dsms.archive.segment as segmod
from dsms.archive import Archive
data_dir, mode, tear_after = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = Archive(data_dir, segment_bytes=4 << 20, fsync=mode)
# continue where the recovered archive ends: after a crash it holds exactly the appends that completed
i = sum(r.frames for r in a.ranges().values())
print("start", i, flush=True)
tear_at = i + tear_after if tear_after >= 0 else -1

def torn_write(fd, data):
    # a deterministic kill inside a write: half the frame reaches the file, then the parent is told to kill
    n = os.write(fd, bytes(data[: len(data) // 2]))
    print("mid", n, flush=True)
    sys.stdin.read()  # blocks until the SIGKILL
    raise SystemExit("not killed")

while True:
    if i == tear_at:
        proxy = types.ModuleType("os")
        proxy.__dict__.update(os.__dict__)
        proxy.write = torn_write
        segmod.os = proxy
    name, kind, ts, n = frame(i)
    if kind == "hb":
        a.append_heartbeat(name, ts)
    else:
        a.append_batch(name, np.full(n, ts, dtype=np.int64), None, cols(i, n))
    i += 1
    if mode == "group" and i % 10 == 0:
        a.sync()
    print(i, flush=True)
'''

gen_ns: dict = {}
exec(GEN, gen_ns)
frame, cols = gen_ns["frame"], gen_ns["cols"]


def run_and_kill(data_dir: Path, mode: str, more: int, tear: bool = False,
                 deadline_s: float = 120.0) -> tuple[int, int]:
    """Start the writer, SIGKILL it once it has acknowledged ``more`` appends beyond where it started (with
    ``tear``: once the next append has written half its frame); return (where it started, the last count it
    acknowledged, counting everything it printed before dying)."""
    script = data_dir.parent / "writer.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(script), str(data_dir), mode, str(more if tear else -1)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    buf = b""
    start: int | None = None
    acked = -1
    torn = False
    end = time.monotonic() + deadline_s
    try:
        while start is None or (not torn if tear else acked < start + more):
            remaining = end - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"writer acknowledged only up to {acked} (started at {start}) before the deadline")
            if not sel.select(timeout=remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                pytest.fail(f"writer exited early (rc={proc.wait()}): {proc.stderr.read().decode()}")
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(b"start "):
                    start = acked = int(line.split()[1])
                elif line.startswith(b"mid "):
                    torn = True
                elif line.isdigit():
                    acked = int(line)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        sel.close()
    # whatever the child printed before it died is still in the pipe: those appends returned too
    rest = buf + proc.stdout.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    for line in rest.split(b"\n"):
        if line.strip().isdigit():
            acked = max(acked, int(line))
    assert proc.returncode == -signal.SIGKILL
    assert start is not None
    return start, acked


def check_archive(data_dir: Path, acked: int) -> tuple[int, int]:
    """Every acknowledged append (0 .. acked-1) is in the archive, intact; besides them at most the append that
    was in flight at the kill, and only whole. Returns (frames found, torn bytes cut on open)."""
    with Archive(data_dir, fsync="never") as a:
        seen: dict[int, tuple] = {}
        for name in a.inputs():
            last_seq = -1
            for r in a.read(name):
                assert r.seq == last_seq + 1  # no holes in the numbering
                last_seq = r.seq
                if r.is_heartbeat:
                    seen[r.ts] = (name, "hb", r.ts, None)
                    continue
                i, n = int(r.ts[0]), len(r)
                assert (r.ts == i).all() and (r.sign == 1).all()
                want = cols(i, n)
                assert r.cols.keys() == want.keys(), i
                for k, v in want.items():
                    assert list(r.cols[k]) == list(v) if k == "s" else (r.cols[k] == v).all(), (i, k)
                seen[i] = (name, "batch", i, n)
        missing = sorted(set(range(acked)) - set(seen))
        assert not missing, f"acknowledged appends lost: {missing[:10]}"
        assert set(seen) <= set(range(acked + 1)), sorted(set(seen) - set(range(acked + 1)))
        for i, got in seen.items():
            assert got == frame(i)
        return len(seen), a.truncated_bytes


@pytest.mark.parametrize("mode,per_round", [("never", 120), ("group", 120), ("always", 40)])
def test_kill_9_loses_no_acknowledged_frame(tmp_path: Path, mode: str, per_round: int) -> None:
    """Kill/recover rounds on the same archive, each restart continuing from what recovery left: kills wherever
    the writer happens to be, and one kill guaranteed to land inside a write (half a frame on disk)."""
    data_dir = tmp_path / "data"
    report = []
    for tear in (False, True, False):
        start, acked = run_and_kill(data_dir, mode, per_round, tear=tear)
        assert acked >= start + per_round
        found, torn = check_archive(data_dir, acked)
        if tear:
            assert torn > 0 and found == acked  # the half frame was cut, nothing else
        report.append((acked, found, torn))
    with Archive(data_dir, fsync="never") as a:  # usable again: append, reopen, nothing left to recover
        nxt = a.ranges()["S"].next_seq
        assert a.append_heartbeat("S", 10**9) == nxt
    with Archive(data_dir, fsync="never") as a:
        assert a.recovery == []
        assert [r.ts for r in a.read("S", 10**9)] == [10**9]
    print(f"{mode}: (acked, found, torn bytes cut) per round: {report}")
