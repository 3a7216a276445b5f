"""``web/malloc.py``: the server keeps freed buffers of a few hundred KB for reuse instead of handing them back to
the kernel and faulting them in again for the next result batch (issue 15, the end-to-end figure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.web.httpkit import ROOT

PROBE = r"""
import json, resource, sys
from web.malloc import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def batch():
    # what every result batch does: a few large buffers alive together (text, bytes, HTTP chunk), then freed
    text = "x" * 400_000
    data = text.encode()
    chunk = b"".join((b"61a80\r\n", data, b"\r\n"))
    return len(chunk)
for _ in range(5):                       # warm up: the heap reaches its working size
    batch()
before = faults()
for _ in range(200):
    batch()
print(json.dumps({"kept": kept, "faults": faults() - before}))
"""


def _probe(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=ROOT, env={**clean, **env}, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return json.loads(out)


def test_freed_buffers_are_reused_without_page_faults() -> None:
    plain = _probe("plain")
    kept = _probe("keep")
    assert kept["kept"] is True
    # 200 batches of three buffers of 98 pages: without the setting they are mapped and faulted in afresh
    assert plain["faults"] > 200 * 50, plain
    assert kept["faults"] < 200, kept


def test_the_environment_still_decides_when_it_sets_the_thresholds() -> None:
    assert _probe("keep", MALLOC_TRIM_THRESHOLD_="131072")["kept"] is False
