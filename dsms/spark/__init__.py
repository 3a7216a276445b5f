"""Replay of the archive on Apache Spark (SPEC section 9): any query over an archived time range, with results
equal to the live run's, parallel by key or by time where the plan allows (docs/replay.md).

Modules: ``spec`` (the query and catalog, from the catalog log), ``archive_input`` (reading segments),
``strategy`` (the parallel plan), ``feed`` (one engine over one share of the input), ``job`` (the Spark job),
``output`` (writers), ``progress`` (the terminal progress bar). PySpark is imported only when a job runs, so
``dsms serve`` never needs it.
"""

from dsms.spark.spec import ReplayError, ReplaySpec, load_spec
from dsms.spark.strategy import KEY, SINGLE, STRATEGIES, TIME, Strategy, choose

__all__ = ["KEY", "SINGLE", "STRATEGIES", "TIME", "ReplayError", "ReplaySpec", "Strategy", "choose", "load_spec"]
