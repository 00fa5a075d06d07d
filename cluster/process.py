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

import msgspec
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from cluster.keys import Keys
from cluster import heartbeat
from cluster.flags import parse_duration
from cluster.kube.connect import KubeConnection
from cluster.kube.lease import KubeLease
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
    parser.add_argument("--leader-elect-lease-duration", default="15s",
                        help="how long a lease lasts unrenewed before another replica may take it (default: 15s)")
    parser.add_argument("--leader-elect-renew-deadline", default="10s",
                        help="a leader that could not renew for this long stops acting (default: 10s)")
    parser.add_argument("--leader-elect-retry-period", default="2s", help="how often to renew or try to acquire (default: 2s)")
    parser.add_argument("--leader-elect-resource-name", default="",
                        help="the lease's name (default: the process's name, e.g. batch-scheduler)")
    parser.add_argument("--leader-elect-resource-namespace", default="caldera-system",
                        help="the Lease's namespace in Kubernetes (default: caldera-system)")


class LeaseConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Leader election: a Kubernetes Lease with a cluster connection, else a lease key in Redis."""

    enabled: bool = False
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    name: str = ""
    namespace: str = "caldera-system"


def lease_config(args: argparse.Namespace) -> LeaseConfig:
    """The ``--leader-elect-*`` flags, checked (ValueError with one line)."""
    values = {}
    for flag in ("lease_duration", "renew_deadline", "retry_period"):
        text = getattr(args, f"leader_elect_{flag}")
        try:
            values[flag] = parse_duration(text)
        except ValueError as e:
            raise ValueError(f"--leader-elect-{flag.replace('_', '-')}: {e}") from None
    if not 0 < values["retry_period"] < values["renew_deadline"] < values["lease_duration"]:
        raise ValueError(f"--leader-elect-retry-period {args.leader_elect_retry_period} < --leader-elect-renew-deadline "
                         f"{args.leader_elect_renew_deadline} < --leader-elect-lease-duration "
                         f"{args.leader_elect_lease_duration} must hold")
    return LeaseConfig(enabled=args.leader_elect, duration=values["lease_duration"],
                       renew_deadline=values["renew_deadline"], retry_period=values["retry_period"],
                       name=args.leader_elect_resource_name, namespace=args.leader_elect_resource_namespace)


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
        args.lease = lease_config(args)
        return build(args)
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return None


async def serve(args: argparse.Namespace, component: str, registry: CollectorRegistry,
                body: Callable[[aioredis.Redis, Keys, Callable[[], bool], asyncio.Event], Coroutine[Any, Any, None]],
                *, kube: KubeConnection | None = None, stats: Callable[[], Mapping[str, Any]] = dict) -> None:
    """Connect, serve /metrics and /healthz, take the lease if asked, run ``body`` until SIGTERM/SIGINT.

    With ``kube`` the lease is a Kubernetes Lease, else a key in Redis; ``body`` acts only
    while ``leading()`` (checked before each decision, so a lost lease stops it at once).
    A heartbeat with ``stats()`` goes to the store every few seconds (``caldera status``).
    """
    keys = Keys(args.cluster)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = aioredis.Redis.from_url(args.redis_url)
    settings: LeaseConfig = getattr(args, "lease", LeaseConfig(enabled=args.leader_elect))
    lease: RedisLease | KubeLease | None = None
    holder = f"{socket.gethostname()}-{os.getpid()}"
    if settings.enabled:
        name = settings.name or component
        if kube is not None:
            lease = KubeLease(kube.client(), name, settings.namespace, holder, lease_duration=settings.duration,
                              renew_deadline=settings.renew_deadline, retry_period=settings.retry_period)
        else:
            lease = RedisLease(client, f"{keys.prefix}lease:{name}", holder, ttl=settings.duration,
                               renew_every=settings.retry_period)
    leading = (lambda: lease.leading) if lease is not None else (lambda: True)
    endpoint = HttpEndpoint(registry, healthy=lambda: not stop.is_set(), port=args.metrics_port)
    print(f"{component}: serving /metrics and /healthz on port {endpoint.port}", flush=True)
    try:
        async with asyncio.TaskGroup() as tg:
            if lease is not None:
                tg.create_task(lease.run(stop), name=f"{component}-lease")
            tg.create_task(heartbeat.run(client, keys, component, holder, leading, stats, stop), name=f"{component}-beat")
            tg.create_task(body(client, keys, leading, stop), name=component)
    finally:
        endpoint.close()
        await client.aclose()
