"""The demo's report: what it achieved, as ``demo-report.json`` and charts, ``demo-report.png`` and
``demo-resources.png``.

The report is the run's totals (:class:`Report`: with each restart of a process and each
process's growth after the warm-up), its samples, the processes' resources and the audits
during the run (caldera.demo.resources), each a JSON key of the file.
The demo samples every couple of seconds (pods bound and their latency per scheduler,
shard sizes, cpu and GPUs allocated per shard); the report is those samples and the totals.
The chart has five panels over time: throughput per scheduler, latency percentiles per
scheduler, where an agent pod's time goes (each stage's p50: agent_scheduler.stages), shard
sizes, and utilization per shard; matplotlib is imported only to draw it.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from agent_scheduler.stages import STAGES, StageFigures
from caldera.demo.resources import AuditSample, CpuUse, Growth, Usage
from caldera.demo.resources import chart as resources_chart
from caldera.demo.supervisor import Restart
from caldera.demo.workload import AGENT, VOLCANO


class RoundBand(msgspec.Struct, frozen=True, kw_only=True):
    """The submission rounds of one size band (caldera.demo.tracker.ROUND_BANDS): how many, and the p50
    over them of their first, median and last pod's submit → bound."""

    band: str
    rounds: int
    first_p50_ms: float
    median_p50_ms: float
    last_p50_ms: float


class SchedulerTotals(msgspec.Struct, frozen=True, kw_only=True):
    """One scheduler over the whole run (latency: submitted → bound)."""

    pods_submitted: int
    pods_bound: int
    pending: int
    deleted_before_bound: int
    pods_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    # Pods are submitted in rounds (an agent burst at once): the rounds, their mean size, and the
    # latency of each round's first pod bound (the path, nothing of its own round ahead of it).
    rounds: int = 0
    round_size_mean: float = 0.0
    round_first_p50_ms: float = 0.0
    round_first_p99_ms: float = 0.0
    by_round_size: list[RoundBand] = []


class QueueJobs(msgspec.Struct, frozen=True, kw_only=True):
    """One queue's gang jobs."""

    submitted: int
    started: int  # placed whole (minAvailable bound), at least once
    running: int  # at the end
    waiting: int  # at the end, never started


class Shards(msgspec.Struct, frozen=True, kw_only=True):
    start: dict[str, int]  # nodes per owner ("" unowned)
    end: dict[str, int]
    moves: int  # nodes that changed owner
    largest_change: dict[str, int]  # per owner, the most its size moved away from its start


class Conflicts(msgspec.Struct, frozen=True, kw_only=True):
    true: int  # commits the binder refused: the node had changed
    resolved: int  # conflicts the agent scheduler resolved by refreshing and committing again
    handed_over: int = 0  # agent: pods one worker handed over to another (room only in its partition)


class ConflictFigures(msgspec.Struct, frozen=True, kw_only=True):
    agent: Conflicts = msgspec.field(name=AGENT)
    volcano: Conflicts = msgspec.field(name=VOLCANO)
    from_heartbeats_of: list[str]  # the processes whose heartbeats counted them

    def of(self, scheduler: str) -> Conflicts:
        return {AGENT: self.agent, VOLCANO: self.volcano}.get(scheduler, Conflicts(true=0, resolved=0))


class StageTotal(msgspec.Struct, frozen=True, kw_only=True):
    """One stage of the agent pods' way (the demo's write, agent_scheduler.stages) over the whole run."""

    pods: int
    p50_ms: float | None
    p99_ms: float | None
    mean_ms: float | None

    @classmethod
    def of(cls, f: StageFigures) -> StageTotal:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v * 1000, 2)

        return cls(
            pods=f.pods,
            p50_ms=ms(f.quantile(0.5)),
            p99_ms=ms(f.quantile(0.99)),
            mean_ms=ms(f.seconds / f.pods) if f.pods else None,
        )


class Report(msgspec.Struct, frozen=True, kw_only=True):
    duration_s: float
    cluster: str  # the driver's description
    schedulers: dict[str, SchedulerTotals]
    jobs: dict[str, QueueJobs]  # per queue
    shards: Shards
    pods_completed: int
    conflicts: ConflictFigures
    tracebacks: list[str]  # the processes that logged one
    audit: str | list[str]  # "ok", or one line per violation
    restarts: list[Restart] = []  # each death of a process, restarted by the demo
    audits_failed: int = 0  # audits during the run that found violations
    audits_unfinished: int = 0  # audits during the run that did not finish (the store too slow to answer)
    growth: list[Growth] = []  # per process, RSS and open files after the warm-up (caldera.demo.resources)
    warmup_share: float = 0.2  # the share of the run before growth is measured
    cpu: list[CpuUse] = []  # per process, the CPU it used from its first sample to its last (caldera.demo.resources)
    failed: list[str] = []  # the demo's own tasks (the simulator, the load, ...) that died, and why
    # where the agent pods' time went, stage by stage: the demo's write, then agent_scheduler.stages
    agent_stages: dict[str, StageTotal] = {}

    @property
    def ok(self) -> bool:
        """A clean run: the audits clean (at the end and during), no traceback, no process died, nothing failed."""
        return (
            self.audit == "ok"
            and not self.tracebacks
            and not self.restarts
            and not self.audits_failed
            and not self.failed
        )


