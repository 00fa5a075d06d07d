"""Connecting a command to Redis: a given ``--redis-url``, or a private redis-server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import redis.asyncio as aioredis

from cluster.redis_server import RedisServer


@contextlib.contextmanager
def redis_url(url: str | None) -> Iterator[str]:
    """The given URL, or the URL of a redis-server started here and stopped on exit."""
    if url:
        yield url
        return
    with RedisServer() as server:
        yield server.url


@contextlib.asynccontextmanager
async def client(url: str) -> AsyncIterator[aioredis.Redis]:
    c = aioredis.Redis.from_url(url)
    try:
        yield c
    finally:
        await c.aclose()
