"""What a session tells users: each PodGroup's phase and condition, each Queue's status, each waiting pod's reason."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from batch_scheduler.info import JobInfo, QueueInfo, TaskStatus
from cluster.model import PodGroupCondition, PodGroupStatus, Quantity, QueueStatus

UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
_LIVE = frozenset({TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BOUND})


def job_phase(job: JobInfo) -> str:
    """Pending, Inqueue, Running (ready: at least minMember placed), Unknown (running, but fewer), Completed."""
    running = job.count(frozenset({TaskStatus.BOUND, TaskStatus.RELEASING}))
    succeeded = job.count(frozenset({TaskStatus.SUCCEEDED}))
    live = job.count(_LIVE)
    if not live and running == 0 and (succeeded >= max(job.min_member, 1) or job.phase in ("Running", "Completed", "Unknown")):
        return "Completed"
    if live and job.ready_count >= max(job.min_member, 1):
        return "Running"
    if running:
        return "Unknown"
    return "Inqueue" if job.phase == "Inqueue" else "Pending"


def pending_reason(job: JobInfo) -> str:
    """The job's reason, or what it waits for when no action gave one."""
    if job.reason:
        return job.reason
    if job.phase == "Pending":
        return "waiting to be admitted to its queue (enqueue)"
    return "waiting for the next session"


def podgroup_status(job: JobInfo, old: PodGroupStatus, now: str) -> PodGroupStatus:
    phase = job_phase(job)
    if phase in ("Running", "Completed"):
        condition = PodGroupCondition(type=SCHEDULED, status="True", reason="tasks in gang are ready to be scheduled",
                                      message=f"{job.ready_count}/{job.min_member} tasks placed")
    elif job.pending() or job.reason:
        condition = PodGroupCondition(type=UNSCHEDULABLE, status="True", reason=job.reason_kind or "NotEnoughResources",
                                      message=pending_reason(job))
    else:
        condition = PodGroupCondition(type=UNSCHEDULABLE, status="True", reason="NotEnoughPods",
                                      message=f"gang: 0/{job.min_member} pods exist")
    before = old.conditions[0] if old.conditions else None
    if before is not None and (before.type, before.status, before.reason) == (condition.type, condition.status, condition.reason):
        condition = msgspec.structs.replace(condition, last_transition_time=before.last_transition_time)
    else:
        condition = msgspec.structs.replace(condition, last_transition_time=now)
    return PodGroupStatus(
        phase=phase, conditions=[condition],
        running=job.count(frozenset({TaskStatus.BOUND, TaskStatus.ALLOCATED})),
        succeeded=job.count(frozenset({TaskStatus.SUCCEEDED})),
        failed=job.count(frozenset({TaskStatus.FAILED})),
    )


def same_status(a: PodGroupStatus, b: PodGroupStatus) -> bool:
    """Equal but for transition times (so an unchanged status is not written again)."""
    def plain(s: PodGroupStatus) -> tuple[object, ...]:
        return (s.phase, s.running, s.succeeded, s.failed,
                tuple((c.type, c.status, c.reason, c.message) for c in s.conditions))
    return plain(a) == plain(b)


def queue_status(queue: QueueInfo, jobs: Iterable[JobInfo]) -> QueueStatus:
    counts = {"Pending": 0, "Inqueue": 0, "Running": 0, "Unknown": 0, "Completed": 0}
    for job in jobs:
        if job.queue == queue.name and job.podgroup is not None:
            counts[job_phase(job)] += 1
    state = queue.queue.status.state if queue.queue is not None else "Open"
    allocated: dict[str, Quantity] = dict(queue.allocated.to_quantities())
    return QueueStatus(state=state, allocated=allocated, pending=counts["Pending"],
                       inqueue=counts["Inqueue"], running=counts["Running"], unknown=counts["Unknown"],
                       completed=counts["Completed"])
