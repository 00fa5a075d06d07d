"""Making room for a task by evicting others: preempt (same queue) and reclaim (other queues).

Both follow Volcano: the task's candidate nodes are those its predicates allow when free
resources are set aside (own shard first in soft mode); on each node the plugins vote on
which of the eligible tasks there may go (``preemptable`` / ``reclaimable``), the node is
skipped when even all of them would not make room, and victims go in Volcano's victim
order — other queues by victim-queue order, other jobs last in job order first, a job's
own tasks last in task order first — only until the task fits. The task is then
pipelined onto the node: allocate places it in a later session, once its victims are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from batch_scheduler.statement import Statement
from batch_scheduler.tasks import PREEMPTABLE_STATUSES, TaskInfo
from cluster.nodeview.devices import card_fit
from cluster.nodeview.fit import fitting
from cluster.nodeview.pod_affinity import pod_rules

if TYPE_CHECKING:
    from batch_scheduler.session import Session


class VictimIndex:
    """Per action: the nodes holding a running or bound preemptable task of some queues.

    Worked out once per set of queues: within an action, tasks only stop being victims
    (evicted), so the set stays a superset of where victims are, and the per-node check that
    follows is exact."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.by_queue: dict[str, npt.NDArray[np.intp]] | None = None
        self.masks: dict[frozenset[str], npt.NDArray[np.bool_]] = {}

    def rows(self, queues: Iterable[str]) -> npt.NDArray[np.bool_]:
        key = frozenset(queues)
        mask = self.masks.get(key)
        if mask is None:
            if self.by_queue is None:
                self.by_queue = self._by_queue()
            mask = np.zeros(self.ssn.n, dtype=np.bool_)
            for q in key:
                rows = self.by_queue.get(q)
                if rows is not None:
                    mask[rows] = True
            self.masks[key] = mask
        return mask

    def _by_queue(self) -> dict[str, npt.NDArray[np.intp]]:
        ssn, found = self.ssn, {}
        rows: dict[str, list[int]] = {}
        for node, tasks in ssn.node_tasks.items():
            i = ssn.columns.index.get(node)
            if i is None:
                continue
            for t in tasks:
                if t.status in PREEMPTABLE_STATUSES and t.preemptable:
                    rows.setdefault(ssn.jobs[t.job].queue, []).append(i)
        for q, rs in rows.items():
            found[q] = np.array(rs, dtype=np.intp)
        return found


def room_rows(ssn: Session, task: TaskInfo) -> npt.NDArray[np.bool_]:
    """Nodes where the task fits in what they will have once their evictions finish."""
    cols = ssn.columns
    fits = fitting(cols, task.request)
    need = task.need
    if need is not None:
        fits &= card_fit(cols, need)
    for node in ssn.releasing:  # few nodes: evictions under way
        i = cols.index.get(node)
        if i is not None and not fits[i]:
            fits[i] = ssn.fits_once_freed(task.request, node, pod=task.pod)
    return fits


