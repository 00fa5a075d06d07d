"""preempt: within a queue, a starving job evicts lower-priority preemptable tasks — only if that makes it ready.

For each starving job (not yet ready, by the plugins' JobStarving), in queue and job
order, each waiting task looks for a node where evicting victims the plugins allow
(priority: lower-priority jobs; gang: not below their minMember, unless switched off;
conformance: never critical pods; drf: not below the preemptor's share) makes it fit.
The job's evictions are kept only when its tasks, placed or pipelined, make it ready;
the pipelined tasks are placed by allocate once the victims are gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.actions.queues import by_queue
from batch_scheduler.actions.victims import evict_for_job
from batch_scheduler.info import JobInfo, TaskInfo

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def starving(ssn: Session, job: JobInfo) -> bool:
    return ssn.admitted(job) and bool(job.pending()) and ssn.schedulable(job) and ssn.tiers.job_starving(job)


def run(ssn: Session) -> None:
    for queue, jobs in by_queue(ssn, (j for j in ssn.jobs.values() if starving(ssn, j))).items():
        for job in jobs:
            def same_queue(victim: TaskInfo, job: JobInfo = job) -> bool:
                return ssn.jobs[victim.job].queue == job.queue

            evicted = evict_for_job(ssn, job, same_queue, ssn.tiers.preemptable)
            if evicted is not None:
                job.reason, job.reason_kind = (f"preempting {evicted} lower-priority task(s) in queue {queue}; "
                                               "starts once they are gone"), "Preempting"
