"""The one door to the Redis client library: its connection types, its errors, and how to connect.

Everything else of caldera that talks to Redis (the runtime's heartbeats and lease, each
process's main, the agent's Ray workers, the commands) takes a :data:`Client` from here, so
that only ``cluster/store`` and ``binder`` import the library (a test checks it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeAlias

import redis
import redis.asyncio as aioredis

from cluster.model.text import one_line

Client: TypeAlias = aioredis.Redis
StoreError = redis.RedisError
"""Any error the client raises talking to Redis (connection lost, timeout, a script error)."""


def connect(url: str) -> Client:
    """A client of the store at ``url`` (redis://, rediss:// or unix://); connects on first use."""
    return aioredis.Redis.from_url(url)


def wait_until_up(host: str, port: int, *, deadline: float, alive: Callable[[], bool] | None = None) -> bool:
    """Ping a local redis-server until it answers (True) or ``deadline`` (monotonic) passes (False).

    When ``alive`` returns False (the server exited) the wait gives up at once.
    """
    client = redis.Redis(host=host, port=port)
    try:
        while True:
            try:
                client.ping()
                return True
            except redis.ConnectionError:
                if (alive is not None and not alive()) or time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
    finally:
        client.close()


STORE_DOWN: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)
"""What a call raises while the store cannot answer (restarting, loading its data, unreachable).
Script errors and refused permissions are not among them: they are defects, not weather."""


class Outage:
    """For a loop that must outlive the store going away: how long to wait before trying again
    (doubling from ``first`` to ``cap``), one log line when an outage starts and one when the
    store answers again — not one per failed call."""

    def __init__(self, log: logging.Logger, what: str, *, first: float = 0.1, cap: float = 2.0) -> None:
        self.log = log
        self.what = what
        self.first = first
        self.cap = cap
        self.delay = 0.0
        self.since: float | None = None
        self.outages = 0

    def failed(self, error: BaseException) -> float:
        """Note a failed call; the seconds to wait before the next try."""
        if self.since is None:
            self.since = time.monotonic()
            self.outages += 1
            self.log.warning("%s: the store does not answer (%s); trying again", self.what, one_line(str(error)))
        self.delay = min(max(self.delay * 2, self.first), self.cap)
        return self.delay

    def ok(self) -> None:
        """Note a call that worked."""
        if self.since is not None:
            self.log.warning("%s: the store answers again after %.1fs", self.what, time.monotonic() - self.since)
            self.since = None
        self.delay = 0.0
