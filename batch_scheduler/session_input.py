"""What a session is built from, and the jobs, tasks and queues it makes of it.

A :class:`SessionInput` is the scheduler's cache at one moment (copied node columns, this
scheduler's pods, PodGroups, Queues, PriorityClasses, the phases remembered from earlier
sessions). :func:`build` turns it into the session's own objects as Volcano's session
does: jobs are PodGroups whose queue exists; a job's priority is its PodGroup's
PriorityClass (else the default class, else 0); a task's priority is its pod's
(``spec.priority``, else its PriorityClass), which ``volcano.sh/task-priority`` overrides;
a task's status comes from its pod as Volcano's ``getTaskStatus`` reads it. A lone pod
gets the implicit PodGroup Volcano's podgroup controller would create.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from batch_scheduler.jobs import JobInfo
from batch_scheduler.queues import QueueInfo, default_queue, queue_info
from batch_scheduler.reasons import PendingReason
from batch_scheduler.subjobs import split
from batch_scheduler.tasks import TaskInfo, TaskStatus, shareable
from batch_scheduler.vector import Vector
from cluster.model.core import PriorityClass
from cluster.model.devices import NO_CARDS
from cluster.model.labels import QUEUE_NAME_ANNOTATION, TASK_PRIORITY_ANNOTATION
from cluster.model.sharding import ShardingMode
from cluster.model.topology import HyperNode
from cluster.model.volcano import PodGroup, Queue
from cluster.nodeview.table import NodeTable
from cluster.nodeview.topology import Topology, from_labels
from cluster.nodeview.topology import build as build_topology
from cluster.store.records import PodRecord

IMPLICIT_PREFIX = "podgroup-"  # a lone pod's implicit PodGroup is named podgroup-<pod uid>, as in Volcano
HOLDING = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING})  # on a node, for the node's tasks


class SessionConfig(msgspec.Struct, frozen=True, kw_only=True):
    scheduler: str = "volcano"  # the name that owns shards
    sharding: ShardingMode = ShardingMode.SOFT
    default_queue: str = "default"
    # Node label keys, lowest tier first, that make HyperNodes where the cluster has none by
    # those names (cluster.nodeview.topology.from_labels); HyperNode objects come first.
    hypernode_labels: tuple[str, ...] = ()


@dataclass
class SessionInput:
    columns: NodeTable  # the session may change it: pass a copy
    pods: Iterable[PodRecord]  # this scheduler's pods, pending or bound
    podgroups: Mapping[str, PodGroup]  # by namespace/name
    queues: Mapping[str, Queue]
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    phases: Mapping[str, str] = field(default_factory=dict)  # job key -> phase from earlier sessions
    releasing: frozenset[str] = frozenset()  # uids being evicted
    hypernodes: Mapping[str, HyperNode] = field(default_factory=dict)  # the network topology, by name
    hypernodes_generation: int = 0  # changes whenever ``hypernodes`` does (the tree is cached on the table)
    others: Iterable[PodRecord] = ()  # other schedulers' pods on nodes: what inter-pod rules count
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # each namespace's labels


def session_topology(
    table: NodeTable, hypernodes: Mapping[str, HyperNode], generation: int, labels: tuple[str, ...]
) -> Topology:
    """The HyperNode tree over ``table``'s nodes: the objects, plus those the node ``labels`` make
    (an object of the same name wins). Cached on the table until its nodes, owners, labels or
    taints change — the cache asks first, on its own table, so a steady cluster builds it once,
    not every session; ``generation`` tells HyperNode changes apart."""

    def made() -> Topology:
        objects = dict(hypernodes)
        for hn in from_labels(table, labels):
            objects.setdefault(hn.name, hn)
        return build_topology(table, objects.values())

    return table.memo_until_topology_changes(("hypernodes", generation, labels), made)


@dataclass
class Built:
    """The session's objects, fresh from its input."""

    queues: dict[str, QueueInfo]
    jobs: dict[str, JobInfo]
    tasks: dict[str, TaskInfo]
    node_tasks: dict[str, list[TaskInfo]]  # tasks of this scheduler on each node
    releasing: list[TaskInfo]  # tasks whose evictions are under way, in creation order


def task_status(record: PodRecord, releasing: frozenset[str]) -> TaskStatus:
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


class _Priorities:
    """Priorities and preemption policies from the PriorityClasses."""

    def __init__(self, classes: Mapping[str, PriorityClass]) -> None:
        self.classes = classes
        default = next((c for c in classes.values() if c.global_default), None)
        self.default = default.value if default is not None else 0

    def of_class(self, class_name: str) -> int:
        pc = self.classes.get(class_name) if class_name else None
        return pc.value if pc is not None else self.default

    def of_task(self, record: PodRecord) -> int:
        pod = record.pod
        text = pod.metadata.annotations.get(TASK_PRIORITY_ANNOTATION)
        if text is not None:
            try:
                return int(text)
            except ValueError:
                pass
        if pod.spec.priority is not None:
            return pod.spec.priority
        return self.of_class(pod.spec.priority_class_name)

    def preemption_policy(self, record: PodRecord) -> str:
        policy = record.pod.spec.preemption_policy
        if policy is None:
            pc = self.classes.get(record.pod.spec.priority_class_name)
            policy = pc.preemption_policy if pc is not None else ""
        return policy


