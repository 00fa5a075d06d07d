"""What every long-running process shares, started one way: :func:`run_process`.

A process's ``main`` parses its flags into a :class:`ProcessConfig` (the shared part) and
its own typed config, then calls ``run_process(config, registry, build)``. ``run_process``
configures logging, connects to the store, serves ``/metrics`` and ``/healthz``, takes the
leader lease when asked, sends heartbeats with the component's figures, builds the
:class:`Component` from :class:`Deps` and runs it until SIGTERM or SIGINT, then stops
everything in order. The Kubernetes Lease is handed in as an ``elect`` function by the
processes that talk to a cluster (``cluster.kube.lease.kube_elect``), so the runtime never
imports the Kubernetes client.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

import msgspec
import uvloop
from prometheus_client import CollectorRegistry

from cluster.model.text import one_line
from cluster.runtime import heap, heartbeat
from cluster.runtime.flags import parse_duration
from cluster.runtime.logs import LogFormat, add_log_flags, configure, logger
from cluster.runtime.serving import HttpEndpoint
from cluster.store.client import STORE_DOWN, AuthError, Client, Outage, StoreError, connect, redacted
from cluster.store.keys import Keys
from cluster.store.lease import RedisLease
from cluster.store.pause import cancels_kept, pause

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
REDIS_URL_ENV = "CALDERA_REDIS_URL"
REDIS_URL_FILE_ENV = "CALDERA_REDIS_URL_FILE"

T = TypeVar("T")


def add_redis_flags(parser: argparse.ArgumentParser) -> None:
    """``--redis-url`` and ``--redis-url-file``, read by :func:`resolve_redis_url` (processes and commands)."""
    parser.add_argument(
        "--redis-url",
        default=None,
        help=f"the store, redis:// or rediss:// (default: ${REDIS_URL_ENV}, else the file in "
        f"--redis-url-file, else {DEFAULT_REDIS_URL})",
    )
    parser.add_argument(
        "--redis-url-file",
        default=None,
        help=f"read the store's URL from this file, e.g. a mounted Secret, so a password never sits on "
        f"the command line (default: ${REDIS_URL_FILE_ENV})",
    )


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    add_redis_flags(parser)
    parser.add_argument("--cluster", default="default", help="cluster name in the store (default: default)")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="port of /metrics and /healthz; 0 picks a free one (default: 8080)",
    )
    parser.add_argument(
        "--metrics-address",
        default="0.0.0.0",
        help="the IP address /metrics and /healthz listen on: 0.0.0.0 (every IPv4 address), :: (every "
        "address), or one of this host's, e.g. 127.0.0.1 for this host only (default: 0.0.0.0)",
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        help="act only while holding the leader lease, so replicas never both act",
    )
    parser.add_argument(
        "--leader-elect-lease-duration",
        default="15s",
        help="how long a lease lasts unrenewed before another replica may take it (default: 15s)",
    )
    parser.add_argument(
        "--leader-elect-renew-deadline",
        default="10s",
        help="a leader that could not renew for this long stops acting (default: 10s)",
    )
    parser.add_argument(
        "--leader-elect-retry-period", default="2s", help="how often to renew or try to acquire (default: 2s)"
    )
    parser.add_argument(
        "--leader-elect-resource-name",
        default="",
        help="the lease's name (default: the process's name, e.g. batch-scheduler)",
    )
    parser.add_argument(
        "--leader-elect-resource-namespace",
        default="caldera-system",
        help="the Lease's namespace in Kubernetes (default: caldera-system)",
    )
    add_log_flags(parser)


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
        raise ValueError(
            f"--leader-elect-retry-period {args.leader_elect_retry_period} < --leader-elect-renew-deadline "
            f"{args.leader_elect_renew_deadline} < --leader-elect-lease-duration "
            f"{args.leader_elect_lease_duration} must hold"
        )
    return LeaseConfig(
        enabled=args.leader_elect,
        duration=values["lease_duration"],
        renew_deadline=values["renew_deadline"],
        retry_period=values["retry_period"],
        name=args.leader_elect_resource_name,
        namespace=args.leader_elect_resource_namespace,
    )


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


def metrics_endpoint(args: argparse.Namespace) -> tuple[str, int]:
    """``--metrics-address`` and ``--metrics-port``, checked (ValueError naming the flag)."""
    try:
        address = str(ipaddress.ip_address(args.metrics_address))
    except ValueError:
        raise ValueError(
            f"--metrics-address: {args.metrics_address!r} is not an IP address (expected e.g. 0.0.0.0, 127.0.0.1 or ::)"
        ) from None
    if not 0 <= args.metrics_port <= 65535:
        raise ValueError(f"--metrics-port: {args.metrics_port} (expected 0 to 65535; 0 picks a free port)")
    return address, args.metrics_port


class ProcessConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`run_process` needs, from the flags every process shares."""

    component: str
    redis_url: str = DEFAULT_REDIS_URL
    cluster: str = "default"
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8080
    lease: LeaseConfig = LeaseConfig()
    log_level: str = "info"
    log_format: LogFormat = LogFormat.TEXT


