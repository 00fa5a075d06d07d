"""Kubeflow training jobs, expanded into the PodGroup and pods their operator makes for Volcano.

Read from the public repository kubeflow/training-operator, branch ``release-1.9`` (the
last with ``kubeflow.org/v1`` jobs): ``pkg/controller.v1/common/job.go`` (the PodGroup),
``common/pod.go`` and ``common/util.go`` (pods, names, ``CalcPGMinResources``),
``control/podgroup_control.go`` (what gang scheduling adds to a pod),
``mpi/mpijob_controller.go`` (MPIJob v1), ``pkg/webhooks/{pytorch,tensorflow}`` and
``apis/kubeflow.org/v1/*_defaults.go``. ``kubeflow.org/v2beta1`` MPIJobs follow
kubeflow/mpi-operator instead (:mod:`cluster.model.mpi_operator`).

Gang scheduling is the operator's setting (``--gang-scheduler-name=volcano``), which a
manifest does not show. :func:`expand_training_job` takes it as ``gang_scheduler``; left
``None``, a job is gang-scheduled by Volcano when any of its pod templates names
``schedulerName: volcano`` or it states ``runPolicy.schedulingPolicy`` (what a user who
writes either expects). Without gang scheduling the pods are made with no PodGroup and
their own scheduler.

With gang scheduling (training operator, v1):

- PodGroup ``<job>``, the job's annotations: minMember = schedulingPolicy.minAvailable,
  else every replica; queue = schedulingPolicy.queue, else ``default``; priorityClassName =
  schedulingPolicy.priorityClass; minResources = schedulingPolicy.minResources, else the
  first minMember pods' containers (requests, or a container's limits when it states no
  requests; init containers not counted) with the replica types ordered by their
  template's PriorityClass value, highest first. The operator iterates a Go map there, so
  its order among equal priorities is random; here it is the manifest's.
- Pods ``<job>-<replica type, lower case>-<index>`` (``mnist-master-0``, ``mnist-worker-1``);
  MPIJob v1: ``<job>-launcher`` and ``<job>-worker-<index>``, the launcher with the
  operator's kubectl-delivery init container. Labels ``training.kubeflow.org/operator-name``,
  ``job-name``, ``replica-type``, ``replica-index`` (not on the MPI launcher) and
  ``job-role: master`` (the Master or Chief, else worker 0; the MPI launcher); annotations
  ``scheduling.k8s.io/group-name: <job>`` and ``volcano.sh/task-spec: <replica type>``;
  ``schedulerName: volcano`` where the template names none.

A suspended job (``runPolicy.suspend``) has neither pods nor PodGroup. The operator
creates pods only once the PodGroup is Inqueue; here they are made at once, for a dry run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from cluster.model.core import Container, ObjectMeta, Pod, ResourceRequirements
from cluster.model.kubeflow_api import (
    GROUP,
    V1,
    V2BETA1,
    KubeflowError,
    MPIJob,
    PyTorchJob,
    ReplicaSpec,
    TFJob,
    TrainingJob,
)
from cluster.model.labels import (
    GROUP_NAME_ANNOTATION,
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    TASK_SPEC_KEY,
)
from cluster.model.mpi_operator import expand_mpi_job
from cluster.model.pod_template import (
    FieldError,
    PodTemplate,
    PriorityValues,
    name_or_generated,
    scheduler_or,
    stamp_pod,
)
from cluster.model.resources import Resources
from cluster.model.volcano import PodGroup, PodGroupSpec

VOLCANO = "volcano"
DEFAULT_QUEUE = "default"
OPERATOR_NAMES = {"PyTorchJob": "pytorchjob-controller", "TFJob": "tfjob-controller", "MPIJob": "mpijob-controller"}
REPLICA_TYPES = {
    "PyTorchJob": ("Master", "Worker"),
    "TFJob": ("PS", "Worker", "Chief", "Master", "Evaluator"),
    "MPIJob": ("Launcher", "Worker"),
}
_DEFAULT_CONTAINERS = {"PyTorchJob": "pytorch", "TFJob": "tensorflow"}
_SPEC_FIELDS = {
    "PyTorchJob": "spec.pytorchReplicaSpecs",
    "TFJob": "spec.tfReplicaSpecs",
    "MPIJob": "spec.mpiReplicaSpecs",
}
# The MPI v1 launcher's init container (mpi/mpijob.go: initContainerCpu, ...Mem, ...EphStorage).
_KUBECTL_DELIVERY = Container(
    name="kubectl-delivery",
    resources=ResourceRequirements(
        requests={"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
        limits={"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
    ),
)
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)


def expand_training_job(
    job: TrainingJob,
    *,
    priority_classes: PriorityValues | None = None,
    ordinal: int = 0,
    gang_scheduler: str | None = None,
) -> tuple[PodGroup | None, list[Pod]]:
    """The PodGroup (None without gang scheduling) and pods the operator makes from ``job``.

    ``gang_scheduler``: the operator's gang scheduler, ``None`` to infer it from the job (see
    the module). ``ordinal`` tells apart jobs sharing a ``generateName``. Raises
    :class:`KubeflowError` for a job the operator or its webhook refuses, QuantityError for a
    bad quantity.
    """
    try:
        job = msgspec.structs.replace(job, metadata=name_or_generated(job.metadata, f"{GROUP}/{job.kind}", ordinal))
    except FieldError as exc:
        raise KubeflowError(exc.field, exc.value, exc.problem) from exc
    gang = uses_volcano(job, gang_scheduler)
    if isinstance(job, MPIJob) and job.api_version == V2BETA1:
        return expand_mpi_job(job, gang=gang, priority_classes=priority_classes or {})
    if job.api_version != V1:
        expected = f"{V1} or {V2BETA1}" if isinstance(job, MPIJob) else V1
        raise KubeflowError(
            "apiVersion", job.api_version, f"{job.api_version!r} is not supported (expected {expected})"
        )
    replicas = defaulted_replicas(job)
    validate_training_job(job, replicas)
    if job.run_policy.suspend:
        return None, []
    pods = [pod for rtype, spec in replicas.items() for pod in _replica_pods(job, rtype, spec, replicas, gang)]
    if not gang:
        return None, pods
    return _podgroup(job, replicas, priority_classes or {}), pods


def uses_volcano(job: TrainingJob, gang_scheduler: str | None) -> bool:
    """Whether the operator gang-schedules ``job`` with Volcano (see the module for ``None``)."""
    if gang_scheduler is not None:
        return gang_scheduler == VOLCANO
    if job.run_policy.scheduling_policy is not None:
        return True
    return any(spec.template.spec.scheduler_name == VOLCANO for spec in job.replica_specs.values())


def defaulted_replicas(job: TrainingJob) -> dict[str, ReplicaSpec]:
    """The replica specs as the operator's defaulting leaves them (v1).

    PyTorchJob and TFJob replica types are matched without case (``master`` is Master) and
    default to 1 replica; an MPIJob's Launcher defaults to 1 and its Worker to 0.
    """
    out: dict[str, ReplicaSpec] = {}
    known = REPLICA_TYPES[job.kind]
    for rtype, spec in job.replica_specs.items():
        if not isinstance(job, MPIJob):
            rtype = next((t for t in known if t.lower() == rtype.lower()), rtype)
        default = 0 if isinstance(job, MPIJob) and rtype == "Worker" else 1
        out[rtype] = spec if spec.replicas is not None else msgspec.structs.replace(spec, replicas=default)
    return out


def validate_training_job(job: TrainingJob, replicas: Mapping[str, ReplicaSpec]) -> None:
    """Raise :class:`KubeflowError` for what the v1 webhooks (PyTorchJob, TFJob) or the MPIJob v1
    validation refuse."""
    field = _SPEC_FIELDS[job.kind]
    if not isinstance(job, MPIJob) and not _DNS1035_LABEL.fullmatch(job.metadata.name):
        raise KubeflowError(
            "metadata.name",
            job.metadata.name,
            f"{job.metadata.name!r} is not a DNS-1035 label "
            "(expected lower-case letters, digits and '-', starting with a letter, at most 63 characters)",
        )
    if not replicas:
        raise KubeflowError(field, {}, f"no replica specs (expected some of {', '.join(REPLICA_TYPES[job.kind])})")
    chief_or_master = [t for t in replicas if t in ("Chief", "Master")]
    for rtype, spec in replicas.items():
        where = f"{field}.{rtype}"
        if not isinstance(job, TFJob) and rtype not in REPLICA_TYPES[job.kind]:
            raise KubeflowError(
                where,
                rtype,
                f"{rtype!r} is not a replica type of a {job.kind} (expected {', '.join(REPLICA_TYPES[job.kind])})",
            )
        containers = spec.template.spec.containers
        if not containers:
            raise KubeflowError(f"{where}.template.spec.containers", [], "no containers (expected at least one)")
        default = _DEFAULT_CONTAINERS.get(job.kind)
        if default is not None and all(c.name != default for c in containers):
            raise KubeflowError(
                f"{where}.template.spec.containers",
                [c.name for c in containers],
                f"no container named {default!r} (the operator needs one)",
            )
        if isinstance(job, MPIJob) and any(not c.name for c in containers):
            raise KubeflowError(f"{where}.template.spec.containers", [], "a container without a name")
        if (rtype == "Master" and isinstance(job, PyTorchJob) or rtype == "Launcher") and spec.replicas != 1:
            raise KubeflowError(f"{where}.replicas", spec.replicas, f"{spec.replicas} {rtype} replicas (expected 1)")
        if spec.replicas is not None and spec.replicas < 0:
            raise KubeflowError(f"{where}.replicas", spec.replicas, f"{spec.replicas} is negative (expected 0 or more)")
    if isinstance(job, TFJob) and len(chief_or_master) > 1:
        raise KubeflowError(field, chief_or_master, "both a Chief and a Master (expected at most one of them)")
    if isinstance(job, PyTorchJob) and job.spec.elastic_policy is not None and "Worker" not in replicas:
        raise KubeflowError(f"{field}.Worker", None, "missing (an elasticPolicy needs Worker replicas)")
    if isinstance(job, MPIJob) and "Launcher" not in replicas:
        raise KubeflowError(f"{field}.Launcher", None, "missing (an MPIJob needs one Launcher)")


def _is_master(job: TrainingJob, rtype: str, index: int, replicas: Mapping[str, ReplicaSpec]) -> bool:
    """``IsMasterRole``: the Master (PyTorch) or Chief/Master (TF), else worker 0; the MPI launcher."""
    if isinstance(job, MPIJob):
        return rtype == "Launcher"
    masters = ("Master",) if isinstance(job, PyTorchJob) else ("Chief", "Master")
    if any(t in replicas for t in masters):
        return rtype in masters
    return rtype == "Worker" and index == 0


def _replica_pods(
    job: TrainingJob, rtype: str, spec: ReplicaSpec, replicas: Mapping[str, ReplicaSpec], gang: bool
) -> list[Pod]:
    rt = rtype.lower()
    meta = job.metadata
    base = {
        OPERATOR_NAME_LABEL: OPERATOR_NAMES[job.kind],
        JOB_NAME_LABEL: meta.name.replace("/", "-"),
        REPLICA_TYPE_LABEL: rt,
    }
    annotations = {GROUP_NAME_ANNOTATION: meta.name, TASK_SPEC_KEY: rt} if gang else {}
    template = spec.template
    pod_spec = template.spec
    if gang:
        pod_spec = msgspec.structs.replace(pod_spec, scheduler_name=scheduler_or(pod_spec, VOLCANO))
    pods = []
    for index in range(spec.replicas or 0):
        labels = dict(base)
        if isinstance(job, MPIJob):
            name = f"{meta.name}-launcher" if rtype == "Launcher" else f"{meta.name}-worker-{index}"
            if rtype == "Worker":
                labels[REPLICA_INDEX_LABEL] = str(index)
        else:
            name = f"{meta.name}-{rt}-{index}".replace("/", "-")
            labels[REPLICA_INDEX_LABEL] = str(index)
        if _is_master(job, rtype, index, replicas):
            labels[JOB_ROLE_LABEL] = "master"
        this_spec = pod_spec
        if isinstance(job, MPIJob) and rtype == "Launcher":
            this_spec = msgspec.structs.replace(
                pod_spec, init_containers=[*pod_spec.init_containers, _KUBECTL_DELIVERY]
            )
        pods.append(
            stamp_pod(
                template,
                name=name,
                namespace=meta.namespace,
                labels=labels,
                annotations=annotations,
                spec=this_spec,
                creation_timestamp=meta.creation_timestamp,
            )
        )
    return pods


def _podgroup(job: TrainingJob, replicas: Mapping[str, ReplicaSpec], priorities: PriorityValues) -> PodGroup:
    policy = job.run_policy.scheduling_policy
    total = sum(spec.replicas or 0 for spec in replicas.values())
    min_member = policy.min_available if policy is not None and policy.min_available is not None else total
    if policy is not None and policy.min_resources is not None:
        field = "spec.runPolicy.schedulingPolicy.minResources"
        needed = Resources.from_quantities(policy.min_resources, field=field)
    else:
        needed = first_pods_resources(replicas, min_member, priorities, _SPEC_FIELDS[job.kind])
    meta = job.metadata
    return PodGroup(
        metadata=ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            annotations=dict(meta.annotations),
            creation_timestamp=meta.creation_timestamp,
        ),
        spec=PodGroupSpec(
            min_member=min_member,
            queue=(policy.queue if policy is not None else "") or DEFAULT_QUEUE,
            priority_class_name=policy.priority_class if policy is not None else "",
            min_resources=dict(needed.to_quantities()),
        ),
    )


def first_pods_resources(
    replicas: Mapping[str, ReplicaSpec], min_member: int, priorities: PriorityValues, field: str
) -> Resources:
    """The training operator's ``CalcPGMinResources``: the containers of the first ``min_member``
    pods, replica types highest PriorityClass value first (ties in ``replicas``' order)."""
    order = sorted(replicas.items(), key=lambda item: -priorities.get(item[1].template.spec.priority_class_name, 0))
    total, left = Resources(), min_member
    for rtype, spec in order:
        count = min(spec.replicas or 0, max(left, 0))
        total += containers_resources(spec.template, f"{field}.{rtype}.template").scaled(count)
        left -= count
    return total


def containers_resources(template: PodTemplate, field: str) -> Resources:
    """One pod's containers summed, each its requests, or its limits when it states no requests
    (``AddResourceList``; init containers and overhead are not counted)."""
    total = Resources()
    for i, container in enumerate(template.spec.containers):
        resources = container.resources
        values, which = (resources.requests, "requests") if resources.requests else (resources.limits, "limits")
        total += Resources.from_quantities(values, field=f"{field}.spec.containers[{i}].resources.{which}")
    return total
