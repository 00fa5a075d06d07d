"""Pacing calls to the API server: ``--kube-api-qps`` on average, ``--kube-api-burst`` at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Pacer:
    """A token bucket: ``qps`` calls per second on average, up to ``burst`` at once."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.at = clock()

    async def take(self) -> None:
        while True:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.qps)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.qps)
