"""``caldera bench sharding``: the time of a full resync at a given cluster size.

The cluster is real (nodes in a private Redis, read back through the informer's listing);
between syncs the load on a share of the nodes changes, as the feed would report, so each
sync runs the whole policy over every node and writes the moves and NodeShard records.
Beside it, in the same run, the pure policy alone (``policy_ms_p50``) — the floor.
"""

from __future__ import annotations

import argparse
import time
from typing import Annotated, Any

import msgspec
import numpy as np

from caldera._store import client
from caldera.bench.runner import positive_int, run_bench
from caldera.flag_config import checked, from_flags, number, redis_url
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.informer import Informer
from cluster.store.keys import Keys, Kind
from cluster.store.store import Store
from sharding.config import DEFAULT_SCHEDULER_CONFIGS, parse_scheduler_configs
from sharding.controller import ControllerConfig, ShardingController
from sharding.policy import assign


class Report(msgspec.Struct):
    nodes: int
    syncs: int
    sync_ms_p50: float
    sync_ms_p99: float
    first_sync_ms: float
    policy_ms_p50: float
    moves_per_sync: float


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sharding", help="full-resync time of the sharding controller")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--nodes", type=positive_int, default=20000, help="nodes in the cluster (default: 20000)")
    p.add_argument("--syncs", type=positive_int, default=30, help="syncs measured (default: 30)")
    p.add_argument(
        "--churn", type=number, default=0.05, help="share of nodes whose load changes between syncs (default: 0.05)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class ShardingBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench sharding``'s flags, checked."""

    redis_url: str | None = None
    nodes: Annotated[int, msgspec.Meta(ge=2, le=1_000_000, description="2 to 1,000,000 nodes")] = 20000
    syncs: Annotated[int, msgspec.Meta(ge=1, le=100_000, description="1 to 100,000 syncs")] = 30
    churn: Annotated[float, msgspec.Meta(gt=0, le=1, description="a share in (0, 1]")] = 0.05
    json: bool = False


def config(args: argparse.Namespace) -> ShardingBench:
    """The flags checked (ValueError naming the flag); nothing started."""
    return from_flags(ShardingBench, args, redis_url=redis_url("--redis-url", args.redis_url))


async def measure(url: str, args: ShardingBench) -> Report:
    rng = np.random.default_rng(0)
    async with client(url) as c:
        store = Store(c, Keys("bench-sharding"))
        nodes = pool_nodes(
            NodePool(name="n", count=args.nodes, resources={"cpu": 64, "memory": "256Gi", "nvidia.com/gpu": 8})
        )
        for i in range(0, len(nodes), 2000):
            await store.upsert_nodes(nodes[i : i + 2000])
        half = args.nodes // 2
        configs = parse_scheduler_configs(DEFAULT_SCHEDULER_CONFIGS.replace(":100", f":{half}"))
        controller = ShardingController(store, ControllerConfig(configs=configs))
        controller.columns.apply(await Informer(store, [Kind.NODE]).listing())
        cpu = controller.columns.resource_row("cpu")
        n = len(controller.columns)

        def churn(share: float) -> None:
            rows = rng.choice(n, size=max(1, int(n * share)), replace=False)
            alloc = controller.columns.allocatable[cpu, rows]
            controller.columns.allocated[cpu, rows] = (alloc * rng.random(len(rows))).astype(np.int64)

        churn(1.0)
        t = time.perf_counter()
        await controller.sync()
        first = (time.perf_counter() - t) * 1000
        sync_ms, policy_ms, moves = [], [], []
        for _ in range(args.syncs):
            churn(args.churn)
            state = controller._state()
            t = time.perf_counter()
            assign(state, configs, controller.clock(), controller.config.hysteresis)
            policy_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            result = await controller.sync()
            sync_ms.append((time.perf_counter() - t) * 1000)
            moves.append(result.moves)
        await c.flushdb()
    return Report(
        nodes=n,
        syncs=args.syncs,
        sync_ms_p50=round(float(np.percentile(sync_ms, 50)), 1),
        sync_ms_p99=round(float(np.percentile(sync_ms, 99)), 1),
        first_sync_ms=round(first, 1),
        policy_ms_p50=round(float(np.percentile(policy_ms, 50)), 2),
        moves_per_sync=float(np.mean(moves)),
    )


def run(args: argparse.Namespace) -> int:
    bench = checked("caldera bench sharding", args, config)
    if bench is None:
        return 2
    return run_bench(bench, lambda url: measure(url, bench), line)


def line(report: Report) -> str:
    return (
        f"full resync at {report.nodes:,} nodes: p50 {report.sync_ms_p50} ms, p99 {report.sync_ms_p99} ms "
        f"(first sync {report.first_sync_ms} ms; policy alone p50 {report.policy_ms_p50} ms; "
        f"{report.moves_per_sync:.0f} moves per sync)"
    )
