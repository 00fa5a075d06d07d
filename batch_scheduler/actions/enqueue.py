"""enqueue: admit Pending jobs (phase Pending → Inqueue) while their queue and the cluster can take them.

A job whose PodGroup states no minResources is admitted at once, as in Volcano; others
go to the plugins' enqueue vote (any reject refuses, with the rejecting plugin's reason).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.actions.queues import by_queue, interleave
from batch_scheduler.framework import VoteKind
from batch_scheduler.info import JobInfo, QueueInfo

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def run(ssn: Session) -> None:
    waiting = [j for j in ssn.jobs.values() if j.phase == "Pending" and ssn.schedulable(j)]

    def admit(queue: QueueInfo, job: JobInfo) -> bool:
        if job.min_resources.is_empty:
            job.phase = "Inqueue"
            return False
        vote = ssn.tiers.enqueueable(job)
        if vote.kind is VoteKind.REJECT:
            job.set_reason(vote.condition or "NotEnqueued", vote.reason)
        else:
            job.phase = "Inqueue"
            ssn.tiers.enqueued(job)
        return False

    interleave(ssn, by_queue(ssn, waiting), admit)
