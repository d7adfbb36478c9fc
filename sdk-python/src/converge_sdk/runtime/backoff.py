"""Exponential reconnect backoff with ±25 % jitter applied to the sleep only."""

from __future__ import annotations

import random


class Backoff:
    """Doubles from `lo` to `hi` seconds; only the returned sleep is jittered."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo = lo
        self.hi = max(hi, lo)
        self.current = lo

    def reset(self) -> None:
        """Back to the minimum, after a healthy session."""
        self.current = self.lo

    def next_delay(self) -> float:
        """The next sleep (current ±25 %), escalating the raw value for the one after."""
        base = self.current
        self.current = min(self.current * 2, self.hi)
        return base * random.uniform(0.75, 1.25)
