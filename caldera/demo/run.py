"""``caldera demo``: the whole system on a simulated cluster, live, then a report and the audit.

What runs: a private redis-server (unless ``--redis-url``); as separate OS processes the
sharding controller (``caldera sharding``), the batch scheduler (``caldera
batch-scheduler``, a session every 500 ms) and the agent scheduler (``caldera
agent-scheduler``, with local Ray workers); and here the simulator (the kubelets: pods
start when bound and end after their duration) and the workload (``--workload FILE``, by
default ``caldera/demo/workloads/default.yaml``: ~1,000 nodes in pools, training gangs in three
queues, bursts of agent pods on a rising load), or a replayed trace (``--trace``). Both
schedulers commit through the binder, racing for the same nodes in soft sharding mode.

The processes' output goes to ``<out>/demo-logs/<process>.log``; the summary says if any
of them logged a traceback. ``caldera bench mixed`` runs the same thing without the view.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from caldera._loop import run_loop
from caldera._store import client, redis_url
from caldera.demo import workload as workloads
from caldera.demo.processes import Child, Driver, Options, start_processes
from caldera.demo.report import (
    ConflictFigures,
    Conflicts,
    QueueJobs,
    Report,
    Sample,
    SchedulerTotals,
    Shards,
    write,
)
from caldera.demo.tracker import Tracker
from caldera.demo.view import Frame, View, summary
from caldera.demo.workload import AGENT, VOLCANO, WorkloadDriver
from cluster.model.devices import CARD_PREFIX, is_card_resource
from cluster.model.resources import CPU, GPU, Resources
from cluster.model.text import one_line
from cluster.runtime import heartbeat
from cluster.sim.cluster import SimCluster
from cluster.store.audit import audit
from cluster.store.keys import Keys
from cluster.store.store import Store

if TYPE_CHECKING:
    from rich.console import Console

SAMPLE_EVERY_S = 2.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the whole system on a simulated cluster, live, and report")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load (default: 60)")
    p.add_argument(
        "--workload", default=None, help="workload YAML (default: the packaged caldera/demo/workloads/default.yaml)"
    )
    p.add_argument("--trace", default=None, help="replay this OpenB-format pods CSV instead of a workload")
    p.add_argument("--trace-nodes", default=None, help="the trace's nodes CSV (with --trace)")
    p.add_argument(
        "--speedup",
        type=float,
        default=0.0,
        help="trace seconds per second; 0 = fit the trace into 90%% of --duration (default: 0)",
    )
    p.add_argument(
        "--trace-schedulers",
        default=None,
        help="QOS=SCHEDULER,...,*=SCHEDULER for trace pods (default: LS=agent-scheduler,*=volcano)",
    )
    p.add_argument("--workers", type=int, default=2, help="agent scheduler workers (default: 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--out", default=".", help="folder for demo-report.json, demo-report.png and demo-logs/ (default: .)"
    )
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.set_defaults(run=run)


# -- watching the cluster --------------------------------------------------------------------


class Monitor:
    """Once a second: shard sizes and allocation (from the nodes) and the processes' heartbeats."""

    def __init__(self, store: Store, keys: Keys) -> None:
        self.store, self.keys = store, keys
        self.owners: dict[str, str] = {}
        self.start_sizes: dict[str, int] = {}
        self.shards: dict[str, dict[str, float]] = {}
        self.figures: dict[str, dict[str, Any]] = {}
        self.moves = 0
        self.largest_change: dict[str, int] = {}

    async def poll(self) -> None:
        nodes = await self.store.list_nodes()
        shards: dict[str, dict[str, float]] = {}
        for n in nodes:
            s = shards.setdefault(
                n.owner, {"nodes": 0, "cpu_used": 0, "cpu": 0, "gpu_used": 0, "gpus": 0, "fragment": 0.0}
            )
            s["fragment"] += fragment_gpus(n.allocatable, n.allocated)
            s["nodes"] += 1
            s["cpu_used"] += n.allocated.get(CPU, 0)
            s["cpu"] += n.allocatable.get(CPU, 0)
            s["gpu_used"] += n.allocated.get(GPU, 0)
            s["gpus"] += n.allocatable.get(GPU, 0)
            if self.owners and self.owners.get(n.name, n.owner) != n.owner:
                self.moves += 1
            self.owners[n.name] = n.owner
        self.shards = {
            name: {
                "nodes": s["nodes"],
                "cpu": s["cpu_used"] / s["cpu"] if s["cpu"] else 0.0,
                "gpu": s["gpu_used"] / s["gpus"] if s["gpus"] else 0.0,
                "gpus": s["gpus"],
                "fragment": s["fragment"] / s["gpus"] if s["gpus"] else 0.0,
            }
            for name, s in sorted(shards.items())
        }
        if not self.start_sizes:
            self.start_sizes = {name: int(s["nodes"]) for name, s in self.shards.items()}
        for name, s in self.shards.items():
            change = abs(int(s["nodes"]) - self.start_sizes.get(name, 0))
            self.largest_change[name] = max(self.largest_change.get(name, 0), change)
        self.figures = {b.component: b.stats for b in await heartbeat.beats(self.store.client, self.keys)}

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.poll()
            try:
                async with asyncio.timeout(1.0):
                    await stop.wait()
            except TimeoutError:
                pass

    def conflicts(self) -> dict[str, Conflicts]:
        agent, batch = self.figures.get("agent-scheduler", {}), self.figures.get("batch-scheduler", {})
        return {
            AGENT: Conflicts(true=int(agent.get("conflicts", 0)), resolved=int(agent.get("conflicts_resolved", 0))),
            VOLCANO: Conflicts(true=int(batch.get("conflicts", 0)), resolved=0),
        }


