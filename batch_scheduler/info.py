"""What a session schedules: tasks (pods), jobs (PodGroups with their tasks) and queues.

These are the session's own objects, built fresh from the scheduler's cache for every
session and changed only by its statements; nothing here touches Redis.
Resource figures for jobs and queues leave out ``pods`` (every pod takes one on its node,
which the node fit checks; it is not a share anyone is entitled to).
"""

from __future__ import annotations

import enum
import functools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from cluster.model import Pod, PodGroup, Queue
from cluster.resources import PODS, Resources

PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
_encoder = msgspec.msgpack.Encoder()
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def shareable(request: Mapping[str, int]) -> Resources:
    """A request without its ``pods`` entry: what job and queue accounting counts."""
    return Resources({k: v for k, v in request.items() if k != PODS})


class TaskStatus(enum.StrEnum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"  # placed in this session, not yet committed
    PIPELINED = "Pipelined"  # waits for resources that evictions are freeing
    BOUND = "Bound"  # bound (running or about to)
    RELEASING = "Releasing"  # evicted, still holding its node until it is gone
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


OCCUPYING = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND})
READY = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.SUCCEEDED})


@dataclass(eq=False)
class TaskInfo:
    uid: str
    pod: Pod
    job: str  # the job key
    request: Resources  # with pods: 1, for node fit
    priority: int
    status: TaskStatus
    node: str = ""
    order: int = 0  # creation order, the last tie-break

    def __setattr__(self, name: str, value: Any) -> None:
        # Keep the job's per-status counts (JobInfo.add) in step with every status change.
        if name == "status":
            counts: Counter[TaskStatus] | None = self.__dict__.get("_counts")
            if counts is not None:
                counts[self.__dict__["status"]] -= 1
                counts[value] += 1
        object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @functools.cached_property
    def resreq(self) -> Resources:
        return shareable(self.request)

    @functools.cached_property
    def template(self) -> tuple[Resources, bytes]:
        """What decides where the task may go and how nodes score for it; alike tasks share it."""
        spec = self.pod.spec
        return self.request, _encoder.encode((spec.tolerations, spec.node_selector, spec.affinity))

    @functools.cached_property
    def best_effort(self) -> bool:
        """Requests nothing but its pod slot (backfill places these)."""
        return all(v == 0 for k, v in self.request.items() if k != PODS)

    @property
    def preemptable(self) -> bool:
        """``volcano.sh/preemptable`` (annotation, then label); absent means true."""
        value = self.pod.metadata.annotations.get(PREEMPTABLE_ANNOTATION, self.pod.labels.get(PREEMPTABLE_ANNOTATION, "true"))
        return value.strip().lower() != "false"

    @property
    def critical(self) -> bool:
        """A kube-system or system-critical pod, which nothing may evict (conformance)."""
        return self.namespace == "kube-system" or self.pod.spec.priority_class_name in CRITICAL_CLASSES


@dataclass(eq=False)
class JobInfo:
    """A gang: a PodGroup (or the implicit one-pod group of a lone pod) and its tasks."""

    key: str  # namespace/name
    namespace: str
    name: str
    queue: str
    priority: int
    min_member: int
    min_resources: Resources
    podgroup: PodGroup | None  # None for a lone pod's implicit group
    phase: str  # PodGroup phase at session open: Pending, Inqueue, Running, Unknown, Completed
    order: int  # creation order
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    allocated: Resources = field(default_factory=Resources)  # sum over occupying tasks
    reason: str = ""  # why it waits, set by the actions
    reason_kind: str = ""  # a PodGroup condition reason, e.g. NotEnoughResources

    counts: Counter[TaskStatus] = field(default_factory=Counter)

    counted: int = 0  # tasks the counts cover

    def add(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        task.__dict__["_counts"] = self.counts
        self.counts[task.status] += 1
        self.counted += 1

    def count(self, statuses: frozenset[TaskStatus]) -> int:
        counts = self.counts
        if self.counted != len(self.tasks):  # tasks added without add(): count them all again
            counts.clear()
            for t in self.tasks.values():
                t.__dict__["_counts"] = counts
                counts[t.status] += 1
            self.counted = len(self.tasks)
        n = 0
        for s in statuses:
            n += counts[s]
        return n

    @property
    def ready_count(self) -> int:
        return self.count(READY)

    @property
    def pipelined_count(self) -> int:
        return self.count(frozenset({TaskStatus.PIPELINED}))

    def pending(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]

    def running(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.BOUND]

    @property
    def inqueue(self) -> bool:
        """Admitted by enqueue (or already running): allocate may place its tasks."""
        return self.phase in ("Inqueue", "Running", "Unknown")

    def set_reason(self, kind: str, message: str) -> None:
        """Keep the first reason of a session: it is the one that stopped the job."""
        if not self.reason:
            self.reason, self.reason_kind = message, kind


@dataclass(eq=False)
class QueueInfo:
    name: str
    weight: int
    capability: Resources  # empty: unlimited
    guarantee: Resources
    deserved: Resources  # as stated in the spec (capacity plugin); proportion computes its own
    parent: str
    reclaimable: bool
    open: bool
    queue: Queue | None  # None for the implicit default queue
    allocated: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)  # minResources of admitted jobs not yet running
    order: int = 0


def queue_info(queue: Queue, order: int) -> QueueInfo:
    return QueueInfo(
        name=queue.name,
        weight=max(queue.spec.weight, 1),
        capability=shareable(queue.capability_resources()),
        guarantee=shareable(queue.guarantee_resources()),
        deserved=shareable(queue.deserved_resources()),
        parent=queue.spec.parent,
        reclaimable=queue.spec.reclaimable,
        open=queue.status.state == "Open",
        queue=queue,
        order=order,
    )


def default_queue(name: str) -> QueueInfo:
    """The queue that exists implicitly (weight 1, open, unlimited) until someone creates it."""
    return QueueInfo(name=name, weight=1, capability=Resources(), guarantee=Resources(), deserved=Resources(),
                     parent="", reclaimable=True, open=True, queue=None, order=-1)


def min_of(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """Per resource the smaller amount; a resource missing from either counts as 0."""
    return Resources({k: min(a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b)})


def less_equal(a: Mapping[str, int], b: Mapping[str, int], *, only: Mapping[str, int] | None = None) -> bool:
    """``a <= b`` in every resource (missing counts as 0); with ``only``, just the resources ``only`` requests."""
    names = [k for k, v in only.items() if v > 0] if only is not None else set(a) | set(b)
    return all(a.get(k, 0) <= b.get(k, 0) for k in names)
