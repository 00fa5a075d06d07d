"""One scheduling session: a snapshot of the cluster, the conf's plugins opened fresh, the actions in order.

The session is pure: built from a :class:`SessionInput` (copied node columns, this
scheduler's pods, PodGroups, Queues, PriorityClasses, the phases remembered from earlier
sessions) it runs the actions and leaves behind what to do — gang batches to commit,
pods to evict, a phase and a reason for every job. The scheduler process does the I/O.

It follows Volcano's session: jobs are PodGroups whose queue exists; a job's priority is
its PodGroup's PriorityClass (else the default class, else 0); a task's priority is its
pod's (``spec.priority``, else its PriorityClass), which ``volcano.sh/task-priority``
overrides; a task's status comes from its pod as Volcano's ``getTaskStatus`` reads it.
Nodes are the caldera node columns: what a node has free now (idle) is allocatable minus
allocated, and what it will have once the evictions under way finish (future idle) adds
what releasing tasks hold and takes off what pipelined tasks wait for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from batch_scheduler.chooser import Chooser
from batch_scheduler.conf import SchedulerConf
from batch_scheduler.framework import Tiers
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
from batch_scheduler.vector import Vector
from cluster.model.core import PriorityClass
from cluster.model.labels import QUEUE_NAME_ANNOTATION, TASK_PRIORITY_ANNOTATION
from cluster.model.resources import Resources
from cluster.model.volcano import PodGroup, Queue
from cluster.nodeview.fit import resources_fit
from cluster.nodeview.predicates import Filtered, insufficient
from cluster.nodeview.shard import ShardingMode, shard_feasible, shard_rank
from cluster.nodeview.table import Mask, NodeColumns
from cluster.store.records import PodRecord

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


def _task_status(record: PodRecord, releasing: frozenset[str]) -> TaskStatus:
    """Volcano's ``getTaskStatus``, with pods this scheduler is evicting counted as releasing."""
    phase = record.phase
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    if phase == "Unknown":
        return TaskStatus.UNKNOWN
    if record.uid in releasing or record.pod.metadata.deletion_timestamp:
        return TaskStatus.RELEASING
    if phase == "Running":
        return TaskStatus.RUNNING
    return TaskStatus.BOUND if record.node else TaskStatus.PENDING


