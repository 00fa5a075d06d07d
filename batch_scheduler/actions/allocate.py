"""allocate: place the tasks of admitted jobs, queue by queue, job by job, and keep only ready gangs.

As Volcano's allocate action: each job's pending tasks (best-effort and scheduling-gated
ones aside; a gated pod waits until its gates are removed) form its worksheet, in task order. Queues take turns in queue order, asked
again after every job; a queue the plugins call overused gets nothing more this session.
From the queue first in line, the job first in job order gets a statement:

- a task its queue may not take (allocatable) is skipped;
- a task of a role that already fit nowhere is skipped (Volcano's predicate error cache;
  ``predicateErrorCacheEnable: false`` in the allocate action's arguments turns it off);
- a task that fits nowhere stops the job, unless its other tasks can still make it
  ready (Volcano's ``NeedContinueAllocating``: the roles' minimums and minMember);
- otherwise it goes to the best node with room now, or — when only evictions under way
  will make room — is pipelined to the best such node;
- as soon as the job is ready, it stops.

A ready job's statement is committed (a gang batch for the binder) and the job goes back
in line if tasks remain; a job that is only pipelined keeps its statement in the session
for the actions after; any other job's statement is discarded, with a reason saying how
far the gang got. Without an enqueue action in the conf, pending jobs are admitted here.

Last, the queue-allocation gate (:func:`lift_queue_gates`): a gated pod that opted in is let out
of its gate when its queue may take it, after this session's placements have taken their share.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from batch_scheduler.actions._interleave import by_queue, interleave
from batch_scheduler.actions._topology import highest_tier, place_in_topology
from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo
from batch_scheduler.reasons import PendingReason
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import TaskInfo, parse_bool
from cluster.model.labels import QUEUE_ALLOCATION_GATE
from cluster.nodeview.table import Mask

if TYPE_CHECKING:
    from batch_scheduler.session import Session

ERROR_CACHE = "predicateErrorCacheEnable"


def worksheet(ssn: Session, pending: list[TaskInfo]) -> deque[TaskInfo]:
    return deque(ssn.tiers.sort_tasks(t for t in pending if not t.best_effort and not t.scheduling_gated))


def error_cache(ssn: Session) -> bool:
    """Whether allocate skips tasks of a role that already fit nowhere (Volcano's default: yes)."""
    return parse_bool(ssn.conf.argument("allocate", ERROR_CACHE) or "true") is not False


def place_tasks(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    tasks: deque[TaskInfo],
    role_cache: bool = True,
    within: Mask | None = None,
) -> Statement | None:
    """Volcano's ``allocateResourcesForTasks``: the job's statement, or None (discarded);
    ``within``: only these nodes (a HyperNode's)."""
    stmt = Statement(ssn)
    failure: tuple[PendingReason, str] | None = None
    while tasks:
        task = tasks.popleft()
        refusal = ssn.tiers.allocatable(queue, task)
        if refusal is not None:
            failure = failure or (refusal.condition, refusal.message)
            continue
        if role_cache and job.task_has_fit_errors(task):
            job.fit_errors[task.uid] = f"task {task.name}: a task of role {task.role} already fit nowhere"
            continue
        choice = ssn.best_node(task, within)
        if not isinstance(choice, tuple):
            message = f"task {task.name}: {choice.reason()}"
            job.fit_errors[task.uid] = message
            failure = failure or (PendingReason.NOT_ENOUGH_RESOURCES, message)
            if job.need_continue_allocating():
                continue
            break
        row, pipelined = choice
        node = ssn.columns.names[row]
        if pipelined:
            stmt.pipeline(task, node)
        else:
            stmt.allocate(task, node)
        if ssn.tiers.job_ready(job):
            break
    if ssn.tiers.job_ready(job) or ssn.tiers.job_pipelined(job):
        if failure is not None:  # tasks beyond the gang's need, or a pipelined gang, still wait
            job.set_reason(failure[0], failure[1])
        return stmt
    placeable = job.ready_count + job.pipelined_count
    stmt.discard()
    short = max(job.min_member - placeable, 0)
    what = failure[1] if failure is not None else "the gang's task roles (minTaskMember) are not all placeable"
    job.set_reason(
        failure[0] if failure is not None else PendingReason.NOT_ENOUGH_RESOURCES,
        f"gang: {placeable}/{job.min_member} tasks placeable, {short} short: {what}",
    )
    return None


def gated_reason(gated: list[TaskInfo]) -> str:
    gates = sorted({g.name for t in gated for g in t.pod.spec.scheduling_gates})
    reason = f"{len(gated)} pod(s) wait for their scheduling gates to be removed ({', '.join(gates)})"
    if any(t.queue_gated and not t.queue_gate_opted_in for t in gated):
        reason += (
            f"; the {QUEUE_ALLOCATION_GATE} gate is lifted only for pods annotated "
            f'{QUEUE_ALLOCATION_GATE}: "true" (these are not)'
        )
    return reason


def lift_queue_gates(ssn: Session, gated: list[tuple[JobInfo, TaskInfo]]) -> None:
    """Volcano's queue admission by scheduling gate: a pod that opted in and whose queue may take
    it now (``allocatable``, with the pods whose gate was lifted before counted) has its
    queue-allocation gate removed — the binder's side writes it to the API — and its request held
    against the queue (``QueueGate``) until it is placed. Its other gates, if any, stay."""
    for job, task in sorted(gated, key=lambda jt: (jt[1].created, jt[1].uid)):
        queue = ssn.queues.get(job.queue)
        if queue is None or ssn.tiers.allocatable(queue, task) is not None:
            continue
        ssn.ungated.append(task)
        for p in ssn.tiers.queue_gates:
            p.gate_passed(task)


def run(ssn: Session) -> None:
    sheets: dict[str, deque[TaskInfo]] = {}
    gate_queue: list[tuple[JobInfo, TaskInfo]] = []
    jobs = []
    for job in ssn.jobs.values():
        if job.is_pending():
            if "enqueue" in ssn.conf.actions:
                continue
            job.phase = "Inqueue"  # no enqueue action: admitted here, as in Volcano
        if not ssn.in_queue(job) or not ssn.schedulable(job):
            continue
        pending = job.pending()
        tasks = worksheet(ssn, pending)
        gated = [t for t in pending if t.scheduling_gated]
        if gated:
            job.set_reason(PendingReason.SCHEDULING_GATED, gated_reason(gated))
            gate_queue.extend((job, t) for t in gated if t.queue_gated and t.queue_gate_opted_in)
        if tasks:
            sheets[job.key] = tasks
            jobs.append(job)

    def overused(queue: QueueInfo, remaining: list[JobInfo]) -> bool:
        refusal = ssn.tiers.overused(queue)
        if refusal is None:
            return False
        for job in remaining:
            job.set_reason(refusal.condition, refusal.message)
        return True

    role_cache = error_cache(ssn)

    def place(
        ssn: Session, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo], within: Mask | None
    ) -> Statement | None:
        return place_tasks(ssn, queue, job, tasks, role_cache, within)

    def handle(queue: QueueInfo, job: JobInfo) -> bool:
        tasks = sheets[job.key]
        tier = highest_tier(ssn, job)
        if tier is None and not job.sub_jobs:
            stmt = place_tasks(ssn, queue, job, tasks, role_cache)
        else:
            stmt = place_in_topology(ssn, queue, job, tasks, place, tier)
        if stmt is not None and ssn.tiers.job_ready(job):
            stmt.commit()
            return bool(tasks)  # more tasks than the gang needs: back in line
        return False

    interleave(ssn, by_queue(ssn, jobs), handle, overused)
    lift_queue_gates(ssn, gate_queue)
