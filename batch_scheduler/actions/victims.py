"""Making room for a task by evicting others: shared by preempt (same queue) and reclaim (other queues)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from batch_scheduler.info import JobInfo, TaskInfo, TaskStatus
from batch_scheduler.statement import Op, Statement

if TYPE_CHECKING:
    from batch_scheduler.session import Session

Vote = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]


def make_room(ssn: Session, stmt: Statement, task: TaskInfo, eligible: Callable[[TaskInfo], bool], vote: Vote) -> bool:
    """Evict the fewest eligible victims the plugins allow from one node so that ``task`` fits there.

    Nodes are tried best score first; on each, victims go lowest task order first. The
    task is pipelined onto the node: it is placed in a later session, once its victims
    are gone. False when no node can be freed for it.
    """
    feasible = ssn.feasible(task, ignore_resources=True)
    for i in np.flatnonzero(feasible.mask):  # room already being freed here: no new victims
        name = ssn.columns.names[int(i)]
        if name in ssn.releasing and task.request.fits_in(ssn.future_idle(name)):
            stmt.pipeline(task, name)
            return True
    with_victims = np.array([bool(ssn.node_tasks.get(name)) for name in ssn.columns.names], dtype=np.bool_)
    idx = np.flatnonzero(feasible.mask & with_victims)
    if not len(idx):
        return False
    scores = ssn.tiers.scores(ssn, task, idx)
    order = ssn.tiers.task_key()
    for i in idx[np.argsort(-scores, kind="stable")]:
        name = ssn.columns.names[int(i)]
        pool = [t for t in ssn.node_tasks.get(name, []) if t.status is TaskStatus.BOUND and t.preemptable and eligible(t)]
        if not pool:
            continue
        victims = vote(task, pool)
        idle = ssn.future_idle(name)
        freed = idle
        for v in victims:
            freed = freed + v.request
        if not task.request.fits_in(freed):
            continue
        for victim in sorted(victims, key=order, reverse=True):
            if task.request.fits_in(idle):
                break
            stmt.evict(victim)
            idle = idle + victim.request
        stmt.pipeline(task, name)
        return True
    return False


def evict_for_job(ssn: Session, job: JobInfo, eligible: Callable[[TaskInfo], bool], vote: Vote,
                  may_take: Callable[[TaskInfo], bool] = lambda task: True) -> int | None:
    """Make room for the job's waiting tasks, in task order, until it would be ready.

    The evictions are kept only when the job's placed and pipelined tasks make it ready;
    then the number of victims, else None (and nothing changed). ``may_take`` stops at the
    first task its queue may not take.
    """
    stmt = Statement(ssn)
    for task in sorted(job.pending(), key=ssn.tiers.task_key()):
        if not may_take(task) or not make_room(ssn, stmt, task, eligible, vote):
            break
        if ssn.tiers.job_pipelined(job):
            break
    if ssn.tiers.job_pipelined(job) and not stmt.empty:
        evicted = sum(1 for op, _, _ in stmt.ops if op is Op.EVICT)
        stmt.commit()
        return evicted
    stmt.discard()
    return None
