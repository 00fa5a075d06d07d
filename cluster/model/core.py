"""The Kubernetes core API objects caldera reads (Node, Pod, PriorityClass), as msgspec Structs decoded from Kubernetes / Volcano JSON or YAML.

Field names are the API's (camelCase on the wire, snake_case here); unknown fields are
ignored, so full API server objects decode. Only what scheduling needs is modelled.

``null``: Go reads a JSON ``null`` as "absent". Fields the API server may send as null
(unset timestamps, pointers such as ``priority`` or ``affinity``) accept ``None`` here, so
``msgspec.json.decode(body, type=Pod)`` works on what it sends. Other producers may put
null anywhere (hand-written YAML ``labels:`` with nothing under it, Volcano's empty
``nodesDesired``): ``cluster.model.decode.from_builtins`` and ``decode_json`` drop nulls
first, and are the way to read anything else.
"""

from __future__ import annotations

import uuid

import msgspec

from cluster.model.labels import GROUP_NAME_ANNOTATION
from cluster.model.memo import Memo
from cluster.model.pod_rules import PodAffinity, TopologySpreadConstraint
from cluster.model.resources import DEFAULT_MAX_PODS, PODS, Resources

Quantity = str | int | float
ResourceList = dict[str, Quantity]
RawObject = dict[str, object]
"""A part of an object caldera carries but does not read, as the API sent it (camelCase keys)."""

ALWAYS = "Always"

# Pod uids for objects that have none (manifests not read from an API server) are derived
# from namespace/name, so the same manifest always gets the same uid.
_UID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "caldera.pods")


# -- metadata and node selection ----------------------------------------------------


class ObjectMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    generate_name: str = ""
    namespace: str = "default"
    uid: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None