class Sample(msgspec.Struct):
    t: float
    pods_per_s: dict[str, float]
    p50_ms: dict[str, float | None]  # None: nothing bound in that interval
    p99_ms: dict[str, float | None]
    shard_nodes: dict[str, int]
    shard_cpu: dict[str, float]  # share of the shard's cpu allocated
    shard_gpu: dict[str, float] = {}  # share of the shard's GPUs allocated (shards with GPUs)
    shard_fragment: dict[str, float] = {}  # share of the shard's GPUs free on cards partly in use
    agent_stage_p50_ms: dict[str, float | None] = {}  # per stage, over the agent pods counted since the last sample


def gap(value: float | None) -> float:
    """No figure (nothing bound in the interval) is a gap in the line, not a zero."""
    return float("nan") if value is None else value


def write(
    out: Path, report: Report, samples: list[Sample], usage: list[Usage], audits: list[AuditSample]
) -> list[Path]:
    """Write the JSON (totals, samples, resources, audits) and the charts; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path, resources_path = out / "demo-report.json", out / "demo-report.png", out / "demo-resources.png"
    figures = {
        **msgspec.to_builtins(report),
        "samples": msgspec.to_builtins(samples),
        "resources": msgspec.to_builtins(usage),
        "audits": msgspec.to_builtins(audits),
    }
    json_path.write_text(json.dumps(figures, indent=2) + "\n")
    chart(png_path, samples)
    resources_chart(resources_path, usage)
    return [json_path, png_path, resources_path]


def chart(path: Path, samples: list[Sample]) -> None:
    """The five panels over time, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax5, ax3, ax4) = plt.subplots(5, 1, figsize=(10, 16), sharex=True)
    t = [s.t for s in samples]
    schedulers = sorted({k for s in samples for k in s.pods_per_s})
    for i, name in enumerate(schedulers):  # one colour per scheduler (and its shard) across the panels
        ax1.plot(t, [s.pods_per_s.get(name, 0.0) for s in samples], color=f"C{i}", label=name)
        ax2.plot(t, [gap(s.p50_ms.get(name)) for s in samples], color=f"C{i}", marker=".", label=f"{name} p50")
        ax2.plot(
            t,
            [gap(s.p99_ms.get(name)) for s in samples],
            color=f"C{i}",
            marker=".",
            linestyle="--",
            label=f"{name} p99",
        )
    ax1.set_ylabel("pods bound / s")
    ax1.set_title("throughput per scheduler")
    ax2.set_ylabel("submit → bound, ms")
    ax2.set_yscale("log")
    ax2.set_title("latency percentiles per scheduler (over each 2 s)")
    shards = sorted({k for s in samples for k in s.shard_nodes})
    for name in shards:
        colour = f"C{schedulers.index(name)}" if name in schedulers else "C7"
        label = name or "unowned"
        ax3.plot(t, [s.shard_nodes.get(name, 0) for s in samples], color=colour, label=label)
        ax4.plot(t, [100 * s.shard_cpu.get(name, 0.0) for s in samples], color=colour, label=f"{label} cpu")
        if any(name in s.shard_gpu for s in samples):
            ax4.plot(
                t,
                [100 * s.shard_gpu.get(name, 0.0) for s in samples],
                color=colour,
                linestyle="--",
                label=f"{label} GPUs",
            )
        if any(s.shard_fragment.get(name) for s in samples):  # only where shares left GPUs in fragments
            ax4.plot(
                t,
                [100 * s.shard_fragment.get(name, 0.0) for s in samples],
                color=colour,
                linestyle=":",
                label=f"{label} GPUs in fragments",
            )
    stages = [st for st in ("write", *STAGES) if any(s.agent_stage_p50_ms.get(st) is not None for s in samples)]
    for i, st in enumerate(stages):
        ax5.plot(t, [gap(s.agent_stage_p50_ms.get(st)) for s in samples], color=f"C{i}", marker=".", label=st)
    ax5.set_ylabel("p50 ms")
    ax5.set_yscale("log")
    ax5.set_title("where an agent pod's time goes: each stage's p50 (write, then the agent scheduler's stages)")
    ax3.set_ylabel("nodes")
    ax3.set_title("shard sizes (the sharding controller moves nodes between schedulers)")
    ax4.set_ylabel("allocated (GPUs in fragments: free on partly used cards), %")
    ax4.set_ylim(0, 100)
    ax4.set_title("utilization per shard")
    ax4.set_xlabel("seconds")
    for ax in (ax1, ax2, ax5, ax3, ax4):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
