"""Volcano's API objects caldera reads: PodGroup, Queue and NodeShard (decoded as ``cluster.model.core``'s are)."""

from __future__ import annotations

import msgspec

from cluster.model.core import ObjectMeta, RawObject, ResourceList
from cluster.model.resources import Resources
from cluster.model.topology import NetworkTopologySpec, SubGroupPolicy


class PodGroupCondition(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    transition_id: str = msgspec.field(default="", name="transitionID")


class PodGroupSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    min_member: int = 1
    min_task_member: dict[str, int] = msgspec.field(default_factory=dict)
    min_resources: ResourceList | None = None
    queue: str = "default"
    priority_class_name: str = ""
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] = msgspec.field(default_factory=list)


class PodGroupStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    phase: str = "Pending"
    conditions: list[PodGroupCondition] = msgspec.field(default_factory=list)
    running: int = 0
    succeeded: int = 0
    failed: int = 0


class PodGroup(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano gang: at least ``min_member`` pods run together or none do."""

    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "PodGroup"
    metadata: ObjectMeta
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    def min_resources_amounts(self) -> Resources:
        """What the gang needs before it may start (empty when not stated)."""
        return Resources.from_quantities(self.spec.min_resources, field="spec.minResources")


class QueueGuarantee(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    resource: ResourceList = msgspec.field(default_factory=dict)


class QueueSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    weight: int = 1
    capability: ResourceList = msgspec.field(default_factory=dict)
    deserved: ResourceList = msgspec.field(default_factory=dict)
    guarantee: QueueGuarantee = msgspec.field(default_factory=QueueGuarantee)
    reclaimable: bool = True
    parent: str = ""
    priority: int = 0
    affinity: RawObject | None = None  # queue affinity to node groups: not honoured yet (cluster.model.unhonoured)


class QueueStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Volcano's queue status: state, PodGroup counts by phase, and what the queue holds."""

    state: str = "Open"
    allocated: ResourceList = msgspec.field(default_factory=dict)
    pending: int = 0
    inqueue: int = 0
    running: int = 0
    unknown: int = 0
    completed: int = 0


class Queue(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A Volcano queue (cluster-scoped: ``metadata.namespace`` means nothing)."""

    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "Queue"
    metadata: ObjectMeta
    spec: QueueSpec = msgspec.field(default_factory=QueueSpec)
    status: QueueStatus = msgspec.field(default_factory=QueueStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    def capability_resources(self) -> Resources:
        """The most the queue may use; empty means unlimited."""
        return Resources.from_quantities(self.spec.capability, field="spec.capability")

    def guarantee_resources(self) -> Resources:
        """What the queue keeps even when others want it."""
        return Resources.from_quantities(self.spec.guarantee.resource, field="spec.guarantee.resource")

    def deserved_resources(self) -> Resources:
        """The queue's fair share, when stated (capacity plugin)."""
        return Resources.from_quantities(self.spec.deserved, field="spec.deserved")


# -- PriorityClass, NodeShard -------------------------------------------------------------


class NodeShardSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    nodes_desired: list[str] = msgspec.field(default_factory=list)
    scheduler_name: str = ""  # in some Volcano versions


class NodeShardStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    nodes_in_use: list[str] = msgspec.field(default_factory=list)
    nodes_to_add: list[str] = msgspec.field(default_factory=list)
    nodes_to_remove: list[str] = msgspec.field(default_factory=list)
    last_update_time: str | None = None


class NodeShard(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The nodes one scheduler owns (cluster-scoped, ``shard.volcano.sh/v1alpha1``)."""

    api_version: str = "shard.volcano.sh/v1alpha1"
    kind: str = "NodeShard"
    metadata: ObjectMeta
    spec: NodeShardSpec = msgspec.field(default_factory=NodeShardSpec)
    status: NodeShardStatus = msgspec.field(default_factory=NodeShardStatus)

    @property
    def name(self) -> str:
        return self.metadata.name
