"""Volcano's ``batch.volcano.sh/v1alpha1`` Job, and its expansion into a PodGroup and pods.

A Job is never scheduled itself: Volcano's job controller turns it into one PodGroup (the
gang) and ``replicas`` pods per task, and the scheduler sees only those. :func:`expand_job`
does the same, so a Job manifest can be fed to anything that reads pods and PodGroups.

Only what scheduling needs is modelled; plugins, policies, volumes and the like are
ignored. The admission webhook's defaults are applied here (schedulerName ``volcano``,
queue ``default``, ``minAvailable`` 0 meaning "all replicas"), and its validation too,
each error one line naming the field, the bad value and what is accepted.
"""

from __future__ import annotations

import re

import msgspec

from cluster.model import GROUP_NAME_ANNOTATION, ObjectMeta, Pod, PodGroup, PodGroupSpec, PodSpec, ResourceList
from cluster.quantity import QuantityError
from cluster.resources import PODS, Resources

DEFAULT_SCHEDULER = "volcano"
DEFAULT_QUEUE = "default"
KUBE_DEFAULT_SCHEDULER = "default-scheduler"  # PodSpec's default: the template named none

JOB_NAME_LABEL = "volcano.sh/job-name"
TASK_SPEC_LABEL = "volcano.sh/task-spec"
QUEUE_NAME_LABEL = "volcano.sh/queue-name"

# Task names become part of pod names and label values, so Volcano requires a DNS-1123 label.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
_DNS1123_ACCEPTED = (
    "lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
)


class JobError(ValueError):
    """A Job Volcano would refuse; the message is ``field: problem``, naming the value and what is accepted."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.value = value
        self.problem = problem


class TemplateMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pod template's metadata; its name, if any, is not used (pods are named by the Job)."""

    name: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class PodTemplate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class TaskSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``replicas`` identical pods; ``min_available`` of them must run for the task to count."""

    name: str = ""
    replicas: int = 1
    min_available: int | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)


class JobSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    scheduler_name: str = DEFAULT_SCHEDULER
    min_available: int | None = None  # None or 0: every replica of every task
    queue: str = DEFAULT_QUEUE
    priority_class_name: str = ""
    tasks: list[TaskSpec] = msgspec.field(default_factory=list)


class Job(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano Job: a gang of tasks, each a set of identical pods."""

    api_version: str = "batch.volcano.sh/v1alpha1"
    kind: str = "Job"
    metadata: ObjectMeta
    spec: JobSpec = msgspec.field(default_factory=JobSpec)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace


def expand_job(job: Job) -> tuple[PodGroup, list[Pod]]:
    """The PodGroup and pods Volcano's job controller makes from ``job``.

    Pods are ``<job>-<task>-<index>``, in task order. Raises :class:`JobError` for a Job
    the admission webhook would refuse, and QuantityError (its field path starting at
    ``spec.tasks[i].template``) for a bad quantity in a template.
    """
    min_member = _validate(job)
    requests = [_template_request(task, i) for i, task in enumerate(job.spec.tasks)]
    queue = job.spec.queue or DEFAULT_QUEUE
    min_resources: ResourceList = dict(_min_resources(job.spec.tasks, requests, min_member).to_quantities())
    pods = [_pod(job, task, index, queue) for task in job.spec.tasks for index in range(task.replicas)]
    group = PodGroup(
        metadata=ObjectMeta(name=job.name, namespace=job.namespace,
                            creation_timestamp=job.metadata.creation_timestamp),
        spec=PodGroupSpec(
            min_member=min_member,
            min_task_member={t.name: t.min_available for t in job.spec.tasks if t.min_available is not None},
            min_resources=min_resources,
            queue=queue,
            priority_class_name=job.spec.priority_class_name,
        ),
    )
    return group, pods


def _validate(job: Job) -> int:
    """Check ``job`` as Volcano's admission webhook does; the gang's minMember."""
    tasks = job.spec.tasks
    if not tasks:
        raise JobError("spec.tasks", [], "no tasks (a Job needs at least one task, with a name and a pod template)")
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        _validate_task(task, f"spec.tasks[{i}]")
        if task.name in seen:
            problem = f"{task.name!r} is also the name of spec.tasks[{seen[task.name]}] (task names must be unique)"
            raise JobError(f"spec.tasks[{i}].name", task.name, problem)
        seen[task.name] = i
    total = sum(task.replicas for task in tasks)
    stated = job.spec.min_available
    if stated is not None and not 0 <= stated <= total:
        problem = f"{stated} is out of range (expected 0 to the replicas of all tasks, {total})"
        raise JobError("spec.minAvailable", stated, problem)
    # Go cannot tell 0 from unset, so Volcano's webhook reads 0 as "not stated".
    return stated or total


def _validate_task(task: TaskSpec, field: str) -> None:
    if not task.name:
        raise JobError(f"{field}.name", task.name, f"missing (every task needs a name: {_DNS1123_ACCEPTED})")
    if not _DNS1123_LABEL.fullmatch(task.name):
        problem = f"{task.name!r} is not a valid task name (expected {_DNS1123_ACCEPTED})"
        raise JobError(f"{field}.name", task.name, problem)
    if task.replicas < 0:
        raise JobError(f"{field}.replicas", task.replicas, f"{task.replicas} is negative (expected 0 or more)")
    if task.min_available is not None and not 0 <= task.min_available <= task.replicas:
        problem = f"{task.min_available} is out of range (expected 0 to the task's replicas, {task.replicas})"
        raise JobError(f"{field}.minAvailable", task.min_available, problem)


def _template_request(task: TaskSpec, i: int) -> Resources:
    """What one pod of ``task`` requests, without the ``pods`` entry (not part of minResources)."""
    probe = Pod(metadata=ObjectMeta(name=task.name), spec=task.template.spec)
    try:
        request = probe.request()
    except QuantityError as exc:
        raise QuantityError(f"spec.tasks[{i}].template.{exc.field}", exc.value, exc.problem) from exc
    return Resources({name: amount for name, amount in request.items() if name != PODS})


def _min_resources(tasks: list[TaskSpec], requests: list[Resources], min_member: int) -> Resources:
    """The requests of the first ``min_member`` pods, in task order: what the gang needs to start."""
    total, remaining = Resources(), min_member
    for task, request in zip(tasks, requests):
        count = min(task.replicas, remaining)
        total += request.scaled(count)
        remaining -= count
    return total


def _pod(job: Job, task: TaskSpec, index: int, queue: str) -> Pod:
    template = task.template
    scheduler = template.spec.scheduler_name
    if scheduler in ("", KUBE_DEFAULT_SCHEDULER):
        scheduler = job.spec.scheduler_name or DEFAULT_SCHEDULER
    labels = {**template.metadata.labels, JOB_NAME_LABEL: job.name, TASK_SPEC_LABEL: task.name, QUEUE_NAME_LABEL: queue}
    return Pod(
        metadata=ObjectMeta(
            name=f"{job.name}-{task.name}-{index}",
            namespace=job.namespace,
            labels=labels,
            annotations={**template.metadata.annotations, GROUP_NAME_ANNOTATION: job.name},
            creation_timestamp=job.metadata.creation_timestamp,  # created with the job: its order is the job's
        ),
        spec=msgspec.structs.replace(
            template.spec,
            scheduler_name=scheduler,
            priority_class_name=template.spec.priority_class_name or job.spec.priority_class_name,
        ),
    )
