"""Fault injection: LIKE patterns built to make a backtracking matcher take exponential time (issue 18 item 1).

What is injected: patterns with many ``%`` (and ``_`` runs between them) against long strings that almost
match, run through the real engine. What must hold: each costs at most a generous multiple of a linear
baseline measured in the same test on the same strings (a ``%zz%`` scan of every string), and the results are
right. A backtracking translation (``.*a.*a...b``) never finishes these inputs; a SIGALRM deadline (the regex
engine checks signals) turns that into a failure instead of a hung test. The ratios of the last run are in
docs/reliability.md.
"""

from __future__ import annotations

import signal
import time

import pytest

from dsms import Engine

LENGTH, ROWS = 4000, 200
FACTOR = 60            # allowed cost relative to the baseline scan; a linear matcher measures 0.1x to 10x
STRINGS = {"a": "a" * LENGTH, "ab": "ab" * (LENGTH // 2), "a_then_b": "a" * (LENGTH - 1) + "b"}
ADVERSARIAL = [
    ("%a%a%a%a%a%a%a%a%a%a%a%a%b", {"a": False, "ab": True, "a_then_b": True}),
    ("%a%a%a%a%a%a%a%a%a%a%a%a%c", {"a": False, "ab": False, "a_then_b": False}),
    ("%a_a_a_a_a_a_c%", {"a": False, "ab": False, "a_then_b": False}),
    ("_%_%_%_%_%_%_%_%c", {"a": False, "ab": False, "a_then_b": False}),
    ("%" + "a" * 40 + "c%", {"a": False, "ab": False, "a_then_b": False}),
    ("%ab%ab%ab%ab%ab%ab%ac", {"a": False, "ab": False, "a_then_b": False}),
    ("%a_%_a_%_a_%_b", {"a": False, "ab": True, "a_then_b": True}),
    ("a%a%a%a%a%a%a%a%a%a%a%a%a", {"a": True, "ab": False, "a_then_b": False}),
]


class _Deadline(Exception):
    pass


def _timed(pattern: str, deadline: float) -> tuple[float, dict[str, bool]]:
    """Seconds a fresh engine takes to run one LIKE query over every string family, and which matched."""
    eng = Engine()
    eng.execute("REGISTER STREAM S (k INT, s STRING)")
    q = eng.execute(f"SELECT ISTREAM(k) FROM S [NOW] WHERE s LIKE '{pattern}'")

    def stop(signum, frame):
        raise _Deadline(f"LIKE {pattern!r} still running after {deadline:.2f} s")
    previous = signal.signal(signal.SIGALRM, stop)
    outer = signal.setitimer(signal.ITIMER_REAL, deadline)
    try:
        t0 = time.perf_counter()
        for i, s in enumerate(STRINGS.values()):
            eng.push("S", [{"k": i, "s": s}] * ROWS, ts=[i + 1] * ROWS)
            eng.run()
        elapsed = time.perf_counter() - t0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer[0]:                                  # give pytest-timeout's alarm back
            signal.setitimer(signal.ITIMER_REAL, max(outer[0] - deadline, 0.01))
    eng.heartbeat(len(STRINGS) + 1)
    eng.run()
    got = {e.row["k"] for e in q.drain()}
    return elapsed, {name: i in got for i, name in enumerate(STRINGS)}


@pytest.mark.parametrize(("pattern", "expected"), ADVERSARIAL, ids=[p for p, _ in ADVERSARIAL])
def test_adversarial_like_costs_a_bounded_multiple_of_a_linear_scan(pattern: str, expected: dict) -> None:
    baselines = []
    for _ in range(3):
        t, matched = _timed("%zz%", 30.0)
        assert not any(matched.values())
        baselines.append(t)
    baseline = min(baselines)
    allowed = FACTOR * baseline
    runs = [_timed(pattern, max(allowed, 2.0)) for _ in range(2)]   # the better of two: a descheduled run
    spent = min(t for t, _ in runs)                                   # on a busy machine is not the matcher
    assert all(matched == expected for _, matched in runs)
    assert spent <= allowed, f"LIKE {pattern!r}: {spent:.4f} s against a {baseline:.4f} s linear scan"
