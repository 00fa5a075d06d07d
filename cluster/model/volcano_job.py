"""Volcano's ``batch.volcano.sh/v1alpha1`` Job, and its expansion into a PodGroup and pods.

A Job is never scheduled itself: Volcano's admission webhook sets its defaults and refuses
bad ones (:mod:`cluster.model.volcano_admission`), then Volcano's job controller turns it into
one PodGroup (the gang) and ``replicas`` pods per task, and the scheduler sees only those.
:func:`expand_job` does all three, so a Job manifest can be fed to anything that reads
pods and PodGroups. Read from Volcano release-1.14, ``pkg/controllers/job/``
(``job_controller_util.go`` ``createJobPod``, ``job_controller_actions.go``
``createOrUpdatePodGroup``, ``calcPGMinResources``).

What the controller makes, and where caldera differs:

- Pods ``<job>-<task>-<index>``, with the template's labels and annotations under the
  controller's: ``volcano.sh/task-index``, ``task-spec``, ``job-name``, ``queue-name``,
  ``job-version`` ("0"), ``template-uid`` (``<job>-<task>``), ``job-retry-count`` ("0"),
  ``numa-topology-policy`` (with a topologyPolicy), the group-name annotation, and the
  labels ``task-index``, ``job-name``, ``task-spec``, ``job-namespace``, ``queue-name``,
  ``partition-id`` (with a partitionPolicy). The Job's annotations ``volcano.sh/preemptable``,
  ``cooldown-time``, ``revocable-zone`` and ``jdb-min-available`` (else
  ``jdb-max-unavailable``), and its labels ``preemptable`` and ``cooldown-time``, are copied
  to every pod. The template's scheduler, else the Job's; its priority class, else the Job's.
- One PodGroup with the Job's labels and annotations: minMember = the Job's minAvailable,
  minTaskMember = every task's minAvailable, the queue, the priority class, and
  minResources as Volcano computes it: tasks ordered by their template's PriorityClass
  value (highest first; an unknown class is 0; ties keep task order), then the first
  minAvailable pods in that order when minAvailable is below the tasks' minAvailable
  summed (``CalcFirstCountResources``), else each task's minAvailable pods topped up from
  the remaining replicas (``CalcPGMinResources``).
- **Names.** Volcano names the PodGroup ``<job>-<uid>``; caldera keeps ``<job>`` (it changes
  no placement, and a manifest has no uid). A Job with only ``generateName`` gets a
  generated name (see :mod:`cluster.model.pod_template`).
- **minResources quantities.** A pod's request here is Kubernetes' effective request (a
  limit without a request counts as the request, as the API server defaults it on the
  pods); Volcano reads the undefaulted template through the quota evaluator, so a
  resource stated only as a limit is missing from its minResources. caldera also leaves
  out ``pods`` and the quota's ``requests.*``/``limits.*``/``count/*`` keys, which
  Volcano's scheduler ignores.
- **Volumes.** Each of the Job's volumes becomes a ``persistentVolumeClaim`` volume of every
  pod (a claim to be created is named ``<job>-pvc-<12 characters>``, drawn from the job
  rather than at random), so what placement ignores about storage can be named.
- **Pods up front.** Volcano creates pods only once the PodGroup is Inqueue, and a task
  with ``dependsOn`` only once the tasks it depends on run; here every pod is made at once,
  which is what a dry run needs. Plugins (svc, ssh, env) and policies are checked but add
  nothing to the pods (no Services, ConfigMaps, Secrets, env or hostnames).
"""

from __future__ import annotations

import msgspec

from cluster.model.core import ObjectMeta, Pod, Volume
from cluster.model.labels import (
    COOLDOWN_TIME_KEY,
    GROUP_NAME_ANNOTATION,
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_RETRY_COUNT_KEY,
    JOB_VERSION_KEY,
    NUMA_POLICY_KEY,
    PARTITION_ID_KEY,
    PREEMPTABLE_KEY,
    QUEUE_NAME_KEY,
    REVOCABLE_ZONE_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_UID_KEY,
)
from cluster.model.pod_template import (
    KUBE_DEFAULT_SCHEDULER,
    FieldError,
    PodTemplate,
    PriorityValues,
    TemplateMeta,
    generated_suffix,
    name_or_generated,
    scheduler_or,
    stamp_pod,
    template_request,
)
from cluster.model.resources import Resources
from cluster.model.topology import LabelMatch, NetworkTopologySpec, SubGroupPolicy
from cluster.model.volcano import PodGroup, PodGroupSpec
from cluster.model.volcano_admission import admit_queue, validate_job
from cluster.model.volcano_job_api import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER,
    JOB_NAME_LABEL,
    QUEUE_NAME_LABEL,
    TASK_SPEC_LABEL,
    DependsOn,
    Job,
    JobError,
    JobSpec,
    LifecyclePolicy,
    PartitionPolicy,
    TaskSpec,
    VolumeSpec,
)
from cluster.model.volcano_mutation import mutate_job

