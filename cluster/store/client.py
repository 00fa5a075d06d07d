"""The one door to the Redis client library: its connection types, its errors, and how to connect.

Everything else of caldera that talks to Redis (the runtime's heartbeats and lease, each
process's main, the agent's Ray workers, the commands) takes a :data:`Client` from here, so
that only ``cluster/store`` and ``binder`` import the library (a test checks it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

import redis
import redis.asyncio as aioredis

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
