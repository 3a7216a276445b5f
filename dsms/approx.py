"""What an approximate result carries: its relative error bound, the confidence of that bound, and the
sampling rate in effect (issue 14; docs/approximation.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Approx:
    rel_error: float
    confidence: float = 0.95
    sampling_rate: float | None = None