def candidate_nodes(ssn: Session, task: TaskInfo, where: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
    """Rows among ``where`` the predicates allow without free resources, own shard first (soft
    mode). Volcano tries every such node; one without room and without a victim is always
    passed over (even all victims would not make room), so only ``where`` is looked at."""
    rows = np.flatnonzero(ssn.chooser.allowed(task) & where)
    return rows[np.argsort(ssn.rank[rows], kind="stable")]


def rules_allow(ssn: Session, task: TaskInfo, node: str, gone: Sequence[TaskInfo]) -> bool:
    """Whether the task's inter-pod rules (and placed pods' anti-affinity) let it on ``node`` once
    ``gone`` have left it — kube-scheduler's preemption filters the node without its victims."""
    if not ssn.ruled(task):
        return True  # no rule here rules out a node
    placed = ssn.placed
    removed = [placed.pods[t.uid] for t in gone if t.uid in placed.pods]
    for entry in removed:
        placed.remove(entry.uid)
    try:
        return bool(pod_rules(ssn.columns, task.pod, placed).mask[ssn.columns.index[node]])
    finally:
        for entry in removed:
            placed.add_placed(entry)


def must_go(
    ssn: Session, task: TaskInfo, node: str, victims: Sequence[TaskInfo], order: Callable[[TaskInfo], Any]
) -> list[TaskInfo]:
    """The victims in eviction order, those the task's inter-pod rules need gone first (each one whose
    staying alone would keep the task out), so that no more are evicted than room and rules need."""
    ranked = sorted(victims, key=order)
    if len(ranked) < 2 or not ssn.ruled(task):
        return ranked
    first = [v for v in ranked if not rules_allow(ssn, task, node, [o for o in ranked if o is not v])]
    return first + [v for v in ranked if all(v is not f for f in first)]


def preempt_on_nodes(
    ssn: Session, stmt: Statement, preemptor: TaskInfo, rows: npt.NDArray[np.intp], eligible: Callable[[TaskInfo], bool]
) -> bool:
    """Volcano's ``normalPreempt``: nodes by score, evicting until the preemptor's queue may
    take it and it fits; True when it was pipelined somewhere."""
    if not len(rows):
        return False
    scores = ssn.tiers.scores(ssn, preemptor, rows)
    queue = ssn.queues[ssn.jobs[preemptor.job].queue]
    order = ssn.victim_order(preemptor)

    def fits_now(node: str) -> bool:
        return ssn.tiers.allocatable(queue, preemptor) is None and ssn.fits_once_freed(
            preemptor.request, node, pod=preemptor.pod
        )

    for i in rows[np.argsort(-scores, kind="stable")]:
        node = ssn.columns.names[int(i)]
        preemptees = [t for t in ssn.node_tasks.get(node, []) if eligible(t)]
        victims = ssn.tiers.preemptable(preemptor, preemptees)
        if not ssn.fits_once_freed(preemptor.request, node, victims, pod=preemptor.pod):
            continue
        if not rules_allow(ssn, preemptor, node, victims):
            continue  # a pod that stays keeps it out, whatever is evicted
        evicted: list[TaskInfo] = []
        for victim in must_go(ssn, preemptor, node, victims, order):
            if fits_now(node) and rules_allow(ssn, preemptor, node, evicted):
                break
            stmt.evict(victim)
            evicted.append(victim)
        if fits_now(node) and rules_allow(ssn, preemptor, node, evicted):
            stmt.pipeline(preemptor, node)
            return True
    return False


def reclaim_on_nodes(
    ssn: Session, stmt: Statement, reclaimer: TaskInfo, rows: npt.NDArray[np.intp], eligible: Callable[[TaskInfo], bool]
) -> bool:
    """Volcano's ``reclaimForTask``: nodes in order, evicting until the task fits; True when
    it was pipelined somewhere."""
    order = ssn.victim_order(reclaimer)
    for i in rows:
        node = ssn.columns.names[int(i)]
        reclaimees = [t for t in ssn.node_tasks.get(node, []) if eligible(t)]
        if not reclaimees:
            continue
        victims = ssn.tiers.reclaimable(reclaimer, reclaimees)
        if not ssn.fits_once_freed(reclaimer.request, node, victims, pod=reclaimer.pod) or not rules_allow(
            ssn, reclaimer, node, victims
        ):
            continue
        evicted: list[TaskInfo] = []
        for victim in must_go(ssn, reclaimer, node, victims, order):
            stmt.evict(victim)
            evicted.append(victim)
            if ssn.fits_once_freed(reclaimer.request, node, pod=reclaimer.pod) and rules_allow(
                ssn, reclaimer, node, evicted
            ):
                break
        if ssn.fits_once_freed(reclaimer.request, node, pod=reclaimer.pod) and rules_allow(
            ssn, reclaimer, node, evicted
        ):
            stmt.pipeline(reclaimer, node)
            return True
    return False
