"""``caldera sharding`` / ``python -m sharding``: the sharding controller process."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence

import msgspec
import numpy as np
from prometheus_client import CollectorRegistry

from cluster.kube.connect import KubeConnection, add_kube_flags, kube_connection
from cluster.kube.lease import kube_elect
from cluster.kube.shards import NodeShardPublisher
from cluster.runtime.flags import Parser, duration
from cluster.runtime.heartbeat import Stats
from cluster.runtime.process import Build, Deps, Elect, ProcessConfig, add_common_flags, launch
from cluster.store.store import Store
from sharding.config import (
    DEFAULT_SCHEDULER_CONFIGS,
    ConfigError,
    Utilization,
    parse_scheduler_configs,
)
from sharding.controller import ControllerConfig, ShardingController
from sharding.metrics import ShardMetrics
from sharding.policy import Hysteresis


def build_parser(prog: str = "caldera sharding") -> Parser:
    p = Parser(prog=prog, description="Split the nodes into NodeShards, one per scheduler, by utilization band.")
    p.add_argument(
        "--scheduler-configs",
        default=DEFAULT_SCHEDULER_CONFIGS,
        help=f"NAME:TYPE:MIN_UTIL:MAX_UTIL:PREFER_WARMUP:MIN_NODES:MAX_NODES,... (default: {DEFAULT_SCHEDULER_CONFIGS})",
    )
    p.add_argument(
        "--shard-sync-period", type=duration, default="60s", help="full resync period, a Go duration (default: 60s)"
    )
    p.add_argument(
        "--enable-node-event-trigger",
        default="true",
        choices=["true", "false"],
        help="resync within a few hundred ms when a node crosses a band edge (default: true)",
    )
    p.add_argument(
        "--utilization",
        default="cpu",
        choices=[u.value for u in Utilization],
        help="requests ÷ allocatable of cpu, memory, gpu, or the max of them (default: cpu)",
    )
    p.add_argument(
        "--band-margin",
        type=float,
        default=Hysteresis().margin,
        help="hysteresis: a node leaves its shard once this far outside the band (default: 0.05)",
    )
    p.add_argument(
        "--min-dwell",
        type=duration,
        default="5m",
        help="hysteresis: ... or once outside the band this long (default: 5m)",
    )
    add_kube_flags(p)
    add_common_flags(p)
    return p


def parse_config(args: argparse.Namespace) -> ControllerConfig:
    """The typed config; raises ConfigError with one line on a bad value."""
    configs = parse_scheduler_configs(args.scheduler_configs)
    if not 0.0 <= args.band_margin <= 1.0:
        raise ConfigError(f"--band-margin: {args.band_margin} (expected 0.0 to 1.0)")
    for c in configs:
        inner = (c.max_util if c.max_util < 1.0 else np.inf) - (c.min_util if c.min_util > 0.0 else -np.inf)
        if inner < 2 * args.band_margin:
            raise ConfigError(
                f"--scheduler-configs: entry {c.name!r}: band {c.min_util}-{c.max_util} is narrower than twice "
                f"--band-margin {args.band_margin}, so no node could ever enter it (widen the band or lower the margin)"
            )
    if args.shard_sync_period <= 0:
        raise ConfigError(f"--shard-sync-period: {args.shard_sync_period}s (expected a positive duration)")
    return ControllerConfig(
        configs=configs,
        sync_period=args.shard_sync_period,
        event_trigger=args.enable_node_event_trigger == "true",
        utilization=Utilization(args.utilization),
        hysteresis=Hysteresis(margin=args.band_margin, dwell=args.min_dwell),
    )


class ShardingComponent:
    """The controller as a :class:`Component`; with ``kube`` it also writes the NodeShard custom resources."""

    def __init__(
        self, deps: Deps, config: ControllerConfig, metrics: ShardMetrics, kube: KubeConnection | None
    ) -> None:
        self.publisher = NodeShardPublisher(kube.client(), qps=kube.qps, burst=kube.burst) if kube is not None else None
        self.controller = ShardingController(
            Store(deps.client, deps.keys),
            config,
            metrics=metrics,
            leading=deps.leading,
            publish=self.publisher.publish if self.publisher is not None else None,
        )

    def stats(self) -> Stats:
        return self.controller.stats()

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.controller.run(stop)
        finally:
            if self.publisher is not None:
                self.publisher.close()


class ShardingProcess(msgspec.Struct, frozen=True, kw_only=True):
    controller: ControllerConfig
    kube: KubeConnection | None  # the cluster whose Lease elects the leader; None: a Redis lease


def process_config(args: argparse.Namespace) -> ShardingProcess:
    return ShardingProcess(controller=parse_config(args), kube=kube_connection(args, os.environ))


def main(argv: Sequence[str] | None = None, prog: str = "caldera sharding") -> int:
    def make(
        process: ProcessConfig, config: ShardingProcess, registry: CollectorRegistry
    ) -> tuple[Build, Elect | None]:
        metrics = ShardMetrics(registry)
        elect = kube_elect(config.kube) if config.kube is not None else None
        return (lambda deps: ShardingComponent(deps, config.controller, metrics, config.kube)), elect

    return launch(prog, "sharding", argv, build_parser(prog), process_config, make)
