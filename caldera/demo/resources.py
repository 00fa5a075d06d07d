"""What the system's processes hold and use over a run: RSS, open files and CPU of each, and the audit, sampled.

Every ``--sample-every`` the demo samples, with psutil, every process of the system: the
redis-server (found by the pid its ``INFO`` gives, when it runs on this machine), the
sharding controller, the batch and agent schedulers, each process the agent scheduler
started — Ray's ``gcs_server`` and ``raylet``, its Python helpers by script, its worker
actors by actor class (``ray::WorkerActor``; several of one name are ``#1``, ``#2``… by
age) — and the demo itself; and it runs the audit (``caldera audit``'s check) on the store,
recording its verdict. Both go into ``demo-report.json`` (``resources``, ``audits``); the
RSS, open files and CPU per process are drawn into ``demo-resources.png``, and each process's CPU
from its first sample to its last (:func:`cpu_use`) is the report's ``cpu``: where a run's CPU went,
process by process — on a machine of few cores the schedulers share it with Redis and the demo's own
stand-ins for the cluster, and the agent path's latency follows the CPU a burst takes across them all.

Growth, per process, is measured after a warm-up: the first 20% of the run (to its last
sample), or, for a workload whose load rises (its ``ramp``), until the load stops rising
(the default workload's: the first 60%) — memory that follows the pods alive grows with
the load, and is no leak. It is the median of the last three samples over the median of
the first three after the warm-up (of two, or one, when there are fewer than six), so one
noisy sample moves neither end.
A soak (``caldera demo --duration 30m --rate 2``) is held to no growth beyond 5% this way.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Mapping
from pathlib import Path

import msgspec
import psutil

from caldera.demo.supervisor import Supervisor
from cluster.store.audit import audit
from cluster.store.client import StoreError
from cluster.store.pause import pause
from cluster.store.store import Store

WARMUP_SHARE = 0.2
MIB = 1024 * 1024


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """One process at one sample."""

    t_s: float
    process: str
    rss_mb: float
    fds: int
    cpu_s: float = 0.0  # the CPU (user and system) the process has used since it started, in seconds


class AuditSample(msgspec.Struct, frozen=True, kw_only=True):
    t_s: float
    ok: bool | None  # None: the audit did not finish (``error`` says why)
    violations: list[str]  # the first 20 lines, when not ok
    error: str = ""


class CpuUse(msgspec.Struct, frozen=True, kw_only=True):
    """One process's CPU from its first sample to its last: seconds of CPU, and their mean in cores."""

    process: str
    cpu_s: float
    cores: float


class Growth(msgspec.Struct, frozen=True, kw_only=True):
    """One process from the end of the warm-up to the end of the run (medians of up to three samples each)."""

    process: str
    rss_mb: tuple[float, float]
    rss_pct: float
    fds: tuple[float, float]
    fds_pct: float


def default_period(duration: float) -> float:
    """Sampling every tenth of the run, at least every 60 s and at most every 2 s."""
    return min(60.0, max(2.0, duration / 10))


def role(p: psutil.Process) -> str:
    """What a process the agent scheduler started is: Ray's binary, its Python helper's script, or its actor."""
    try:
        cmd = p.cmdline()
        name = p.name()
    except psutil.Error:
        return "?"
    if cmd and cmd[0].startswith("ray::"):
        return cmd[0].split(".")[0].split()[0]  # ray::WorkerActor.serve → ray::WorkerActor
    script = next((os.path.basename(a)[:-3] for a in cmd[1:] if a.endswith(".py")), "")
    return f"ray {script}" if script else name


def system(named: Mapping[str, int | None], redis_pid: int | None) -> dict[str, psutil.Process]:
    """Every process of the system, by a name that holds across samples."""
    found: dict[str, psutil.Process] = {"caldera demo": psutil.Process()}
    if redis_pid is not None:
        try:
            redis = psutil.Process(redis_pid)
            if "redis" in redis.name():
                found["redis-server"] = redis
        except psutil.Error:
            pass
    for name, pid in named.items():
        if pid is None:
            continue
        try:
            top = psutil.Process(pid)
            below = top.children(recursive=True)
        except psutil.Error:
            continue
        found[name] = top
        by_role: dict[str, list[psutil.Process]] = {}
        for p in below:
            by_role.setdefault(role(p), []).append(p)
        for r, procs in by_role.items():
            if len(procs) == 1:
                found[r] = procs[0]
                continue
            for i, p in enumerate(sorted(procs, key=_age), start=1):
                found[f"{r} #{i}"] = p
    return found


def _age(p: psutil.Process) -> float:
    try:
        return float(p.create_time())
    except psutil.Error:
        return 0.0


def measure(processes: Mapping[str, psutil.Process], t: float) -> list[Usage]:
    out = []
    for name, p in processes.items():
        try:
            with p.oneshot():
                cpu = p.cpu_times()
                out.append(
                    Usage(
                        t_s=round(t, 1),
                        process=name,
                        rss_mb=round(p.memory_info().rss / MIB, 1),
                        fds=p.num_fds(),
                        cpu_s=round(cpu.user + cpu.system, 3),
                    )
                )
        except psutil.Error:  # gone between listing and reading
            continue
    return out


