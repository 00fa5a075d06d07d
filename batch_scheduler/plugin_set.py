"""A session's plugins sorted into one list per extension point, and their answers combined as Volcano's tiers.

:class:`PluginSet` sorts the plugin instances once, when a session opens, honouring the
conf's ``enableXxx`` switches (absent = enabled). How several plugins combine follows Volcano:

- orders (job, queue, task): tier by tier, plugin by plugin, the first non-zero answer wins;
  then Volcano's defaults (jobs and queues by creation then name, tasks by pod index, then
  creation, then uid);
- predicates: every plugin must pass (masks are ANDed);
- node scores: summed over every plugin;
- job ready: every plugin must agree; job valid: the first refusal wins (no switch);
- job pipelined: any reject fails; otherwise a tier with a permit passes;
- job starving: the first tier with a plugin decides, every plugin of it must agree; no
  plugin at all means not starving;
- allocatable and preemptive: every plugin must agree; overused: any plugin may say so;
- enqueueable: any reject fails; otherwise a tier with a permit passes;
- preemptable / reclaimable: within a tier the victims of the voting plugins are
  intersected; the first tier with a non-empty result wins. As in Volcano, an intersection
  that comes out empty starts over from the next plugin's victims.
- event handlers: every plugin that has them hears every allocation and deallocation
  (statements call them), so shares it keeps stay current.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from batch_scheduler.framework import (
    SWITCHES,
    Allocatable,
    Enqueueable,
    EventHandler,
    HyperNodeOrder,
    JobOrder,
    JobPipelined,
    JobReady,
    JobStarving,
    JobValid,
    Overused,
    PlacedScore,
    Plugin,
    Preemptable,
    Preemptive,
    QueueGate,
    QueueOrder,
    Reclaimable,
    SessionView,
    TaskOrder,
    VictimQueueOrder,
)
from batch_scheduler.jobs import JobInfo, job_order
from batch_scheduler.queues import QueueInfo, queue_order
from batch_scheduler.tasks import TaskInfo, task_order
from batch_scheduler.votes import PERMIT, Refusal, Vote, VoteKind
from cluster.nodeview.profile import Filter, Score
from cluster.nodeview.scores import Index, Scores
from cluster.nodeview.table import Mask
from cluster.nodeview.topology import Domain

T = TypeVar("T")


class PluginSet:
    """The session's plugins sorted into per-point lists, tier by tier."""

    def __init__(self, tiers: Sequence[Sequence[tuple[Plugin, frozenset[str]]]]) -> None:
        """``tiers``: per tier, each plugin instance with the switches the conf turned off."""
        self.tiers = [[p for p, _ in tier] for tier in tiers]

        def point(proto: Any) -> list[list[Any]]:
            switch = SWITCHES[proto]
            return [[p for p, off in tier if isinstance(p, proto) and switch not in off] for tier in tiers]

        def flat(proto: Any) -> list[Any]:
            return [p for tier in point(proto) for p in tier]

        self.job_orders: list[list[JobOrder]] = point(JobOrder)
        self.queue_orders: list[list[QueueOrder]] = point(QueueOrder)
        self.task_orders: list[list[TaskOrder]] = point(TaskOrder)
        self.predicates: list[Filter] = flat(Filter)
        self.node_orders: list[Score] = flat(Score)
        self.placed_scorers: list[PlacedScore] = flat(PlacedScore)
        self.queue_gates: list[QueueGate] = [p for tier in self.tiers for p in tier if isinstance(p, QueueGate)]
        self.hypernode_orders: list[HyperNodeOrder] = flat(HyperNodeOrder)
        self.ready_checks: list[JobReady] = flat(JobReady)
        self.schedulable_checks: list[JobValid] = [p for tier in self.tiers for p in tier if isinstance(p, JobValid)]
        self.preempt_voters: list[list[Preemptable]] = point(Preemptable)
        self.reclaim_voters: list[list[Reclaimable]] = point(Reclaimable)
        self.overuse_checks: list[Overused] = flat(Overused)
        self.allocatable_checks: list[Allocatable] = flat(Allocatable)
        self.enqueue_voters: list[list[Enqueueable]] = point(Enqueueable)
        self.preemptive_checks: list[Preemptive] = flat(Preemptive)
        self.pipelined_checks: list[list[JobPipelined]] = point(JobPipelined)
        self.starving_checks: list[list[JobStarving]] = point(JobStarving)
        self.victim_queue_orders: list[VictimQueueOrder] = [
            p for tier in self.tiers for p in tier if isinstance(p, VictimQueueOrder)
        ]
        self.event_handlers: list[EventHandler] = [
            p for tier in self.tiers for p in tier if isinstance(p, EventHandler)
        ]

    # -- orders -------------------------------------------------------------------------

    @staticmethod
    def _compare(tiers: list[list[T]], call: Callable[[T], int]) -> int:
        for tier in tiers:
            for plugin in tier:
                result = call(plugin)
                if result:
                    return result
        return 0

    def job_compare(self, a: JobInfo, b: JobInfo) -> int:
        return self._compare(self.job_orders, lambda p: p.job_order(a, b)) or job_order(a, b)

    def queue_compare(self, a: QueueInfo, b: QueueInfo) -> int:
        return self._compare(self.queue_orders, lambda p: p.queue_order(a, b)) or queue_order(a, b)

    def task_compare(self, a: TaskInfo, b: TaskInfo) -> int:
        return self._compare(self.task_orders, lambda p: p.task_order(a, b)) or task_order(a, b)

    def job_key(self) -> Callable[[JobInfo], Any]:
        return functools.cmp_to_key(self.job_compare)

    def queue_key(self) -> Callable[[QueueInfo], Any]:
        return functools.cmp_to_key(self.queue_compare)

    def task_key(self) -> Callable[[TaskInfo], Any]:
        return functools.cmp_to_key(self.task_compare)

    def sort_tasks(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        """``tasks`` in task order. When every task-order plugin also gives a sort key
        (``task_order_key``) and the tasks all have a pod index or all have none, a tuple key
        sorts them as the comparisons would, without calling back into Python per comparison."""
        out = list(tasks)
        if len(out) < 2:  # most of a backlog's jobs are small: nothing to order
            return out
        plugins = [p for tier in self.task_orders for p in tier]
        keys = [getattr(p, "task_order_key", None) for p in plugins]
        indexed = sum(1 for t in out if t.index is not None)
        if None in keys or 0 < indexed < len(out):
            out.sort(key=self.task_key())
            return out
        plugin_keys = [k for k in keys if k is not None]
        if len(plugin_keys) == 1:  # the usual conf (priority's): no tuple built from a generator per task
            (first,) = plugin_keys
            if indexed:
                out.sort(key=lambda t: (first(t), t.index, t.created, t.uid))
            else:
                out.sort(key=lambda t: (first(t), t.created, t.uid))
        elif indexed:
            out.sort(key=lambda t: (*(k(t) for k in plugin_keys), t.index, t.created, t.uid))
        else:
            out.sort(key=lambda t: (*(k(t) for k in plugin_keys), t.created, t.uid))
        return out

    def victim_queue_compare(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """Negative when ``a``'s tasks go first as victims; by default the queue last in queue order."""
        for p in self.victim_queue_orders:
            result = p.victim_queue_order(a, b, preemptor)
            if result:
                return result
        return -self.queue_compare(a, b)

    # -- job questions ------------------------------------------------------------------

    def job_ready(self, job: JobInfo) -> bool:
        return all(p.job_ready(job) for p in self.ready_checks)

    def job_pipelined(self, job: JobInfo) -> bool:
        for tier in self.pipelined_checks:
            permitted = False
            for p in tier:
                if not p.job_pipelined(job):
                    return False
                permitted = True
            if permitted:
                return True
        return True

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.starving_checks:
            if tier:
                return all(p.job_starving(job) for p in tier)
        return False

    def why_not_schedulable(self, job: JobInfo) -> Refusal | None:
        for p in self.schedulable_checks:
            refusal = p.why_not_schedulable(job)
            if refusal is not None:
                return refusal
        return None

    def enqueueable(self, job: JobInfo) -> Vote:
        """PERMIT or the first REJECT (any reject fails; a tier with a permit passes)."""
        for tier in self.enqueue_voters:
            permitted = False
            for p in tier:
                vote = p.enqueueable(job)
                if vote.kind is VoteKind.REJECT:
                    return vote
                permitted |= vote.kind is VoteKind.PERMIT
            if permitted:
                return PERMIT
        return PERMIT

    def enqueued(self, job: JobInfo) -> None:
        """Tell every voter the job was admitted (only now do they reserve its minResources)."""
        for tier in self.enqueue_voters:
            for p in tier:
                p.enqueued(job)

    # -- queue questions ----------------------------------------------------------------

    def overused(self, queue: QueueInfo) -> Refusal | None:
        for p in self.overuse_checks:
            refusal = p.overused(queue)
            if refusal is not None:
                return refusal
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> Refusal | None:
        for p in self.allocatable_checks:
            refusal = p.allocatable(queue, task)
            if refusal is not None:
                return refusal
        return None

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return all(p.preemptive(queue, task) for p in self.preemptive_checks)

    # -- events -------------------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        for p in self.event_handlers:
            p.allocated(task)

    def deallocated(self, task: TaskInfo) -> None:
        for p in self.event_handlers:
            p.deallocated(task)

    # -- victims ------------------------------------------------------------------------

    @staticmethod
    def _victims(tiers: list[list[T]], call: Callable[[T], list[TaskInfo] | None]) -> list[TaskInfo]:
        for tier in tiers:
            chosen: list[TaskInfo] = []
            for plugin in tier:
                result = call(plugin)
                if result is None:
                    continue
                if not result:
                    chosen = []
                    break
                if not chosen:  # first voter — or an empty intersection, which Volcano starts over from
                    chosen = list(result)
                else:
                    uids = {t.uid for t in result}
                    chosen = [t for t in chosen if t.uid in uids]
            if chosen:
                return chosen
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self._victims(self.preempt_voters, lambda p: p.preemptable(preemptor, candidates))

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self._victims(self.reclaim_voters, lambda p: p.reclaimable(reclaimer, candidates))

    # -- nodes --------------------------------------------------------------------------

    def hypernode_scores(self, job: JobInfo, tasks: Sequence[TaskInfo], domains: Sequence[Domain]) -> dict[str, float]:
        """The summed HyperNode scores of every plugin, per domain (0 without such a plugin)."""
        total = dict.fromkeys((d.name for d in domains), 0.0)
        for p in self.hypernode_orders:
            for name, score in p.hypernode_scores(job, tasks, domains).items():
                total[name] += score
        return total

    def placed_scores(self, task: TaskInfo, candidates: Mask) -> Scores | None:
        """The summed :class:`PlacedScore` answers for the task over every node, None when no plugin has one."""
        total: Scores | None = None
        for p in self.placed_scorers:
            score = p.placed_score(task, candidates)
            if score is not None:
                total = score.copy() if total is None else total + score
        return total

    def scores(self, ssn: SessionView, task: TaskInfo, nodes: Index | None = None) -> Scores:
        """The summed node scores of every plugin, for every node or only ``nodes``."""
        total = np.zeros(ssn.n if nodes is None else len(nodes), dtype=np.float64)
        if self.node_orders:
            placing = ssn.placing(task)
            for p in self.node_orders:
                total += p.score(ssn.columns, placing, nodes)
        return total
