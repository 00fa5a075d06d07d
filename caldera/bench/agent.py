"""``caldera bench agent``: the agent scheduler's throughput and latency under contention.

N nodes of 16 cpu / 64Gi / 110 pods, first filled to ``--fill`` of their cpu and memory by
resident pods that stay (another scheduler's, bound before the run: a full shard, each node
filled to its own level, uneven as a busy shard is); then M pods sized so that together they
take ``--take`` of the cpu the residents leave free, submitted as one burst or at ``--rate``
pods/s; the loop and W Ray-actor workers place them through the binder. Latency is from the moment
a pod is in the store (submitted) to the moment the loop learns it was committed and
bound. In the same run, on fresh clusters: one worker (the baseline), and W workers with
a coarse binder that refuses any version change (Volcano's), for comparison (its workers commit
each batch in one call: see :func:`place`). The
simulated kubelets are not run: the figures are the scheduler's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

import msgspec
import numpy as np

from agent_scheduler.core import CoreConfig, ScoreKind
from agent_scheduler.loop import INFLIGHT_STORE, AgentLoop, LoopConfig
from agent_scheduler.worker import COMMIT_CHUNK, WorkerConfig
from binder.commit import Binder
from caldera._store import client
from caldera.bench.binders import VersionOnlyBinder
from caldera.bench.runner import MAX_NODES, MAX_PODS, MAX_WORKERS, figures, positive_int, run_bench
from caldera.flag_config import checked, from_flags, number, redis_url
from cluster.model.core import Node, Pod
from cluster.nodeview.devices import CardPolicy
from cluster.sim.pods import make_pod
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.audit import audit
from cluster.store.keys import Keys
from cluster.store.store import Store

AGENT = "agent-scheduler"
STALL_S = 15.0


class Run(msgspec.Struct):
    pods_per_s: float
    p50_ms: float
    p99_ms: float
    attempts_per_pod: float
    conflict_rate: float
    resolved_conflicts: int
    placed: int
    audit: str
    raylets: int = 1  # the Ray nodes the workers ran on
    handed_over: int = 0  # pods one worker handed to another (each one more trip through the loop)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("agent", help="agent scheduler pods/s and latency, beside one worker and a coarse binder")
    p.add_argument("--nodes", type=positive_int, default=5000)
    p.add_argument("--pods", type=positive_int, default=10000)
    p.add_argument("--workers", type=positive_int, default=2)
    p.add_argument("--rate", type=number, default=0.0, help="pods/s to submit at; 0 = one burst (default: 0)")
    p.add_argument(
        "--fill",
        type=number,
        default=0.0,
        help="share of each node's cpu and memory resident pods hold before the run, on average (default: 0)",
    )
    p.add_argument(
        "--take",
        type=number,
        default=0.8,
        help="share of the free cpu the measured pods take together (default: 0.8)",
    )
    p.add_argument("--batch-size", type=positive_int, default=256)
    p.add_argument(
        "--inflight",
        type=positive_int,
        default=INFLIGHT_STORE,
        help=f"batches in flight per worker (default: {INFLIGHT_STORE}, the agent scheduler's binding in the store)",
    )
    p.add_argument(
        "--room-shares",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the loop shares a burst by the room each worker's partition has left (the agent "
        "scheduler's --room-shares; default: on)",
    )
    p.add_argument(
        "--hand-over",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a worker hands a pod with room only in another's partition over to that worker (the agent "
        "scheduler's --hand-over; default: on)",
    )
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--skip-baselines", action="store_true", help="measure only the W-worker fine-binder run")
    p.add_argument(
        "--curve",
        type=worker_counts,
        default=(),
        help="worker counts to measure the same run at, as a curve: 1,2,4,8 (default: none)",
    )
    p.add_argument(
        "--ray-address",
        default="",
        help="join this Ray cluster (workers spread over its raylets) instead of starting a local Ray (default: local)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class AgentBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench agent``'s flags, checked."""

    nodes: Annotated[int, msgspec.Meta(ge=1, le=MAX_NODES, description=f"1 to {MAX_NODES:,} nodes")] = 5000
    pods: Annotated[int, msgspec.Meta(ge=1, le=MAX_PODS, description=f"1 to {MAX_PODS:,} pods")] = 10000
    workers: Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS, description=f"1 to {MAX_WORKERS} workers")] = 2
    rate: Annotated[float, msgspec.Meta(ge=0, le=1e6, description="0 (one burst) to 1,000,000 pods/s")] = 0.0
    fill: Annotated[float, msgspec.Meta(ge=0, lt=1, description="a share in [0, 1)")] = 0.0
    take: Annotated[float, msgspec.Meta(gt=0, le=1, description="a share in (0, 1]")] = 0.8
    batch_size: Annotated[int, msgspec.Meta(ge=1, le=100_000, description="1 to 100,000 pods")] = 256
    inflight: Annotated[int, msgspec.Meta(ge=1, le=1000, description="1 to 1,000 batches")] = INFLIGHT_STORE
    room_shares: bool = True
    hand_over: bool = True
    redis_url: str | None = None
    skip_baselines: bool = False
    curve: tuple[Annotated[int, msgspec.Meta(ge=1, le=MAX_WORKERS)], ...] = ()
    ray_address: str = ""
    json: bool = False

    def __post_init__(self) -> None:
        if pod_cpu(self) > NODE_CPU_M * (1 - self.fill):
            least = int(self.take * self.nodes) + 1
            raise ValueError(
                f"--pods {self.pods}: too few to take {self.take:g} of the free cpu of {self.nodes} nodes "
                f"{self.fill:g} full with pods that fit the room an average node has (expected at least {least})"
            )


