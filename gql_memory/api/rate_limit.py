"""Per-key request rate limits: the generic cell rate algorithm (GCRA).

Each key has a theoretical arrival time (TAT): every admitted operation pushes it one
interval (1 / rate) further. An operation is admitted while the TAT stays within
``burst`` intervals of now, so a key may send ``burst`` operations at once and ``rate`` per
second after that. One float per key; the limit is per server process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from gql_memory.errors import RateLimitedError

# Keys kept before idle ones (TAT in the past: they would start afresh anyway) are dropped.
PRUNE_ABOVE = 10_000


class RateLimiter:
    """Admits or refuses operations per key; ``rate`` 0 admits everything."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.window = self.interval * burst
        self.clock = clock
        self._tat: dict[Hashable, float] = {}

    def admit(self, key: Hashable) -> None:
        """Count one operation of ``key``, or raise RateLimitedError with the retry delay."""
        if not self.interval:
            return
        now = self.clock()
        tat = max(self._tat.get(key, now), now) + self.interval
        if tat - now > self.window:
            raise RateLimitedError(tat - now - self.window)
        if len(self._tat) >= PRUNE_ABOVE and key not in self._tat:
            self._tat = {k: v for k, v in self._tat.items() if v > now}
        self._tat[key] = tat
