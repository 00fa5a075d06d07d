"""backfill: place best-effort tasks (no requests beyond their pod slot) of admitted jobs.

As Volcano's backfill action: the best-effort tasks of every admitted, valid job — pending
ones, and pipelined ones taken back first — are ordered queue by queue, job by job, task
by task; each goes to the best node the predicates allow. A best-effort pod holds nothing
a gang could be short of, so it is placed alone; it is bound once its job is ready (with
whatever else of the job is placed and not yet bound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def pending_tasks(ssn: Session) -> list[TaskInfo]:
    """Volcano's ``pickUpPendingTasks``: best-effort tasks in queue, job and task order."""
    by_queue: dict[str, list[tuple[Any, list[TaskInfo]]]] = {}
    job_key, task_key = ssn.tiers.job_key(), ssn.tiers.task_key()
    taken_back = Statement(ssn)
    for job in ssn.jobs.values():
        if not ssn.admitted(job) or not ssn.in_queue(job) or not ssn.schedulable(job):
            continue
        tasks = [t for t in job.pending() if t.best_effort and not t.scheduling_gated]
        for t in job.with_status(TaskStatus.PIPELINED):
            if t.best_effort:
                taken_back.unpipeline(t)
                tasks.append(t)
        if tasks:
            by_queue.setdefault(job.queue, []).append((job_key(job), sorted(tasks, key=task_key)))
    queue_key = ssn.tiers.queue_key()
    out: list[TaskInfo] = []
    for name in sorted(by_queue, key=lambda q: queue_key(ssn.queues[q])):
        for _, tasks in sorted(by_queue[name], key=lambda jt: jt[0]):
            out += tasks
    return out


def run(ssn: Session) -> None:
    for task in pending_tasks(ssn):
        job = ssn.jobs[task.job]
        choice = ssn.best_node(task)
        if not isinstance(choice, tuple) or choice[1]:
            reason = choice.reason() if not isinstance(choice, tuple) else "nodes with room are being freed"
            job.fit_errors[task.uid] = f"task {task.name}: {reason}"
            job.set_reason(PendingReason.NOT_ENOUGH_RESOURCES, f"task {task.name}: {reason}")
            continue
        stmt = Statement(ssn)
        stmt.allocate(task, ssn.columns.names[choice[0]])
        stmt.keep()  # Volcano's ssn.Allocate: no statement to undo
        if ssn.tiers.job_ready(job):
            stmt.bind(job.with_status(TaskStatus.ALLOCATED))
