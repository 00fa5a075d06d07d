"""What a session schedules: tasks (pods), jobs (PodGroups with their tasks) and queues.

These are the session's own objects, built fresh from the scheduler's cache for every
session and changed only by its statements; nothing here touches Redis. They follow
Volcano's ``api.TaskInfo``, ``api.JobInfo`` and ``api.QueueInfo``: the same task statuses,
the same counts (ready, pipelined, valid, ...), the same gang rules per task role, so
that plugins written against them decide as Volcano's do. Job and queue figures are
:class:`~batch_scheduler.vector.Vector` s; like Volcano's they count one ``pods`` per task.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import msgspec

from batch_scheduler.vector import Vector
from cluster.model.core import Pod
from cluster.model.labels import (
    HIERARCHY_ANNOTATION,
    HIERARCHY_WEIGHTS_ANNOTATION,
    PREEMPTABLE_KEY,
    TASK_SPEC_KEY,
)
from cluster.model.resources import PODS, Resources
from cluster.model.volcano import PodGroup, Queue

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
ROOT_QUEUE = "root"
_encoder = msgspec.msgpack.Encoder()


def shareable(request: Mapping[str, int]) -> Resources:
    """A request without its ``pods`` entry."""
    return Resources({k: v for k, v in request.items() if k != PODS})


def parse_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool``; None when the text is none of its spellings."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


class TaskStatus(enum.StrEnum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"  # placed in this session, not yet committed
    PIPELINED = "Pipelined"  # waits for resources that evictions are freeing
    BINDING = "Binding"  # placed by a committed statement: the binder takes it
    BOUND = "Bound"  # bound to a node, not yet running
    RUNNING = "Running"
    RELEASING = "Releasing"  # evicted or being deleted, still holding its node
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


ALLOCATED_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED})
"""What counts against a job's and a queue's allocation (Volcano's ``AllocatedStatus``)."""
READY = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}
"""Volcano's ``ReadyTaskNum``: tasks that hold (or held) their place."""
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
SCHEDULED_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED})
COMPLETED_STATUSES = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
VALID = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING}
"""Volcano's ``ValidTaskNum``: tasks that exist and may still run."""
_PIPELINED_OR_READY = READY | {TaskStatus.PIPELINED}
T = TypeVar("T")


class lazy(Generic[T]):  # noqa: N801 - used as a decorator, like functools.cached_property
    """``functools.cached_property`` without its lock (Python 3.11 takes one per first read):
    the value is worked out on first read and kept in the instance's ``__dict__``."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> lazy[T]: ...

    @overload
    def __get__(self, obj: object, owner: type[Any]) -> T: ...

    def __get__(self, obj: object | None, owner: type[Any]) -> T | lazy[T]:
        if obj is None:
            return self
        value = self.compute(obj)
        obj.__dict__[self.name] = value
        return value


def pod_index(name: str) -> int | None:
    """The pod's index under its task (the last ``-`` part of ``<job>-<task>-<i>``), if any."""
    parts = name.split("-")
    if len(parts) < 3:
        return None
    try:
        return int(parts[-1])
    except ValueError:
        return None


