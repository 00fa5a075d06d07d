"""Jobs: a PodGroup (or a lone pod's implicit group) with its tasks, and Volcano's counts over them.

A :class:`JobInfo` follows Volcano's ``api.JobInfo``: the same counts (ready, pipelined,
valid, ...), the same gang rules per task role. Its figures are
:class:`~batch_scheduler.vector.Vector` s; like Volcano's they count one ``pods`` per task.
A task's status change keeps its job's counts and allocation current (see
:class:`~batch_scheduler.tasks.TaskInfo`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from batch_scheduler.reasons import PendingReason
from batch_scheduler.tasks import (
    ALLOCATED_STATUSES,
    PIPELINED_OR_READY,
    PREEMPTABLE_STATUSES,
    READY,
    VALID,
    TaskInfo,
    TaskStatus,
)
from batch_scheduler.vector import Vector, exceeded_part
from cluster.model.topology import NetworkTopologySpec
from cluster.model.volcano import PodGroup


@dataclass(eq=False)
class SubJob:
    id: str  # <job>/<policy>-<values>, or the job's key for the default subjob
    family: str  # the policy's name; "" for the default subjob
    min_available: int
    topology: NetworkTopologySpec | None
    match_index: int
    tasks: list[TaskInfo] = field(default_factory=list)

    def _count(self, statuses: frozenset[TaskStatus]) -> int:
        return sum(1 for t in self.tasks if t.status in statuses or (t.best_effort and t.status is TaskStatus.PENDING))

    def ready(self) -> bool:
        """Its ready tasks (pending best-effort ones too) reach its gang size (Volcano's SubJobReady)."""
        return self._count(READY) >= self.min_available

    def pipelined(self) -> bool:
        return self._count(PIPELINED_OR_READY) >= self.min_available

    def pending(self) -> list[TaskInfo]:
        return [t for t in self.tasks if t.status is TaskStatus.PENDING and not t.best_effort]


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
    reason_kind: PendingReason | None = None  # the PodGroup condition reason, once a reason is set
    counts: Counter[TaskStatus] = field(default_factory=Counter)
    counted: int = 0  # tasks the counts cover
    best_effort_tasks: int = 0  # tasks requesting nothing but a pod slot (most jobs: none)
    sub_jobs: list[SubJob] = field(default_factory=list)  # its subgroups (batch_scheduler.subjobs); none: one gang
    min_sub_jobs: dict[str, int] = field(default_factory=dict)  # per subgroup family, its minSubGroups

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
        return (
            self.counts.get(TaskStatus.PIPELINED, 0)
            if self.counted == len(self.tasks)
            else self.count((TaskStatus.PIPELINED,))
        )

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
        return self._roles_meet(self._roles(PIPELINED_OR_READY, True))

    def check_task_starving(self) -> bool:
        if not self.min_task_member:
            return False
        if self.min_member < self.task_min_member_total:
            return True
        return not self._roles_meet(self._roles(PIPELINED_OR_READY, False))

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
        return all(
            self.min_task_member.get(role, 0) == 0 or allocated[role] >= self.min_task_member[role] for role in failed
        )

    def elastic(self) -> Vector:
        """What the job holds beyond its minResources (Volcano's ``GetElasticResources``)."""
        return exceeded_part(self.allocated, self.min_resources if self.min_resources is not None else Vector())

    def set_reason(self, kind: PendingReason, message: str) -> None:
        """Keep the first reason of a session: it is the one that stopped the job."""
        if not self.reason:
            self.reason, self.reason_kind = message, kind


def job_order(a: JobInfo, b: JobInfo) -> int:
    """Volcano's default job order: creation, then key."""
    if a.created != b.created:
        return -1 if a.created < b.created else 1
    return (a.key > b.key) - (a.key < b.key)
