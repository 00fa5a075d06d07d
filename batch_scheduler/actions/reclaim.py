"""reclaim: a queue takes resources back from other queues, for its starving jobs.

As Volcano's reclaim action: queues in queue order, skipping those the plugins call
overused; in each, the starving jobs in job order; for a job, each pending task in task
order (while the job still starves) — unless its pod says ``preemptionPolicy: Never`` or
the plugins say its queue may not reclaim for it (``preemptive``: proportion and capacity
check the queue's deserved share) — looks, node by node, for running preemptable tasks of
*other*, reclaimable queues that the plugins let go (``reclaimable``) and evicts them, only
until the task fits on that node, then pipelines it there. The job's evictions are kept
only when the job is then pipelined (gang).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batch_scheduler.actions._evict import (
    VictimIndex,
    candidate_nodes,
    reclaim_on_nodes,
)
from batch_scheduler.actions._interleave import by_queue
from batch_scheduler.actions.preempt import preemptors
from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def run(ssn: Session) -> None:
    grouped = by_queue(ssn, preemptors(ssn))
    index = VictimIndex(ssn)
    task_key, queue_key, job_key = ssn.tiers.task_key(), ssn.tiers.queue_key(), ssn.tiers.job_key()
    for name in sorted(grouped, key=lambda q: queue_key(ssn.queues[q])):
        queue = ssn.queues[name]
        if ssn.tiers.overused(queue) is not None:
            continue
        for job in sorted(grouped[name], key=job_key):
            tasks = sorted((t for t in job.pending() if not t.scheduling_gated), key=task_key)

            def eligible(t: TaskInfo, name: str = name) -> bool:
                if t.status is not TaskStatus.RUNNING or not t.preemptable:
                    return False
                other = ssn.jobs.get(t.job)
                if other is None or other.queue == name:
                    return False
                theirs = ssn.queues.get(other.queue)
                return theirs is not None and theirs.reclaimable

            others = [q for q, info in ssn.queues.items() if q != name and info.reclaimable]
            stmt = Statement(ssn)
            while ssn.tiers.job_starving(job) and tasks:
                task = tasks.pop(0)
                if not task.may_preempt or not ssn.tiers.preemptive(queue, task):
                    continue
                where = index.rows(others)  # Volcano skips a node without reclaimees
                reclaim_on_nodes(ssn, stmt, task, candidate_nodes(ssn, task, where), eligible)
            if not ssn.tiers.job_pipelined(job):
                stmt.discard()
                continue
            evicted = stmt.evicted
            stmt.commit()
            if evicted:
                job.reason, job.reason_kind = (
                    (
                        f"reclaiming {evicted} task(s) from queues above their deserved share "
                        f"for queue {name}; starts once they are gone"
                    ),
                    PendingReason.RECLAIMING,
                )