def process_config(component: str, args: argparse.Namespace, environ: Mapping[str, str]) -> ProcessConfig:
    """The shared flags, checked (ValueError with one line)."""
    Keys(args.cluster)
    address, port = metrics_endpoint(args)
    return ProcessConfig(
        component=component,
        redis_url=resolve_redis_url(args, environ),
        cluster=args.cluster,
        metrics_address=address,
        metrics_port=port,
        lease=lease_config(args),
        log_level=args.log_level,
        log_format=LogFormat(args.log_format),
    )


def configs_or_none(
    prog: str, component: str, args: argparse.Namespace, build: Callable[[argparse.Namespace], T]
) -> tuple[ProcessConfig, T] | None:
    """The shared config and the process's own, from its flags; on a bad value, None after one
    line on stderr (the caller exits 2). ``args`` is only read."""
    try:
        return process_config(component, args, os.environ), build(args)
    except ValueError as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)  # a value may hold a line break
        return None


class Fatal(Exception):
    """A component cannot go on (its message says why, in one line): the process exits 1, for
    whatever runs it (a Deployment, the demo) to start it again."""


class Lease(Protocol):
    """Leader election: ``leading`` is true only while this process may act."""

    @property
    def leading(self) -> bool: ...

    async def run(self, stop: asyncio.Event) -> None: ...


@dataclasses.dataclass(frozen=True)
class Deps:
    """What a component is built from: the store's client and keys, whether it leads, who it is."""

    client: Client
    keys: Keys
    leading: Callable[[], bool]
    holder: str


class Component(Protocol):
    """A process's long-running part: runs until ``stop``; its figures go into the heartbeat."""

    async def run(self, stop: asyncio.Event) -> None: ...

    def stats(self) -> heartbeat.Stats: ...


Elect = Callable[[LeaseConfig, str, str], Lease]
"""Builds a lease: (settings, lease name, holder) -> Lease. Default: a key in the store."""


async def _store_answers(client: Client, url: str, log: logging.Logger, stop: asyncio.Event) -> bool:
    """Ping the store until it answers (True). A store that cannot be reached is waited for, as
    every loop waits out an outage, until ``stop`` (False); one that refuses the URL's user is one
    error line (False). Lines name the URL without its password; redis-py's messages name the
    host and port only."""
    where = f"the store at {redacted(url)}"
    outage = Outage(log, where, first=0.5)
    while not stop.is_set():
        try:
            await client.ping()
            outage.ok()
            return True
        except AuthError as e:  # a ConnectionError to redis-py, but no outage: a wrong user or password
            log.error("%s: %s", where, one_line(str(e) or type(e).__name__))
            return False
        except STORE_DOWN as e:
            await pause(stop, outage.failed(e))
        except StoreError as e:  # refused: the user may not even PING
            log.error("%s: %s", where, one_line(str(e) or type(e).__name__))
            return False
    return False


