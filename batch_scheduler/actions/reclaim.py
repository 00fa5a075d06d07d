"""reclaim: a queue takes resources back from other queues, for its starving jobs.

As Volcano's reclaim action: queues in queue order, skipping those the plugins call
overused; in each, the starving jobs in job order; for a job, each pending task in task
order (while the job still starves) — unless its pod says ``preemptionPolicy: Never`` or
the plugins say its queue may not reclaim for it (``preemptive``: proportion and capacity
check the queue's deserved share) — looks, node by node, for running preemptable tasks of
*other*, reclaimable queues that the plugins let go (``reclaimable``) and evicts them, only
until the task fits on that node, then pipelines it there. The job's evictions are kept
only when the job is then pipelined (gang); for a job with a network topology, only when
they all lie inside one domain of its allowed tiers (Volcano's reclaim ignores topology and
scatters victims, volcano#4374).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from batch_scheduler.actions._evict import (
    VictimIndex,
    candidate_nodes,
    reclaim_on_nodes,
)
from batch_scheduler.actions._interleave import by_queue
from batch_scheduler.actions._topology import Attempt, in_one_domain
from batch_scheduler.actions.preempt import preemptors
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import TaskInfo, TaskStatus
from cluster.nodeview.table import Mask

Eligible = Callable[[TaskInfo], bool]

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def _attempt(
    ssn: Session, index: VictimIndex, queue: QueueInfo, others: list[str], eligible: Eligible, job: JobInfo
) -> Attempt:
    """One reclaim pass for the job's tasks, on the nodes of ``within`` (None: every node)."""

    def attempt(stmt: Statement, left: list[TaskInfo], within: Mask | None) -> bool:
        while ssn.tiers.job_starving(job) and left:
            task = left.pop(0)
            if not task.may_preempt or not ssn.tiers.preemptive(queue, task):
                continue
            where = index.rows(others)  # Volcano skips a node without reclaimees
            if within is not None:
                where = where & within
            reclaim_on_nodes(ssn, stmt, task, candidate_nodes(ssn, task, where), eligible)
        return False

    return attempt


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

            attempt = _attempt(ssn, index, queue, others, eligible, job)
            found = in_one_domain(ssn, job, tasks, attempt)
            if found is None:
                continue
            stmt = found[0]
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