NODE_CPU_M = 16000  # a node's cpu, in millicores


def pod_cpu(args: AgentBench) -> int:
    """A measured pod's cpu request in millicores: together they take ``take`` of the free cpu."""
    return max(1, round(args.take * (1 - args.fill) * args.nodes * NODE_CPU_M / args.pods))


def residents(nodes: list[Node], fill: float, seed: int = 0) -> list[Pod]:
    """One resident pod per node, bound and running, holding a share of its cpu and memory drawn
    evenly from [2·fill − 1, 2·fill] (clipped to [0, 1]): ``fill`` on average, uneven from node
    to node as a busy shard is. None at fill 0."""
    if fill <= 0:
        return []
    rng = np.random.default_rng(seed)
    shares = rng.uniform(max(0.0, 2 * fill - 1), min(1.0, 2 * fill), len(nodes))
    out = []
    for n, share in zip(nodes, shares):
        cpu = int(share * NODE_CPU_M)
        if cpu:
            memory = f"{int(share * 64 * 1024)}Mi"
            out.append(
                make_pod(
                    f"resident-{n.name}",
                    scheduler="other",
                    node=n.name,
                    phase="Running",
                    requests={"cpu": f"{cpu}m", "memory": memory},
                )
            )
    return out


def worker_counts(text: str) -> tuple[int, ...]:
    """argparse type: worker counts separated by commas, each 1 to MAX_WORKERS."""
    counts = tuple(positive_int(part) for part in text.split(","))
    if any(n > MAX_WORKERS for n in counts):
        raise argparse.ArgumentTypeError(f"{text} (expected worker counts of 1 to {MAX_WORKERS}, such as 1,2,4,8)")
    return counts


def config(args: argparse.Namespace) -> AgentBench:
    """The flags checked (ValueError naming the flag); nothing started."""
    return from_flags(AgentBench, args, redis_url=redis_url("--redis-url", args.redis_url))


