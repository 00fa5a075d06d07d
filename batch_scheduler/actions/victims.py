"""Making room for a task by evicting others: shared by preempt (same queue) and reclaim (other queues)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from batch_scheduler.info import TaskInfo, TaskStatus
from batch_scheduler.statement import Statement

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
