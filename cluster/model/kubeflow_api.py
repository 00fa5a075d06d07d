"""Kubeflow's training jobs as a user writes them: ``kubeflow.org/v1`` PyTorchJob, TFJob and
MPIJob (the training operator), and ``kubeflow.org/v2beta1`` MPIJob (the MPI operator).

Read from the public repositories kubeflow/training-operator (branch ``release-1.9``:
``pkg/apis/kubeflow.org/v1/*_types.go``, ``*_defaults.go``) and kubeflow/mpi-operator
(``master``: ``pkg/apis/kubeflow/v2beta1/types.go``, ``default.go``). Both MPIJob versions
share one kind in one API group, so one Struct holds the fields of both and
``apiVersion`` says which operator's rules apply. Fields that change no placement
(``elasticPolicy``, ``successPolicy``, ``cleanPodPolicy``, the restart policies, ...) are
kept as written.
"""

from __future__ import annotations

import msgspec

from cluster.model.core import RawObject, ResourceList
from cluster.model.pod_template import FieldError, OwnerMeta, PodTemplate

GROUP = "kubeflow.org"
V1 = "kubeflow.org/v1"
V2BETA1 = "kubeflow.org/v2beta1"

# training.kubeflow.org labels (common_types.go; v2beta1/constants.go).


class KubeflowError(FieldError):
    """A training job the operator or its webhook would refuse: ``field: problem``."""


class SchedulingPolicy(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the operator puts on the job's PodGroup instead of its own defaults."""

    min_available: int | None = None
    queue: str = ""
    min_resources: ResourceList | None = None
    priority_class: str = ""
    schedule_timeout_seconds: int | None = None


class RunPolicy(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    clean_pod_policy: str | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool = False
    managed_by: str | None = None


class ReplicaSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``replicas`` pods of one replica type (Master, Worker, PS, Launcher, ...)."""

    replicas: int | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)
    restart_policy: str = ""


class PyTorchJobSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    run_policy: RunPolicy = msgspec.field(default_factory=RunPolicy)
    elastic_policy: RawObject | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec] = msgspec.field(default_factory=dict)
    nproc_per_node: str | None = None


class TFJobSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    run_policy: RunPolicy = msgspec.field(default_factory=RunPolicy)
    success_policy: str | None = None
    tf_replica_specs: dict[str, ReplicaSpec] = msgspec.field(default_factory=dict)
    enable_dynamic_worker: bool = False


class MPIJobSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Both versions' fields: v1 (``cleanPodPolicy``, ``mainContainer``) and v2beta1 (the rest after runPolicy)."""

    slots_per_worker: int | None = None
    clean_pod_policy: str | None = None
    run_policy: RunPolicy = msgspec.field(default_factory=RunPolicy)
    mpi_replica_specs: dict[str, ReplicaSpec] = msgspec.field(default_factory=dict)
    main_container: str = ""
    run_launcher_as_worker: bool | None = None
    ssh_auth_mount_path: str = ""
    launcher_creation_policy: str = ""
    mpi_implementation: str = ""


class PyTorchJob(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = V1
    kind: str = "PyTorchJob"
    metadata: OwnerMeta
    spec: PyTorchJobSpec = msgspec.field(default_factory=PyTorchJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.pytorch_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


class TFJob(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = V1
    kind: str = "TFJob"
    metadata: OwnerMeta
    spec: TFJobSpec = msgspec.field(default_factory=TFJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.tf_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


class MPIJob(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = V2BETA1
    kind: str = "MPIJob"
    metadata: OwnerMeta
    spec: MPIJobSpec = msgspec.field(default_factory=MPIJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.mpi_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


TrainingJob = PyTorchJob | TFJob | MPIJob
