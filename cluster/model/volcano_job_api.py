"""The ``batch.volcano.sh/v1alpha1`` Job as a user writes it (``staging/.../batch/v1alpha1/job.go``).

Every field of the API is kept, including those that change nothing in caldera's placement
today (policies, plugins, volumes, ``dependsOn``, ``topologyPolicy``, ``networkTopology``,
``partitionPolicy``, ``ttlSecondsAfterFinished``, ``minSuccess``): admission checks them as
Volcano's webhook does, and a warning can name them. Defaults are Go's zero values, as
the API server stores a Job before Volcano's mutating webhook runs
(:mod:`cluster.model.volcano_admission` applies the webhook's defaults).
"""

from __future__ import annotations

import msgspec

from cluster.model.core import RawObject
from cluster.model.labels import (
    JOB_NAME_KEY,
    QUEUE_NAME_KEY,
    TASK_SPEC_KEY,
)
from cluster.model.pod_template import FieldError, OwnerMeta, PodTemplate
from cluster.model.topology import NetworkTopologySpec

DEFAULT_SCHEDULER = "volcano"
DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_PREFIX = "default"  # an unnamed task i is named default<i>

# Labels and annotations Volcano's job controller puts on pods (batch/v1alpha1/labels.go).
# The Job's own annotations (and, for the first two, labels) the controller copies to its pods
# (scheduling/v1beta1/labels.go).

# Kept for callers of the first version of this module.
JOB_NAME_LABEL = JOB_NAME_KEY
TASK_SPEC_LABEL = TASK_SPEC_KEY
QUEUE_NAME_LABEL = QUEUE_NAME_KEY


class JobError(FieldError):
    """A Job Volcano would refuse; the message is ``field: problem``, naming the value and what is accepted."""


class LifecyclePolicy(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the job controller does on an event (or a container's exit code); not modelled by caldera."""

    action: str = ""
    event: str = ""
    events: list[str] = msgspec.field(default_factory=list)
    exit_code: int | None = None
    timeout: str | None = None

    def event_list(self) -> list[str]:
        """``events`` then ``event``, each once, as the webhook reads them."""
        out: list[str] = []
        for event in [*self.events, *([self.event] if self.event else [])]:
            if event not in out:
                out.append(event)
        return out


class DependsOn(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The tasks whose pods must run before this task's are created (not modelled: pods are made up front)."""

    name: list[str] = msgspec.field(default_factory=list)
    iteration: str = ""


class PartitionPolicy(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A task split into ``totalPartitions`` sub-gangs of ``partitionSize`` pods (Volcano 1.14)."""

    total_partitions: int = 0
    partition_size: int = 0
    min_partitions: int = 0
    network_topology: NetworkTopologySpec | None = None


class VolumeSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A claim mounted at ``mountPath`` in every container of every pod (not modelled by placement)."""

    mount_path: str = ""
    volume_claim_name: str = ""
    volume_claim: RawObject | None = None  # a PersistentVolumeClaim spec, as written


class TaskSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``replicas`` identical pods; ``min_available`` of them must run for the task to count."""

    name: str = ""
    replicas: int = 0
    min_available: int | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)
    policies: list[LifecyclePolicy] = msgspec.field(default_factory=list)
    topology_policy: str = ""  # NUMA: none | best-effort | restricted | single-numa-node
    max_retry: int = 0
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class JobSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    scheduler_name: str = ""
    min_available: int = 0  # 0: the sum of the tasks' minAvailable (the webhook's default)
    volumes: list[VolumeSpec] = msgspec.field(default_factory=list)
    tasks: list[TaskSpec] = msgspec.field(default_factory=list)
    policies: list[LifecyclePolicy] = msgspec.field(default_factory=list)
    plugins: dict[str, list[str]] = msgspec.field(default_factory=dict)
    running_estimate: str | None = None
    queue: str = ""
    max_retry: int = 0
    ttl_seconds_after_finished: int | None = None
    priority_class_name: str = ""
    min_success: int | None = None
    network_topology: NetworkTopologySpec | None = None


class Job(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano Job: a gang of tasks, each a set of identical pods."""

    api_version: str = "batch.volcano.sh/v1alpha1"
    kind: str = "Job"
    metadata: OwnerMeta
    spec: JobSpec = msgspec.field(default_factory=JobSpec)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace
