"""The terminal progress bar of ``dsms replay`` (rich): tasks done, input rows, results and result instants of
the finished tasks, rate and ETA; silent when stderr is not a terminal, so scripts and logs get the summary
alone."""

from __future__ import annotations

import sys
import time
from typing import Any


class ReplayProgress:
    """A context manager whose ``update(dict)`` is the job's ``on_progress`` callback."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.label = label
        self._bar: Any = None
        self._task: Any = None
        self._t0 = time.monotonic()

    def __enter__(self) -> ReplayProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("tasks {task.completed:.0f}/{task.total:.0f}"),
                                 TextColumn("{task.fields[rows]:,} rows in, {task.fields[results]:,} results, "
                                            "{task.fields[instants]:,} instants, {task.fields[rate]:,.0f} rows/s"),
                                 TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=Console(file=sys.stderr), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=1, rows=0, results=0, instants=0, rate=0.0)
        return self

    def update(self, p: dict[str, int]) -> None:
        if self._bar is None:
            return
        rate = p["rows"] / max(time.monotonic() - self._t0, 1e-9)
        self._bar.update(self._task, completed=p["tasks_done"], total=max(p["tasks"], 1), rows=p["rows"],
                         results=p["results"], instants=p.get("instants", 0), rate=rate)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