@dataclass(eq=False)
class TaskInfo:
    uid: str
    pod: Pod
    job: str  # the job key
    request: Resources  # with pods: 1, for node fit
    priority: int
    status: TaskStatus
    node: str = ""
    order: int = 0  # creation order among the session's pods
    preemption_policy: str = ""  # the pod's, or its PriorityClass's

    def __setattr__(self, name: str, value: Any) -> None:
        # Keep the job's per-status counts and its allocation in step with every status
        # change, as Volcano's JobInfo.UpdateTaskStatus does.
        if name == "status" and "status" in self.__dict__:
            old = self.__dict__["status"]
            counts: Counter[TaskStatus] | None = self.__dict__.get("_counts")
            if counts is not None:
                counts[old] -= 1
                counts[value] += 1
            allocated: Vector | None = self.__dict__.get("_allocated")
            if allocated is not None and (old in ALLOCATED_STATUSES) != (value in ALLOCATED_STATUSES):
                if value in ALLOCATED_STATUSES:
                    allocated.add(self.resreq)
                else:
                    allocated.sub(self.resreq)
        object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @lazy
    def resreq(self) -> Vector:
        """What the task counts for in its job's and queue's shares: Volcano's ``Resreq``, its
        request with one ``pods`` (which emptiness and the per-dimension checks leave out)."""
        return Vector.from_amounts(self.request)

    @lazy
    def role(self) -> str:
        """Its task role (``volcano.sh/task-spec``, annotation then label), '' for none."""
        meta = self.pod.metadata
        return meta.annotations.get(TASK_SPEC_KEY) or meta.labels.get(TASK_SPEC_KEY, "")

    @lazy
    def created(self) -> str:
        return self.pod.metadata.creation_timestamp or ""

    @lazy
    def index(self) -> int | None:
        return pod_index(self.pod.name)

    @lazy
    def template(self) -> tuple[Resources, bytes]:
        """What decides where the task may go and how nodes score for it; alike tasks share it."""
        spec = self.pod.spec
        return self.request, _encoder.encode((spec.tolerations, spec.node_selector, spec.affinity))

    @lazy
    def best_effort(self) -> bool:
        """Requests nothing but its pod slot (backfill places these): Volcano's ``Resreq.IsEmpty``.
        Integer amounts are whole millicores, bytes or units, never below its 0.1 tolerance."""
        return all(name == PODS for name in self.request)

    @lazy
    def preemptable(self) -> bool:
        """``volcano.sh/preemptable`` (annotation, then label); absent means true, a value Go's
        ParseBool does not read means false (as in Volcano)."""
        meta = self.pod.metadata
        value = meta.annotations.get(PREEMPTABLE_KEY)
        if value is None:
            value = meta.labels.get(PREEMPTABLE_KEY)
        if value is None:
            return True
        return parse_bool(value) is True

    @property
    def critical(self) -> bool:
        """A kube-system or system-critical pod, which nothing may evict (conformance)."""
        return self.namespace == "kube-system" or self.pod.spec.priority_class_name in CRITICAL_CLASSES

    @lazy
    def scheduling_gated(self) -> bool:
        """The pod has scheduling gates: nothing places it until they are removed."""
        return bool(self.pod.spec.scheduling_gates)

    @property
    def may_preempt(self) -> bool:
        """False for ``preemptionPolicy: Never``."""
        return self.preemption_policy != "Never"


def task_order(a: TaskInfo, b: TaskInfo) -> int:
    """Volcano's default task order: pod index under its task, then creation, then uid."""
    ia, ib = a.index, b.index
    if ia is not None and ib is not None and ia != ib:
        return -1 if ia < ib else 1
    ca, cb = a.created, b.created
    if ca != cb:
        return -1 if ca < cb else 1
    return (a.uid > b.uid) - (a.uid < b.uid)


