"""One real local SparkSession (``local[2]``) for the whole pytest session: starting the JVM costs seconds, a
job on a warm session a fraction of one."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from dsms.spark.job import session

    s = session("local[2]", "dsms replay tests")
    yield s
    s.stop()