class Taint(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    key: str
    value: str = ""
    effect: str


class Toleration(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Empty key with operator Exists tolerates everything; empty effect matches every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class NodeSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    key: str
    operator: str
    values: list[str] = msgspec.field(default_factory=list)


class NodeSelectorTerm(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """All requirements of a term must hold."""

    match_expressions: list[NodeSelectorRequirement] = msgspec.field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = msgspec.field(default_factory=list)


class NodeSelector(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Any one of the terms must hold."""

    node_selector_terms: list[NodeSelectorTerm] = msgspec.field(default_factory=list)


class PreferredSchedulingTerm(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = msgspec.field(
        default_factory=list
    )


class Affinity(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# -- Node -----------------------------------------------------------------------------


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    unschedulable: bool = False
    taints: list[Taint] = msgspec.field(default_factory=list)


class NodeStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    capacity: ResourceList = msgspec.field(default_factory=dict)
    allocatable: ResourceList = msgspec.field(default_factory=dict)


class Node(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def taints(self) -> list[Taint]:
        return self.spec.taints

    @property
    def unschedulable(self) -> bool:
        return self.spec.unschedulable

    def allocatable_resources(self) -> Resources:
        """What pods may request on this node.

        ``status.allocatable``, or ``status.capacity`` when allocatable is absent or empty
        (hand-written nodes often give only one). A node that states no ``pods`` gets the
        kubelet's default of :data:`DEFAULT_MAX_PODS`: every pod takes one, so a node
        without it could otherwise run nothing.
        """
        if self.status.allocatable:
            values, field = self.status.allocatable, "status.allocatable"
        else:
            values, field = self.status.capacity, "status.capacity"
        resources = Resources.from_quantities(values, field=field)
        if PODS not in values:
            resources = resources + {PODS: DEFAULT_MAX_PODS}
        return resources


# -- Pod ------------------------------------------------------------------------------


class ResourceRequirements(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    requests: ResourceList = msgspec.field(default_factory=dict)
    limits: ResourceList = msgspec.field(default_factory=dict)

    def effective_requests(self, *, field: str) -> Resources:
        """Requests, where a resource with a limit but no request requests its limit.

        This is the API server's defaulting; ``field`` is the path of this object.
        """
        requests = Resources.from_quantities(self.requests, field=f"{field}.requests")
        limits = Resources.from_quantities(self.limits, field=f"{field}.limits")
        return requests + {name: amount for name, amount in limits.items() if name not in self.requests}


class ContainerPort(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A port a container exposes; with ``host_port`` (or on the host network) it takes the node's port."""

    container_port: int = 0
    host_port: int | None = None
    protocol: str = "TCP"
    host_ip: str = msgspec.field(default="", name="hostIP")
    name: str = ""


class Container(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar
    ports: list[ContainerPort] = msgspec.field(default_factory=list)


class Volume(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A pod volume; only the sources that tie a pod to where its storage is are read."""

    name: str = ""
    persistent_volume_claim: RawObject | None = None
    ephemeral: RawObject | None = None  # a generic ephemeral volume: a PVC made for the pod


class PodSchedulingGate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str


class PodSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    containers: list[Container] = msgspec.field(default_factory=list)
    init_containers: list[Container] = msgspec.field(default_factory=list)
    overhead: ResourceList = msgspec.field(default_factory=dict)
    resources: ResourceRequirements | None = None  # pod-level resources (Kubernetes 1.32+)
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    tolerations: list[Toleration] = msgspec.field(default_factory=list)
    affinity: Affinity | None = None
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None  # PreemptLowerPriority (default) or Never
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    # Carried so that what caldera does not honour yet can be said (cluster.model.unhonoured).
    host_network: bool = False
    volumes: list[Volume] = msgspec.field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = msgspec.field(default_factory=list)
    scheduling_gates: list[PodSchedulingGate] = msgspec.field(default_factory=list)
    resource_claims: list[RawObject] = msgspec.field(default_factory=list)


class PodStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    phase: str = "Pending"


class Pod(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def uid(self) -> str:
        """``metadata.uid``; when empty, a uuid5 of namespace/name (stable across runs)."""
        if self.metadata.uid:
            return self.metadata.uid
        return str(uuid.uuid5(_UID_NAMESPACE, f"{self.namespace}/{self.name}"))

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def scheduler_name(self) -> str:
        return self.spec.scheduler_name

    @property
    def node_name(self) -> str:
        return self.spec.node_name

    @property
    def phase(self) -> str:
        return self.status.phase

    @property
    def group_name(self) -> str:
        """The PodGroup this pod belongs to (Volcano's annotation), '' for none."""
        return self.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")

    @property
    def priority(self) -> int:
        return self.spec.priority if self.spec.priority is not None else 0

    def request(self) -> Resources:
        """What the pod takes from its node: Kubernetes' effective request, plus one pod."""
        return pod_request(self)


def _items(values: ResourceList) -> tuple[tuple[str, object, type], ...]:
    """A quantity list as a key: with each value's type, as ``True`` equals ``1`` and is refused where 1 is not."""
    return tuple((name, value, type(value)) for name, value in values.items())


def _lists(r: ResourceRequirements) -> tuple[tuple[tuple[str, object, type], ...], ...]:
    return _items(r.requests), _items(r.limits)


_REQUESTS: Memo[Resources] = Memo()
"""Pod requests already worked out, by what they are made of (a cluster's pods repeat a few shapes):
worked out, one cost ~19 µs (a dozen Resources built along the way) — the demo spent 2.8 ms of every
150-pod burst on them before its write, and the simulated kubelets as much again."""


def pod_request(pod: Pod) -> Resources:
    """Kubernetes' effective pod request (``PodRequests`` with sidecars), plus ``pods: 1``.

    Regular containers and sidecars (init containers with ``restartPolicy: Always``) run
    together, so they add up. Each regular init container runs alone beside the sidecars
    started before it; the pod needs the larger of the two figures, per resource. Then
    pod-level requests (cpu, memory, hugepages) replace the containers' sum, and the
    RuntimeClass overhead is added.
    """
    spec = pod.spec
    key = (
        tuple(_lists(c.resources) for c in spec.containers),
        tuple((_lists(c.resources), c.restart_policy) for c in spec.init_containers),
        None if spec.resources is None else _lists(spec.resources),
        _items(spec.overhead),
    )
    try:
        return _REQUESTS.get(key, lambda: _pod_request(pod))
    except TypeError:  # an unhashable amount: worked out, it is refused with the field named
        return _pod_request(pod)


def _pod_request(pod: Pod) -> Resources:
    spec = pod.spec
    total = Resources()
    for i, c in enumerate(spec.containers):
        total += c.resources.effective_requests(field=f"spec.containers[{i}].resources")
    sidecars = Resources()
    init_peak = Resources()
    for i, c in enumerate(spec.init_containers):
        request = c.resources.effective_requests(field=f"spec.initContainers[{i}].resources")
        if c.restart_policy == ALWAYS:
            total += request
            sidecars += request
            init_peak = init_peak.max_with(sidecars)
        else:
            init_peak = init_peak.max_with(request + sidecars)
    total = total.max_with(init_peak)
    if spec.resources is not None:
        pod_level = spec.resources.effective_requests(field="spec.resources")
        supported = {n: a for n, a in pod_level.items() if n in ("cpu", "memory") or n.startswith("hugepages-")}
        if supported:
            total = Resources({**total, **supported})
    total += Resources.from_quantities(spec.overhead, field="spec.overhead")
    return (total + {PODS: 1}).within_int64(field="spec (the pod's effective request)")


# -- Volcano: PodGroup and Queue ----------------------------------------------------------


class Namespace(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A namespace: what inter-pod affinity's ``namespaceSelector`` matches is its labels."""

    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta

    @property
    def name(self) -> str:
        return self.metadata.name


class PriorityClass(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"
    description: str = ""

    @property
    def name(self) -> str:
        return self.metadata.name
