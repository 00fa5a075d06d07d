"""Connecting a command to Redis: a given ``--redis-url``, or a private redis-server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from cluster.runtime.redis_server import RedisServer
from cluster.store.client import Client, connect


@contextlib.contextmanager
def redis_url(url: str | None) -> Iterator[str]:
    """The given URL, or the URL of a redis-server started here and stopped on exit."""
    if url:
        yield url
        return
    with RedisServer() as server:
        yield server.url


@contextlib.asynccontextmanager
async def client(url: str) -> AsyncIterator[Client]:
    c = connect(url)
    try:
        yield c
    finally:
        await c.aclose()
