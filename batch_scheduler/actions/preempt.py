"""preempt: a starving job evicts tasks of other jobs in its queue, then tasks within a job make room for their siblings.

As Volcano's preempt action. Preemptors are the admitted, valid jobs the plugins call
starving, queue by queue in queue order, job by job in job order. For a job, each pending
task in task order (while the job still starves) looks for a node where evicting running
tasks of *other* jobs of the same queue — preemptable ones (``volcano.sh/preemptable`` not
false), best-effort only for a best-effort preemptor, as the plugins allow — lets its
queue take it and makes it fit; it is then pipelined there. A task whose pod says
``preemptionPolicy: Never`` preempts nothing. The job's evictions are kept only when its
tasks, placed or pipelined, make it pipelined (gang); a job that got a node goes back in
line. A job with a network topology preempts inside one domain of its allowed tiers — the
lowest tier first, in HyperNode-score order — or not at all (Volcano skips such jobs,
volcano#4374); its tasks evicting siblings stay inside its own domain. Then, in the same
queue, each starving job's pending tasks may evict lower-priority running tasks of the same job.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from batch_scheduler.actions._evict import (
    VictimIndex,
    candidate_nodes,
    preempt_on_nodes,
    room_rows,
)
from batch_scheduler.actions._interleave import by_queue
from batch_scheduler.actions._topology import in_one_domain, own_domain
from batch_scheduler.jobs import JobInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import PREEMPTABLE_STATUSES, TaskInfo
from cluster.nodeview.table import Mask

if TYPE_CHECKING:
    from batch_scheduler.session import Session


def preemptors(ssn: Session) -> list[JobInfo]:
    """Admitted, valid, starving jobs (Volcano's preempt and reclaim take the same)."""
    return [
        j
        for j in ssn.jobs.values()
        if not j.is_pending() and ssn.in_queue(j) and ssn.schedulable(j) and ssn.tiers.job_starving(j)
    ]


def _preempt(
    ssn: Session, stmt: Statement, preemptor: TaskInfo, same_job: bool, index: VictimIndex, within: Mask | None = None
) -> bool:
    if not preemptor.may_preempt:
        return False
    job = ssn.jobs[preemptor.job]

    def eligible(t: TaskInfo) -> bool:
        if t.status not in PREEMPTABLE_STATUSES or not t.preemptable:
            return False
        if preemptor.best_effort and not t.best_effort:
            return False
        other = ssn.jobs.get(t.job)
        if other is None:
            return False
        if same_job:
            return t.job == preemptor.job
        return other.queue == job.queue and t.job != preemptor.job

    where = index.rows([job.queue]) | room_rows(ssn, preemptor)
    if within is not None:
        where = where & within
    return preempt_on_nodes(ssn, stmt, preemptor, candidate_nodes(ssn, preemptor, where), eligible)


def run(ssn: Session) -> None:
    grouped = by_queue(ssn, preemptors(ssn))
    index = VictimIndex(ssn)
    task_key = ssn.tiers.task_key()
    queue_key = ssn.tiers.queue_key()
    for name in sorted(grouped, key=lambda q: queue_key(ssn.queues[q])):
        starving = list(grouped[name])
        job_key = ssn.tiers.job_key()
        line = sorted(starving, key=job_key)  # as Volcano's heap: only the job just tried changes place
        tasks = {j.key: sorted((t for t in j.pending() if not t.scheduling_gated), key=task_key) for j in starving}
        while line:
            job = line.pop(0)

            def attempt(stmt: Statement, left: list[TaskInfo], within: Mask | None, job: JobInfo = job) -> bool:
                assigned = False
                while ssn.tiers.job_starving(job) and left:
                    assigned = _preempt(ssn, stmt, left.pop(0), same_job=False, index=index, within=within)
                return assigned

            found = in_one_domain(ssn, job, tasks[job.key], attempt)
            if found is None:
                tasks[job.key] = []
                continue
            stmt, assigned, tasks[job.key] = found
            evicted = stmt.evicted
            stmt.commit()
            if evicted:
                job.reason, job.reason_kind = (
                    (f"preempting {evicted} lower-priority task(s) in queue {name}; starts once they are gone"),
                    PendingReason.PREEMPTING,
                )
            if assigned:
                bisect.insort(line, job, key=job_key)
        for job in starving:  # tasks within a job
            within = own_domain(ssn, job)
            for task in sorted((t for t in job.pending() if not t.scheduling_gated), key=task_key):
                stmt = Statement(ssn)
                assigned = _preempt(ssn, stmt, task, same_job=True, index=index, within=within)
                stmt.commit()
                if not assigned:
                    break
