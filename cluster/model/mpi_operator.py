"""``kubeflow.org/v2beta1`` MPIJobs, expanded as the MPI operator makes them for Volcano.

Read from the public repository kubeflow/mpi-operator (``master``):
``pkg/controller/mpi_job_controller.go`` (``newWorker``, ``newLauncherJob``,
``newLauncherPodTemplate``), ``pkg/controller/podgroup.go`` (``VolcanoCtrl.newPodGroup``,
``calPGMinResource``, ``calculateMinAvailable``, ``calculatePriorityClassName``),
``pkg/apis/kubeflow/v2beta1/default.go`` and ``pkg/apis/kubeflow/validation``.

- Workers ``<job>-worker-<index>``, labelled ``training.kubeflow.org/operator-name:
  mpi-operator``, ``job-name``, ``job-role: worker`` and ``replica-index`` (from 1 when the
  launcher runs as a worker).
- The launcher is a ``batch/v1`` Job ``<job>-launcher``, so its pod is
  ``<job>-launcher-<5 characters>`` (see :mod:`cluster.model.pod_controllers`), labelled
  ``job-role: launcher``.
- With gang scheduling, every pod's ``schedulerName`` becomes ``volcano`` (the operator
  overwrites it) and carries ``scheduling.k8s.io/group-name: <job>``. The PodGroup
  ``<job>`` (no annotations copied): minMember = schedulingPolicy.minAvailable, else
  workers + 1; queue = schedulingPolicy.queue, else the job's annotation
  ``scheduling.volcano.sh/queue-name``, else ``default``; priorityClassName =
  schedulingPolicy.priorityClass, else the launcher's, else the workers'; minResources =
  schedulingPolicy.minResources, none when minMember is 0, else launcher and workers
  summed (a container's requests, a limit where it states no request) after cutting the
  lower-priority replica type (the workers when both are equal) to minMember − 1 pods.

The operator may wait for the workers before creating the launcher
(``launcherCreationPolicy: WaitForWorkersReady``); here every pod is made at once.
"""

from __future__ import annotations

import re

import msgspec

from cluster.model.core import ObjectMeta, Pod, PodSpec
from cluster.model.kubeflow_api import KubeflowError, MPIJob, ReplicaSpec
from cluster.model.labels import (
    GROUP_NAME_ANNOTATION,
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    OPERATOR_NAME_LABEL,
    QUEUE_NAME_ANNOTATION,
    REPLICA_INDEX_LABEL,
)
from cluster.model.pod_controllers import BatchJob, BatchJobSpec, batch_job_pods
from cluster.model.pod_template import OwnerMeta, PodTemplate, PriorityValues, stamp_pod
from cluster.model.resources import Resources
from cluster.model.volcano import PodGroup, PodGroupSpec

OPERATOR_NAME = "mpi-operator"
VOLCANO = "volcano"
LAUNCHER, WORKER = "Launcher", "Worker"
_FIELD = "spec.mpiReplicaSpecs"
_RESTART_POLICIES = ("Never", "OnFailure")
_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
_CLEAN_POD_POLICIES = ("None", "Running", "All")
_MANAGED_BY = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


def expand_mpi_job(job: MPIJob, *, gang: bool, priority_classes: PriorityValues) -> tuple[PodGroup | None, list[Pod]]:
    """The PodGroup (None without gang scheduling) and pods of a v2beta1 MPIJob (already named).

    Raises :class:`KubeflowError` for a job the operator's validation refuses.
    """
    replicas = _defaulted(job)
    _validate(job, replicas)
    if job.spec.run_policy.suspend:
        return None, []
    meta = job.metadata
    as_worker = bool(job.spec.run_launcher_as_worker)
    group_annotations = {GROUP_NAME_ANNOTATION: meta.name} if gang else {}
    pods = []
    worker = replicas.get(WORKER)
    for index in range(worker.replicas or 0 if worker is not None else 0):
        assert worker is not None
        labels = {
            OPERATOR_NAME_LABEL: OPERATOR_NAME,
            JOB_NAME_LABEL: meta.name,
            JOB_ROLE_LABEL: "worker",
            REPLICA_INDEX_LABEL: str(index + 1 if as_worker else index),
        }
        pods.append(
            stamp_pod(
                worker.template,
                name=f"{meta.name}-worker-{index}",
                namespace=meta.namespace,
                labels=labels,
                annotations=group_annotations,
                spec=_scheduled(worker.template, gang),
                creation_timestamp=meta.creation_timestamp,
            )
        )
    pods += _launcher_pods(job, replicas[LAUNCHER], gang, as_worker)
    if not gang:
        return None, pods
    return _podgroup(job, replicas, priority_classes), pods