def build_queues(inp: SessionInput, config: SessionConfig) -> dict[str, QueueInfo]:
    queues: dict[str, QueueInfo] = {}
    for i, name in enumerate(sorted(inp.queues)):
        queues[name] = queue_info(inp.queues[name], i)
    if config.default_queue not in queues:
        queues[config.default_queue] = default_queue(config.default_queue)
    return queues


def _job(key: str, pg: PodGroup, order: int, phase: str, config: SessionConfig, priorities: _Priorities) -> JobInfo:
    spec = pg.spec
    return JobInfo(
        key=key,
        namespace=pg.namespace,
        name=pg.name,
        queue=spec.queue or config.default_queue,
        priority=priorities.of_class(spec.priority_class_name),
        min_member=max(spec.min_member, 0),
        min_resources=Vector.from_quantities(spec.min_resources, field="spec.minResources"),
        podgroup=pg,
        phase=phase,
        order=order,
        min_task_member=dict(spec.min_task_member),
        created=pg.metadata.creation_timestamp or "",
    )


def _implicit_job(
    key: str, record: PodRecord, order: int, phase: str, config: SessionConfig, priorities: _Priorities
) -> JobInfo:
    """What Volcano's podgroup controller would create for a lone pod: minMember 1, minResources
    its requests, its PriorityClass, the queue its annotation names."""
    namespace, _, name = key.partition("/")
    pod = record.pod
    queue = pod.metadata.annotations.get(QUEUE_NAME_ANNOTATION) or config.default_queue
    job = JobInfo(
        key=key,
        namespace=namespace,
        name=name,
        queue=queue,
        priority=priorities.of_class(pod.spec.priority_class_name),
        min_member=1,
        min_resources=Vector.from_amounts(shareable(record.request)),
        podgroup=None,
        phase=phase,
        order=order,
        created=pod.metadata.creation_timestamp or "",
    )
    if record.group:
        job.set_reason(PendingReason.POD_GROUP_NOT_FOUND, f"PodGroup {key} does not exist yet")
    return job


def build(inp: SessionInput, config: SessionConfig) -> Built:
    """The session's queues, jobs and tasks; each job in its queue's list unless it is missing one."""
    priorities = _Priorities(inp.priority_classes)
    out = Built(queues=build_queues(inp, config), jobs={}, tasks={}, node_tasks={}, releasing=[])
    jobs = out.jobs
    groups = sorted(inp.podgroups.items(), key=lambda kv: (kv[1].metadata.creation_timestamp or "", kv[0]))
    for order, (key, pg) in enumerate(groups):
        jobs[key] = _job(key, pg, order, inp.phases.get(key, pg.status.phase), config, priorities)
    records = sorted(inp.pods, key=lambda r: (r.pod.metadata.creation_timestamp or "", r.namespace, r.name))
    for order, record in enumerate(records):
        if record.phase in ("Succeeded", "Failed") and not record.group:
            continue
        key = record.group or f"{record.namespace}/{IMPLICIT_PREFIX}{record.uid}"
        job = jobs.get(key)
        if job is None:
            job = jobs[key] = _implicit_job(
                key, record, len(jobs) + order, inp.phases.get(key, "Pending"), config, priorities
            )
        task = TaskInfo(
            uid=record.uid,
            pod=record.pod,
            job=key,
            request=record.request,
            order=order,
            priority=priorities.of_task(record),
            status=task_status(record, inp.releasing),
            node=record.node,
            preemption_policy=priorities.preemption_policy(record),
            cards=record.cards if record.node else NO_CARDS,
        )
        job.add(task)
        out.tasks[task.uid] = task
        if task.node and task.status in HOLDING:
            out.node_tasks.setdefault(task.node, []).append(task)
        if task.status is TaskStatus.RELEASING:
            out.releasing.append(task)
    for job in jobs.values():
        job.sub_jobs, job.min_sub_jobs = split(job)
        info = out.queues.get(job.queue)
        if info is None:
            job.set_reason(PendingReason.QUEUE_NOT_FOUND, f"queue {job.queue} does not exist")
            continue
        if job.reason_kind is PendingReason.POD_GROUP_NOT_FOUND:
            continue  # Volcano leaves pods of a missing PodGroup out of every job and queue
        info.jobs.append(job)
    return out