class Session:
    def __init__(self, conf: SchedulerConf, config: SessionConfig, inp: SessionInput) -> None:
        self.conf = conf
        self.config = config
        self.columns = inp.columns
        self.n = len(inp.columns)
        self.allowed: Mask = shard_feasible(inp.columns, config.scheduler, config.sharding)
        self.rank = shard_rank(inp.columns, config.scheduler, config.sharding)
        # The cluster the shares divide: every node this scheduler may use (its shard in hard
        # mode), cordoned ones too, as Volcano's TotalResource counts every node it sees.
        self.total = Vector.from_amounts({r: int(inp.columns.allocatable[i, : self.n][self.allowed].sum())
                                          for i, r in enumerate(inp.columns.resources)})
        self.priority_classes = inp.priority_classes
        self.queues: dict[str, QueueInfo] = {}
        for i, name in enumerate(sorted(inp.queues)):
            self.queues[name] = queue_info(inp.queues[name], i)
        if config.default_queue not in self.queues:
            self.queues[config.default_queue] = default_queue(config.default_queue)
        self.jobs: dict[str, JobInfo] = {}
        self.tasks: dict[str, TaskInfo] = {}
        self.node_tasks: dict[str, list[TaskInfo]] = {}  # tasks of this scheduler on each node
        self.releasing: dict[str, Resources] = {}  # per node: what releasing tasks free, less what pipelined ones wait for
        self._build_jobs(inp)
        self.commits: list[list[TaskInfo]] = []
        self.evictions: list[TaskInfo] = []
        self.tiers = conf.build()
        for plugin in (p for tier in self.tiers.tiers for p in tier):
            plugin.open(self)
        self.chooser = Chooser(self)

    # -- building the snapshot -----------------------------------------------------------

    def default_priority(self) -> int:
        default = next((c for c in self.priority_classes.values() if c.global_default), None)
        return default.value if default is not None else 0

    def _class_value(self, class_name: str) -> int:
        pc = self.priority_classes.get(class_name) if class_name else None
        return pc.value if pc is not None else self.default_priority()

    def _task_priority(self, record: PodRecord) -> int:
        pod = record.pod
        text = pod.metadata.annotations.get(TASK_PRIORITY_ANNOTATION)
        if text is not None:
            try:
                return int(text)
            except ValueError:
                pass
        if pod.spec.priority is not None:
            return pod.spec.priority
        return self._class_value(pod.spec.priority_class_name)

    def _preemption_policy(self, record: PodRecord) -> str:
        policy = record.pod.spec.preemption_policy
        if policy is None:
            pc = self.priority_classes.get(record.pod.spec.priority_class_name)
            policy = pc.preemption_policy if pc is not None else ""
        return policy

    def _job(self, key: str, pg: PodGroup, order: int, phase: str) -> JobInfo:
        spec = pg.spec
        queue = spec.queue or self.config.default_queue
        return JobInfo(
            key=key, namespace=pg.namespace, name=pg.name, queue=queue,
            priority=self._class_value(spec.priority_class_name),
            min_member=max(spec.min_member, 0),
            min_resources=Vector.from_quantities(spec.min_resources, field="spec.minResources"),
            podgroup=pg, phase=phase, order=order, min_task_member=dict(spec.min_task_member),
            created=pg.metadata.creation_timestamp or "")

    def _build_jobs(self, inp: SessionInput) -> None:
        groups = sorted(inp.podgroups.items(), key=lambda kv: (kv[1].metadata.creation_timestamp or "", kv[0]))
        for order, (key, pg) in enumerate(groups):
            self.jobs[key] = self._job(key, pg, order, inp.phases.get(key, pg.status.phase))
        records = sorted(inp.pods, key=lambda r: (r.pod.metadata.creation_timestamp or "", r.namespace, r.name))
        for order, record in enumerate(records):
            if record.phase in ("Succeeded", "Failed") and not record.group:
                continue
            key = record.group or f"{record.namespace}/{IMPLICIT_PREFIX}{record.uid}"
            job = self.jobs.get(key)
            if job is None:
                namespace, _, name = key.partition("/")
                pod = record.pod
                # What Volcano's podgroup controller would create for a lone pod: minMember 1,
                # minResources its requests, its PriorityClass, the queue its annotation names.
                queue = pod.metadata.annotations.get(QUEUE_NAME_ANNOTATION) or self.config.default_queue
                job = JobInfo(key=key, namespace=namespace, name=name, queue=queue,
                              priority=self._class_value(pod.spec.priority_class_name), min_member=1,
                              min_resources=Vector.from_amounts(shareable(record.request)), podgroup=None,
                              phase=inp.phases.get(key, "Pending"),
                              order=len(self.jobs) + order, created=pod.metadata.creation_timestamp or "")
                if record.group:
                    job.set_reason("PodGroupNotFound", f"PodGroup {key} does not exist yet")
                self.jobs[key] = job
            task = TaskInfo(uid=record.uid, pod=record.pod, job=key, request=record.request, order=order,
                            priority=self._task_priority(record), status=_task_status(record, inp.releasing),
                            node=record.node, preemption_policy=self._preemption_policy(record))
            job.add(task)
            self.tasks[task.uid] = task
            if task.node and task.status in (TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING):
                self.node_tasks.setdefault(task.node, []).append(task)
            if task.status is TaskStatus.RELEASING:
                self.releasing_add(task, +1)
        for job in self.jobs.values():
            info = self.queues.get(job.queue)
            if info is None:
                job.set_reason("QueueNotFound", f"queue {job.queue} does not exist")
                continue
            if job.reason_kind == "PodGroupNotFound":
                continue  # Volcano leaves pods of a missing PodGroup out of every job and queue
            info.jobs.append(job)

    # -- what statements change ---------------------------------------------------------

    def releasing_add(self, task: TaskInfo, sign: int) -> None:
        """Count what a releasing task frees (+1) or a pipelined one takes of it (-1) on its node."""
        if not task.node:
            return
        current = self.releasing.get(task.node, Resources())
        self.releasing[task.node] = current + (task.request if sign > 0 else task.request.scaled(-1))

    def allocated_event(self, task: TaskInfo) -> None:
        self.tiers.allocated(task)

    def deallocated_event(self, task: TaskInfo) -> None:
        self.tiers.deallocated(task)

    # -- questions actions ask ----------------------------------------------------------

    def admitted(self, job: JobInfo) -> bool:
        """Inqueue (or running) — or any job at all when the conf has no enqueue action, as in Volcano."""
        return job.inqueue or "enqueue" not in self.conf.actions

    def schedulable(self, job: JobInfo) -> bool:
        """In a queue that exists and a PodGroup that exists, and valid by every plugin (Volcano's JobValid)."""
        if job.reason_kind in ("PodGroupNotFound", "QueueNotFound"):
            return False
        invalid = self.tiers.job_invalid(job)
        if invalid is not None:
            job.set_reason("NotEnoughPods", invalid)
            return False
        return True

    def in_queue(self, job: JobInfo) -> bool:
        """The job's queue exists (Volcano leaves other jobs out of the session)."""
        return job.reason_kind not in ("PodGroupNotFound", "QueueNotFound") and job.queue in self.queues

    def victim_order(self, preemptor: TaskInfo) -> Callable[[TaskInfo], Any]:
        """Volcano's ``BuildVictimsPriorityQueue`` as a sort key: the first victim first — within a
        job by reversed task order, across queues by victim queue order, else by reversed job order."""
        mine = self.queues.get(self.jobs[preemptor.job].queue)
        tiers, jobs, queues = self.tiers, self.jobs, self.queues

        def first(a: TaskInfo, b: TaskInfo) -> int:
            if a.job == b.job:
                return -tiers.task_compare(a, b)
            ja, jb = jobs[a.job], jobs[b.job]
            if ja.queue != jb.queue and mine is not None:
                return tiers.victim_queue_compare(queues[ja.queue], queues[jb.queue], mine)
            return -tiers.job_compare(ja, jb)

        return functools.cmp_to_key(first)

    def hierarchy_enabled(self, plugin: str) -> bool:
        """Whether the conf turns ``enableHierarchy`` on for the plugin (Volcano's default: off)."""
        return any(o.name == plugin and "enableHierarchy" in o.enabled for tier in self.conf.tiers for o in tier)

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

    def best_node(self, task: TaskInfo) -> tuple[int, bool] | Filtered:
        """Where the task goes: the highest-scoring node with room now (own shard first in soft
        mode; ties go to the first), else the best one whose room evictions are freeing — as
        ``(row, pipelined)`` — or the predicates' verdict when no node will have room."""
        row = self.chooser.choose(task)
        if row is not None:
            return row, False
        future = self.future_node(task)
        if future is not None:
            return future, True
        return self.feasible(task)

    def future_node(self, task: TaskInfo) -> int | None:
        """The best node where the task fits in what the node will have once its evictions finish."""
        rows = [self.columns.index[name] for name, freed in self.releasing.items()
                if name in self.columns.index and not freed.is_empty]
        if not rows:
            return None
        allowed = self.chooser.allowed(task)
        fits = [r for r in rows if allowed[r] and task.request.fits_in(self.future_idle(self.columns.names[r]))]
        if not fits:
            return None
        idx = np.array(sorted(fits), dtype=np.intp)
        scores = self.tiers.scores(self, task, idx) - self.chooser.penalty[idx]
        return int(idx[int(np.argmax(scores))])

    def idle(self, node: str) -> Resources:
        i = self.columns.index[node]
        return Resources({r: int(self.columns.allocatable[k, i] - self.columns.allocated[k, i])
                          for k, r in enumerate(self.columns.resources)})

    def future_idle(self, node: str) -> Resources:
        """What the node will have free once the evictions under way finish (Volcano's FutureIdle)."""
        return self.idle(node) + self.releasing.get(node, Resources())

    def run(self) -> None:
        for name in self.conf.actions:
            ACTIONS[name].run(self)

    def close(self) -> None:
        """Drop the plugins and the chooser, which point back at the session: without the cycle,
        reference counting frees the session's objects at once instead of the cyclic collector
        (which would walk the scheduler's whole cache to find them)."""
        self.tiers = Tiers([])
        self.chooser = Chooser.__new__(Chooser)
