"""``caldera bench batch``: how long a batch session takes with many nodes and many pending pods.

N GPU nodes (8 GPUs, 64 cpu, 512Gi each); M pending pods in gang jobs of mixed sizes
(1–16 tasks of 1 GPU, minAvailable = size) spread over three queues of weights 1, 2
and 3. Each session runs the default (Volcano Helm) conf, or ``--conf``'s, end to end — snapshot,
enqueue, allocate, backfill, gang commits through the binder, binds, status and reasons
written back — and between sessions the pods it placed end and new jobs arrive, so
every session sees M pending pods and the same free capacity.

Two runs, in the same process: *steady* — a busy cluster where ``--free`` of the GPUs are
free at each session (the usual case: a backlog waiting for capacity, so most jobs are
tried and refused with a reason) — and *burst* — half the GPUs free, so every pending pod
is placed in each session while they number at most four a node (the worst case: M
placements, M gang commits' worth of Lua; beyond four a node, as many as fit).
Reported per run: session duration p50/p99, placed pods per second of session time, and
the allocate action's share.

``--curve`` also measures both runs at every point of a grid of nodes × pending pods
(:data:`CURVE_NODES` × :data:`CURVE_PENDING`): how a session's cost grows with each. A flag
rather than lists for ``--nodes``/``--pending``, so that the report keeps one shape — today's
keys for the ``--nodes``/``--pending`` point, and ``curve`` beside them (empty without the
flag). ``--quick`` shrinks every size (:data:`QUICK`) to check that the bench runs.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import numpy as np

from batch_scheduler.cache import KINDS
from batch_scheduler.conf import ConfError, SchedulerConf, load_conf
from batch_scheduler.cycle import BatchScheduler, SchedulerConfig
from batch_scheduler.registry import default_registry
from batch_scheduler.session_input import SessionConfig
from caldera._store import client
from caldera.bench.runner import MAX_NODES, MAX_PODS, positive_int, run_bench
from caldera.flag_config import checked, from_flags, number, readable_file, redis_url, whole
from cluster.model.core import Pod
from cluster.model.sharding import ShardingMode
from cluster.model.volcano import PodGroup, Queue
from cluster.runtime.heap import HeapKeeper, settle
from cluster.sim.cluster import SimBindTarget, SimEvictor
from cluster.sim.pods import make_pod, make_podgroup
from cluster.sim.pools import NodePool, pool_nodes
from cluster.store.audit import audit
from cluster.store.informer import Informer
from cluster.store.keys import Keys, Kind
from cluster.store.store import Delete, Put, Store

BATCH = "volcano"
QUEUES = {"q1": 1, "q2": 2, "q3": 3}
SIZES = (1, 2, 4, 8, 16)
NODE: dict[str, str | int | float] = {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8, "pods": 110}
TASK: dict[str, str | int] = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": 1}
CURVE_NODES = (1000, 5000, 20000)
CURVE_PENDING = (1000, 10000, 50000)


class Sizes(msgspec.Struct, frozen=True, kw_only=True):
    """What ``--nodes``, ``--pending`` and ``--sessions`` default to, and the curve's grid."""

    nodes: int
    pending: int
    sessions: int
    curve_nodes: tuple[int, ...]
    curve_pending: tuple[int, ...]


FULL = Sizes(nodes=5000, pending=10000, sessions=6, curve_nodes=CURVE_NODES, curve_pending=CURVE_PENDING)
QUICK = Sizes(nodes=40, pending=120, sessions=2, curve_nodes=(20, 40), curve_pending=(30, 120))


class Run(msgspec.Struct):
    session_s_p50: float
    session_s_p99: float
    allocate_s_p50: float
    placed_per_session: float
    pods_per_s: float
    jobs_started: int
    audit: str


class Point(msgspec.Struct):
    """Both runs at one point of the curve."""

    nodes: int
    pending: int
    steady: Run
    burst: Run


class Report(msgspec.Struct):
    nodes: int
    pending: int
    sessions: int
    free: float
    session_s_p50: float  # steady
    session_s_p99: float
    pods_per_s: float
    steady: Run
    burst: Run
    curve: list[Point] = msgspec.field(default_factory=list)  # with --curve: every point, nodes then pending


def add_parser(sub: Any) -> None:
    p = sub.add_parser("batch", help="batch session duration and pods/s at N nodes and M pending pods")
    p.add_argument(
        "--nodes", type=positive_int, default=None, help=f"(default: {FULL.nodes}; {QUICK.nodes} with --quick)"
    )
    p.add_argument(
        "--pending", type=positive_int, default=None, help=f"(default: {FULL.pending}; {QUICK.pending} with --quick)"
    )
    p.add_argument(
        "--sessions",
        type=positive_int,
        default=None,
        help=f"sessions measured per run (default: {FULL.sessions}; {QUICK.sessions} with --quick)",
    )
    p.add_argument(
        "--curve",
        action="store_true",
        help="also run every point of nodes "
        + "/".join(f"{n:,}" for n in CURVE_NODES)
        + " x pending "
        + "/".join(f"{n:,}" for n in CURVE_PENDING)
        + " (both runs, --sessions each)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes (a curve of nodes "
        + "/".join(map(str, QUICK.curve_nodes))
        + " x pending "
        + "/".join(map(str, QUICK.curve_pending))
        + "): checks that the bench runs; the figures mean little",
    )
    p.add_argument(
        "--free", type=number, default=0.05, help="share of GPUs free at each steady session (default: 0.05)"
    )
    p.add_argument("--seed", type=whole, default=1)
    p.add_argument("--conf", default=None, help="scheduler conf to run (default: Volcano's Helm-chart conf)")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