async def run_process(
    config: ProcessConfig,
    registry: CollectorRegistry,
    build: Callable[[Deps], Component],
    *,
    elect: Elect | None = None,
) -> int:
    """Connect, serve /metrics and /healthz, take the lease if asked, run the component until SIGTERM/SIGINT.

    The component acts only while ``deps.leading()`` (checked before each decision, so a lost
    lease stops it at once). A heartbeat with ``component.stats()`` goes to the store every
    few seconds (``caldera status``). A store that cannot be reached is waited for (one
    warning line); one that refuses the URL's user is one error line naming the URL without
    its password, exit 1; a metrics address that cannot be bound, one line naming the
    flags, exit 2. Otherwise 0 after SIGTERM.
    """
    configure(config.component, config.log_level, config.log_format)
    log = logger(config.component)
    keys = Keys(config.cluster)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = connect(config.redis_url)
    if not await _store_answers(client, config.redis_url, log, stop):
        await client.aclose()
        return 0 if stop.is_set() else 1
    holder = f"{socket.gethostname()}-{os.getpid()}"
    lease: Lease | None = None
    settings = config.lease
    if settings.enabled:
        name = settings.name or config.component
        if elect is not None:
            lease = elect(settings, name, holder)
        else:
            lease = RedisLease(
                client, keys.lease(name), holder, ttl=settings.duration, renew_every=settings.retry_period
            )
    leading = (lambda: lease.leading) if lease is not None else (lambda: True)
    try:
        endpoint = HttpEndpoint(
            registry, healthy=lambda: not stop.is_set(), host=config.metrics_address, port=config.metrics_port
        )
    except OSError as e:
        log.error(
            "--metrics-address %s --metrics-port %d: cannot listen there: %s",
            config.metrics_address,
            config.metrics_port,
            e.strerror or e,
        )
        await client.aclose()
        return 2
    log.info("serving /metrics and /healthz on %s port %d", config.metrics_address, endpoint.port)
    try:
        component = build(Deps(client=client, keys=keys, leading=leading, holder=holder))
        async with asyncio.TaskGroup() as tg:
            if lease is not None:
                tg.create_task(lease.run(stop), name=f"{config.component}-lease")
            tg.create_task(
                heartbeat.run(client, keys, config.component, holder, leading, component.stats, stop),
                name=f"{config.component}-beat",
            )
            tg.create_task(component.run(stop), name=config.component)
    finally:
        endpoint.close()
        await client.aclose()
    return 0


Build = Callable[[Deps], Component]
"""Builds a process's component once the store is connected."""
Make = Callable[[ProcessConfig, T, CollectorRegistry], tuple[Build, Elect | None]]
"""From the two configs and the metrics registry: what builds the component, and its election (None: the store's)."""


def launch(
    prog: str,
    component: str,
    argv: Sequence[str] | None,
    parser: argparse.ArgumentParser,
    parse: Callable[[argparse.Namespace], T],
    make: Make[T],
) -> int:
    """A process's ``main``: its flags into configs (2 after one line on a bad value), then
    :func:`run_process` on uvloop until SIGTERM; its exit status — 1 after one line when a
    component raised :class:`Fatal`."""
    configs = configs_or_none(prog, component, parser.parse_args(argv), parse)
    if configs is None:
        return 2
    process, config = configs
    registry = CollectorRegistry()
    build, elect = make(process, config, registry)
    heap.settle()
    fatal: BaseExceptionGroup[Fatal] | None = None
    status = 0
    try:
        with cancels_kept():  # a task group's cancel must reach a task inside a Redis call
            status = uvloop.run(run_process(process, registry, build, elect=elect))
    except* Fatal as group:
        fatal = group
    if fatal is not None:
        first: BaseException = fatal
        while isinstance(first, BaseExceptionGroup):  # groups nest as the task groups did
            first = first.exceptions[0]
        print(f"{prog}: error: {one_line(str(first))}", file=sys.stderr, flush=True)
        return 1
    return status