async def submit(store: Store, pods: list[Any], rate: float, created: dict[str, float], size: int = 1000) -> None:
    if rate <= 0:
        for i in range(0, len(pods), size):
            chunk = pods[i : i + size]
            await store.upsert_pods(chunk)
            now = time.monotonic()
            created.update((p.uid, now) for p in chunk)
        return
    start = time.monotonic()
    sent = 0
    while sent < len(pods):
        due = min(len(pods), int((time.monotonic() - start) * rate) + 1)
        if due > sent:
            chunk = pods[sent:due]
            await store.upsert_pods(chunk)
            now = time.monotonic()
            created.update((p.uid, now) for p in chunk)
            sent = due
        await asyncio.sleep(0.005)


async def one_run(url: str, args: AgentBench, name: str, workers: int, coarse: bool) -> Run:
    nodes = pool_nodes(NodePool(name="n", count=args.nodes, resources={"cpu": 16, "memory": "64Gi", "pods": 110}))
    cpu = pod_cpu(args)
    pods = [
        make_pod(f"{name}-{i}", scheduler=AGENT, requests={"cpu": f"{cpu}m", "memory": "256Mi"})
        for i in range(args.pods)
    ]
    return await place(
        url,
        name,
        nodes,
        pods,
        residents=residents(nodes, args.fill),
        workers=workers,
        coarse=coarse,
        rate=args.rate,
        batch_size=args.batch_size,
        inflight=args.inflight,
        room_shares=args.room_shares,
        hand_over=args.hand_over,
    )


async def place(
    url: str,
    name: str,
    nodes: list[Node],
    pods: list[Pod],
    *,
    residents: Sequence[Pod] = (),
    workers: int,
    coarse: bool = False,
    score: ScoreKind = ScoreKind.BINPACK,
    weights: dict[str, float] | None = None,
    rate: float = 0.0,
    chunk: int = 1000,
    batch_size: int = 256,
    inflight: int = INFLIGHT_STORE,
    room_shares: bool = True,
    hand_over: bool = True,
    until: Callable[[Store, AgentLoop], Awaitable[bool]] | None = None,
    gpu_policy: CardPolicy = CardPolicy.VOLCANO,
) -> Run:
    """Place ``pods`` on a fresh cluster of ``nodes`` with the agent loop and ``workers`` Ray workers; the figures.

    ``residents``: bound pods stored with the nodes, before the workers start.
    Pods are submitted in chunks of ``chunk`` (or at ``rate`` pods/s). The run ends when
    every pod is bound, when nothing more was bound for STALL_S, or when ``until`` (asked
    every 50 ms) says so; the figures are up to that moment.
    """
    from agent_scheduler.actors import (  # ray is heavy: import it only to use it
        ActorSpec,
        RayWorker,
    )

    async with client(url) as c:
        store = Store(c, Keys(f"bench-agent-{name}"))
        for i in range(0, len(nodes), 2000):
            await store.upsert_nodes(nodes[i : i + 2000])
        for i in range(0, len(residents), 2000):
            await store.upsert_pods(list(residents[i : i + 2000]))
        core = CoreConfig(worker=0, workers=workers, score=score, gpu_policy=gpu_policy)
        if weights:
            core = msgspec.structs.replace(core, weights=weights)
        handles = [
            RayWorker(
                f"w{i}",
                ActorSpec(
                    redis_url=url,
                    cluster=store.keys.cluster,
                    worker=WorkerConfig(
                        core=msgspec.structs.replace(core, worker=i),
                        seed=i,
                        report_room=room_shares,
                        hand_over=hand_over,
                        # The coarse binder refuses a node whose version moved, and a worker's later
                        # chunks meet the nodes its earlier ones moved: sent as it decides, its batch
                        # would collide with itself. It commits each batch in one call, as before the
                        # chunks (the suite's agent bench: its conflicts 0.67% whole, 4.7% in chunks of 32).
                        commit_chunk=batch_size if coarse else COMMIT_CHUNK,
                    ),
                ),
                binder=VersionOnlyBinder if coarse else Binder,
            )
            for i in range(workers)
        ]
        await asyncio.gather(*(h.start() for h in handles))
        loop = AgentLoop(store, handles, LoopConfig(batch_size=batch_size, inflight=inflight, room_shares=room_shares))
        stop = asyncio.Event()
        created: dict[str, float] = {}
        runner = asyncio.create_task(loop.run(stop))
        start = time.monotonic()
        submitter = asyncio.create_task(submit(store, pods, rate, created, chunk))
        # Until every pod is bound, or nothing more was bound for STALL_S (pods too big for
        # any node's free room stay pending: reported as placed < pods, not waited for).
        last, progress, checked = len(loop.bound), time.monotonic(), 0.0
        end = None
        while len(loop.bound) < len(pods) and time.monotonic() - progress < STALL_S:
            await asyncio.sleep(0.01)
            if len(loop.bound) != last:
                last, progress = len(loop.bound), time.monotonic()
            if until is not None and time.monotonic() - checked > 0.05:
                checked = time.monotonic()
                if await until(store, loop):
                    end = checked
                    break
        submitter.cancel()
        if end is None:
            end = max(loop.bound_at.values()) if loop.bound_at else time.monotonic()
        placed = {u: t for u, t in loop.bound_at.items() if t <= end}
        stop.set()
        await runner
        await asyncio.gather(*(h.stop() for h in handles))
        raylets = len({h.node_id for h in handles})
        problems = await audit(store)
        lat = np.array([(t - created[u]) * 1000 for u, t in placed.items() if u in created] or [0.0])
        t = loop.totals
        tries = t["committed"] + t["conflicts"] + t["rejected"]
        await c.delete(*[k async for k in c.scan_iter(match=store.keys.prefix + "*")])
        return Run(
            pods_per_s=round(len(placed) / max(end - start, 1e-9), 1),
            p50_ms=round(float(np.percentile(lat, 50)), 2),
            p99_ms=round(float(np.percentile(lat, 99)), 2),
            attempts_per_pod=round(tries / max(t["committed"], 1), 4),
            conflict_rate=round(t["conflicts"] / max(t["committed"], 1), 4),
            resolved_conflicts=t["resolved"],
            placed=len(placed),
            audit="ok" if not problems else f"{len(problems)} violations",
            raylets=raylets,
            handed_over=t["handed_over"],
        )