def _scheduled(template: PodTemplate, gang: bool) -> PodSpec:
    return msgspec.structs.replace(template.spec, scheduler_name=VOLCANO) if gang else template.spec


def _launcher_pods(job: MPIJob, launcher: ReplicaSpec, gang: bool, as_worker: bool) -> list[Pod]:
    """The launcher's ``batch/v1`` Job, expanded as the Job controller would."""
    meta, template = job.metadata, launcher.template
    labels = {
        **template.metadata.labels,
        OPERATOR_NAME_LABEL: OPERATOR_NAME,
        JOB_NAME_LABEL: meta.name,
        JOB_ROLE_LABEL: "launcher",
        **({REPLICA_INDEX_LABEL: "0"} if as_worker else {}),
    }
    annotations = {**template.metadata.annotations, **({GROUP_NAME_ANNOTATION: meta.name} if gang else {})}
    launcher_template = PodTemplate(
        metadata=msgspec.structs.replace(template.metadata, labels=labels, annotations=annotations),
        spec=msgspec.structs.replace(template.spec, scheduler_name=VOLCANO) if gang else template.spec,
    )
    batch = BatchJob(
        metadata=OwnerMeta(
            name=f"{meta.name}-launcher",
            namespace=meta.namespace,
            labels={"app": meta.name},
            creation_timestamp=meta.creation_timestamp,
        ),
        spec=BatchJobSpec(template=launcher_template, backoff_limit=job.spec.run_policy.backoff_limit),
    )
    _, pods = batch_job_pods(batch)
    return pods


def _defaulted(job: MPIJob) -> dict[str, ReplicaSpec]:
    """``SetDefaults_MPIJob``: a Launcher of 1 replica, Workers of 0, unless stated."""
    out = {}
    for rtype, spec in job.spec.mpi_replica_specs.items():
        default = 1 if rtype == LAUNCHER else 0
        restart = spec.restart_policy or ("OnFailure" if rtype == LAUNCHER else "Never")
        out[rtype] = msgspec.structs.replace(
            spec,
            replicas=default if spec.replicas is None else spec.replicas,
            restart_policy=restart if rtype in (LAUNCHER, WORKER) else spec.restart_policy,
        )
    return out


def _validate(job: MPIJob, replicas: dict[str, ReplicaSpec]) -> None:  # noqa: C901 (a flat list of checks, one branch each)
    """``ValidateMPIJob``, after defaulting (the first problem)."""
    spec, policy = job.spec, job.spec.run_policy
    worker = replicas.get(WORKER)
    count = worker.replicas if worker is not None and worker.replicas else 1
    longest = f"{job.metadata.name}-worker-{count - 1}"
    if not _DNS1035_LABEL.fullmatch(longest):
        raise KubeflowError(
            "metadata.name",
            job.metadata.name,
            f"the pod name {longest!r} would not be a DNS-1035 label "
            "(expected lower-case letters, digits and '-', starting with a letter, at most 63 characters)",
        )
    if not replicas:
        raise KubeflowError(_FIELD, {}, "no replica specs (expected a Launcher, and Workers)")
    if LAUNCHER not in replicas:
        raise KubeflowError(f"{_FIELD}.{LAUNCHER}", None, "missing (an MPIJob needs one Launcher)")
    for rtype in (LAUNCHER, WORKER):
        replica = replicas.get(rtype)
        if replica is None:
            continue
        where = f"{_FIELD}.{rtype}"
        if replica.restart_policy not in _RESTART_POLICIES:
            raise KubeflowError(
                f"{where}.restartPolicy",
                replica.restart_policy,
                f"{replica.restart_policy!r} is not supported (expected {' or '.join(_RESTART_POLICIES)})",
            )
        if not replica.template.spec.containers:
            raise KubeflowError(f"{where}.template.spec.containers", [], "no containers (expected at least one)")
    launcher = replicas[LAUNCHER]
    if launcher.replicas != 1:
        raise KubeflowError(f"{_FIELD}.{LAUNCHER}.replicas", launcher.replicas, f"{launcher.replicas} (expected 1)")
    if worker is not None and (worker.replicas or 0) < 1:
        raise KubeflowError(f"{_FIELD}.{WORKER}.replicas", worker.replicas, f"{worker.replicas} (expected 1 or more)")
    if spec.slots_per_worker is not None and spec.slots_per_worker < 0:
        raise KubeflowError("spec.slotsPerWorker", spec.slots_per_worker, "negative (expected 0 or more)")
    if spec.mpi_implementation and spec.mpi_implementation not in _IMPLEMENTATIONS:
        raise KubeflowError(
            "spec.mpiImplementation",
            spec.mpi_implementation,
            f"{spec.mpi_implementation!r} is not supported (expected one of {', '.join(_IMPLEMENTATIONS)})",
        )
    if policy.clean_pod_policy is not None and policy.clean_pod_policy not in _CLEAN_POD_POLICIES:
        raise KubeflowError(
            "spec.runPolicy.cleanPodPolicy",
            policy.clean_pod_policy,
            f"{policy.clean_pod_policy!r} is not supported (expected one of {', '.join(_CLEAN_POD_POLICIES)})",
        )
    for name, value in (
        ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", policy.active_deadline_seconds),
        ("backoffLimit", policy.backoff_limit),
    ):
        if value is not None and value < 0:
            raise KubeflowError(f"spec.runPolicy.{name}", value, f"{value} is negative (expected 0 or more)")
    if policy.managed_by is not None and policy.managed_by not in _MANAGED_BY:
        raise KubeflowError(
            "spec.runPolicy.managedBy",
            policy.managed_by,
            f"{policy.managed_by!r} is not supported (expected one of {', '.join(_MANAGED_BY)})",
        )


