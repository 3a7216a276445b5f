"""Shared pytest configuration: hypothesis profiles, "ci" (derandomized: the same examples on every run, so that a
run of the README's test command on any machine, CI included, gives the same verdict) by default, "dev" (random
examples, to explore) when DSMS_RANDOM_TESTS is set. pytest puts ``tests/`` on the import path, so tests can ``import oracle``."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, settings

# tests/control_tables, tests/scheduler, tests/web mirror the top-level packages without __init__.py, so with only
# tests/ on sys.path (plain `pytest`) they would be found as empty namespace packages; with the repository root on
# sys.path the real (regular) packages win wherever they stand in the path.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

settings.register_profile(
    "ci", derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dev" if os.environ.get("DSMS_RANDOM_TESTS") else "ci")

# The real mosquitto broker fixtures (tests/brokers.py), for the MQTT adapter tests and the server's
# end-to-end MQTT tests alike.
from brokers import mosquitto, mosquitto_persistent  # noqa: E402,F401
