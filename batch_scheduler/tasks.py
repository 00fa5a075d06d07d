"""What a session schedules, task by task: a pod as a :class:`TaskInfo`, and its status.

Tasks are the session's own objects, built fresh from the scheduler's cache for every
session and changed only by its statements; nothing here touches Redis. They follow
Volcano's ``api.TaskInfo``: the same task statuses and the same sets of them that the
counts of a job (:mod:`batch_scheduler.jobs`) are made of, so that plugins written
against them decide as Volcano's do.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import msgspec

from batch_scheduler.vector import Vector
from cluster.model.core import Pod
from cluster.model.devices import NO_CARDS, is_card_resource
from cluster.model.labels import PREEMPTABLE_KEY, QUEUE_ALLOCATION_GATE, TASK_SPEC_KEY
from cluster.model.resources import PODS, Resources
from cluster.nodeview.devices import Need, card_need

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
_encoder = msgspec.msgpack.Encoder()


def shareable(request: Mapping[str, int]) -> Resources:
    """A request without its ``pods`` entry and the GPU cards' rooms (node totals count the GPUs)."""
    return Resources({k: v for k, v in request.items() if k != PODS and not is_card_resource(k)})


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
PIPELINED_OR_READY = READY | {TaskStatus.PIPELINED}
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
    cards: Resources = field(default_factory=lambda: NO_CARDS)  # the GPU cards' shares it takes on ``node``

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
    def need(self) -> Need | None:
        """What the task asks of GPU cards (``cluster.nodeview.devices``), None for nothing."""
        return card_need(self.pod, self.request)

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
    def queue_gate_opted_in(self) -> bool:
        """The pod asks for queue admission by gate (the annotation, ``"true"``)."""
        return self.pod.metadata.annotations.get(QUEUE_ALLOCATION_GATE) == "true"

    @property
    def queue_gated(self) -> bool:
        """The pod carries the queue-allocation gate (others may be there too)."""
        return any(g.name == QUEUE_ALLOCATION_GATE for g in self.pod.spec.scheduling_gates)

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
