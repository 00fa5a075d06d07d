"""Pods and PodGroups as a workload generator submits them."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import msgspec

from cluster.model.core import Pod
from cluster.model.labels import GROUP_NAME_ANNOTATION
from cluster.model.volcano import PodGroup

DURATION_ANNOTATION = "sim.caldera.io/duration-seconds"


def make_pod(
    name: str,
    *,
    requests: Mapping[str, str | int | float],
    namespace: str = "default",
    scheduler: str = "default-scheduler",
    duration: float | None = None,
    group: str = "",
    priority: int = 0,
    node: str = "",
    phase: str = "Pending",
    labels: Mapping[str, str] | None = None,
    uid: str | None = None,
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    priority_class: str = "",
) -> Pod:
    """A one-container pod; ``duration`` (seconds of running) tells the simulator when it ends.

    ``node_affinity`` is required node affinity: the pod may only go to nodes whose label
    ``key`` has one of the ``values``, for every key given (one term of ``key In values``).
    """
    annotations: dict[str, str] = {}
    if duration is not None:
        annotations[DURATION_ANNOTATION] = repr(float(duration))
    if group:
        annotations[GROUP_NAME_ANNOTATION] = group
    affinity: dict[str, object] | None = None
    if node_affinity:
        terms = [
            {"matchExpressions": [{"key": k, "operator": "In", "values": list(v)} for k, v in node_affinity.items()]}
        ]
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    return msgspec.convert(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or str(uuid.uuid4()),
                "labels": dict(labels or {}),
                "annotations": annotations,
            },
            "spec": {
                "schedulerName": scheduler,
                "priority": priority,
                "nodeName": node,
                "affinity": affinity,
                "nodeSelector": dict(node_selector or {}),
                "tolerations": [dict(t) for t in tolerations],
                "priorityClassName": priority_class,
                "containers": [{"name": "main", "resources": {"requests": {k: str(v) for k, v in requests.items()}}}],
            },
            "status": {"phase": phase},
        },
        Pod,
    )


def make_podgroup(
    name: str, *, min_member: int, queue: str = "default", namespace: str = "default", priority_class: str = ""
) -> PodGroup:
    return msgspec.convert(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member, "queue": queue, "priorityClassName": priority_class},
        },
        PodGroup,
    )


def pod_duration(pod: Pod) -> float | None:
    """Seconds the pod runs once bound, when the workload said; None runs until deleted."""
    value = pod.metadata.annotations.get(DURATION_ANNOTATION) if pod.metadata.annotations else None
    return float(value) if value is not None else None
