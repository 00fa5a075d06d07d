"""One scheduling session: a snapshot of the cluster, the conf's plugins opened fresh, the actions in order.

The session is pure: built from a :class:`SessionInput` (copied node columns, this
scheduler's pods, PodGroups, Queues, PriorityClasses, the phases remembered from earlier
sessions) it runs the actions and leaves behind what to do — gang batches to commit,
pods to evict, a phase and a reason for every job. The scheduler process does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec
import numpy as np

from batch_scheduler.chooser import Chooser
from batch_scheduler.conf import SchedulerConf
from batch_scheduler.info import (
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
    default_queue,
    queue_info,
    shareable,
)
from batch_scheduler.registry import ACTIONS
from cluster.model import PodGroup, PriorityClass, Queue
from cluster.predicates import Filtered, insufficient, resources_fit
from cluster.records import PodRecord
from cluster.resources import Resources
from cluster.shard import ShardingMode, shard_feasible, shard_rank
from cluster.snapshot import Mask, NodeColumns

IMPLICIT_PREFIX = "podgroup-"  # a lone pod's implicit PodGroup is named podgroup-<pod uid>, as in Volcano


class SessionConfig(msgspec.Struct, frozen=True, kw_only=True):
    scheduler: str = "volcano"  # the name that owns shards
    sharding: ShardingMode = ShardingMode.SOFT
    default_queue: str = "default"


@dataclass
class SessionInput:
    columns: NodeColumns  # the session may change it: pass a copy
    pods: Iterable[PodRecord]  # this scheduler's pods, pending or bound
    podgroups: Mapping[str, PodGroup]  # by namespace/name
    queues: Mapping[str, Queue]
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    phases: Mapping[str, str] = field(default_factory=dict)  # job key -> phase from earlier sessions
    releasing: frozenset[str] = frozenset()  # uids being evicted


def _phase_status(record: PodRecord, releasing: frozenset[str]) -> TaskStatus:
    if record.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if record.phase == "Failed":
        return TaskStatus.FAILED
    if record.uid in releasing or record.pod.metadata.deletion_timestamp:
        return TaskStatus.RELEASING
    return TaskStatus.BOUND if record.node else TaskStatus.PENDING


class Session:
    def __init__(self, conf: SchedulerConf, config: SessionConfig, inp: SessionInput) -> None:
        self.conf = conf
        self.config = config
        self.columns = inp.columns
        self.n = len(inp.columns)
        self.allowed: Mask = shard_feasible(inp.columns, config.scheduler, config.sharding)
        self.rank = shard_rank(inp.columns, config.scheduler, config.sharding)
        usable = self.allowed & ~inp.columns.unschedulable[: self.n]
        self.total = shareable({r: int(inp.columns.allocatable[i, : self.n][usable].sum())
                                for i, r in enumerate(inp.columns.resources)})
        self.priority_classes = inp.priority_classes
        self.queues: dict[str, QueueInfo] = {}
        for i, name in enumerate(sorted(inp.queues)):
            self.queues[name] = queue_info(inp.queues[name], i)
        if config.default_queue not in self.queues:
            self.queues[config.default_queue] = default_queue(config.default_queue)
        self.jobs: dict[str, JobInfo] = {}
        self.tasks: dict[str, TaskInfo] = {}
        self.node_tasks: dict[str, list[TaskInfo]] = {}  # bound tasks of this scheduler per node
        self.releasing: dict[str, Resources] = {}  # per node, what evicted tasks will free
        self._build_jobs(inp)
        self.commits: list[list[TaskInfo]] = []
        self.evictions: list[TaskInfo] = []
        self.tiers = conf.build()
        for plugin in (p for tier in self.tiers.tiers for p in tier):
            plugin.open(self)
        self.chooser = Chooser(self)

    # -- building the snapshot -----------------------------------------------------------

    def _priority(self, class_name: str, explicit: int | None) -> int:
        if explicit is not None:
            return explicit
        pc = self.priority_classes.get(class_name) if class_name else None
        if pc is not None:
            return pc.value
        default = next((c for c in self.priority_classes.values() if c.global_default), None)
        return default.value if default is not None else 0

    def _build_jobs(self, inp: SessionInput) -> None:
        groups = sorted(inp.podgroups.items(), key=lambda kv: (kv[1].metadata.creation_timestamp or "", kv[0]))
        for order, (key, pg) in enumerate(groups):
            self.jobs[key] = JobInfo(
                key=key, namespace=pg.namespace, name=pg.name, queue=pg.spec.queue or self.config.default_queue,
                priority=self._priority(pg.spec.priority_class_name, None) if pg.spec.priority_class_name else 0,
                min_member=max(pg.spec.min_member, 0), min_resources=shareable(pg.min_resources_resources()),
                podgroup=pg, phase=inp.phases.get(key, pg.status.phase), order=order,
                min_task_member=dict(pg.spec.min_task_member))
        records = sorted(inp.pods, key=lambda r: (r.pod.metadata.creation_timestamp or "", r.namespace, r.name))
        explicit_priority = {key for key, pg in inp.podgroups.items() if pg.spec.priority_class_name}
        for order, record in enumerate(records):
            if record.phase in ("Succeeded", "Failed") and not record.group:
                continue
            key = record.group or f"{record.namespace}/{IMPLICIT_PREFIX}{record.uid}"
            job = self.jobs.get(key)
            if job is None:
                namespace, _, name = key.partition("/")
                job = JobInfo(key=key, namespace=namespace, name=name, queue=self.config.default_queue,
                              priority=0, min_member=1, min_resources=Resources(), podgroup=None,
                              phase=inp.phases.get(key, "Pending"), order=len(self.jobs) + order)
                if record.group:
                    job.set_reason("PodGroupNotFound", f"PodGroup {key} does not exist yet")
                self.jobs[key] = job
            pod = record.pod
            task = TaskInfo(uid=record.uid, pod=pod, job=key, request=record.request, order=order,
                            priority=self._priority(pod.spec.priority_class_name, pod.spec.priority),
                            status=_phase_status(record, inp.releasing), node=record.node)
            job.add(task)
            self.tasks[task.uid] = task
            if key not in explicit_priority:
                job.priority = max(job.priority, task.priority) if len(job.tasks) > 1 else task.priority
            if task.node and task.status in (TaskStatus.BOUND, TaskStatus.RELEASING):
                self.node_tasks.setdefault(task.node, []).append(task)
            if task.status is TaskStatus.BOUND:
                self.account(task, +1)
            elif task.status is TaskStatus.RELEASING and task.node:
                self.releasing_add(task, +1)
        for job in self.jobs.values():
            if job.queue not in self.queues:
                job.set_reason("QueueNotFound", f"queue {job.queue} does not exist")
            elif not self.queues[job.queue].open:
                job.set_reason("QueueClosed", f"queue {job.queue} is not open: only Open queues take new jobs")

    # -- accounting (statements call these) ---------------------------------------------

    def account(self, task: TaskInfo, sign: int) -> None:
        """Count a task's request in its job's and queue's allocation (sign -1 takes it out)."""
        job = self.jobs[task.job]
        req = task.resreq if sign > 0 else task.resreq.scaled(-1)
        job.allocated = job.allocated + req
        queue = self.queues.get(job.queue)
        if queue is not None:
            queue.allocated = queue.allocated + req

    def releasing_add(self, task: TaskInfo, sign: int) -> None:
        if not task.node:
            return
        current = self.releasing.get(task.node, Resources())
        self.releasing[task.node] = current + (task.request if sign > 0 else task.request.scaled(-1))

    # -- questions actions ask ----------------------------------------------------------

    def admitted(self, job: JobInfo) -> bool:
        """Inqueue (or running) — or any job at all when the conf has no enqueue action, as in Volcano."""
        return job.inqueue or "enqueue" not in self.conf.actions

    def schedulable(self, job: JobInfo) -> bool:
        """Not held back by a missing PodGroup or queue, a closed queue, or a plugin's validity check."""
        if job.reason_kind in ("PodGroupNotFound", "QueueNotFound", "QueueClosed"):
            return False
        invalid = self.tiers.job_invalid(job)
        if invalid is not None:
            job.set_reason("NotEnoughPods", invalid)
            return False
        return True

    def feasible(self, task: TaskInfo, *, ignore_resources: bool = False) -> Filtered:
        """The nodes the task may go to, by every predicate (resources unless told otherwise)."""
        allowed = self.allowed
        if self.tiers.predicates:
            result: Filtered | None = None
            for p in self.tiers.predicates:
                f = p.predicate(self, task, allowed, resources=not ignore_resources)
                result = f if result is None else Filtered(mask=result.mask & f.mask, failed={**result.failed, **f.failed},
                                                           total=self.n)
            assert result is not None
            return result
        mask = allowed & ~self.columns.unschedulable[: self.n]
        failed: dict[str, int] = {}
        if self.n - int(np.count_nonzero(mask)):
            failed["unschedulable"] = self.n - int(np.count_nonzero(mask))
        if not ignore_resources:
            fit, short = resources_fit(self.columns, task.request)
            for name, m in short.items():
                count = int(np.count_nonzero(mask & m))
                if count:
                    failed[insufficient(name)] = count
            mask &= fit
        return Filtered(mask=mask, failed=failed, total=self.n)

    def best_node(self, task: TaskInfo) -> int | Filtered:
        """The row of the highest-scoring feasible node (own shard first in soft mode; ties go to
        the first), or the predicates' verdict when no node fits."""
        row = self.chooser.choose(task)
        return row if row is not None else self.feasible(task)

    def future_idle(self, node: str) -> Resources:
        """What the node will have free once the evictions under way finish."""
        i = self.columns.index[node]
        free = {r: int(self.columns.allocatable[k, i] - self.columns.allocated[k, i]) for k, r in enumerate(self.columns.resources)}
        return Resources(free) + self.releasing.get(node, Resources())

    def run(self) -> None:
        for name in self.conf.actions:
            ACTIONS[name].run(self)