def queue_rows(tracker: Tracker, monitor: Monitor, names: list[str]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    seen = monitor.figures.get("batch-scheduler", {}).get("queues", {})
    for name, jobs in tracker.queues(names).items():
        q = seen.get(name, {})
        rows[name] = {
            **jobs,
            "weight": q.get("weight", ""),
            "capability_gpu": q.get("capability", {}).get(GPU, ""),
            "allocated_gpu": q.get("allocated", {}).get(GPU, 0),
            "deserved_gpu": q.get("deserved", {}).get(GPU, "—"),
        }
    return rows


def frame(tracker: Tracker, monitor: Monitor, driver: Driver, t: float, duration: float) -> Frame:
    lately = tracker.lately()
    conflicts = monitor.conflicts()
    agent_queue = monitor.figures.get("agent-scheduler", {}).get("queue")  # urgent, active, backoff and in flight
    depth = {
        AGENT: sum(agent_queue.values()) if isinstance(agent_queue, dict) else None,
        VOLCANO: monitor.figures.get("batch-scheduler", {}).get("pending"),
    }  # pods waiting at the last session
    schedulers = {
        name: {
            **msgspec.structs.asdict(lately[name]),
            "bound": len(tracker.latencies[name]),
            "pending": tracker.pending(name),
            "queue": depth.get(name),
            "conflicts": conflicts[name].true,
            "resolved": conflicts[name].resolved,
        }
        for name in tracker.schedulers
    }
    return Frame(
        t=t,
        duration=duration,
        title=driver.describe(),
        schedulers=schedulers,
        queues=queue_rows(tracker, monitor, driver.queues()),
        shards=monitor.shards,
        moves=monitor.moves,
        completed=tracker.completed,
    )


# -- the run ---------------------------------------------------------------------------------


class Outcome(msgspec.Struct, kw_only=True):
    report: Report
    samples: list[Sample]
    interrupted: bool


async def run_system(url: str, make_driver: Any, options: Options, view: View) -> Outcome:
    """Start the processes, drive the load for ``options.duration``, stop everything, audit; the figures."""
    children: list[Child] = []
    try:
        return await _run_system(url, make_driver, options, view, children)
    finally:
        for child in children:
            await asyncio.to_thread(child.stop)


async def _run_system(url: str, make_driver: Any, options: Options, view: View, children: list[Child]) -> Outcome:
    keys = Keys("demo")
    tracker = Tracker([AGENT, VOLCANO])
    logs = options.out / "demo-logs"
    logs.mkdir(parents=True, exist_ok=True)
    async with client(url) as c:
        store = Store(c, keys)
        driver: Driver = make_driver(store, tracker)
        await driver.prepare()
        view.say(
            f"cluster: {driver.describe()}; starting the sharding controller, the batch scheduler and the agent "
            f"scheduler ({options.workers} Ray workers) as their own processes (logs in {logs})…"
        )
        await asyncio.to_thread(start_processes, children, url, keys, driver, options, logs)
        monitor = Monitor(store, keys)
        await monitor.poll()
        view.say("shards at start: " + ", ".join(f"{k or 'unowned'} {v}" for k, v in monitor.start_sizes.items()))
        stop = asyncio.Event()
        sim = SimCluster(store)
        tasks = [
            asyncio.create_task(sim.run()),
            asyncio.create_task(driver.run(stop)),
            asyncio.create_task(tracker.watch(store, stop)),
            asyncio.create_task(monitor.run(stop)),
        ]
        samples: list[Sample] = []
        interrupted = False
        started = time.monotonic()
        try:
            with view:
                next_sample = started + SAMPLE_EVERY_S
                while (now := time.monotonic()) - started < options.duration:
                    view.show(frame(tracker, monitor, driver, now - started, options.duration))
                    if now >= next_sample:
                        next_sample += SAMPLE_EVERY_S
                        samples.append(sample(tracker, monitor, now - started))
                    await asyncio.sleep(0.25)
        except asyncio.CancelledError:  # Ctrl-C or SIGTERM: stop everything, then report what happened so far
            interrupted = True
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # handled here: the clean-up's own timeouts must work as timeouts
            view.say("interrupted: stopping the processes and writing the report so far")
        finally:
            elapsed = time.monotonic() - started
            await monitor.poll()  # the heartbeats, before the processes stop
            stop.set()
            sim.stop()
            for child in children:
                await asyncio.to_thread(child.stop)
            _, stuck = await asyncio.wait(tasks, timeout=10)
            for t in stuck:
                t.cancel()
        problems = await audit(store)
    conflicts = monitor.conflicts()
    report = Report(
        duration_s=round(elapsed, 1),
        cluster=driver.describe(),
        schedulers=msgspec.convert(tracker.totals(elapsed), dict[str, SchedulerTotals]),
        jobs=msgspec.convert(tracker.queues(driver.queues()), dict[str, QueueJobs]),
        shards=Shards(
            start=monitor.start_sizes,
            end={k: int(v["nodes"]) for k, v in monitor.shards.items()},
            moves=monitor.moves,
            largest_change=monitor.largest_change,
        ),
        pods_completed=tracker.completed,
        conflicts=ConflictFigures(
            agent=conflicts[AGENT],
            volcano=conflicts[VOLCANO],
            from_heartbeats_of=sorted(n for n, f in monitor.figures.items() if "conflicts" in f),
        ),
        tracebacks=[c.name for c in children if c.traceback()],
        audit=problems if problems else "ok",
    )
    return Outcome(report=report, samples=samples, interrupted=interrupted)


def sample(tracker: Tracker, monitor: Monitor, t: float) -> Sample:
    lately = tracker.lately()
    return Sample(
        t=round(t, 1),
        pods_per_s={k: v.pods_per_s for k, v in lately.items()},
        p50_ms={k: v.p50_ms for k, v in lately.items()},
        p99_ms={k: v.p99_ms for k, v in lately.items()},
        shard_nodes={k: int(v["nodes"]) for k, v in monitor.shards.items()},
        shard_cpu={k: round(v["cpu"], 3) for k, v in monitor.shards.items()},
        shard_gpu={k: round(v["gpu"], 3) for k, v in monitor.shards.items() if v["gpus"]},
        shard_fragment={k: round(v["fragment"], 4) for k, v in monitor.shards.items() if v["gpus"]},
    )


def fragment_gpus(allocatable: Resources, allocated: Resources) -> float:
    """GPUs free on cards partly in use (in cards): room a whole-GPU pod cannot use."""
    total = 0.0
    for name, room in allocatable.items():
        if is_card_resource(name) and "." not in name[len(CARD_PREFIX) :] and room > 0:
            used = allocated.get(name, 0)
            if 0 < used < room:
                total += (room - used) / room
    return total


def make_driver(args: argparse.Namespace) -> Any:
    """A function of (store, tracker) giving the driver the flags ask for; ValueError on bad input."""
    if args.trace or args.trace_nodes:
        if not (args.trace and args.trace_nodes):
            raise ValueError("--trace and --trace-nodes go together (a pods CSV and its nodes CSV)")
        from caldera.demo.replay import TraceDriver, load_trace

        trace = load_trace(args.trace, args.trace_nodes, args.trace_schedulers, args.speedup, args.duration)
        return lambda store, tracker: TraceDriver(trace, store, tracker)
    w = workloads.load(args.workload)
    return lambda store, tracker: WorkloadDriver(w, store, tracker, seed=args.seed, duration=args.duration)


def run(args: argparse.Namespace) -> int:
    if args.duration <= 0 or args.workers < 1 or args.speedup < 0:
        print(
            f"caldera demo: error: --duration {args.duration:g}, --workers {args.workers}, --speedup {args.speedup:g} "
            "(expected a positive duration, at least one worker, a speedup of 0 or more)",
            file=sys.stderr,
        )
        return 2
    if (args.trace or args.trace_nodes) and args.workload:
        print(
            "caldera demo: error: --workload and --trace: give one (a workload description or a trace to replay)",
            file=sys.stderr,
        )
        return 2
    if args.trace_schedulers and not args.trace:
        print("caldera demo: error: --trace-schedulers needs --trace", file=sys.stderr)
        return 2
    try:
        driver = make_driver(args)
    except ValueError as e:
        print(f"caldera demo: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    from rich.console import Console  # drawing needs rich; the rest of caldera does not

    console = Console()
    options = Options(duration=args.duration, workers=args.workers, out=Path(args.out))
    with redis_url(args.redis_url) as url:
        return run_loop(demo(url, driver, options, console))


async def demo(url: str, driver: Any, options: Options, console: Console) -> int:
    """The run, its summary, the report files; the exit status.

    Ctrl-C or SIGTERM (see caldera._loop) cancels the run: the processes are
    stopped and the report so far is written.
    """
    try:
        outcome = await run_system(url, driver, options, View(console))
    except asyncio.CancelledError:  # before the run began; every process started is stopped
        console.print("caldera demo: interrupted while starting; everything it started is stopped")
        return 130
    report = outcome.report
    console.print(summary(report))
    for problem in (report.audit if report.audit != "ok" else [])[:20]:
        console.print(problem, highlight=False)
    json_path, png_path = await asyncio.to_thread(write, options.out, report, outcome.samples)
    console.print(f"caldera audit: {'ok' if report.audit == 'ok' else 'violations (above)'}")
    console.print(f"report: {json_path} and {png_path}")
    if outcome.interrupted:
        return 130
    return 0 if report.ok else 1