__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_SCHEDULER",
    "JOB_NAME_LABEL",
    "KUBE_DEFAULT_SCHEDULER",
    "QUEUE_NAME_LABEL",
    "TASK_SPEC_LABEL",
    "DependsOn",
    "Job",
    "JobError",
    "JobSpec",
    "LifecyclePolicy",
    "NetworkTopologySpec",
    "PartitionPolicy",
    "PodTemplate",
    "TaskSpec",
    "TemplateMeta",
    "VolumeSpec",
    "KIND",
    "admit_queue",
    "admitted_job",
    "expand_job",
    "min_resources",
]

KIND = "batch.volcano.sh/Job"
_VOLCANO_RANDOM = "0123456789abcdefghijklmnopqrstuvwxyz"  # helpers.GenRandomStr's alphabet


def admitted_job(job: Job, *, ordinal: int = 0) -> Job:
    """``job`` named, with the webhook's defaults, once its validation has passed.

    ``ordinal`` tells apart Jobs sharing a ``generateName`` (see :mod:`cluster.model.pod_template`).
    Raises :class:`JobError` for a Job Volcano refuses.
    """
    try:
        named = msgspec.structs.replace(job, metadata=name_or_generated(job.metadata, KIND, ordinal))
    except FieldError as exc:
        raise JobError(exc.field, exc.value, exc.problem) from exc
    mutated = mutate_job(named)
    validate_job(mutated)
    return mutated


def expand_job(
    job: Job, *, priority_classes: PriorityValues | None = None, ordinal: int = 0
) -> tuple[PodGroup, list[Pod]]:
    """The PodGroup and pods Volcano's admission and job controller make from ``job``.

    Pods are ``<job>-<task>-<index>``, in task order. ``priority_classes`` (name → value)
    orders the tasks for minResources. Raises :class:`JobError` for a Job the admission
    webhook would refuse, and QuantityError (its field path starting at
    ``spec.tasks[i].template``) for a bad quantity in a template. The queue is not checked
    here: see :func:`admit_queue`.
    """
    job = admitted_job(job, ordinal=ordinal)
    tasks = job.spec.tasks
    requests = [template_request(task.template.spec, f"spec.tasks[{i}].template") for i, task in enumerate(tasks)]
    pods = [_pod(job, task, index) for task in tasks for index in range(task.replicas)]
    needed = min_resources(tasks, requests, job.spec.min_available, priority_classes or {}).within_int64(
        field="spec.tasks (minResources, the sum of the minimum tasks' requests)"
    )
    group = PodGroup(
        metadata=ObjectMeta(
            name=job.name,
            namespace=job.namespace,
            labels=dict(job.metadata.labels),
            annotations=dict(job.metadata.annotations),
            creation_timestamp=job.metadata.creation_timestamp,
        ),
        spec=PodGroupSpec(
            min_member=job.spec.min_available,
            min_task_member={task.name: _min_task_member(task) for task in tasks},
            min_resources=dict(needed.to_quantities()),
            queue=job.spec.queue,
            priority_class_name=job.spec.priority_class_name,
            network_topology=_network_topology(job.spec.network_topology, prefer_tier=True),
            sub_group_policy=[_sub_group_policy(task) for task in tasks if task.partition_policy is not None],
        ),
    )
    return group, pods


def _network_topology(topology: NetworkTopologySpec | None, *, prefer_tier: bool) -> NetworkTopologySpec | None:
    """The PodGroup's ``networkTopology``: the mode, and the tier (for the Job's own: the number
    when both are given, else the name; a partition's keeps both)."""
    if topology is None or not prefer_tier or topology.highest_tier_allowed is None:
        return topology
    return msgspec.structs.replace(topology, highest_tier_name="")


def _sub_group_policy(task: TaskSpec) -> SubGroupPolicy:
    """``getSubGroupPolicy``: one subgroup family per partitioned task, its pods told apart by partition id."""
    partition = task.partition_policy
    assert partition is not None
    return SubGroupPolicy(
        name=task.name,
        sub_group_size=partition.partition_size,
        min_sub_groups=partition.min_partitions,
        label_selector=LabelMatch(match_labels={TASK_SPEC_KEY: task.name}),
        match_label_keys=[PARTITION_ID_KEY],
        network_topology=_network_topology(partition.network_topology, prefer_tier=False),
    )


