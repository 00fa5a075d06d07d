"""The demo's live view: a few tables refreshed four times a second, or plain lines.

On a terminal the view is a ``rich`` Live display: per scheduler (pods/s and latency
lately, totals, queue depth, conflicts), per Volcano queue (weight, capability, jobs
started/running/waiting, GPUs allocated and deserved), per shard (nodes, cpu and GPU
allocated) and shard moves. When stdout is not a terminal (a log, CI) it prints one plain
line every two seconds instead. At the end, :func:`summary` is the run's report as a table. A process that died is
named on a line of its own above the tables while the run lasts (and at the end of each
plain line), and in the summary: when, how, and when it served again.

``rich`` is imported where it draws, so that importing this module (as ``caldera bench
mixed`` does, with a view that shows nothing) does not load it.
"""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table

    from caldera.demo.report import Report
    from caldera.demo.supervisor import Restart

GPU = "nvidia.com/gpu"


class Frame(msgspec.Struct, kw_only=True):
    """Everything the view shows at one moment."""

    t: float
    duration: float
    title: str
    schedulers: dict[str, dict[str, Any]]  # per scheduler: lately, totals, queue depth, conflicts
    queues: dict[str, dict[str, Any]]  # per queue: weight, capability, jobs, GPUs allocated/deserved
    shards: dict[str, dict[str, float]]  # per shard: nodes, cpu and gpu shares allocated
    moves: int
    completed: int
    restarts: list[str] = []  # one line per death of a process (see told)


def told(r: Restart) -> str:
    """A death and the restart after it, in words."""
    died = f"{r.process} died at {r.at_s:,.1f} s ({r.how}{', after a traceback' if r.traceback else ''})"
    back = f"serving again {r.ready_after_s:,.1f} s later" if r.ready_after_s is not None else "not serving again yet"
    return f"{died}, restarted: {back}"


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def render(frame: Frame) -> Group:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text.assemble(
        ("caldera demo", "bold"),
        f"  {frame.t:5.1f} s of {frame.duration:.0f} s  ·  {frame.title}  ·  "
        f"pods run to completion {frame.completed:,}",
    )
    sched = Table(title="schedulers (pods/s and latency over the last 2 s)", title_justify="left")
    for col in (
        "scheduler",
        "pods/s",
        "p50 ms",
        "p99 ms",
        "bound",
        "pending",
        "queue depth",
        "conflicts resolved / true",
    ):
        sched.add_column(col, justify="left" if col == "scheduler" else "right")
    for name, s in frame.schedulers.items():
        sched.add_row(
            name,
            f"{s['pods_per_s']:,.0f}",
            ms(s["p50_ms"]),
            ms(s["p99_ms"]),
            f"{s['bound']:,}",
            f"{s['pending']:,}",
            f"{s['queue']:,}" if s.get("queue") is not None else "—",
            f"{s.get('resolved', 0):,} / {s.get('conflicts', 0):,}",
        )
    parts: list[Any] = [head]
    for restart in frame.restarts:
        parts.append(Text(restart, style="bold red"))
    parts.append(sched)
    if frame.queues:
        queues = Table(title="Volcano queues (batch scheduler)", title_justify="left")
        for col in (
            "queue",
            "weight",
            "capability GPUs",
            "jobs started",
            "running",
            "waiting",
            "GPUs allocated",
            "deserved",
        ):
            queues.add_column(col, justify="left" if col == "queue" else "right")
        for name, q in frame.queues.items():
            queues.add_row(
                name,
                str(q.get("weight", "")),
                str(q.get("capability_gpu") or "—"),
                f"{q['started']:,}",
                f"{q['running']:,}",
                f"{q['waiting']:,}",
                str(q.get("allocated_gpu", 0)),
                str(q.get("deserved_gpu", "—")),
            )
        parts.append(queues)
    shards = Table(title=f"shards (nodes moved between shards so far: {frame.moves:,})", title_justify="left")
    for col in ("shard", "nodes", "cpu allocated", "GPUs allocated", "GPUs in fragments"):
        shards.add_column(col, justify="left" if col == "shard" else "right")
    for name, s in frame.shards.items():
        shards.add_row(
            name or "unowned",
            f"{int(s['nodes']):,}",
            f"{100 * s['cpu']:.0f}%",
            f"{100 * s['gpu']:.0f}%" if s["gpus"] else "—",
            f"{100 * s.get('fragment', 0.0):.1f}%" if s["gpus"] else "—",
        )
    parts.append(shards)
    return Group(*parts)


def line(frame: Frame) -> str:
    """The frame as one plain line, for logs."""
    scheds = "  ".join(
        f"{name} {s['pods_per_s']:,.0f}/s p99 {ms(s['p99_ms'])} ms bound {s['bound']:,} pending {s['pending']:,}"
        for name, s in frame.schedulers.items()
    )
    jobs = " ".join(f"{name} {q['started']}/{q['waiting']}" for name, q in frame.queues.items())
    shards = " ".join(f"{name or 'unowned'} {int(s['nodes'])}" for name, s in frame.shards.items())
    restarts = f"  restarts: {'; '.join(frame.restarts)}" if frame.restarts else ""
    return (
        f"t={frame.t:5.1f}s  {scheds}  jobs started/waiting {jobs or '—'}  shards {shards}  moves {frame.moves}"
        f"  finished {frame.completed:,}{restarts}"
    )


