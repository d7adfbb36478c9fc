"""Which broker of `BROKER_ADDR` to dial next, and how long to wait first.

The list is walked in order, wrapping around, the way gRPC's connection backoff treats an
address list: an attempt that gets no stream moves straight on to the next address, and only
once every address has failed in a row does the worker sleep (one jittered backoff per failed
round, doubling to the ceiling). A stream that opened and later ended also moves on to the
next address, after one jittered wait so that the workers of a broker that died or drained do
not all land on the next one in the same instant.

The backoff starts over when a stream opens after failures (a failover, or the one broker back
from an outage) and when an ended stream had outlived the current backoff. A broker that keeps
accepting streams and dropping them at once therefore still escalates. The same rules as the
Rust and Go SDKs.
"""

from __future__ import annotations

from .backoff import Backoff


class Failover:
    """The dialling position in the broker list and the backoff shared across the list."""

    def __init__(self, count: int, lo: float, hi: float) -> None:
        self.count = max(count, 1)
        self.current = 0
        """The index of the address to dial now."""
        self.failures = 0
        """Attempts in a row that got no stream (or no config) since the last success."""
        self.backoff = Backoff(lo, hi)

    def succeeded(self) -> None:
        """A stream (or a config pull) succeeded on the current address. After failures this
        is a recovery, so the backoff starts over: a stream lost soon after a failover is
        retried within the minimum, not after the escalated wait of the outage."""
        if self.failures > 0:
            self.failures = 0
            self.backoff.reset()

    def failed(self) -> float:
        """The attempt on the current address failed before a stream opened (no connection,
        refused, bad credentials): moves on to the next address and returns the seconds to
        wait before dialling it, 0 while this round still has untried addresses."""
        self.failures += 1
        self._advance()
        if self.failures % self.count == 0:
            return self.backoff.next_delay()
        return 0.0

    def ended(self, lived: float) -> float:
        """A stream that had opened on the current address ended after `lived` seconds: moves
        on to the next address and returns the jittered wait before dialling it."""
        self.succeeded()
        if lived > self.backoff.current:
            self.backoff.reset()
        self._advance()
        return self.backoff.next_delay()

    def _advance(self) -> None:
        self.current = (self.current + 1) % self.count