class BatchBench(msgspec.Struct, frozen=True, kw_only=True):
    """``caldera bench batch``'s flags, checked."""

    nodes: Annotated[int, msgspec.Meta(ge=1, le=MAX_NODES, description=f"1 to {MAX_NODES:,} nodes")] = FULL.nodes
    pending: Annotated[int, msgspec.Meta(ge=1, le=MAX_PODS, description=f"1 to {MAX_PODS:,} pods")] = FULL.pending
    sessions: Annotated[int, msgspec.Meta(ge=1, le=10_000, description="1 to 10,000 sessions")] = FULL.sessions
    curve: bool = False
    quick: bool = False
    free: Annotated[float, msgspec.Meta(gt=0, le=0.5, description="a share in (0, 0.5]")] = 0.05
    seed: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1, description="a 64-bit integer")] = 1
    conf: str | None = None
    redis_url: str | None = None
    json: bool = False

    @property
    def grid(self) -> list[tuple[int, int]]:
        """The curve's points (nodes, pending), nodes then pending; none without ``--curve``."""
        sizes = QUICK if self.quick else FULL
        return [(n, m) for n in sizes.curve_nodes for m in sizes.curve_pending] if self.curve else []


def config(args: argparse.Namespace) -> BatchBench:
    """The flags checked, the conf loaded once to check it (ValueError naming the flag); nothing started."""
    sizes = QUICK if args.quick else FULL
    given = {name: getattr(args, name) for name in ("nodes", "pending", "sessions")}
    bench = from_flags(
        BatchBench,
        args,
        redis_url=redis_url("--redis-url", args.redis_url),
        **{name: getattr(sizes, name) if value is None else value for name, value in given.items()},
    )
    conf = readable_file("--conf", bench.conf) if bench.conf is not None else None
    try:
        load_conf(conf, default_registry(), "--conf")
    except ConfError as e:
        raise ValueError(f"--conf {conf}: {e}") from None
    return bench


