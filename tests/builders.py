"""Small fluent builders for tests: ``node("n1", cpu="8", gpu=4)``, ``pod("p", cpu="1")``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from cluster.model.core import Node, ObjectMeta, Pod
from cluster.model.devices import node_allocatable
from cluster.model.resources import Resources
from cluster.model.topology import ExactMatch, HyperNode, HyperNodeSpec, LabelMatch, Member, MemberSelector, RegexMatch
from cluster.nodeview.table import NodeTable
from cluster.sim.pods import make_pod
from cluster.sim.pools import NodePool, TaintSpec, pool_nodes
from cluster.store.records import NodeRecord


def node(
    name: str,
    *,
    cpu: str | int = "8",
    memory: str = "32Gi",
    gpu: int = 0,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[TaintSpec] | None = None,
    unschedulable: bool = False,
) -> Node:
    resources: dict[str, str | int | float] = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpu:
        resources["nvidia.com/gpu"] = gpu
    made = pool_nodes(
        NodePool(
            name="x",
            count=1,
            resources=resources,
            labels=labels or {},
            taints=taints or [],
            unschedulable=unschedulable,
        )
    )[0]
    labels = {**made.metadata.labels, "kubernetes.io/hostname": name, **(labels or {})}
    meta = msgspec.structs.replace(made.metadata, name=name, labels=labels)
    return msgspec.structs.replace(made, metadata=meta)


def pod(
    name: str,
    *,
    cpu: str | int = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    scheduler: str = "s",
    node: str = "",
    phase: str = "Pending",
    duration: float | None = None,
    group: str = "",
) -> Pod:
    requests: dict[str, str | int] = {"cpu": cpu, "memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    return make_pod(
        name,
        requests=requests,
        scheduler=scheduler,
        node=node,
        phase=phase,
        duration=duration,
        group=group,
        uid=f"uid-{name}",
    )


def hypernode(
    name: str, tier: int, *, nodes: Sequence[str] = (), children: Sequence[str] = (), **selector: Any
) -> HyperNode:
    """A HyperNode of ``tier`` holding ``nodes`` (exact names) and ``children`` (HyperNodes); a
    ``regex=`` or ``labels=`` keyword adds one member of that kind; ``tier_name=`` names the tier."""
    members = [Member(type="Node", selector=MemberSelector(exact_match=ExactMatch(name=n))) for n in nodes]
    members += [Member(type="HyperNode", selector=MemberSelector(exact_match=ExactMatch(name=c))) for c in children]
    if "regex" in selector:
        members.append(Member(type="Node", selector=MemberSelector(regex_match=RegexMatch(pattern=selector["regex"]))))
    if "labels" in selector:
        members.append(
            Member(type="Node", selector=MemberSelector(label_match=LabelMatch(match_labels=selector["labels"])))
        )
    return HyperNode(
        metadata=ObjectMeta(name=name),
        spec=HyperNodeSpec(tier=tier, tier_name=selector.get("tier_name", ""), members=members),
    )


def labelled_table(nodes: Mapping[str, dict[str, str]], pods: int = 0) -> NodeTable:
    """A node table of 8-cpu nodes (room for ``pods`` pods, when given) with these names and labels, nothing allocated."""
    room = {"cpu": 8000, "pods": pods} if pods else {"cpu": 8000}
    return NodeTable(
        NodeRecord(
            name=name,
            allocatable=Resources(room),
            allocated=Resources(),
            version=1,
            owner="",
            unschedulable=False,
            node=node(name, labels=labels),
        )
        for name, labels in nodes.items()
    )


def gpu_node(
    name: str,
    *,
    allocatable: Mapping[str, str | int],
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    cpu: str = "32",
    memory: str = "256Gi",
) -> Node:
    """A node with GPU resources (``volcano.sh/gpu-number``/``-memory``, ``volcano.sh/vgpu-*``,
    ``nvidia.com/gpu``) and annotations such as ``volcano.sh/node-vgpu-register``."""
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                "annotations": dict(annotations or {}),
            },
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110", **allocatable}},
        },
        Node,
    )


def gpu_pod(
    name: str,
    *,
    limits: Mapping[str, str | int],
    annotations: Mapping[str, str] | None = None,
    containers: int = 1,
    scheduler: str = "s",
    node: str = "",
    phase: str = "Pending",
    group: str = "",
    cpu: str = "1",
) -> Pod:
    """A pod whose containers each have these GPU ``limits`` (and 1 cpu, 1Gi requested)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "annotations": dict(annotations or {}),
    }
    if group:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    container = {
        "name": "c",
        "image": "x",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {k: str(v) for k, v in limits.items()}},
    }
    return msgspec.convert(
        {
            "metadata": meta,
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node,
                "containers": [{**container, "name": f"c{i}"} for i in range(containers)],
            },
            "status": {"phase": phase},
        },
        Pod,
    )


def node_table(nodes: Sequence[Node], allocated: Mapping[str, Resources] | None = None) -> NodeTable:
    """A node table of these nodes as the store holds them (their cards' rooms too), ``allocated`` per node name."""
    return NodeTable(
        NodeRecord(
            name=n.name,
            allocatable=node_allocatable(n),
            allocated=(allocated or {}).get(n.name, Resources()),
            version=1,
            owner="",
            unschedulable=n.unschedulable,
            node=n,
        )
        for n in nodes
    )
