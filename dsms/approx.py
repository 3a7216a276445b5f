"""What an approximate result says about itself: its relative error bound, at what confidence, and the
sampling rate behind it (SPEC sections 1 and 6; issue 14 item 2; digest-004 R-APX-03: "the system must tell
users what approximation is currently in effect").

The approximation of a result is computed from the entities upstream of the query's output: any operator,
synopsis or shedder may define ``approximation(self) -> Approx | None`` (None: exact now), and
``Engine.query_approximation`` combines what they say with ``combine``. Exact results carry nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Approx:
    """A relative error bound ``rel_error`` that holds with probability ``confidence``; ``sampling_rate``
    is the fraction of the input the result was computed from, when sampling is the cause (None otherwise).
    ``subset`` says that every row delivered is a row of the exact answer and rows may be missing (a shed
    selection: it has no relative error bound, so ``rel_error`` is infinite; docs/approximation.md).

    >>> Approx(0.03).as_json()
    {'rel_error': 0.03, 'confidence': 0.95}
    >>> Approx(math.inf, 1.0, 0.4, subset=True).as_json()
    {'rel_error': 'Infinity', 'confidence': 1.0, 'sampling_rate': 0.4, 'subset': True}
    """

    rel_error: float
    confidence: float = 0.95
    sampling_rate: float | None = None
    subset: bool = False

    def __post_init__(self) -> None:
        if not (self.rel_error >= 0):               # also refuses NaN
            raise ValueError(f"rel_error must be >= 0, not {self.rel_error!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be within [0, 1], not {self.confidence!r}")
        if self.sampling_rate is not None and not 0.0 < self.sampling_rate <= 1.0:
            raise ValueError(f"sampling_rate must be within (0, 1], not {self.sampling_rate!r}")

    def as_json(self) -> dict:
        """The wire form (SPEC section 6): ``sampling_rate`` only when there is one; an unbounded error is
        the string "Infinity", as elsewhere in our JSON."""
        out: dict = {"rel_error": _round(self.rel_error) if math.isfinite(self.rel_error) else "Infinity",
                     "confidence": _round(self.confidence)}
        if self.sampling_rate is not None:
            out["sampling_rate"] = _round(self.sampling_rate)
        if self.subset:
            out["subset"] = True
        return out


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def combine(approxes: Iterable[Approx | None]) -> Approx | None:
    """One approximation for a result that several approximate entities feed; None when all are exact.

    Conservative on every field: relative errors add (a first-order bound for errors that compound along a
    path, and an upper bound for errors of independent parts), confidences combine by the union bound
    (every bound holds at once with probability at least 1 - sum of their failure probabilities), and
    sampling rates multiply (independent samplers in series keep the product of their rates; for samplers
    side by side the product is a lower bound of what reached the result); a result is a subset of the
    exact one when every part says so.

    >>> combine([None, Approx(0.02, 0.95, 0.5), Approx(0.01, 0.99, 0.5)])
    Approx(rel_error=0.03, confidence=0.94, sampling_rate=0.25, subset=False)
    >>> combine([None, None]) is None
    True
    """
    err = 0.0
    fail = 0.0
    rate: float | None = None
    seen = False
    subset = True
    for a in approxes:
        if a is None:
            continue
        seen = True
        subset = subset and a.subset
        err += a.rel_error
        fail += 1.0 - a.confidence
        if a.sampling_rate is not None:
            rate = a.sampling_rate if rate is None else rate * a.sampling_rate
    if not seen:
        return None
    return Approx(round(err, 12), round(max(0.0, 1.0 - fail), 12), rate, subset)