@dataclass(eq=False)
class JobInfo:
    """A gang: a PodGroup (or the implicit one-pod group of a lone pod) and its tasks."""

    key: str  # namespace/name (Volcano's JobID)
    namespace: str
    name: str
    queue: str
    priority: int
    min_member: int  # the PodGroup's minMember (Volcano's MinAvailable)
    min_resources: Vector | None  # None when the PodGroup states none
    podgroup: PodGroup | None  # None for a lone pod's implicit group
    phase: str  # PodGroup phase: Pending, Inqueue, Running, Unknown, Completed
    order: int  # creation order
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    created: str = ""  # creation timestamp (RFC 3339 text)
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    allocated: Vector = field(default_factory=Vector)  # sum over tasks in ALLOCATED_STATUSES
    fit_errors: dict[str, str] = field(default_factory=dict)  # task uid -> why it fit nowhere (NodesFitErrors)
    reason: str = ""  # why it waits, set by the actions
    reason_kind: str = ""  # a PodGroup condition reason, e.g. NotEnoughResources
    counts: Counter[TaskStatus] = field(default_factory=Counter)
    counted: int = 0  # tasks the counts cover
    best_effort_tasks: int = 0  # tasks requesting nothing but a pod slot (most jobs: none)

    def __post_init__(self) -> None:
        self.task_min_member_total = sum(self.min_task_member.values())

    def add(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        # The job's counters, not the job: no reference cycle, so a session's objects are freed
        # by reference counting when it ends, not by the cyclic collector.
        task.__dict__["_counts"] = self.counts
        task.__dict__["_allocated"] = self.allocated
        if task.best_effort:
            self.best_effort_tasks += 1
        self.counts[task.status] += 1
        self.counted += 1
        if task.status in ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)

    def count(self, statuses: Iterable[TaskStatus]) -> int:
        counts = self.counts
        if self.counted != len(self.tasks):  # tasks added without add(): count them all again
            counts.clear()
            for t in self.tasks.values():
                t.__dict__["_counts"] = counts
                counts[t.status] += 1
            self.counted = len(self.tasks)
        get = counts.get  # not counts[s]: a Counter's __missing__ is a Python call per absent status
        n = 0
        for s in statuses:
            n += get(s, 0)
        return n

    def with_status(self, *statuses: TaskStatus) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status in statuses]

    def pending(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]

    def running(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status in PREEMPTABLE_STATUSES]

    # -- Volcano's counts ---------------------------------------------------------------

    @property
    def ready_count(self) -> int:
        """Volcano's ``ReadyTaskNum``."""
        return self.count(READY)

    @property
    def pipelined_count(self) -> int:
        """Volcano's ``WaitingTaskNum``."""
        return self.counts.get(TaskStatus.PIPELINED, 0) if self.counted == len(self.tasks) else self.count((TaskStatus.PIPELINED,))

    def pending_best_effort_count(self) -> int:
        if not self.best_effort_tasks:
            return 0
        return sum(1 for t in self.tasks.values() if t.status is TaskStatus.PENDING and t.best_effort)

    @property
    def valid_count(self) -> int:
        return self.count(VALID)

    def is_ready(self) -> bool:
        return self.ready_count + self.pending_best_effort_count() >= self.min_member

    def is_pipelined(self) -> bool:
        return self.pipelined_count + self.ready_count + self.pending_best_effort_count() >= self.min_member

    def is_starving(self) -> bool:
        return self.pipelined_count + self.ready_count < self.min_member

    def is_pending(self) -> bool:
        return self.phase in ("Pending", "")

    @property
    def inqueue(self) -> bool:
        """Admitted by enqueue (or already running): allocate may place its tasks."""
        return not self.is_pending()

    def _roles(self, statuses: frozenset[TaskStatus], best_effort_pending: bool) -> Counter[str]:
        roles: Counter[str] = Counter()
        for t in self.tasks.values():
            if t.status in statuses or (best_effort_pending and t.status is TaskStatus.PENDING and t.best_effort):
                roles[t.role] += 1
        return roles

    def _roles_meet(self, roles: Counter[str]) -> bool:
        return all(roles[role] >= need for role, need in self.min_task_member.items())

    def check_task_valid(self) -> bool:
        """Enough tasks of each role exist (only when the job's minMember covers the roles' minimums)."""
        if not self.min_task_member:
            return True
        if self.min_member < self.task_min_member_total:
            return True
        roles = self._roles(VALID, False)
        return all(need == 0 or roles[role] >= need for role, need in self.min_task_member.items())

    def check_task_ready(self) -> bool:
        if not self.min_task_member:
            return True
        if self.min_member < self.task_min_member_total:
            return True
        return self._roles_meet(self._roles(READY, True))

    def check_task_pipelined(self) -> bool:
        if not self.min_task_member:
            return True
        if self.min_member < self.task_min_member_total:
            return True
        return self._roles_meet(self._roles(_PIPELINED_OR_READY, True))

    def check_task_starving(self) -> bool:
        if not self.min_task_member:
            return False
        if self.min_member < self.task_min_member_total:
            return True
        return not self._roles_meet(self._roles(_PIPELINED_OR_READY, False))

    def fit_failed_roles(self) -> set[str]:
        return {self.tasks[uid].role for uid in self.fit_errors if uid in self.tasks}

    def task_has_fit_errors(self, task: TaskInfo) -> bool:
        """A task of the same role already fit nowhere this session (Volcano's predicate error cache)."""
        return bool(task.role) and task.role in self.fit_failed_roles()

    def need_continue_allocating(self) -> bool:
        """After a task fit nowhere: whether the job's other tasks may still make it ready
        (Volcano's ``NeedContinueAllocating``)."""
        if self.min_member >= len(self.tasks):  # every task is needed (the default SubJob's rule too)
            return False
        failed = self.fit_failed_roles()
        if self.min_member < self.task_min_member_total:
            left = sum(1 for t in self.tasks.values() if t.status is TaskStatus.PENDING and t.role not in failed)
            return self.ready_count + left >= self.min_member
        allocated = self._roles(READY, True)
        return all(self.min_task_member.get(role, 0) == 0 or allocated[role] >= self.min_task_member[role]
                   for role in failed)

    def elastic(self) -> Vector:
        """What the job holds beyond its minResources (Volcano's ``GetElasticResources``)."""
        from batch_scheduler.vector import exceeded_part
        return exceeded_part(self.allocated, self.min_resources if self.min_resources is not None else Vector())

    def set_reason(self, kind: str, message: str) -> None:
        """Keep the first reason of a session: it is the one that stopped the job."""
        if not self.reason:
            self.reason, self.reason_kind = message, kind