def _podgroup(job: MPIJob, replicas: dict[str, ReplicaSpec], priorities: PriorityValues) -> PodGroup:
    meta, policy = job.metadata, job.spec.run_policy.scheduling_policy
    worker = replicas.get(WORKER)
    workers = worker.replicas or 0 if worker is not None else 0
    min_member = policy.min_available if policy is not None and policy.min_available is not None else workers + 1
    queue = (policy.queue if policy is not None else "") or meta.annotations.get(QUEUE_NAME_ANNOTATION, "")
    if policy is not None and policy.min_resources is not None:
        needed = Resources.from_quantities(policy.min_resources, field="spec.runPolicy.schedulingPolicy.minResources")
    elif min_member == 0:
        needed = Resources()
    else:
        needed = _min_resources(replicas, min_member, priorities)
    return PodGroup(
        metadata=ObjectMeta(name=meta.name, namespace=meta.namespace, creation_timestamp=meta.creation_timestamp),
        spec=PodGroupSpec(
            min_member=min_member,
            queue=queue or "default",
            priority_class_name=_priority_class(replicas, job),
            min_resources=dict(needed.to_quantities()),
        ),
    )


def _priority_class(replicas: dict[str, ReplicaSpec], job: MPIJob) -> str:
    """``calculatePriorityClassName``: the scheduling policy's, else the launcher's, else the workers'."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        return policy.priority_class
    for rtype in (LAUNCHER, WORKER):
        replica = replicas.get(rtype)
        if replica is not None and replica.template.spec.priority_class_name:
            return replica.template.spec.priority_class_name
    return ""


def _min_resources(replicas: dict[str, ReplicaSpec], min_member: int, priorities: PriorityValues) -> Resources:
    """``calPGMinResource``: launcher and workers, highest priority first, the second cut to
    minMember − 1 pods when there are more pods than minMember (the workers when equal)."""
    order = sorted(replicas.items(), key=lambda item: -priorities.get(item[1].template.spec.priority_class_name, 0))
    counts = {rtype: spec.replicas or 0 for rtype, spec in order}
    if len(order) > 1 and sum(counts[rtype] for rtype, _ in order[:2]) > min_member:
        first, second = order[0], order[1]
        same = priorities.get(first[1].template.spec.priority_class_name, 0) == priorities.get(
            second[1].template.spec.priority_class_name, 0
        )
        cut = WORKER if same and WORKER in counts else second[0]
        counts[cut] = min_member - 1
    total = Resources()
    for rtype, spec in order:
        for i, container in enumerate(spec.template.spec.containers):
            field = f"{_FIELD}.{rtype}.template.spec.containers[{i}].resources"
            total += container.resources.effective_requests(field=field).scaled(counts[rtype])
    return total
