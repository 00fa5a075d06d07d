"""``caldera demo`` — for now, the foundation at work: the simulator fills a cluster
through the binder, then the audit checks it.

Until the sharding controller and the two schedulers exist (later issues), the pods are
placed by a few concurrent *placers*: small greedy loops (first fit by most allocated
cpu, among the top few at random) that each keep their own view of the nodes from the
change feed and commit through the binder, so that their commits race as real schedulers'
would. What this shows is the binder: conflicts resolved and retried, no node
over-committed, and the audit's verdict at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import uvloop

import numpy as np
from rich.console import Console
from rich.table import Table

from binder.bind import bind_committed
from binder.commit import Binder
from binder.results import Committed, Conflict, Placement
from caldera.connect import client, redis_url
from cluster.audit import audit
from cluster.feed import Informer
from cluster.keys import Keys, Kind
from cluster.records import Binding
from cluster.sim.cluster import SimBindTarget, SimCluster
from cluster.sim.pools import NodePool, pool_nodes
from cluster.sim.workload import make_pod
from cluster.snapshot import NodeColumns
from cluster.store import Store

SCHEDULER = "caldera-demo"
POOLS = [
    NodePool(name="gpu", count=64, resources={"cpu": 96, "memory": "768Gi", "nvidia.com/gpu": 8}),
    NodePool(name="cpu", count=192, resources={"cpu": 32, "memory": "128Gi"}),
]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the system on a simulated cluster and report")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of load (default: 20)")
    p.add_argument("--placers", type=int, default=4, help="concurrent placers racing for nodes (default: 4)")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(run=run)


class Stats:
    def __init__(self) -> None:
        self.submitted = 0
        self.committed = 0
        self.resolved = 0
        self.conflicts = 0
        self.latencies: list[float] = []


async def placer(store: Store, index: int, count: int, stats: Stats, created: dict[str, float], rng: random.Random,
                 stop: asyncio.Event) -> None:
    """One greedy placer: takes its share of the pending pods and commits them in batches."""
    binder = Binder(store.client, store.keys, SCHEDULER)
    target = SimBindTarget(store)
    view = NodeColumns()
    informer = Informer(store, [Kind.NODE], block_ms=50)
    updates = informer.updates()
    view.apply(await anext(updates))

    async def follow() -> None:
        async for update in updates:
            view.apply(update)

    follower = asyncio.create_task(follow())
    try:
        while not stop.is_set():
            uids = [u for u in await store.pending(SCHEDULER) if hash(u) % count == index][:64]
            if not uids:
                await asyncio.sleep(0.02)
                continue
            pods = await store.get_pods(uids)
            placements = []
            for rec in pods.values():
                ok = np.flatnonzero(view.fits(rec.request))
                if not len(ok):
                    continue
                cpu = view.allocated[0, ok] / np.maximum(view.allocatable[0, ok], 1)
                top = ok[np.argsort(-cpu)[:3]]
                i = int(rng.choice(top))
                placements.append(Placement(uid=rec.uid, node=view.names[i], request=rec.request, version=int(view.version[i])))
                view.add(view.names[i], rec.request)
            if not placements:
                await asyncio.sleep(0.05)
                continue
            results = await binder.commit(placements)
            bindings = []
            for p, r in zip(placements, results):
                if isinstance(r, Committed):
                    stats.committed += 1
                    stats.resolved += r.resolved
                    stats.latencies.append(time.monotonic() - created.get(p.uid, time.monotonic()))
                    rec = pods[p.uid]
                    bindings.append(Binding(uid=p.uid, namespace=rec.namespace, name=rec.name, node=p.node))
                elif isinstance(r, Conflict):
                    stats.conflicts += 1
                    view.set_figures(r.node, r.allocatable, r.allocated, r.version, r.unschedulable)
            if bindings:
                await bind_committed(binder, target, bindings)
    finally:
        informer.stop()
        await follower


async def workload(store: Store, stats: Stats, created: dict[str, float], rng: random.Random, stop: asyncio.Event) -> None:
    """Training pods (GPUs, tens of seconds) and bursts of agent pods (cpu, seconds)."""
    n = 0
    while not stop.is_set():
        pods = []
        for _ in range(rng.randint(5, 20)):
            gpus = rng.choice([1, 2, 4, 8])
            pods.append(make_pod(f"train-{n}", scheduler=SCHEDULER, duration=rng.uniform(5, 20),
                                 requests={"cpu": 8 * gpus, "memory": f"{64 * gpus}Gi", "nvidia.com/gpu": gpus}))
            n += 1
        for _ in range(rng.randint(50, 200)):
            pods.append(make_pod(f"agent-{n}", scheduler=SCHEDULER, duration=rng.uniform(1, 5),
                                 requests={"cpu": rng.choice(["250m", "500m", "1", "2"]), "memory": "1Gi"}))
            n += 1
        now = time.monotonic()
        for p in pods:
            created[p.uid] = now
        await store.upsert_pods(pods)
        stats.submitted += len(pods)
        await asyncio.sleep(0.25)


async def main_async(url: str, args: argparse.Namespace, console: Console) -> int:
    rng = random.Random(args.seed)
    stats, created = Stats(), {}  # type: ignore[var-annotated]
    async with client(url) as c:
        store = Store(c, Keys("demo"))
        nodes = [n for pool in POOLS for n in pool_nodes(pool)]
        await store.upsert_nodes(nodes)
        console.print(f"cluster: {len(nodes)} nodes ({', '.join(f'{p.count} {p.name}' for p in POOLS)}); "
                      f"{args.placers} placers racing through the binder for {args.duration:.0f}s")
        sim = SimCluster(store)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(sim.run()), asyncio.create_task(workload(store, stats, created, rng, stop))]
        tasks += [asyncio.create_task(placer(store, i, args.placers, stats, created, random.Random(args.seed + i), stop))
                  for i in range(args.placers)]
        start = time.monotonic()
        try:
            while time.monotonic() - start < args.duration:
                await asyncio.sleep(2)
                console.print(f"  t={time.monotonic() - start:4.0f}s submitted {stats.submitted:6d} committed {stats.committed:6d} "
                              f"running/finished {sim.started:6d}/{sim.completed:6d} conflicts resolved {stats.resolved} true {stats.conflicts}")
        finally:
            stop.set()
            sim.stop()
            _, stuck = await asyncio.wait(tasks, timeout=5)
            for t in stuck:
                console.print(f"warning: task {t.get_name()} did not stop within 5 s; cancelling it")
                t.cancel()
            for t in tasks:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
        problems = await audit(store)
    lat = np.array(stats.latencies or [0.0]) * 1000
    table = Table(title="caldera demo (foundation preview: placers + binder + simulator)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    elapsed = args.duration
    for name, value in [
        ("pods submitted", f"{stats.submitted:,}"),
        ("pods committed", f"{stats.committed:,}"),
        ("commits/s", f"{stats.committed / elapsed:,.0f}"),
        ("submit → commit p50 / p99 ms", f"{np.percentile(lat, 50):.1f} / {np.percentile(lat, 99):.1f}"),
        ("conflicts resolved (still fit)", f"{stats.resolved:,}"),
        ("true conflicts (retried)", f"{stats.conflicts:,}"),
        ("pods run to completion", f"{sim.completed:,}"),
        ("audit", "ok" if not problems else f"{len(problems)} violations"),
    ]:
        table.add_row(name, value)
    console.print(table)
    for line in problems[:20]:
        console.print(line)
    return 0 if not problems else 1


def run(args: argparse.Namespace) -> int:
    if args.duration <= 0 or args.placers < 1:
        print(f"caldera demo: error: --duration {args.duration} / --placers {args.placers} (expected positive numbers)")
        return 2
    console = Console()
    with redis_url(args.redis_url) as url:
        return uvloop.run(main_async(url, args, console))
