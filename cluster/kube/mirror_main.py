"""``caldera mirror``: keep the store equal to the Kubernetes cluster (Nodes, Pods, PodGroups, Queues,
PriorityClasses)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import msgspec
from prometheus_client import CollectorRegistry, Gauge

from cluster.kube.connect import KubeConnection, add_kube_flags, api_client
from cluster.kube.lease import kube_elect
from cluster.kube.mirror import Mirror
from cluster.kube.reflector import kinds
from cluster.kube.writeback import WriteBack
from cluster.runtime.flags import Parser, parse_duration
from cluster.runtime.heartbeat import Stats
from cluster.runtime.logs import logger
from cluster.runtime.process import Build, Deps, Elect, ProcessConfig, add_common_flags, launch
from cluster.store.store import Store

log = logger("mirror")


class MirrorConfig(msgspec.Struct, frozen=True, kw_only=True):
    kubeconfig: str | None
    master: str | None
    resync: float
    watch_seconds: int
    schedulers: tuple[str, ...]
    qps: float
    burst: int


def build_parser(prog: str = "caldera mirror") -> Parser:
    p = Parser(
        prog=prog,
        description="Mirror the Kubernetes cluster's nodes, pods, PodGroups, Queues and "
        "PriorityClasses into the store.",
    )
    p.add_argument("--resync-period", default="5m", help="list everything again this often (default: 5m)")
    p.add_argument("--watch-timeout", default="60s", help="length of one watch request (default: 60s)")
    p.add_argument(
        "--event-schedulers",
        default="volcano,agent-scheduler",
        help="schedulerNames whose pods get Scheduled/FailedScheduling Events (default: volcano,agent-scheduler)",
    )
    add_kube_flags(p)
    add_common_flags(p)
    return p


def parse_config(args: argparse.Namespace) -> MirrorConfig:
    durations = {}
    for flag, text in (("--resync-period", args.resync_period), ("--watch-timeout", args.watch_timeout)):
        try:
            durations[flag] = parse_duration(text)
        except ValueError as e:
            raise ValueError(f"{flag}: {e}") from None
        if durations[flag] < 1:
            raise ValueError(f"{flag}: {text!r} (expected at least 1s)")
    if args.kube_api_qps <= 0 or args.kube_api_burst < 1:
        raise ValueError(
            f"--kube-api-qps {args.kube_api_qps} / --kube-api-burst {args.kube_api_burst} (expected positive)"
        )
    api_client(args.kubeconfig, args.master)  # refuse a bad kubeconfig or master at start
    schedulers = tuple(n.strip() for n in args.event_schedulers.split(",") if n.strip())
    return MirrorConfig(
        kubeconfig=args.kubeconfig,
        master=args.master,
        resync=durations["--resync-period"],
        watch_seconds=int(durations["--watch-timeout"]),
        schedulers=schedulers,
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
    )


class MirrorProcess:
    """The mirror as a :class:`Component`: the reflectors, and the write-back of statuses and Events."""

    def __init__(self, deps: Deps, config: MirrorConfig, registry: CollectorRegistry) -> None:
        store, api = Store(deps.client, deps.keys), api_client(config.kubeconfig, config.master)
        self.writeback = WriteBack(store, api, schedulers=config.schedulers, qps=config.qps, burst=config.burst)
        self.mirror = Mirror(
            store,
            kinds(api),
            watch_seconds=config.watch_seconds,
            resync_seconds=config.resync,
            observe=self.writeback.observe,
            forget=self.writeback.forget,
        )
        relists = Gauge(
            "caldera_mirror_lists",
            "Listings per kind since start (start, 410 Gone, broken watch, resync).",
            ["kind"],
            registry=registry,
        )
        patched = Gauge(
            "caldera_mirror_status_patches",
            "PodGroup and Queue statuses written to the API server since start.",
            registry=registry,
        )
        events = Gauge("caldera_mirror_events", "Events created since start.", registry=registry)
        full_syncs = Gauge(
            "caldera_mirror_full_syncs",
            "Times the store was filled whole since start: at start, then after Redis restarted, lost its "
            "data or did not answer a write.",
            registry=registry,
        )
        for r in self.mirror.reflectors:
            relists.labels(r.kind.kind.value).set_function(lambda r=r: r.lists)  # type: ignore[misc]
        patched.set_function(lambda: self.writeback.patched)
        events.set_function(lambda: self.writeback.events)
        full_syncs.set_function(lambda: self.mirror.full_syncs)

    def stats(self) -> Stats:
        return Stats()

    async def run(self, stop: asyncio.Event) -> None:
        log.info("following the cluster")
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.mirror.run(stop), name="mirror")
            tg.create_task(self.writeback.run(stop), name="writeback")


def main(argv: Sequence[str] | None = None, prog: str = "caldera mirror") -> int:
    def make(process: ProcessConfig, config: MirrorConfig, registry: CollectorRegistry) -> tuple[Build, Elect]:
        elect = kube_elect(KubeConnection(kubeconfig=config.kubeconfig, master=config.master))
        return (lambda deps: MirrorProcess(deps, config, registry)), elect

    return launch(prog, "mirror", argv, build_parser(prog), parse_config, make)