async def redis_pid(store: Store) -> int | None:
    try:
        info = await store.client.info("server")
        return int(info["process_id"])
    except (StoreError, KeyError, ValueError):  # a Redis that does not say: its process is not sampled
        return None


class Sampler:
    """Samples the system's processes (the supervised ones by pid, and what they started) and audits the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.usage: list[Usage] = []
        self.audits: list[AuditSample] = []
        self.redis: int | None = None

    async def sample(self, t: float, pids: Mapping[str, int | None]) -> None:
        if self.redis is None:
            self.redis = await redis_pid(self.store)
        procs = await asyncio.to_thread(system, pids, self.redis)
        self.usage += await asyncio.to_thread(measure, procs, t)
        try:
            problems = await audit(self.store)
        except StoreError as e:  # e.g. a store so full that the audit's dump outlasts the client's timeout
            self.audits.append(AuditSample(t_s=round(t, 1), ok=None, violations=[], error=f"{type(e).__name__}: {e}"))
            return
        self.audits.append(AuditSample(t_s=round(t, 1), ok=not problems, violations=problems[:20]))

    async def run(self, stop: asyncio.Event, supervisor: Supervisor, started: float, every_s: float) -> None:
        """A sample at once, then every ``every_s`` until ``stop``; times in seconds since ``started``."""
        due = started
        while not stop.is_set():
            await self.sample(time.monotonic() - started, {n: supervisor.pid(n) for n in supervisor.names()})
            due += every_s
            await pause(stop, max(0.0, due - time.monotonic()))


def growth(usage: list[Usage], warmup: float = WARMUP_SHARE) -> list[Growth]:
    """Per process, its growth after the warm-up, the first ``warmup`` of the run (see the module's docstring);
    none for too few samples."""
    if not usage:
        return []
    end = max(u.t_s for u in usage)
    series: dict[str, list[Usage]] = {}
    for u in sorted(usage, key=lambda u: u.t_s):
        if u.t_s >= warmup * end:
            series.setdefault(u.process, []).append(u)
    out = []
    for name, s in series.items():
        if len(s) < 2:
            continue
        k = min(3, len(s) // 2)
        rss = (
            round(statistics.median(u.rss_mb for u in s[:k]), 1),
            round(statistics.median(u.rss_mb for u in s[-k:]), 1),
        )
        fds = (float(statistics.median(u.fds for u in s[:k])), float(statistics.median(u.fds for u in s[-k:])))
        out.append(Growth(process=name, rss_mb=rss, rss_pct=pct(*rss), fds=fds, fds_pct=pct(*fds)))
    return out


def used_between(a: Usage, b: Usage) -> float:
    """The CPU one process used from sample ``a`` to sample ``b``: a count lower than before is a new
    process under the name (restarted), and what it used since it started counts whole."""
    return b.cpu_s - a.cpu_s if b.cpu_s >= a.cpu_s else b.cpu_s


def cpu_use(usage: list[Usage]) -> list[CpuUse]:
    """Per process sampled more than once, the CPU it used from its first sample to its last
    (:func:`used_between` each two), most first. The CPU a process used before its first sample (its
    start) is not counted."""
    series: dict[str, list[Usage]] = {}
    for u in sorted(usage, key=lambda u: u.t_s):
        series.setdefault(u.process, []).append(u)
    out = []
    for name, s in series.items():
        span = s[-1].t_s - s[0].t_s
        if len(s) < 2 or span <= 0:
            continue
        used = sum(used_between(a, b) for a, b in zip(s, s[1:]))
        out.append(CpuUse(process=name, cpu_s=round(used, 2), cores=round(used / span, 3)))
    return sorted(out, key=lambda c: -c.cpu_s)


def pct(before: float, after: float) -> float:
    return round(100 * (after - before) / before, 1) if before else 0.0


def chart(path: Path, usage: list[Usage]) -> None:
    """RSS, open files and CPU (cores, from one sample to the next) per process over time: three panels,
    one line per process, named in a legend."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (rss, fds, cpu) = plt.subplots(3, 1, figsize=(12, 13), sharex=True)
    names = sorted({u.process for u in usage})
    colours = plt.get_cmap("tab20")
    for i, name in enumerate(names):
        mine = sorted((u for u in usage if u.process == name), key=lambda u: u.t_s)
        style = {"color": colours(i % 20), "linestyle": "-" if i < 20 else "--", "marker": "."}
        rss.plot([u.t_s for u in mine], [u.rss_mb for u in mine], label=name, **style)
        fds.plot([u.t_s for u in mine], [u.fds for u in mine], label=name, **style)
        steps = [(b.t_s, used_between(a, b) / (b.t_s - a.t_s)) for a, b in zip(mine, mine[1:]) if b.t_s > a.t_s]
        cpu.plot([t for t, _ in steps], [c for _, c in steps], **style)
    rss.set_ylabel("RSS, MiB")
    rss.set_title("resident memory per process")
    fds.set_ylabel("open file descriptors")
    fds.set_title("open files per process")
    cpu.set_ylabel("cores")
    cpu.set_title("CPU per process, since the sample before")
    cpu.set_xlabel("seconds")
    rss.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