async def measure(url: str, args: AgentBench) -> dict[str, Any]:
    main = await one_run(url, args, "main", args.workers, False)
    report: dict[str, Any] = {
        "nodes": args.nodes,
        "pods": args.pods,
        "workers": args.workers,
        "rate": args.rate,
        "fill": args.fill,
        "take": args.take,
        **msgspec.to_builtins(main),
    }
    if args.curve:
        curve = [(w, await one_run(url, args, f"curve{w}", w, False)) for w in args.curve]
        report["curve"] = [
            {"workers": w, **{k: getattr(r, k) for k in ("pods_per_s", "p50_ms", "conflict_rate", "raylets", "audit")}}
            for w, r in curve
        ]
    if not args.skip_baselines:
        one = await one_run(url, args, "one", 1, False)
        coarse = await one_run(url, args, "coarse", args.workers, True)
        report.update(
            baseline_one_worker_pods_per_s=one.pods_per_s,
            coarse_conflict_rate=coarse.conflict_rate,
            coarse_attempts_per_pod=coarse.attempts_per_pod,
            coarse_pods_per_s=coarse.pods_per_s,
            speedup_vs_one_worker=round(main.pods_per_s / max(one.pods_per_s, 1e-9), 2),
        )
    return report


def run(args: argparse.Namespace) -> int:
    bench = checked("caldera bench agent", args, config)
    if bench is None:
        return 2
    return run_bench(
        bench,
        lambda url: measure(url, bench),
        figures(32),
        ok=lambda report: report["audit"] == "ok" and all(c["audit"] == "ok" for c in report.get("curve", [])),
        ray=True,
        ray_address=bench.ray_address,
    )
