"""enqueue: admit Pending jobs (phase Pending → Inqueue) while their queue and the cluster can take them.

As Volcano's enqueue action: queues take turns in queue order, each offering its first
pending job in job order. A job whose PodGroup states no minResources is admitted at
once; the others go to the plugins' vote (any reject refuses, with the rejecting plugin's
reason). Every plugin hears of each admission (it reserves the job's minResources).

A job is admitted before its pods exist: Volcano's job controller creates a Job's pods
only once its PodGroup is Inqueue, so waiting for the pods here would wait forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.actions._interleave import by_queue, interleave
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.votes import VoteKind

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def run(ssn: Session) -> None:
    waiting = [j for j in ssn.jobs.values() if j.is_pending() and ssn.in_queue(j)]

    def admit(queue: QueueInfo, job: JobInfo) -> bool:
        if job.min_resources is not None:
            vote = ssn.tiers.enqueueable(job)
            if vote.kind is VoteKind.REJECT:
                job.set_reason(vote.condition or PendingReason.NOT_ENQUEUED, vote.reason)
                return False
        ssn.tiers.enqueued(job)
        job.phase = "Inqueue"
        return False

    interleave(ssn, by_queue(ssn, waiting), admit)