class Workload:
    """Gang jobs of mixed sizes into three queues, created on demand to keep M pods pending."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0

    def jobs(self, pods: int) -> tuple[list[PodGroup], list[Pod]]:
        groups: list[PodGroup] = []
        made: list[Pod] = []
        while len(made) < pods:
            size = min(self.rng.choice(SIZES), pods - len(made))
            name = f"job-{self.count}"
            self.count += 1
            queue = self.rng.choices(list(QUEUES), weights=list(QUEUES.values()))[0]
            groups.append(make_podgroup(name, min_member=size, queue=queue))
            made += [make_pod(f"{name}-{i}", requests=TASK, scheduler=BATCH, group=name) for i in range(size)]
        return groups, made


def simulated(store: Store, conf: SchedulerConf, heap: HeapKeeper) -> tuple[BatchScheduler, Informer]:
    """A batch scheduler on the simulated cluster of ``store`` (every node to it), as the process
    runs it, and an informer to feed its cache."""
    scheduler = BatchScheduler(
        store,
        conf,
        SchedulerConfig(session=SessionConfig(scheduler=BATCH, sharding=ShardingMode.NONE)),
        bind_target=SimBindTarget(store),
        evictor=SimEvictor(store),
        heap=heap,
    )
    return scheduler, Informer(store, KINDS, block_ms=50, count=50000)


async def one_run(url: str, args: BatchBench, name: str, free: float, nodes_count: int, pending_count: int) -> Run:
    async with client(url) as c:
        store = Store(c, Keys(f"bench-batch-{name}"))
        nodes = pool_nodes(NodePool(name="gpu", count=nodes_count, resources=NODE))
        for i in range(0, len(nodes), 2000):
            await store.upsert_nodes(nodes[i : i + 2000])
        # Another scheduler's pods hold all but ``free`` of the GPUs (and their share of cpu and
        # memory), the free ones spread evenly over the nodes.
        free_gpus = round(free * 8 * len(nodes))
        held = []
        for i, n in enumerate(nodes):
            gpus = 8 - (free_gpus // len(nodes) + (1 if i < free_gpus % len(nodes) else 0))
            if gpus:
                held.append(
                    make_pod(
                        f"other-{n.name}",
                        scheduler="other",
                        node=n.name,
                        phase="Running",
                        requests={"cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi", "nvidia.com/gpu": gpus},
                    )
                )
        for i in range(0, len(held), 2000):
            await store.upsert_pods(held[i : i + 2000])
        await store.write(
            [Put(msgspec.convert({"metadata": {"name": q}, "spec": {"weight": w}}, Queue)) for q, w in QUEUES.items()]
        )
        workload = Workload(args.seed)
        heap = HeapKeeper()  # as the batch-scheduler process runs it
        scheduler, informer = simulated(store, load_conf(args.conf, default_registry()), heap)
        updates = informer.updates()
        pending = 0
        seconds: list[float] = []
        allocate: list[float] = []
        placed = started = 0
        for _ in range(args.sessions):
            groups, pods = workload.jobs(pending_count - pending)
            await store.write([Put(g) for g in groups])
            for i in range(0, len(pods), 2000):
                await store.upsert_pods(pods[i : i + 2000])
            target = await store.version()
            while scheduler.version < target:  # the scheduler's cache catches up, as in the process
                scheduler.apply(await anext(updates))
            report = await scheduler.run_session()
            seconds.append(report.seconds)
            allocate.append(report.actions.get("allocate", 0.0))
            placed += report.committed
            started += report.jobs_started
            bound = [uid for uid, r in scheduler.pods.items() if r.node]
            for i in range(0, len(bound), 2000):  # the placed pods run and end before the next session
                await store.delete_pods(bound[i : i + 2000])
            # and their jobs end with them: each PodGroup whose pods all ran goes too (as the
            # demo's finished jobs do), not left behind as a group still waiting for its pods
            waiting = {r.group for r in scheduler.pods.values() if not r.node}
            ended = {r.group for r in scheduler.pods.values() if r.node and r.group not in waiting}
            await store.write([Delete(Kind.PODGROUP, g) for g in sorted(ended)])
            pending = sum(1 for r in scheduler.pods.values() if not r.node)
        informer.stop()
        heap.release()
        problems = await audit(store)
        await c.delete(*[k async for k in c.scan_iter(match=store.keys.prefix + "*")])
        s = np.array(seconds)
        return Run(
            session_s_p50=round(float(np.percentile(s, 50)), 3),
            session_s_p99=round(float(np.percentile(s, 99)), 3),
            allocate_s_p50=round(float(np.percentile(np.array(allocate), 50)), 3),
            placed_per_session=round(placed / len(seconds), 1),
            pods_per_s=round(placed / max(float(s.sum()), 1e-9), 1),
            jobs_started=started,
            audit="ok" if not problems else f"{len(problems)} violations",
        )


async def point(url: str, args: BatchBench, nodes: int, pending: int) -> Point:
    """Both runs at ``nodes`` and ``pending``, one after the other."""
    steady = await one_run(url, args, "steady", args.free, nodes, pending)
    burst = await one_run(url, args, "burst", 0.5, nodes, pending)
    return Point(nodes=nodes, pending=pending, steady=steady, burst=burst)


async def measure(url: str, args: BatchBench, progress: Callable[[str], None] = lambda line: None) -> Report:
    """The ``--nodes``/``--pending`` point and, with ``--curve``, every point of the grid (the
    ``--nodes``/``--pending`` point measured once when it is on the grid)."""
    curve = []
    for nodes, pending in args.grid:
        progress(f"{nodes:,} nodes, {pending:,} pending…")
        curve.append(await point(url, args, nodes, pending))
    main = next((p for p in curve if (p.nodes, p.pending) == (args.nodes, args.pending)), None)
    if main is None:
        main = await point(url, args, args.nodes, args.pending)
    return Report(
        nodes=args.nodes,
        pending=args.pending,
        sessions=args.sessions,
        free=args.free,
        session_s_p50=main.steady.session_s_p50,
        session_s_p99=main.steady.session_s_p99,
        pods_per_s=main.steady.pods_per_s,
        steady=main.steady,
        burst=main.burst,
        curve=curve,
    )


def text(report: Report) -> str:
    """Today's figures one per line, then the curve as a table."""
    lines = [f"{k:20} {v}" for k, v in msgspec.to_builtins(report).items() if k != "curve"]
    if report.curve:
        lines.append(
            f"{'nodes':>7} {'pending':>8} {'steady p50 s':>13} {'placed/s':>9} {'burst p50 s':>12} {'placed/s':>9}"
        )
        for p in report.curve:
            lines.append(
                f"{p.nodes:>7,} {p.pending:>8,} {p.steady.session_s_p50:>13.3f} {p.steady.pods_per_s:>9,.0f} "
                f"{p.burst.session_s_p50:>12.3f} {p.burst.pods_per_s:>9,.0f}"
            )
    return "\n".join(lines)


def audits_ok(report: Report) -> bool:
    runs = [report.steady, report.burst, *(r for p in report.curve for r in (p.steady, p.burst))]
    return all(r.audit == "ok" for r in runs)


def run(args: argparse.Namespace) -> int:
    bench = checked("caldera bench batch", args, config)
    if bench is None:
        return 2
    settle()  # the collector as the batch-scheduler process has it (its launch settles it)
    return run_bench(
        bench,
        lambda url: measure(url, bench, lambda line: print(f"bench batch: {line}", file=sys.stderr, flush=True)),
        text,
        ok=audits_ok,
    )
