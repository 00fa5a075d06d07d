"""Builders with the names and arguments of Volcano's test helpers (``util.BuildPod``, ...).

A ported case reads like its Go original, argument for argument, so that a reader can hold
the two side by side. Each returns a caldera model object. Where Volcano's helper leaves a
field to Go's zero value, so does the builder: no creation timestamp, no spec.priority
(a pod gets Volcano's task default of 1), a PodGroup queue as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from cluster.model.core import Node, Pod, PriorityClass
from cluster.model.volcano import PodGroup, Queue

GROUP_NAME = "scheduling.k8s.io/group-name"
PREEMPTABLE = "volcano.sh/preemptable"
TASK_SPEC = "volcano.sh/task-spec"

PENDING, RUNNING, SUCCEEDED, FAILED, UNKNOWN = "Pending", "Running", "Succeeded", "Failed", "Unknown"
PG_PENDING, PG_INQUEUE, PG_RUNNING, PG_UNKNOWN, PG_COMPLETED = "Pending", "Inqueue", "Running", "Unknown", "Completed"

ResourceList = dict[str, str]
DEFAULT_TASK_PRIORITY = 1  # Volcano's TaskInfo priority when the pod has no spec.priority (never so from an API server)


def scalar(name: str, value: str) -> tuple[str, str]:
    """``api.ScalarResource{Name, Value}``."""
    return (name, value)


def build_resource_list(cpu: str, memory: str, *scalars: tuple[str, str]) -> ResourceList:
    """``api.BuildResourceList``: empty cpu or memory is left out."""
    out: ResourceList = {}
    if cpu:
        out["cpu"] = cpu
    if memory:
        out["memory"] = memory
    for name, value in scalars:
        out[name] = value
    return out


def build_resource_list_with_gpu(cpu: str, memory: str, gpu: str, *scalars: tuple[str, str]) -> ResourceList:
    """``api.BuildResourceListWithGPU``."""
    out = build_resource_list(cpu, memory, *scalars)
    if gpu:
        out["nvidia.com/gpu"] = gpu
    return out


def build_node(
    name: str,
    alloc: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    *,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> Node:
    """``util.BuildNode``: capacity and allocatable both ``alloc``."""
    return msgspec.convert(
        {
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints or []), "unschedulable": unschedulable},
            "status": {"capacity": dict(alloc), "allocatable": dict(alloc)},
        },
        Node,
    )


def build_pod(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    req: Mapping[str, str],
    group_name: str,
    labels: Mapping[str, str] | None = None,
    selector: Mapping[str, str] | None = None,
    **spec: Any,
) -> Pod:
    """``util.BuildPod``: uid ``<namespace>-<name>``, the group-name annotation, one container
    with ``req`` as requests. ``spec`` adds camelCase spec fields (priority, affinity, ...)."""
    body: dict[str, Any] = {
        "nodeName": node_name,
        "nodeSelector": dict(selector or {}),
        "priority": DEFAULT_TASK_PRIORITY,
        "containers": [{"name": "", "resources": {"requests": dict(req)}}],
        **spec,
    }
    meta = {
        "uid": f"{namespace}-{name}",
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": {GROUP_NAME: group_name},
    }
    return msgspec.convert({"metadata": meta, "spec": body, "status": {"phase": phase}}, Pod)


def build_best_effort_pod(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    group_name: str,
    labels: Mapping[str, str] | None = None,
    selector: Mapping[str, str] | None = None,
) -> Pod:
    return build_pod(namespace, name, node_name, phase, {}, group_name, labels, selector)


def build_pod_with_priority(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    req: Mapping[str, str],
    group_name: str,
    labels: Mapping[str, str] | None,
    selector: Mapping[str, str] | None,
    priority: int,
) -> Pod:
    return build_pod(namespace, name, node_name, phase, req, group_name, labels, selector, priority=priority)


def build_pod_with_preemption_policy(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    req: Mapping[str, str],
    group_name: str,
    labels: Mapping[str, str] | None,
    selector: Mapping[str, str] | None,
    policy: str,
) -> Pod:
    return build_pod(namespace, name, node_name, phase, req, group_name, labels, selector, preemptionPolicy=policy)


def build_pod_with_affinity(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    req: Mapping[str, str],
    group_name: str,
    labels: Mapping[str, str] | None,
    selector: Mapping[str, str] | None,
    affinity: Mapping[str, Any],
) -> Pod:
    return build_pod(namespace, name, node_name, phase, req, group_name, labels, selector, affinity=dict(affinity))


def build_pod_with_tolerations(
    namespace: str,
    name: str,
    node_name: str,
    phase: str,
    req: Mapping[str, str],
    group_name: str,
    labels: Mapping[str, str] | None,
    selector: Mapping[str, str] | None,
    tolerations: list[dict[str, Any]],
) -> Pod:
    return build_pod(namespace, name, node_name, phase, req, group_name, labels, selector, tolerations=tolerations)


def build_pod_group(
    name: str,
    namespace: str,
    queue: str,
    min_member: int,
    task_min_member: Mapping[str, int] | None,
    phase: str,
    *,
    min_resources: Mapping[str, str] | None = None,
    priority_class: str = "",
    annotations: Mapping[str, str] | None = None,
) -> PodGroup:
    """``util.BuildPodGroup``: no minResources (nil) unless given."""
    spec: dict[str, Any] = {
        "queue": queue,
        "minMember": min_member,
        "minTaskMember": dict(task_min_member or {}),
        "priorityClassName": priority_class,
    }
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
            "spec": spec,
            "status": {"phase": phase},
        },
        PodGroup,
    )


def build_pod_group_with_prio(
    name: str,
    namespace: str,
    queue: str,
    min_member: int,
    task_min_member: Mapping[str, int] | None,
    phase: str,
    prio_name: str,
) -> PodGroup:
    return build_pod_group(name, namespace, queue, min_member, task_min_member, phase, priority_class=prio_name)


def build_pod_group_with_min_resources(
    name: str,
    namespace: str,
    queue: str,
    min_member: int,
    task_min_member: Mapping[str, int] | None,
    min_resources: Mapping[str, str],
    phase: str,
) -> PodGroup:
    return build_pod_group(name, namespace, queue, min_member, task_min_member, phase, min_resources=min_resources)


def build_pod_group_with_anno(
    name: str,
    namespace: str,
    queue: str,
    min_member: int,
    task_min_member: Mapping[str, int] | None,
    phase: str,
    annotations: Mapping[str, str],
) -> PodGroup:
    return build_pod_group(name, namespace, queue, min_member, task_min_member, phase, annotations=annotations)


def build_queue(
    name: str,
    weight: int,
    capability: Mapping[str, str] | None,
    *,
    state: str = "Open",
    deserved: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    priority: int = 0,
    parent: str = "",
    annotations: Mapping[str, str] | None = None,
    reclaimable: bool | None = None,
) -> Queue:
    """``util.BuildQueue``: state Open."""
    spec: dict[str, Any] = {
        "weight": weight,
        "capability": dict(capability or {}),
        "deserved": dict(deserved or {}),
        "priority": priority,
        "parent": parent,
    }
    if guarantee is not None:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    return msgspec.convert(
        {"metadata": {"name": name, "annotations": dict(annotations or {})}, "spec": spec, "status": {"state": state}},
        Queue,
    )


def build_queue_with_state(name: str, weight: int, capability: Mapping[str, str] | None, state: str) -> Queue:
    return build_queue(name, weight, capability, state=state)


def build_queue_with_annos(
    name: str, weight: int, capability: Mapping[str, str] | None, annotations: Mapping[str, str]
) -> Queue:
    return build_queue(name, weight, capability, annotations=annotations)


def build_queue_with_resources_quantity(
    name: str, deserved: Mapping[str, str] | None, capability: Mapping[str, str] | None
) -> Queue:
    return build_queue(name, 1, capability, deserved=deserved)


def build_queue_with_priority_and_resources_quantity(
    name: str, priority: int, deserved: Mapping[str, str] | None, capability: Mapping[str, str] | None
) -> Queue:
    return build_queue(name, 1, capability, deserved=deserved, priority=priority)


def build_priority_class(name: str, value: int, *, preemption_policy: str | None = None) -> PriorityClass:
    body: dict[str, Any] = {"metadata": {"name": name}, "value": value}
    if preemption_policy is not None:
        body["preemptionPolicy"] = preemption_policy
    return msgspec.convert(body, PriorityClass)


def build_priority_class_with_preemption_policy(name: str, value: int, policy: str) -> PriorityClass:
    return build_priority_class(name, value, preemption_policy=policy)
