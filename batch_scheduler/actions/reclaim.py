"""reclaim: a queue below its deserved share takes resources back from reclaimable queues above theirs.

For each queue the plugins do not call overused, its starving jobs' waiting tasks (that
the queue may take: allocatable) look for a node where evicting tasks of *other*,
reclaimable queues — as the plugins allow (proportion/capacity: only while the victim's
queue stays above its deserved share; gang; conformance) — makes room. Kept only when the
job becomes ready with its pipelined tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.actions.preempt import starving
from batch_scheduler.actions.queues import by_queue
from batch_scheduler.actions.victims import evict_for_job
from batch_scheduler.info import QueueInfo, TaskInfo

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def run(ssn: Session) -> None:
    grouped = by_queue(ssn, (j for j in ssn.jobs.values() if starving(ssn, j)))
    key = ssn.tiers.queue_key()
    for name in sorted(grouped, key=lambda q: key(ssn.queues[q])):
        queue = ssn.queues[name]
        if ssn.tiers.overused(queue) is not None:
            continue

        def other_queue(victim: TaskInfo, name: str = name) -> bool:
            theirs = ssn.queues.get(ssn.jobs[victim.job].queue)
            return theirs is not None and theirs.name != name and theirs.reclaimable

        def takes(task: TaskInfo, queue: QueueInfo = queue) -> bool:
            return ssn.tiers.allocatable(queue, task) is None

        for job in grouped[name]:
            evicted = evict_for_job(ssn, job, other_queue, ssn.tiers.reclaimable, takes)
            if evicted is not None:
                job.reason, job.reason_kind = (f"reclaiming {evicted} task(s) from queues above their deserved share "
                                               f"for queue {name}; starts once they are gone"), "Reclaiming"
