"""``caldera agent-scheduler`` / ``python -m agent_scheduler``: the agent scheduler process."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Callable, Sequence

import msgspec
import redis.asyncio as aioredis
import uvloop
from prometheus_client import CollectorRegistry

from agent_scheduler.core import CoreConfig, ScoreKind
from agent_scheduler.loop import AgentLoop, LoopConfig
from agent_scheduler.metrics import AgentMetrics
from agent_scheduler.worker import WorkerConfig
from binder.metrics import BinderMetrics
from cluster.flags import Parser
from cluster.keys import Keys
from cluster.kube.connect import KubeConnection, add_kube_flags, kube_connection
from cluster.kube.shards import ShardStatusReporter
from cluster.process import add_common_flags, config_or_none, serve
from cluster.shard import ShardingMode
from cluster.store import Store




def build_parser(prog: str = "caldera agent-scheduler") -> Parser:
    p = Parser(prog=prog, description="The low-latency scheduler for agent-scheduler pods, with Ray-actor workers.")
    p.add_argument("--scheduler-name", default="agent-scheduler", help="the schedulerName this process serves (default: agent-scheduler)")
    p.add_argument("--workers", type=int, default=2, help="Ray-actor workers (default: 2)")
    p.add_argument("--batch-size", type=int, default=256, help="most pods per worker call (default: 256)")
    p.add_argument("--inflight", type=int, default=2, help="batches in flight per worker (default: 2)")
    p.add_argument("--candidates", type=int, default=3, help="top-K nodes a choice is drawn from (default: 3)")
    p.add_argument("--score", default="binpack", choices=[s.value for s in ScoreKind], help="node score (default: binpack)")
    p.add_argument("--score-weights", default="cpu=1,memory=1", help="weight per resource in the score (default: cpu=1,memory=1)")
    p.add_argument("--max-retries", type=int, default=3, help="conflict retries inside one worker call (default: 3)")
    p.add_argument("--sharding-mode", default="soft", choices=[m.value for m in ShardingMode],
                   help="hard: own shard only; soft: own, then unowned, then others; none (default: soft)")
    p.add_argument("--ray-address", default="", help="empty: start a local Ray sized to this machine; auto or an address: join (default: empty)")
    add_kube_flags(p)
    add_common_flags(p)
    return p


def parse_weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            w = float(value)
        except ValueError:
            w = -1.0
        if not sep or not name.strip() or w < 0:
            raise ValueError(f"--score-weights: entry {part!r} (expected name=weight with a weight ≥ 0, e.g. cpu=1,memory=1)")
        weights[name.strip()] = w
    if not any(weights.values()):
        raise ValueError(f"--score-weights: {text!r} has no positive weight")
    return weights


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    worker: WorkerConfig
    kube: KubeConnection | None  # None: bind in the simulator


def agent_config(args: argparse.Namespace) -> AgentConfig:
    return AgentConfig(worker=worker_config(args), kube=kube_connection(args, os.environ))


def worker_config(args: argparse.Namespace) -> WorkerConfig:
    for flag in ("workers", "batch_size", "candidates", "inflight"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')}: {getattr(args, flag)} (expected a positive integer)")
    if args.max_retries < 0:
        raise ValueError(f"--max-retries: {args.max_retries} (expected 0 or more)")
    core = CoreConfig(scheduler=args.scheduler_name, sharding=ShardingMode(args.sharding_mode), score=ScoreKind(args.score),
                      weights=parse_weights(args.score_weights), candidates=args.candidates)
    return WorkerConfig(core=core, max_retries=args.max_retries)


def main(argv: Sequence[str] | None = None, prog: str = "caldera agent-scheduler") -> int:
    args = build_parser(prog).parse_args(argv)
    agent = config_or_none(prog, args, agent_config)
    if agent is None:
        return 2
    config = agent.worker
    from agent_scheduler.actors import ActorSpec, RayWorker, start_ray, stop_ray

    registry = CollectorRegistry()
    metrics, binder_metrics = AgentMetrics(registry), BinderMetrics(registry)

    loops: list[AgentLoop] = []  # the loop, once built, for the heartbeat's figures

    async def body(client: aioredis.Redis, keys: Keys, leading: Callable[[], bool], stop: asyncio.Event) -> None:
        start_ray(args.ray_address, num_cpus=os.cpu_count() or 2)
        # Ray installs its own SIGTERM handler (which aborts the process): take SIGTERM back.
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        workers = []
        try:
            for i in range(args.workers):
                spec = ActorSpec(redis_url=args.redis_url, cluster=keys.cluster, kube=agent.kube,
                                 worker=WorkerConfig(core=msgspec.structs.replace(config.core, worker=i, workers=args.workers),
                                                     max_retries=config.max_retries, seed=i))
                workers.append(RayWorker(f"w{i}", spec))
            await asyncio.gather(*(w.start() for w in workers))
            print(f"agent-scheduler: {len(workers)} workers ready", flush=True)
            store = Store(client, keys)
            loop = AgentLoop(store, workers, LoopConfig(scheduler=args.scheduler_name, batch_size=args.batch_size, inflight=args.inflight),
                             metrics=metrics, binder_metrics=binder_metrics, leading=leading)
            loops.append(loop)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(loop.run(stop))
                if agent.kube is not None:
                    reporter = ShardStatusReporter(agent.kube.client(), args.scheduler_name, store, qps=agent.kube.qps,
                                                   burst=agent.kube.burst)
                    tg.create_task(reporter.run(stop))
        finally:
            await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
            stop_ray()

    uvloop.run(serve(args, "agent-scheduler", registry, body, kube=agent.kube,
                     stats=lambda: loops[0].stats() if loops else {}))
    return 0
