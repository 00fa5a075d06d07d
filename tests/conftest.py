"""Shared fixtures: a real redis-server per test session, a fresh cluster name per test."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from cluster.runtime.redis_server import RedisServer
from cluster.store.keys import Keys
from cluster.store.store import Store

_names = itertools.count()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def keys() -> Keys:
    return Keys(f"t{next(_names)}")


@pytest.fixture
async def rclient(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    c = aioredis.Redis.from_url(redis_server.url)
    yield c
    await c.aclose()


@pytest.fixture
def store(rclient: aioredis.Redis, keys: Keys) -> Store:
    return Store(rclient, keys)