def _volumes(job: Job) -> list[Volume]:
    """The Job's volumes as the claims every pod mounts; a claim to be created gets
    ``<job>-pvc-<12 characters>`` and each pod volume ``<job>-<12 characters>``, the
    characters drawn from the job and the volume's position (Volcano draws them at random)."""
    volumes: dict[str, Volume] = {}
    for i, volume in enumerate(job.spec.volumes):
        seed = f"{KIND}/{job.namespace}/{job.name}/volumes/{i}"
        claim = (
            volume.volume_claim_name or f"{job.name}-pvc-{generated_suffix(seed, length=12, alphabet=_VOLCANO_RANDOM)}"
        )
        if claim not in volumes:
            name = f"{job.name}-{generated_suffix(seed + '/mount', length=12, alphabet=_VOLCANO_RANDOM)}"
            volumes[claim] = Volume(name=name, persistent_volume_claim={"claimName": claim})
    return list(volumes.values())


def _min_task_member(task: TaskSpec) -> int:
    """``getMinTaskMember``: minAvailable, else minPartitions × partitionSize, else replicas."""
    if task.min_available is not None:
        return task.min_available
    partition = task.partition_policy
    if partition is not None and partition.min_partitions and partition.partition_size:
        return partition.min_partitions * partition.partition_size
    return task.replicas


def min_resources(
    tasks: list[TaskSpec], requests: list[Resources], min_available: int, priorities: PriorityValues
) -> Resources:
    """What the gang needs before it may start, as Volcano's job controller computes it.

    ``requests[i]`` is one pod of ``tasks[i]``. Tasks go highest PriorityClass value first
    (of the template's class; ties keep task order). Below the tasks' minAvailable summed,
    the first ``min_available`` pods count; otherwise each task's minAvailable pods, topped
    up to ``min_available`` from the other replicas in the same order.
    """
    order = sorted(range(len(tasks)), key=lambda i: -priorities.get(tasks[i].template.spec.priority_class_name, 0))
    total = Resources()
    if min_available < sum(_task_min(tasks[i]) for i in order):
        count = min_available
        for i in order:
            taken = min(count, tasks[i].replicas)
            total += requests[i].scaled(taken)
            count -= taken
            if count <= 0:
                break
        return total
    counted = 0
    for i in order:
        taken = min(_task_min(tasks[i]), min_available - counted)
        total += requests[i].scaled(taken)
        counted += taken
        if counted >= min_available:
            return total
    for i in order:
        rest = min(tasks[i].replicas - _task_min(tasks[i]), min_available - counted)
        total += requests[i].scaled(rest)
        counted += rest
        if counted >= min_available:
            break
    return total


def _task_min(task: TaskSpec) -> int:
    return task.min_available if task.min_available is not None else task.replicas


def _pod(job: Job, task: TaskSpec, index: int) -> Pod:
    """``createJobPod``: the template with the controller's labels and annotations."""
    template, spec = task.template, task.template.spec
    job_meta, queue = job.metadata, job.spec.queue
    labels = {
        TASK_INDEX_KEY: str(index),
        JOB_NAME_KEY: job.name,
        TASK_SPEC_KEY: task.name,
        JOB_NAMESPACE_KEY: job.namespace,
        QUEUE_NAME_KEY: queue,
        **{key: job_meta.labels[key] for key in (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY) if key in job_meta.labels},
    }
    partition = task.partition_policy
    if partition is not None:
        labels[PARTITION_ID_KEY] = str(index // partition.partition_size if partition.partition_size > 0 else 0)
    annotations = {
        TASK_INDEX_KEY: str(index),
        TASK_SPEC_KEY: task.name,
        GROUP_NAME_ANNOTATION: job.name,
        JOB_NAME_KEY: job.name,
        QUEUE_NAME_KEY: queue,
        JOB_VERSION_KEY: "0",
        TEMPLATE_UID_KEY: f"{job.name}-{task.name}",
        JOB_RETRY_COUNT_KEY: "0",
        **{
            key: job_meta.annotations[key]
            for key in (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY, REVOCABLE_ZONE_KEY)
            if key in job_meta.annotations
        },
    }
    if task.topology_policy:
        annotations[NUMA_POLICY_KEY] = task.topology_policy
    for key in (JDB_MIN_AVAILABLE_KEY, JDB_MAX_UNAVAILABLE_KEY):  # the first found only
        if key in job_meta.annotations:
            annotations[key] = job_meta.annotations[key]
            break
    pod_spec = msgspec.structs.replace(
        spec,
        scheduler_name=scheduler_or(spec, job.spec.scheduler_name),
        priority_class_name=spec.priority_class_name or job.spec.priority_class_name,
        volumes=[*spec.volumes, *_volumes(job)],
    )
    return stamp_pod(
        template,
        name=f"{job.name}-{task.name}-{index}",
        namespace=job.namespace,
        labels=labels,
        annotations=annotations,
        spec=pod_spec,
        creation_timestamp=job_meta.creation_timestamp,
    )
