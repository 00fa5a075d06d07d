"""``caldera batch-scheduler`` / ``python -m batch_scheduler``: the batch scheduler process.

With ``--kubeconfig`` or ``--master`` (or inside a pod) it binds and evicts through the
Kubernetes API; without, in the simulator (the store alone), as the demo runs it.

It keeps its cache current from the feed and runs a session every ``--schedule-period``,
counted from the end of the previous session (a slow session never overlaps the next).
The conf file is re-read when it changes; a broken file keeps the previous conf.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry

from batch_scheduler.cache import KINDS
from batch_scheduler.conf import SchedulerConf, load_conf
from batch_scheduler.cycle import BatchScheduler, SchedulerConfig
from batch_scheduler.metrics import BatchMetrics
from batch_scheduler.registry import default_registry
from batch_scheduler.session_input import SessionConfig
from binder.bind import BindTarget, Evictor
from binder.metrics import BinderMetrics
from cluster.kube.bind import KubeTarget
from cluster.kube.connect import add_kube_flags, kube_connection
from cluster.kube.lease import kube_elect
from cluster.kube.shards import ShardStatusReporter
from cluster.model.sharding import ShardingMode
from cluster.runtime.flags import Parser, add_rebind_after, add_sharding_mode, parse_duration, rebind_after
from cluster.runtime.heap import HeapKeeper
from cluster.runtime.heartbeat import Stats
from cluster.runtime.logs import logger
from cluster.runtime.process import Build, Deps, Elect, ProcessConfig, add_common_flags, launch
from cluster.sim.cluster import SimBindTarget, SimEvictor
from cluster.store.client import STORE_DOWN, Outage
from cluster.store.informer import Informer
from cluster.store.pause import pause
from cluster.store.store import Store

log = logger("batch-scheduler")

FEED_SETTLE_S = 0.1
"""After a read of the feed that found changes, the scheduler's informer waits this long before the
next (:attr:`Informer.settle_s`): a busy feed — an agent burst's pods created, committed and started,
the nodes they moved — is read in a few large steps rather than one per write; a node many pods moved
on is fetched once. Before each session it catches up (:meth:`Informer.caught_up`), so the session
sees every change made before it began, as without the settle. Read as each change came, the
scheduler took 0.13–0.16 of a core through the demo, much of it during the agent bursts, beside the
agent path; settled, 0.05–0.07 (without the catch-up, settled reads made the training pods wait a
session longer)."""


def build_parser(prog: str = "caldera batch-scheduler") -> Parser:
    p = Parser(
        prog=prog, description="The periodic batch scheduler for volcano pods: gangs, queues, fair share, preemption."
    )
    p.add_argument(
        "--scheduler-name",
        action="append",
        default=None,
        help="a schedulerName this process serves; repeatable (default: volcano)",
    )
    p.add_argument(
        "--scheduler-conf",
        default=None,
        help="Volcano-format scheduler conf file, re-read when it changes (default: Volcano's Helm-chart conf)",
    )
    p.add_argument(
        "--schedule-period", default="1s", help="pause between sessions, counted after each ends (default: 1s)"
    )
    p.add_argument(
        "--default-queue",
        default="default",
        help="queue of jobs that name none; exists implicitly with weight 1 (default: default)",
    )
    add_sharding_mode(p)
    add_rebind_after(p)
    p.add_argument(
        "--hypernode-labels",
        default="",
        help="node label keys, lowest tier first and comma-separated (e.g. a leaf-switch label, then a spine "
        "label), that make HyperNodes beside the cluster's HyperNode objects (default: none)",
    )
    add_kube_flags(p)
    add_common_flags(p)
    return p


def hypernode_labels(text: str) -> tuple[str, ...]:
    """``--hypernode-labels``: label keys, each a valid key, none twice; ValueError naming the bad one."""
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    for key in keys:
        name = key.rsplit("/", 1)[-1]
        if not name or len(name) > 63 or not all(c.isalnum() or c in "-_." for c in name) or not name[0].isalnum():
            raise ValueError(f"--hypernode-labels: {key!r} is not a label key (expected e.g. example.com/leaf-switch)")
    if len(set(keys)) != len(keys):
        raise ValueError(f"--hypernode-labels: {text!r} names a key twice (expected each tier's key once)")
    return keys


def parse_config(args: argparse.Namespace) -> SchedulerConfig:
    names = tuple(args.scheduler_name or ["volcano"])
    for name in names:
        if not name.strip():
            raise ValueError("--scheduler-name: '' (expected a non-empty schedulerName)")
    try:
        period = parse_duration(args.schedule_period)
    except ValueError as e:
        raise ValueError(f"--schedule-period: {e}") from None
    if period <= 0:
        raise ValueError(
            f"--schedule-period: {args.schedule_period!r} (expected a positive duration such as 1s or 500ms)"
        )
    if not args.default_queue.strip():
        raise ValueError("--default-queue: '' (expected a queue name)")
    load_conf(args.scheduler_conf, default_registry())  # refuse a bad conf at start
    return SchedulerConfig(
        names=names,
        period=period,
        conf_path=args.scheduler_conf,
        rebind_after=rebind_after(args),
        kube=kube_connection(args, os.environ),
        session=SessionConfig(
            scheduler=names[0],
            sharding=ShardingMode(args.sharding_mode),
            default_queue=args.default_queue,
            hypernode_labels=hypernode_labels(args.hypernode_labels),
        ),
    )


async def run_scheduler(
    scheduler: BatchScheduler,
    informer: Informer,
    period: float,
    stop: asyncio.Event,
    leading: Callable[[], bool] = lambda: True,
) -> None:
    """Follow the feed and run a session every period until ``stop``; while the store does not
    answer, sessions wait (one line when that starts and ends). Each session begins once the cache
    holds every change made before it (the informer's settle cut short), or after a period (a second
    when the period is shorter) at most."""

    async def follow() -> None:
        async for update in informer.updates():
            scheduler.apply(update)

    follower = asyncio.create_task(follow(), name="batch-follow")
    outage = Outage(log, "sessions")
    try:
        while not stop.is_set():
            if scheduler.version and leading():
                try:
                    await informer.caught_up(timeout_s=max(period, 1.0))
                    await scheduler.rebind()
                    await scheduler.run_session()
                    outage.ok()
                except STORE_DOWN as e:
                    outage.failed(e)
            await pause(stop, period)
    finally:
        informer.stop()
        await follower


class BatchProcess:
    """The batch scheduler as a :class:`Component`: the scheduler, its feed, and (on Kubernetes) the shard reporter."""

    def __init__(
        self,
        deps: Deps,
        config: SchedulerConfig,
        conf: SchedulerConf,
        metrics: BatchMetrics,
        binder_metrics: BinderMetrics,
    ) -> None:
        self.config, self.leading = config, deps.leading
        self.store = Store(deps.client, deps.keys)
        self.kube = (
            KubeTarget(config.kube.client(), qps=config.kube.qps, burst=config.kube.burst) if config.kube else None
        )
        target: BindTarget = self.kube if self.kube is not None else SimBindTarget(self.store)
        evictor: Evictor = self.kube if self.kube is not None else SimEvictor(self.store)
        self.scheduler = BatchScheduler(
            self.store,
            conf,
            config,
            bind_target=target,
            evictor=evictor,
            gates=self.kube if self.kube is not None else SimEvictor(self.store),
            metrics=metrics,
            binder_metrics=binder_metrics,
            heap=HeapKeeper(),
        )

    def stats(self) -> Stats:
        return self.scheduler.stats()

    async def run(self, stop: asyncio.Event) -> None:
        config = self.config
        where = "Kubernetes" if self.kube is not None else "the simulator"
        log.info("serving %s in %s; actions %s", ", ".join(config.names), where, ", ".join(self.scheduler.conf.actions))
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(
                    run_scheduler(
                        self.scheduler,
                        Informer(self.store, KINDS, block_ms=200, settle_s=FEED_SETTLE_S),
                        config.period,
                        stop,
                        self.leading,
                    )
                )
                if config.kube is not None:
                    reporter = ShardStatusReporter(
                        config.kube.client(), config.names[0], self.store, qps=config.kube.qps, burst=config.kube.burst
                    )
                    tg.create_task(reporter.run(stop))
        finally:
            if self.kube is not None:
                self.kube.close()


def main(argv: Sequence[str] | None = None, prog: str = "caldera batch-scheduler") -> int:
    def make(
        process: ProcessConfig, config: SchedulerConfig, registry: CollectorRegistry
    ) -> tuple[Build, Elect | None]:
        metrics, binder_metrics = BatchMetrics(registry), BinderMetrics(registry)
        conf = load_conf(config.conf_path, default_registry())
        for line in conf.warnings:  # e.g. a Volcano plugin caldera does not implement yet
            print(f"batch-scheduler: warning: {line}", file=sys.stderr, flush=True)
        metrics.conf_loaded(conf)
        elect = kube_elect(config.kube) if config.kube is not None else None
        return (lambda deps: BatchProcess(deps, config, conf, metrics, binder_metrics)), elect

    return launch(prog, "batch-scheduler", argv, build_parser(prog), parse_config, make)
