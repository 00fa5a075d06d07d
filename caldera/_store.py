"""Connecting a command to Redis: a given ``--redis-url``, or a private redis-server."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator

from cluster.model.text import one_line
from cluster.runtime.process import resolve_redis_url
from cluster.runtime.redis_server import RedisServer
from cluster.store.client import Client, connect, redacted


def store_url(prog: str, args: argparse.Namespace) -> str | None:
    """The store's URL from ``--redis-url``, ``--redis-url-file`` or the environment (as the
    processes find it); None after one line on stderr naming a bad one."""
    try:
        return resolve_redis_url(args, os.environ)
    except ValueError as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
        return None


def store_failure(prog: str, url: str, error: Exception) -> str:
    """The one line for a store that could not be reached or refused the URL's user: the URL
    without its password."""
    return f"{prog}: error: the store at {redacted(url)}: {one_line(str(error) or type(error).__name__)}"


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
