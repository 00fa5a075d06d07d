"""What every long-running process shares: its Redis connection, its endpoint, its lease, SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from cluster.keys import Keys
from cluster.lease import RedisLease
from cluster.serving import HttpEndpoint

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
REDIS_URL_ENV = "CALDERA_REDIS_URL"
REDIS_URL_FILE_ENV = "CALDERA_REDIS_URL_FILE"

T = TypeVar("T")


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis-url", default=None,
                        help=f"the store, redis:// or rediss:// (default: ${REDIS_URL_ENV}, else the file in "
                             f"--redis-url-file, else {DEFAULT_REDIS_URL})")
    parser.add_argument("--redis-url-file", default=None,
                        help=f"read the store's URL from this file, e.g. a mounted Secret, so a password never sits on "
                             f"the command line (default: ${REDIS_URL_FILE_ENV})")
    parser.add_argument("--cluster", default="default", help="cluster name in the store (default: default)")
    parser.add_argument("--metrics-port", type=int, default=8080, help="port of /metrics and /healthz; 0 picks a free one (default: 8080)")
    parser.add_argument("--leader-elect", action="store_true", help="act only while holding the leader lease, so replicas never both act")


def resolve_redis_url(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The store's URL: ``--redis-url``, ``$CALDERA_REDIS_URL``, the file of ``--redis-url-file`` or
    ``$CALDERA_REDIS_URL_FILE``, or the default — in that order. ValueError names a bad one."""
    url: str | None = args.redis_url or environ.get(REDIS_URL_ENV) or None
    source = "--redis-url" if args.redis_url else f"${REDIS_URL_ENV}"
    path = args.redis_url_file or environ.get(REDIS_URL_FILE_ENV)
    if url is None and path:
        source = "--redis-url-file" if args.redis_url_file else f"${REDIS_URL_FILE_ENV}"
        try:
            with open(path, encoding="utf-8") as f:
                url = f.read().strip()
        except OSError as e:
            raise ValueError(f"{source}: {path}: {e.strerror or e}") from None
    if url is None:
        return DEFAULT_REDIS_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        shown = url if source != "--redis-url-file" and "@" not in url else "(hidden)"
        raise ValueError(f"{source}: {shown!r} is not a Redis URL (expected redis://, rediss:// or unix://)")
    return url


def config_or_none(prog: str, args: argparse.Namespace, build: Callable[[argparse.Namespace], T]) -> T | None:
    """The process's typed config from its flags (the Redis URL resolved into ``args.redis_url``);
    on a bad value, None after one line on stderr."""
    try:
        Keys(args.cluster)
        args.redis_url = resolve_redis_url(args, os.environ)
        return build(args)
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return None


async def serve(args: argparse.Namespace, component: str, registry: CollectorRegistry,
                body: Callable[[aioredis.Redis, Keys, Callable[[], bool], asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Connect, serve /metrics and /healthz, take the lease if asked, run ``body`` until SIGTERM/SIGINT."""
    keys = Keys(args.cluster)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = aioredis.Redis.from_url(args.redis_url)
    lease: RedisLease | None = None
    if args.leader_elect:
        lease = RedisLease(client, f"{keys.prefix}lease:{component}", f"{socket.gethostname()}-{os.getpid()}")
    leading = (lambda: lease.leading) if lease is not None else (lambda: True)
    endpoint = HttpEndpoint(registry, healthy=lambda: not stop.is_set(), port=args.metrics_port)
    print(f"{component}: serving /metrics and /healthz on port {endpoint.port}", flush=True)
    try:
        async with asyncio.TaskGroup() as tg:
            if lease is not None:
                tg.create_task(lease.run(stop), name=f"{component}-lease")
            tg.create_task(body(client, keys, leading, stop), name=component)
    finally:
        endpoint.close()
        await client.aclose()
