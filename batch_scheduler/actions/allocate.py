"""allocate: place the tasks of admitted jobs, queue by queue, job by job, and keep only ready gangs.

Queues come in queue order (re-asked after every job), jobs in job order, tasks in task
order. A queue the plugins call overused gets nothing this session. For each task: the
queue must be able to take it (allocatable), then the predicates give the feasible nodes
and the node scores pick one (own shard first in soft mode). The job's placements are a
statement: committed when the job is ready (gang), else discarded with a reason saying
how far it got and what stopped it. Best-effort tasks are left to backfill.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.actions.queues import by_queue, interleave
from batch_scheduler.info import JobInfo, QueueInfo, TaskInfo
from batch_scheduler.statement import Statement

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def _waiting(job: JobInfo) -> list[TaskInfo]:
    return [t for t in job.pending() if not t.best_effort]


def place_job(ssn: Session, queue: QueueInfo, job: JobInfo) -> bool:
    """Place the job's waiting tasks; True when it became ready with tasks still waiting.

    Such a job goes back in line (as in Volcano): its share grew, and job order (drf,
    priority) decides whether it or another job gets the next task.
    """
    stmt = Statement(ssn)
    failure: tuple[str, str] | None = None
    tasks = sorted(_waiting(job), key=ssn.tiers.task_key())
    for k, task in enumerate(tasks):
        refusal = ssn.tiers.allocatable(queue, task)
        if refusal is not None:
            failure = (refusal.condition, refusal.message)
            break
        row = ssn.best_node(task)
        if not isinstance(row, int):
            failure = ("NotEnoughResources", f"task {task.name}: {row.reason()}")
            break
        stmt.allocate(task, ssn.columns.names[row])
        if k + 1 < len(tasks) and ssn.tiers.job_ready(job):
            stmt.commit()
            return True
    if ssn.tiers.job_ready(job):
        stmt.commit()
        if failure is not None:  # ready, with more tasks than the gang needs still waiting
            job.set_reason(failure[0], failure[1])
        return False
    placeable = job.ready_count
    stmt.discard()
    short = max(job.min_member - placeable, 0)
    what = failure[1] if failure is not None else "the gang's task roles (minTaskMember) are not all placeable"
    job.set_reason(failure[0] if failure is not None else "NotEnoughResources",
                   f"gang: {placeable}/{job.min_member} tasks placeable, {short} short: {what}")
    return False


def run(ssn: Session) -> None:
    jobs = [j for j in ssn.jobs.values() if ssn.admitted(j) and _waiting(j) and ssn.schedulable(j)]

    def overused(queue: QueueInfo, remaining: list[JobInfo]) -> bool:
        refusal = ssn.tiers.overused(queue)
        if refusal is None:
            return False
        for job in remaining:
            job.set_reason(refusal.condition, refusal.message)
        return True

    interleave(ssn, by_queue(ssn, jobs), lambda queue, job: place_job(ssn, queue, job), overused)
