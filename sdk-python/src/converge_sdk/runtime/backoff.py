"""Exponential reconnect backoff with ±25 % jitter applied to the sleep only, never above
the ceiling."""

from __future__ import annotations

import random


class Backoff:
    """Doubles from `lo` to `hi` seconds; only the returned sleep is jittered."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo = lo
        self.hi = max(hi, lo)
        self.current = lo

    def reset(self) -> None:
        """Back to the minimum, after a healthy session or a recovery."""
        self.current = self.lo

    def next_delay(self) -> float:
        """The next sleep, escalating the raw value for the one after: uniform in
        [current × 0.75, current × 1.25], the upper end clipped at `hi`. Clipping the range
        rather than the drawn value keeps the sleeps at the ceiling spread out (workers that
        lost the same broker do not all come back in the same instant) and never above it."""
        base = self.current
        self.current = min(self.current * 2, self.hi)
        return random.uniform(base * 0.75, min(base * 1.25, self.hi))
