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
of them logged a traceback. They are supervised (caldera.demo.supervisor): one that dies
is restarted, and its death is named in the view, the summary and the report. Every
``--sample-every`` the processes' RSS and open files are sampled and the store audited
(caldera.demo.resources). ``caldera bench mixed`` runs the same thing without the view.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import msgspec

from caldera._loop import run_loop
from caldera._store import client, redis_url
from caldera.demo import config as flags
from caldera.demo.monitor import Monitor, p50_ms
from caldera.demo.processes import Driver, Options, demo_env, start_processes, wait_ready
from caldera.demo.report import (
    ConflictFigures,
    QueueJobs,
    Report,
    Sample,
    SchedulerTotals,
    Shards,
    StageTotal,
    write,
)
from caldera.demo.resources import AuditSample, Sampler, Usage, cpu_use, growth
from caldera.demo.supervisor import Supervisor
from caldera.demo.tracker import Tracker
from caldera.demo.view import Frame, View, cpu_table, growth_table, summary, told
from caldera.demo.workload import AGENT, VOLCANO
from caldera.flag_config import checked
from cluster.model.resources import GPU
from cluster.sim.cluster import SimCluster
from cluster.store.audit import audit
from cluster.store.client import StoreError
from cluster.store.keys import Keys
from cluster.store.store import Store

if TYPE_CHECKING:
    from rich.console import Console

SAMPLE_EVERY_S = 2.0  # the throughput and shard samples (the resource sampler: --sample-every)

HARNESS_NICE = 10
"""Once the processes it demonstrates serve, ``caldera demo``'s own thread — the load, the simulated kubelets
and API, the tracker, the monitor — lowers its CPU priority by this much (``os.nice``: that thread and
those it starts after; the children are started on the supervisor's own thread and keep theirs). On
two cores the demo's process took more CPU than any scheduler (2.8–3.3 CPU-s of every 15), much of it
in the agent bursts, beside the agent path; in a cluster the kubelets and the load are on other
machines. Alternated with the demo at normal priority, six pairs in two sittings: agent pods' p50
47 / 40 / 41 / 46 / 49 / 38 → 41 / 36 / 37 / 42 / 34 / 37 ms, p99 107 / 87 / 124 / 78 / 122 / 77 →
79 / 92 / 82 / 96 / 66 / 73 ms. Latency is counted as before: from just before the demo's write of a pod to the
store's time of the write that bound it, so a demo slower to write counts against the schedulers."""


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


def frame(
    tracker: Tracker, monitor: Monitor, driver: Driver, supervisor: Supervisor, t: float, duration: float
) -> Frame:
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
        restarts=[told(r) for r in supervisor.restarts],
    )


# -- the run ---------------------------------------------------------------------------------


class Outcome(msgspec.Struct, kw_only=True):
    report: Report
    samples: list[Sample]
    usage: list[Usage]
    audits: list[AuditSample]
    interrupted: bool


async def run_system(url: str, make_driver: Any, options: Options, view: View) -> Outcome:
    """Start the processes, drive the load for ``options.duration``, stop everything, audit; the figures.

    The processes are supervised: one that dies is restarted (caldera.demo.supervisor), and
    named in the view, the summary and the report."""
    logs = options.out / "demo-logs"
    supervisor = Supervisor(logs, env=demo_env())
    try:
        return await _run_system(url, make_driver, options, view, supervisor)
    finally:
        await asyncio.to_thread(supervisor.stop_all)


