"""``caldera demo``: the system at work on a simulated cluster, then the audit's verdict.

What runs: a private redis-server (unless ``--redis-url``); as separate OS processes the
sharding controller (``caldera sharding``), the batch scheduler (``caldera
batch-scheduler``, a session every 500 ms) and the agent scheduler (``caldera
agent-scheduler``, with local Ray workers); and here the simulator (the kubelets) and a
workload: bursts of short agent pods for the agent scheduler, and GPU training jobs —
PodGroups of 1–8 pods that must start whole — in two queues (``research`` weight 1,
``prod`` weight 2) for the batch scheduler. Both schedulers commit through the binder,
racing for the same nodes in soft sharding mode.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import uvloop
from rich.console import Console
from rich.table import Table

from caldera.connect import client, redis_url
from caldera.demo_report import Sample, percentiles, write
from cluster import heartbeat
from cluster.audit import audit
from cluster.feed import Informer
from cluster.keys import Keys, Kind
from cluster.sim.cluster import SimCluster
from cluster.sim.pools import NodePool, pool_nodes
from cluster.sim.workload import make_pod, make_podgroup
from cluster.model import Queue
from cluster.store import Put, Store

AGENT = "agent-scheduler"
TRAINING = "volcano"
POOLS = [
    NodePool(name="gpu", count=64, resources={"cpu": 96, "memory": "768Gi", "nvidia.com/gpu": 8}),
    NodePool(name="cpu", count=176, resources={"cpu": 32, "memory": "128Gi"}),
    NodePool(name="warm", count=16, resources={"cpu": 32, "memory": "128Gi"}, labels={"node.volcano.sh/warmup": "true"}),
]
QUEUES = {"research": 1, "prod": 2}
SHARDS = "volcano:volcano:0.0:0.6:false:8:256,agent-scheduler:agent:0.6:1.0:true:16:256"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the system on a simulated cluster and report")
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of load (default: 30)")
    p.add_argument("--workers", type=int, default=2, help="agent scheduler workers (default: 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=".", help="folder for demo-report.json and demo-report.png (default: .)")
    p.set_defaults(run=run)


class Stats:
    def __init__(self) -> None:
        self.submitted = {AGENT: 0, TRAINING: 0}
        self.created: dict[str, tuple[str, float]] = {}
        self.bound: dict[str, float] = {}
        self.jobs: dict[str, list[str]] = {}  # training job -> its pods' uids
        self.queue_of: dict[str, str] = {}  # training job -> its queue

    def latencies(self, scheduler: str) -> list[float]:
        return [(self.bound[u] - t) * 1000 for u, (s, t) in self.created.items() if s == scheduler and u in self.bound]


async def workload(store: Store, stats: Stats, rng: random.Random, stop: asyncio.Event, started: float, duration: float) -> None:
    """Agent pods in bursts (seconds long) on a rising tide, and training gangs (GPUs, tens of seconds)."""
    n = 0
    while not stop.is_set():
        tide = min(1.0, (time.monotonic() - started) / max(duration * 0.6, 1.0))
        pods = []
        groups = []
        for _ in range(rng.randint(1, 2)):
            gpus, size = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 8])
            name, duration_s = f"train-{n}", rng.uniform(8, 25)
            queue = rng.choice(["research", "prod"])
            stats.queue_of[name] = queue
            groups.append(make_podgroup(name, min_member=size, queue=queue))
            gang = [make_pod(f"{name}-{i}", scheduler=TRAINING, duration=duration_s, group=name,
                             requests={"cpu": 8 * gpus, "memory": f"{64 * gpus}Gi", "nvidia.com/gpu": gpus})
                    for i in range(size)]
            stats.jobs[name] = [p.uid for p in gang]
            pods += gang
            n += 1
        for _ in range(int(rng.randint(100, 300) * (0.3 + tide))):
            pods.append(make_pod(f"agent-{n}", scheduler=AGENT, duration=rng.uniform(2, 8),
                                 requests={"cpu": rng.choice(["500m", "1", "2"]), "memory": "1Gi"}))
            n += 1
        await store.write([Put(g) for g in groups])
        await store.upsert_pods(pods)
        now = time.monotonic()
        for p in pods:
            stats.created[p.uid] = (p.scheduler_name, now)
            stats.submitted[p.scheduler_name] += 1
        await asyncio.sleep(0.5)


async def watch_bound(store: Store, stats: Stats, stop: asyncio.Event) -> None:
    informer = Informer(store, [Kind.POD], block_ms=100)
    async for update in informer.updates():
        now = time.monotonic()
        for uid, rec in update.pods.items():
            if rec is not None and rec.node and uid not in stats.bound:
                stats.bound[uid] = now
        if stop.is_set():
            informer.stop()


def spawn(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.Popen([sys.executable, "-m", "caldera", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> None:
    name = " ".join(str(a) for a in proc.args[3:4]) if isinstance(proc.args, list) else "process"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if needle in line:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {proc.stderr.read() if proc.stderr else ''}")
    raise RuntimeError(f"{name} not ready after {timeout:.0f}s")


def stop_process(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def sample(store: Store, stats: Stats, t: float, since: float) -> Sample:
    """What happened since ``since`` (pods/s and latency per scheduler) and the shards now."""
    nodes = await store.list_nodes()
    sizes: dict[str, int] = {}
    used: dict[str, list[int]] = {}
    for n in nodes:
        sizes[n.owner] = sizes.get(n.owner, 0) + 1
        u = used.setdefault(n.owner, [0, 0])
        u[0] += n.allocated.get("cpu", 0)
        u[1] += n.allocatable.get("cpu", 0)
    pods_per_s, p50, p99 = {}, {}, {}
    for scheduler in (AGENT, TRAINING):
        recent = [(stats.bound[u] - c) * 1000 for u, (s, c) in stats.created.items()
                  if s == scheduler and u in stats.bound and since <= stats.bound[u] < since + t]
        pods_per_s[scheduler] = round(len(recent) / max(t, 1e-9), 1)
        p = percentiles(recent)
        p50[scheduler], p99[scheduler] = p["p50_ms"], p["p99_ms"]
    return Sample(t=0.0, pods_per_s=pods_per_s, p50_ms=p50, p99_ms=p99, shard_nodes=sizes,
                  shard_cpu={k: round(v[0] / v[1], 3) if v[1] else 0.0 for k, v in used.items()})


async def shard_sizes(store: Store) -> dict[str, int]:
    sizes = {"volcano": 0, AGENT: 0, "": 0}
    for owner in (await store.owners()).values():
        sizes[owner] = sizes.get(owner, 0) + 1
    return sizes


async def main_async(url: str, args: argparse.Namespace, console: Console, procs: list[subprocess.Popen[str]]) -> int:
    rng = random.Random(args.seed)
    stats = Stats()
    keys = Keys("demo")
    async with client(url) as c:
        store = Store(c, keys)
        nodes = [n for pool in POOLS for n in pool_nodes(pool)]
        await store.upsert_nodes(nodes)
        await store.write([Put(msgspec.convert({"metadata": {"name": q}, "spec": {"weight": w}}, Queue))
                           for q, w in QUEUES.items()])
        console.print(f"cluster: {len(nodes)} nodes ({', '.join(f'{p.count} {p.name}' for p in POOLS)}); starting the sharding "
                      f"controller, the batch scheduler and the agent scheduler ({args.workers} Ray workers) as their own "
                      "processes…")
        common = ["--redis-url", url, "--cluster", keys.cluster, "--metrics-port", "0"]
        procs.append(spawn(["sharding", *common, "--scheduler-configs", SHARDS, "--shard-sync-period", "5s", "--min-dwell", "20s"]))
        procs.append(spawn(["batch-scheduler", *common, "--schedule-period", "500ms"]))
        procs.append(spawn(["agent-scheduler", *common, "--workers", str(args.workers)]))
        await asyncio.to_thread(wait_for_line, procs[0], "serving", 60)
        await asyncio.to_thread(wait_for_line, procs[1], "batch-scheduler: serving", 60)
        await asyncio.to_thread(wait_for_line, procs[2], "workers ready", 120)
        initial = await shard_sizes(store)
        console.print(f"shards at start: volcano {initial['volcano']}, agent-scheduler {initial[AGENT]}, unowned {initial['']}")
        stop = asyncio.Event()
        sim = SimCluster(store)
        started = time.monotonic()
        tasks = [asyncio.create_task(sim.run()), asyncio.create_task(workload(store, stats, rng, stop, started, args.duration)),
                 asyncio.create_task(watch_bound(store, stats, stop))]
        moves: list[dict[str, int]] = [initial]
        samples: list[Sample] = []
        interrupted = False
        try:
            last = time.monotonic()
            while time.monotonic() - started < args.duration:
                await asyncio.sleep(2)
                now = time.monotonic()
                taken = await sample(store, stats, now - last, last)
                samples.append(msgspec.structs.replace(taken, t=round(now - started, 1)))
                last = now
                sizes = await shard_sizes(store)
                moves.append(sizes)
                bound = {s: sum(1 for u, (sc, _) in stats.created.items() if sc == s and u in stats.bound) for s in (AGENT, TRAINING)}
                console.print(f"  t={time.monotonic() - started:4.0f}s  agent pods bound {bound[AGENT]:6d}/{stats.submitted[AGENT]:<6d} "
                              f"training pods placed {bound[TRAINING]:4d}/{stats.submitted[TRAINING]:<4d} "
                              f"shards volcano {sizes['volcano']:3d} agent {sizes[AGENT]:3d}  finished {sim.completed}")
        except asyncio.CancelledError:  # Ctrl-C or SIGTERM: stop everything, then report what happened so far
            interrupted = True
            console.print("interrupted: stopping the processes and writing the report so far")
        finally:
            figures = {b.component: b.stats for b in await heartbeat.beats(c, keys)}  # before the processes stop
            stop.set()
            sim.stop()
            for p in procs:
                await asyncio.to_thread(stop_process, p)
            _, stuck = await asyncio.wait(tasks, timeout=10)
            for t in stuck:
                t.cancel()
        problems = await audit(store)
    elapsed = max(time.monotonic() - started, 1e-9) if interrupted else args.duration
    agent_ms = np.array(stats.latencies(AGENT) or [0.0])
    train_ms = np.array(stats.latencies(TRAINING) or [0.0])
    started_jobs = sum(1 for uids in stats.jobs.values() if all(u in stats.bound for u in uids))
    moved = max(abs(m[AGENT] - initial[AGENT]) for m in moves)
    table = Table(title="caldera demo")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in [
        ("agent pods bound (agent scheduler)", f"{len(stats.latencies(AGENT)):,} of {stats.submitted[AGENT]:,}"),
        ("agent pods/s", f"{len(stats.latencies(AGENT)) / elapsed:,.0f}"),
        ("agent submit → bound p50 / p99 ms", f"{np.percentile(agent_ms, 50):.0f} / {np.percentile(agent_ms, 99):.0f}"),
        ("training pods placed (batch scheduler)", f"{len(stats.latencies(TRAINING)):,} of {stats.submitted[TRAINING]:,}"),
        ("training gangs started whole", f"{started_jobs:,} of {len(stats.jobs):,}"),
        ("training submit → bound p50 / p99 ms", f"{np.percentile(train_ms, 50):.0f} / {np.percentile(train_ms, 99):.0f}"),
        ("agent shard size: start → end (largest change)", f"{initial[AGENT]} → {moves[-1][AGENT]} ({moved})"),
        ("pods run to completion", f"{sim.completed:,}"),
        ("audit", "ok" if not problems else f"{len(problems)} violations"),
    ]:
        table.add_row(name, value)
    console.print(table)
    for line in problems[:20]:
        console.print(line)
    queues: dict[str, dict[str, int]] = {q: {"started": 0, "waiting": 0} for q in QUEUES}
    for job, uids in stats.jobs.items():
        queues[stats.queue_of[job]]["started" if all(u in stats.bound for u in uids) else "waiting"] += 1
    report = {
        "duration_s": elapsed,
        "schedulers": {name: {"pods_bound": len(stats.latencies(name)), "pods_submitted": stats.submitted[name],
                              "pods_per_s": round(len(stats.latencies(name)) / elapsed, 1),
                              **percentiles(stats.latencies(name))} for name in (AGENT, TRAINING)},
        "jobs": queues,
        "shards": {"start": initial, "end": moves[-1], "largest_agent_shard_change": moved},
        "pods_completed": sim.completed,
        "conflicts": {"agent-scheduler": {"true": figures.get("agent-scheduler", {}).get("conflicts", 0),
                                          "resolved": figures.get("agent-scheduler", {}).get("conflicts_resolved", 0)},
                      "volcano": {"true": figures.get("batch-scheduler", {}).get("conflicts", 0)},
                      "from_heartbeats_of": sorted(name for name, f in figures.items() if "conflicts" in f)},
        "audit": "ok" if not problems else problems,
    }
    json_path, png_path = write(Path(args.out), report, samples)
    console.print(f"report: {json_path} and {png_path}")
    if interrupted:
        return 130
    return 0 if not problems else 1


def run(args: argparse.Namespace) -> int:
    if args.duration <= 0 or args.workers < 1:
        print(f"caldera demo: error: --duration {args.duration}, --workers {args.workers} (expected positive numbers)")
        return 2
    console = Console()
    procs: list[subprocess.Popen[str]] = []
    try:
        with redis_url(args.redis_url) as url:
            return uvloop.run(main_async(url, args, console, procs))
    finally:
        for p in procs:
            stop_process(p)
