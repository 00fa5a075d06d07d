"""``caldera agent-scheduler`` / ``python -m agent_scheduler``: the agent scheduler process."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Awaitable, Sequence

import msgspec
from prometheus_client import CollectorRegistry

from agent_scheduler.core import CoreConfig, ScoreKind
from agent_scheduler.loop import INFLIGHT_KUBE, INFLIGHT_STORE, AgentLoop, LoopConfig, NoWorkers
from agent_scheduler.metrics import AgentMetrics
from agent_scheduler.worker import WorkerConfig
from binder.bind import BindTarget
from binder.commit import Binder
from binder.metrics import BinderMetrics
from binder.rebind import DEFAULT_AFTER_S, Rebinder
from cluster.kube.bind import KubeTarget
from cluster.kube.connect import KubeConnection, add_kube_flags, kube_connection
from cluster.kube.lease import kube_elect
from cluster.kube.shards import ShardStatusReporter
from cluster.model.sharding import ShardingMode
from cluster.nodeview.devices import CardPolicy
from cluster.nodeview.fgd_score import FgdConfig, parse_typical_pods
from cluster.runtime.flags import Parser, add_rebind_after, add_sharding_mode, rebind_after, workers_or_auto
from cluster.runtime.heartbeat import Stats
from cluster.runtime.logs import logger
from cluster.runtime.process import Build, Deps, Elect, Fatal, ProcessConfig, add_common_flags, launch
from cluster.sim.cluster import SimBindTarget
from cluster.store.client import periodically
from cluster.store.store import Store

log = logger("agent-scheduler")


AUTO_WORKERS_MAX = 8
"""``--workers auto`` starts at most this many workers."""


def auto_workers(cpus: int) -> int:
    """``--workers auto``: one worker per CPU beyond one, 1 to :data:`AUTO_WORKERS_MAX`.

    The loop, the store and the processes around them need a core too, and a worker without a core
    of its own adds no throughput but collides with the others: measured in ``caldera demo`` on two
    cores (three runs each), one worker against two gave 0.1–0.2% true conflicts against 8–14%, and
    agent pods bound at p50 / p99 53–61 / 119–170 ms against 59–75 / 186–339 ms.
    """
    return max(1, min(AUTO_WORKERS_MAX, cpus - 1))


def build_parser(prog: str = "caldera agent-scheduler") -> Parser:
    p = Parser(prog=prog, description="The low-latency scheduler for agent-scheduler pods, with Ray-actor workers.")
    p.add_argument(
        "--scheduler-name",
        default="agent-scheduler",
        help="the schedulerName this process serves (default: agent-scheduler)",
    )
    p.add_argument(
        "--workers",
        type=workers_or_auto,
        default="auto",
        help="Ray-actor workers, or auto: one per CPU of the Ray cluster beyond one, 1 to "
        f"{AUTO_WORKERS_MAX} (a local Ray has this machine's CPUs) (default: auto)",
    )
    p.add_argument("--batch-size", type=int, default=256, help="most pods per worker call (default: 256)")
    p.add_argument(
        "--inflight",
        type=workers_or_auto,
        default="auto",
        help="batches in flight per worker, or auto: 3 binding in the store (the simulator), "
        "2 binding through Kubernetes (default: auto)",
    )
    p.add_argument(
        "--room-shares",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="share a burst among several workers by the room each one's partition of the nodes has left: "
        "fewer conflicts in a full shard (default: on)",
    )
    p.add_argument(
        "--hand-over",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with several workers, a pod with room only in another worker's partition of the nodes goes to "
        "that worker instead of being placed there: no two workers fill the same last room (default: on)",
    )
    p.add_argument("--candidates", type=int, default=3, help="top-K nodes a choice is drawn from (default: 3)")
    p.add_argument(
        "--score", default="binpack", choices=[s.value for s in ScoreKind], help="node score (default: binpack)"
    )
    p.add_argument(
        "--score-weights", default="cpu=1,memory=1", help="weight per resource in the score (default: cpu=1,memory=1)"
    )
    p.add_argument(
        "--gpu-policy",
        default="",
        choices=[c.value for c in CardPolicy],
        help="which GPU card a shared-GPU pod takes on its node: binpack, spread, best-fit, fgd (Fragmentation "
        "Gradient Descent: node and card), or '' for Volcano's order (default: '')",
    )
    p.add_argument(
        "--fgd-typical-pods",
        default="",
        help="with --gpu-policy fgd: the typical pods, e.g. 'cpu=4,gpus=1,milli=500,share=0.6; cpu=8,gpus=8,share=0.4' "
        "(default: learned from the pods placed)",
    )
    fgd = FgdConfig()
    p.add_argument(
        "--fgd-window", type=int, default=fgd.window, help="with fgd: the last pods the typical pods are learned from"
    )
    p.add_argument(
        "--fgd-popularity",
        type=float,
        default=fgd.popularity,
        help=f"with fgd: the %% of those pods the typical shapes cover (default: {fgd.popularity:g})",
    )
    p.add_argument("--fgd-gpu-pods-only", action="store_true", help="with fgd: leave CPU pods out of the typical pods")
    p.add_argument("--max-retries", type=int, default=3, help="conflict retries inside one worker call (default: 3)")
    add_sharding_mode(p)
    add_rebind_after(p)
    p.add_argument(
        "--ray-address",
        default="",
        help="empty: start a local Ray sized to this machine; auto or an address: join (default: empty)",
    )
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
            raise ValueError(
                f"--score-weights: entry {part!r} (expected name=weight with a weight ≥ 0, e.g. cpu=1,memory=1)"
            )
        weights[name.strip()] = w
    if not any(weights.values()):
        raise ValueError(f"--score-weights: {text!r} has no positive weight")
    return weights


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The agent scheduler's own flags, checked."""

    worker: WorkerConfig
    loop: LoopConfig
    workers: int | None  # None: auto (see auto_workers)
    ray_address: str
    kube: KubeConnection | None  # None: bind in the simulator
    rebind_after: float = DEFAULT_AFTER_S  # see binder.rebind


