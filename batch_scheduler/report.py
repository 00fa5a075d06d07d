"""What one batch session did, and the metrics it updates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from batch_scheduler.framework import IgnoredSettings
from batch_scheduler.metrics import BatchMetrics
from batch_scheduler.reasons import PendingReason
from batch_scheduler.session import Session
from batch_scheduler.status import queue_status
from batch_scheduler.vector import Vector
from cluster.model.resources import Resources
from cluster.runtime.heartbeat import Stats


@dataclass
class SessionReport:
    """What one session did (for metrics, dry-run and the bench)."""

    seconds: float = 0.0
    committed: int = 0  # pods
    jobs_started: int = 0
    conflicts: int = 0  # pods in gang batches the binder refused
    evicted: int = 0
    pending: int = 0
    actions: dict[str, float] = field(default_factory=dict)
    session: Session | None = None
    allocated: dict[str, Vector] = field(default_factory=dict)  # per queue, what its jobs hold after the session


def observe(m: BatchMetrics, ssn: Session, report: SessionReport, phases: Mapping[str, str]) -> None:
    """Volcano's metrics after one session: its latency, the actions', attempts, victims, each queue."""
    m.session.observe(report.seconds * 1000)
    for action, seconds in report.actions.items():
        m.action.labels(action).observe(seconds * 1e6)
    m.attempts.labels("scheduled").inc(report.jobs_started)
    waiting = [j for j in ssn.jobs.values() if j.pending()]
    lost = sum(1 for j in waiting if j.reason_kind is PendingReason.COMMIT_CONFLICT)
    m.attempts.labels("unschedulable").inc(len(waiting) - lost)
    m.attempts.labels("error").inc(lost)
    m.victims.set(report.evicted)
    m.preemption_attempts.inc(report.evicted)
    m.unschedulable_tasks.set(report.pending)
    m.unschedulable_jobs.set(len(waiting))
    for name, queue in ssn.queues.items():
        held = report.allocated.get(name) or queue.allocated
        allocated = held.to_amounts(pods=False)
        m.queue_cpu.labels(name).set(allocated.get("cpu", 0))
        m.queue_memory.labels(name).set(allocated.get("memory", 0))
        for r, amount in allocated.items():
            if r not in ("cpu", "memory"):
                m.queue_scalar.labels(name, r).set(amount)
        status = queue_status(queue, phases, held)
        for phase, gauge in m.queue_groups.items():
            gauge.labels(name).set(getattr(status, phase))


class QueueStats(msgspec.Struct, frozen=True, kw_only=True):
    weight: int
    allocated: dict[str, str]  # quantities, as a ResourceList
    capability: dict[str, str]
    deserved: dict[str, str]  # empty unless proportion divides the cluster
    pending_jobs: int
    running_jobs: int


class BatchStats(Stats, frozen=True, kw_only=True):
    sessions: int
    conflicts: int
    unimplemented: dict[str, list[str]]  # plugins and actions the conf names that have no effect here
    pods_per_s: float | None = None
    last_session_ms: float | None = None
    pending: int | None = None
    queues: dict[str, QueueStats] | None = None
    hypernode_problems: list[str] | None = None  # why HyperNodes are left out of the tree (a cycle, two parents)
    ignored_settings: list[str] | None = None  # "job: what a plugin ignores of it and why" (a malformed annotation)


def last_session_stats(out: BatchStats, report: SessionReport | None, phases: Mapping[str, str]) -> BatchStats:
    """``out`` with the last session's figures: its time, pending pods, each queue, what the
    HyperNode tree left out and what plugins ignored of jobs."""
    if report is None or report.session is None:
        return out
    ssn = report.session
    shares = (getattr(p, "deserved", None) for tier in ssn.tiers.tiers for p in tier)  # proportion's
    deserved: dict[str, Any] = next((d for d in shares if isinstance(d, dict)), {})
    queues = {}
    for name, q in ssn.queues.items():
        held = report.allocated.get(name) or q.allocated
        status = queue_status(q, phases, held)
        queues[name] = QueueStats(
            weight=q.weight,
            allocated=held.to_amounts(pods=False).to_quantities(),
            capability=q.capability.to_amounts(pods=False).to_quantities() if q.capability is not None else {},
            deserved=Resources({r: int(v) for r, v in deserved.get(name, {}).items()}).to_quantities(),
            pending_jobs=status.pending + status.inqueue,
            running_jobs=status.running,
        )
    problems = sorted({p.message for p in ssn.topology.problems}) or None
    ignored = sorted(
        f"{job}: {why}"
        for tier in ssn.tiers.tiers
        for p in tier
        if isinstance(p, IgnoredSettings)
        for job, why in p.ignored_settings().items()
    )
    return msgspec.structs.replace(
        out,
        last_session_ms=round(report.seconds * 1000, 1),
        pending=report.pending,
        queues=queues,
        hypernode_problems=problems,
        ignored_settings=ignored or None,
    )