@dataclass(eq=False)
class QueueInfo:
    name: str
    weight: int
    capability: Vector | None  # None: not stated (unlimited)
    guarantee: Vector | None
    deserved: Vector | None  # as stated in the spec (capacity plugin); proportion computes its own
    parent: str
    reclaimable: bool
    state: str
    queue: Queue | None  # None for the implicit default queue
    priority: int = 0
    hierarchy: str = ""  # volcano.sh/hierarchy, e.g. root/eng/prod
    weights: str = ""  # volcano.sh/hierarchy-weights, e.g. 1/2/8
    created: str = ""
    jobs: list[JobInfo] = field(default_factory=list)  # the session's jobs in this queue
    order: int = 0

    @property
    def allocated(self) -> Vector:
        """What the queue's jobs hold (Volcano's queue status ``allocated``); the plugins keep their own figures."""
        total = Vector()
        for job in self.jobs:
            held = job.allocated
            if held.cpu or held.memory or held.scalars:
                total.add(held)
        return total

    @property
    def open(self) -> bool:
        """Takes new jobs. caldera runs no queue controller, so an unset state counts as Open."""
        return self.state in ("Open", "")


def queue_info(queue: Queue, order: int) -> QueueInfo:
    spec = queue.spec
    annotations = queue.metadata.annotations
    return QueueInfo(
        name=queue.name,
        weight=spec.weight,
        capability=Vector.from_quantities(spec.capability or None, field="spec.capability"),
        guarantee=Vector.from_quantities(spec.guarantee.resource or None, field="spec.guarantee.resource"),
        deserved=Vector.from_quantities(spec.deserved or None, field="spec.deserved"),
        parent=spec.parent,
        reclaimable=spec.reclaimable,
        state=queue.status.state,
        queue=queue,
        priority=spec.priority,
        hierarchy=annotations.get(HIERARCHY_ANNOTATION, ""),
        weights=annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, ""),
        created=queue.metadata.creation_timestamp or "",
        order=order,
    )


def default_queue(name: str) -> QueueInfo:
    """The queue that exists implicitly (weight 1, open, unlimited) until someone creates it."""
    return QueueInfo(name=name, weight=1, capability=None, guarantee=None, deserved=None, parent="",
                     reclaimable=True, state="Open", queue=None, order=-1)


def queue_order(a: QueueInfo, b: QueueInfo) -> int:
    """Volcano's default queue order: creation, then name."""
    if a.created != b.created:
        return -1 if a.created < b.created else 1
    return (a.name > b.name) - (a.name < b.name)


def job_order(a: JobInfo, b: JobInfo) -> int:
    """Volcano's default job order: creation, then key."""
    if a.created != b.created:
        return -1 if a.created < b.created else 1
    return (a.key > b.key) - (a.key < b.key)
