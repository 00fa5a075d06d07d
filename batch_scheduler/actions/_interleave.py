"""How actions walk jobs: grouped by queue, queues taken in queue order, one job at a time.

Taking one job from the queue that is first *now* (shares change as jobs are placed),
then asking again, interleaves queues fairly instead of draining one queue first.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def by_queue(ssn: Session, jobs: Iterable[JobInfo]) -> dict[str, list[JobInfo]]:
    """Jobs per queue, each list in job order."""
    grouped: dict[str, list[JobInfo]] = {}
    for job in jobs:
        if job.queue in ssn.queues:
            grouped.setdefault(job.queue, []).append(job)
    key = ssn.tiers.job_key()
    for jobs_of_queue in grouped.values():
        jobs_of_queue.sort(key=key)
    return grouped


def interleave(
    ssn: Session,
    grouped: dict[str, list[JobInfo]],
    handle: Callable[[QueueInfo, JobInfo], bool],
    skip: Callable[[QueueInfo, list[JobInfo]], bool] = lambda q, jobs: False,
) -> None:
    """Call ``handle`` for every job, always from the queue first in queue order at that moment.

    A job for which ``handle`` returns True goes back into its queue's line, at the place
    job order gives it now (a ready job with more tasks waiting, whose share just grew).
    ``skip(queue, its remaining jobs)`` may drop a queue (after giving its jobs a reason).
    """
    queue_key, job_key = ssn.tiers.queue_key(), ssn.tiers.job_key()
    while grouped:
        name = min(grouped, key=lambda q: queue_key(ssn.queues[q]))
        queue, jobs = ssn.queues[name], grouped[name]
        if skip(queue, jobs):
            del grouped[name]
            continue
        job = jobs.pop(0)
        if handle(queue, job):
            bisect.insort(jobs, job, key=job_key)
        if not jobs:
            del grouped[name]