def agent_config(args: argparse.Namespace) -> AgentConfig:
    worker = worker_config(args)
    kube = kube_connection(args, os.environ)
    return AgentConfig(
        worker=worker,
        workers=args.workers,
        ray_address=args.ray_address,
        loop=LoopConfig(
            scheduler=args.scheduler_name,
            batch_size=args.batch_size,
            inflight=args.inflight or (INFLIGHT_KUBE if kube is not None else INFLIGHT_STORE),
            room_shares=args.room_shares,
        ),
        kube=kube,
        rebind_after=rebind_after(args),
    )


def fgd_config(args: argparse.Namespace) -> FgdConfig:
    """FGD's typical pods from the flags; ValueError naming a bad one (or one set without --gpu-policy fgd)."""
    default = FgdConfig()
    given = [
        flag
        for flag, changed in (
            ("--fgd-typical-pods", bool(args.fgd_typical_pods)),
            ("--fgd-window", args.fgd_window != default.window),
            ("--fgd-popularity", args.fgd_popularity != default.popularity),
            ("--fgd-gpu-pods-only", args.fgd_gpu_pods_only),
        )
        if changed
    ]
    if given and args.gpu_policy != CardPolicy.FGD.value:
        raise ValueError(f"{given[0]}: set, but --gpu-policy is {args.gpu_policy!r} (expected fgd)")
    if args.fgd_window < 1:
        raise ValueError(f"--fgd-window: {args.fgd_window} (expected a positive integer)")
    if not 0 < args.fgd_popularity <= 100:
        raise ValueError(f"--fgd-popularity: {args.fgd_popularity:g} (expected a percentage in (0, 100])")
    typical = parse_typical_pods(args.fgd_typical_pods, "--fgd-typical-pods") if args.fgd_typical_pods else ()
    return FgdConfig(
        popularity=args.fgd_popularity,
        include_cpu=not args.fgd_gpu_pods_only,
        window=args.fgd_window,
        typical=typical,
    )