class View:
    """Shows frames: live tables on a terminal, a line every ``every_s`` elsewhere, nothing without a console."""

    def __init__(self, console: Console | None, *, every_s: float = 2.0) -> None:
        self.console = console
        self.live = console is not None and console.is_terminal
        self.every_s = every_s
        self._last_line = 0.0
        self._display: Live | None = None

    def __enter__(self) -> View:
        if self.live:
            from rich.live import Live

            self._display = Live(console=self.console, refresh_per_second=4, transient=False)
            self._display.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if self._display is not None:
            self._display.__exit__(kind, value, tb)
            self._display = None

    def show(self, frame: Frame) -> None:
        if self.console is None:
            return
        if self._display is not None:
            self._display.update(render(frame))
            return
        now = time.monotonic()
        if now - self._last_line >= self.every_s:
            self._last_line = now
            self.console.print(line(frame), highlight=False, soft_wrap=True)

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False, soft_wrap=True)


def summary(report: Report) -> Table:
    """The run's report as one table of figures."""
    from rich.table import Table

    table = Table(title="caldera demo: summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, s in report.schedulers.items():
        table.add_row(f"{name}: pods bound", f"{s.pods_bound:,} of {s.pods_submitted:,} in {report.duration_s:.0f} s")
        if s.deleted_before_bound:
            table.add_row(f"{name}: pods deleted before they were bound", f"{s.deleted_before_bound:,}")
        table.add_row(f"{name}: pods/s", f"{s.pods_per_s:,.0f}")
        table.add_row(f"{name}: submit → bound p50 / p99 ms", f"{s.p50_ms:,.0f} / {s.p99_ms:,.0f}")
        if s.rounds:
            table.add_row(
                f"{name}: first pod of a submission round, p50 / p99 ms",
                f"{s.round_first_p50_ms:,.0f} / {s.round_first_p99_ms:,.0f} ({s.rounds:,} rounds, {s.round_size_mean:,.0f} pods each)",
            )
        if len(s.by_round_size) > 1:
            table.add_row(
                f"{name}: by round size (rounds): first / median / last pod, p50 ms",
                " · ".join(
                    f"{b.band} ({b.rounds:,}): {b.first_p50_ms:,.0f} / {b.median_p50_ms:,.0f} / {b.last_p50_ms:,.0f}"
                    for b in s.by_round_size
                ),
            )
        c = report.conflicts.of(name)
        table.add_row(f"{name}: conflicts resolved / true", f"{c.resolved:,} / {c.true:,}")
        if c.handed_over:
            table.add_row(f"{name}: pods handed from one worker to another", f"{c.handed_over:,}")
    for label in ("p50", "p99"):
        figures = {name: getattr(t, f"{label}_ms") for name, t in report.agent_stages.items()}
        parts = [f"{name} {ms:,.1f}" for name, ms in figures.items() if ms is not None]
        if parts:
            table.add_row(f"agent pods' time by stage, {label} ms", " · ".join(parts))
    for queue, j in report.jobs.items():
        table.add_row(
            f"queue {queue}: gang jobs started / waiting", f"{j.started:,} / {j.waiting:,} (of {j.submitted:,})"
        )
    shards = report.shards
    sizes = ", ".join(f"{k or 'unowned'} {shards.start.get(k, 0)} → {v}" for k, v in shards.end.items())
    table.add_row("shard sizes: start → end", sizes)
    table.add_row("nodes moved between shards", f"{shards.moves:,}")
    table.add_row("pods run to completion", f"{report.pods_completed:,}")
    table.add_row("processes that logged a traceback", ", ".join(report.tracebacks) or "none")
    table.add_row("processes that died (each restarted)", "; ".join(told(r) for r in report.restarts) or "none")
    if report.audits_failed:
        table.add_row("audits during the run that found violations", f"{report.audits_failed:,}")
    if report.audits_unfinished:
        table.add_row("audits during the run that did not finish", f"{report.audits_unfinished:,}")
    if report.failed:
        table.add_row("parts of the demo that died (the run stopped early)", "; ".join(report.failed))
    table.add_row("audit", "ok" if report.audit == "ok" else f"{len(report.audit)} violations")
    return table


def growth_table(report: Report) -> Table:
    """Each process's RSS and open files from the end of the warm-up to the end (caldera.demo.resources)."""
    from rich.table import Table

    table = Table(
        title=f"caldera demo: resources after the warm-up (the first {report.warmup_share:.0%} of the run), "
        "medians of 3 samples"
    )
    for col in ("process", "RSS MiB", "growth", "open files", "growth "):
        table.add_column(col, justify="left" if col == "process" else "right")
    for g in report.growth:
        table.add_row(
            g.process,
            f"{g.rss_mb[0]:,.0f} → {g.rss_mb[1]:,.0f}",
            f"{g.rss_pct:+.1f}%",
            f"{g.fds[0]:,.0f} → {g.fds[1]:,.0f}",
            f"{g.fds_pct:+.1f}%",
        )
    return table


def cpu_table(report: Report) -> Table:
    """Each process's CPU over the samples, most first, with the machine's cores for scale (caldera.demo.resources)."""
    from rich.table import Table

    total = sum(c.cpu_s for c in report.cpu)
    table = Table(title=f"caldera demo: CPU by process ({os.cpu_count() or '?'} cores)")
    for col in ("process", "CPU s", "mean cores", "share"):
        table.add_column(col, justify="left" if col == "process" else "right")
    for c in report.cpu:
        if c.cpu_s > 0:
            table.add_row(c.process, f"{c.cpu_s:,.1f}", f"{c.cores:.3f}", f"{c.cpu_s / total:.0%}" if total else "")
    table.add_row("all", f"{total:,.1f}", f"{sum(c.cores for c in report.cpu):.3f}", "")
    return table