async def _run_system(url: str, make_driver: Any, options: Options, view: View, supervisor: Supervisor) -> Outcome:
    keys = Keys("demo")
    tracker = Tracker([AGENT, VOLCANO])
    logs = supervisor.logs
    async with client(url) as c:
        store = Store(c, keys)
        driver: Driver = make_driver(store, tracker)
        await driver.prepare()
        workers = f"{options.workers} Ray workers" if options.workers else "Ray workers, one per core beyond one"
        view.say(
            f"cluster: {driver.describe()}; starting the sharding controller, the batch scheduler and the agent "
            f"scheduler ({workers}) as their own processes (logs in {logs})…"
        )
        start_processes(supervisor, url, keys, driver, options)  # on the supervisor's own thread (see Supervisor)
        await asyncio.to_thread(wait_ready, supervisor)
        if options.nice:
            os.nice(options.nice)
        monitor = Monitor(store, keys)
        await monitor.start()
        await monitor.poll()
        view.say("shards at start: " + ", ".join(f"{k or 'unowned'} {v}" for k, v in monitor.start_sizes.items()))
        stop = asyncio.Event()
        sim = SimCluster(store, observers=[tracker.seen])  # one read of the pods for both
        sampler = Sampler(store)
        started = time.monotonic()
        supervisor.epoch = started  # deaths are told in seconds of the run
        tasks = [
            asyncio.create_task(sim.run(), name="the simulator"),
            asyncio.create_task(driver.run(stop), name="the load"),
            asyncio.create_task(monitor.run(stop), name="the monitor"),
            asyncio.create_task(supervisor.watch(stop), name="the supervisor"),
            asyncio.create_task(sampler.run(stop, supervisor, started, options.sample_every_s), name="the sampler"),
        ]
        samples: list[Sample] = []
        interrupted = False
        try:
            with view:
                next_sample = started + SAMPLE_EVERY_S
                while (now := time.monotonic()) - started < options.duration:
                    if died := failures(tasks):  # a part of the demo itself died: what follows would mislead
                        view.say(f"stopping early: {'; '.join(died)}")
                        break
                    view.show(frame(tracker, monitor, driver, supervisor, now - started, options.duration))
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
            with contextlib.suppress(StoreError):
                await monitor.poll()  # the heartbeats, before the processes stop
            stop.set()
            sim.stop()
            await asyncio.to_thread(supervisor.stop_all)
            _, stuck = await asyncio.wait(tasks, timeout=10)
            for t in stuck:
                t.cancel()
        try:
            problems = await audit(store)
        except StoreError as e:
            problems = [f"the audit did not finish: {type(e).__name__}: {e}"]
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
        tracebacks=supervisor.tracebacks(),
        audit=problems if problems else "ok",
        restarts=list(supervisor.restarts),
        audits_failed=sum(a.ok is False for a in sampler.audits),
        audits_unfinished=sum(a.ok is None for a in sampler.audits),
        failed=failures(tasks),
        growth=growth(sampler.usage, driver.steady_after),
        warmup_share=driver.steady_after,
        cpu=cpu_use(sampler.usage),
        agent_stages={
            name: StageTotal.of(f) for name, f in {"write": tracker.written(AGENT), **monitor.stages()}.items()
        },
    )
    return Outcome(report=report, samples=samples, usage=sampler.usage, audits=sampler.audits, interrupted=interrupted)


def failures(tasks: list[asyncio.Task[Any]]) -> list[str]:
    """The demo's own tasks that died, each with what killed it."""
    return [
        f"{t.get_name()} died: {type(e).__name__}: {e}"
        for t in tasks
        if t.done() and not t.cancelled() and (e := t.exception()) is not None
    ]


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
        agent_stage_p50_ms={"write": p50_ms(tracker.written_lately(AGENT)), **monitor.stages_lately()},
    )


def add_parser(sub: Any) -> None:
    flags.add_parser(sub, run)


def run(args: argparse.Namespace) -> int:
    parsed = checked("caldera demo", args, flags.parse)
    if parsed is None:
        return 2
    config, driver = parsed
    try:
        config.out.mkdir(parents=True, exist_ok=True)  # before anything starts: a folder that cannot be made stops here
    except OSError as e:
        print(f"caldera demo: error: --out {config.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    from rich.console import Console  # drawing needs rich; the rest of caldera does not

    console = Console()
    options = Options(
        duration=config.duration,
        workers=config.workers,
        out=config.out,
        sample_every=config.sample_every_s,
        nice=HARNESS_NICE,
    )
    with redis_url(config.redis_url) as url:
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
    if report.growth:
        console.print(growth_table(report))
    if report.cpu:
        console.print(cpu_table(report))
    for problem in (report.audit if report.audit != "ok" else [])[:20]:
        console.print(problem, highlight=False)
    paths = await asyncio.to_thread(write, options.out, report, outcome.samples, outcome.usage, outcome.audits)
    console.print(f"caldera audit: {'ok' if report.audit == 'ok' else 'violations (above)'}")
    console.print(f"report: {', '.join(str(p) for p in paths)}")
    if outcome.interrupted:
        return 130
    return 0 if report.ok else 1