def worker_config(args: argparse.Namespace) -> WorkerConfig:
    for flag in ("batch_size", "candidates"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')}: {getattr(args, flag)} (expected a positive integer)")
    if args.max_retries < 0:
        raise ValueError(f"--max-retries: {args.max_retries} (expected 0 or more)")
    core = CoreConfig(
        fgd=fgd_config(args),
        scheduler=args.scheduler_name,
        sharding=ShardingMode(args.sharding_mode),
        score=ScoreKind(args.score),
        weights=parse_weights(args.score_weights),
        candidates=args.candidates,
        gpu_policy=CardPolicy(args.gpu_policy),
    )
    return WorkerConfig(core=core, max_retries=args.max_retries, report_room=args.room_shares, hand_over=args.hand_over)


class AgentProcess:
    """The agent scheduler as a :class:`Component`: Ray workers, the loop, and (on Kubernetes) the shard reporter."""

    def __init__(
        self,
        deps: Deps,
        process: ProcessConfig,
        agent: AgentConfig,
        metrics: AgentMetrics,
        binder_metrics: BinderMetrics,
    ) -> None:
        self.deps, self.process, self.agent = deps, process, agent
        self.metrics, self.binder_metrics = metrics, binder_metrics
        self.loop: AgentLoop | None = None

    def stats(self) -> Stats:
        return self.loop.stats() if self.loop is not None else Stats()

    async def run(self, stop: asyncio.Event) -> None:
        from agent_scheduler.actors import ActorSpec, RayWorker, ray_cpus, start_ray, stop_ray, watch_ray

        agent, keys, config = self.agent, self.deps.keys, self.agent.worker
        start_ray(agent.ray_address)  # a local Ray has the CPUs Ray finds (in a container: its CPU limit)
        cpus = ray_cpus()
        count = agent.workers if agent.workers is not None else auto_workers(cpus)
        # Ray installs its own SIGTERM handler (which aborts the process): take SIGTERM back.
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        workers = []
        share = worker_share(agent.kube, count) if agent.kube is not None else None
        try:
            for i in range(count):
                spec = ActorSpec(
                    redis_url=self.process.redis_url,
                    cluster=keys.cluster,
                    kube=share,
                    worker=msgspec.structs.replace(
                        config, core=msgspec.structs.replace(config.core, worker=i, workers=count), seed=i
                    ),
                )
                workers.append(RayWorker(f"w{i}", spec))
            await asyncio.gather(*(w.start() for w in workers))
            log.info("%d workers ready%s", len(workers), f" (auto, of {cpus} CPUs)" if agent.workers is None else "")
            store = Store(self.deps.client, keys)
            self.loop = AgentLoop(
                store,
                workers,
                agent.loop,
                metrics=self.metrics,
                binder_metrics=self.binder_metrics,
                leading=self.deps.leading,
            )
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._run_loop(self.loop, stop))
                tg.create_task(self._rebind(store, stop))
                if not agent.ray_address:
                    tg.create_task(self._watch_ray(watch_ray(stop)))
                if agent.kube is not None:
                    reporter = ShardStatusReporter(
                        agent.kube.client(), agent.loop.scheduler, store, qps=agent.kube.qps, burst=agent.kube.burst
                    )
                    tg.create_task(reporter.run(stop))
        finally:
            await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
            stop_ray()

    @staticmethod
    async def _watch_ray(watch: Awaitable[str]) -> None:
        """A local Ray whose raylet or GCS died takes every worker with it, for good: exit, to be started
        again with a new Ray (on a Ray cluster, ``--ray-address``, Ray restarts what it loses itself)."""
        died = await watch
        if died:
            raise Fatal(f"{died}: exiting to be started again")

    async def _run_loop(self, loop: AgentLoop, stop: asyncio.Event) -> None:
        try:
            await loop.run(stop)
        except* NoWorkers as group:
            raise Fatal(f"{group.exceptions[0]}: Ray is gone; exiting to be started again") from None

    async def _rebind(self, store: Store, stop: asyncio.Event) -> None:
        """Bind what a stopped agent scheduler (or a dead worker of this one) committed and never
        bound — leaving alone the pods this loop holds, which it sends out again itself."""
        assert self.loop is not None
        loop, agent = self.loop, self.agent
        binder = Binder(store.client, store.keys, agent.loop.scheduler, sharding=agent.worker.core.sharding)
        kube = KubeTarget(agent.kube.client(), qps=agent.kube.qps, burst=agent.kube.burst) if agent.kube else None
        target: BindTarget = kube if kube is not None else SimBindTarget(store)
        rebinder = Rebinder(store, binder, target, after=agent.rebind_after, in_flight=loop.queue.queued)
        try:
            await periodically(log, "rebind", 1.0, stop, rebinder.run_once, when=self.deps.leading)
        finally:
            if kube is not None:
                kube.close()


def worker_share(kube: KubeConnection, workers: int) -> KubeConnection:
    """What each worker paces its calls to: the workers bind from processes of their own, and
    together keep to the process's ``--kube-api-qps``/``--kube-api-burst``."""
    return msgspec.structs.replace(kube, qps=kube.qps / workers, burst=max(1, kube.burst // workers))


def main(argv: Sequence[str] | None = None, prog: str = "caldera agent-scheduler") -> int:
    def make(process: ProcessConfig, agent: AgentConfig, registry: CollectorRegistry) -> tuple[Build, Elect | None]:
        metrics, binder_metrics = AgentMetrics(registry), BinderMetrics(registry)
        elect = kube_elect(agent.kube) if agent.kube is not None else None
        return (lambda deps: AgentProcess(deps, process, agent, metrics, binder_metrics)), elect

    return launch(prog, "agent-scheduler", argv, build_parser(prog), agent_config, make)
