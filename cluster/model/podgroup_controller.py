"""Volcano's podgroup controller: a PodGroup for pods that Volcano schedules and that name none.

Read from Volcano release-1.14, ``pkg/controllers/podgroup/`` (``pg_controller.go``
``processNextReq``, ``pg_controller_handler.go`` ``buildPodGroupFromPod``) and
``volcano.sh/apis`` ``helpers.GeneratePodgroupName``. For a pod whose ``schedulerName`` is
Volcano's and that carries no ``scheduling.k8s.io/group-name`` annotation, the controller
makes one PodGroup per owning controller (the pods of one ReplicaSet share it) and
annotates each pod with its name:

- name ``podgroup-<uid of the pod's controller>`` (of the pod itself when it has none);
- minMember 1, or the owner's annotation ``scheduling.volcano.sh/group-min-member``
  (a number ≥ 0; anything else leaves 1); minResources: the pod's request × minMember;
- queue: the **pod's** annotation ``scheduling.volcano.sh/queue-name`` (else the CRD's
  default, ``default``); a Deployment's own annotation of that name is not read;
- priorityClassName: the pod's;
- annotations: the owner's ``volcano.sh/*`` ones (``--inherit-owner-annotations``, on by
  default), then the pod's ``volcano.sh/preemptable``, ``cooldown-time``,
  ``revocable-zone`` and ``jdb-min-available`` (else ``jdb-max-unavailable``); labels: the
  pod's ``volcano.sh/preemptable`` and ``cooldown-time``;
- networkTopology from the pod's ``volcano.sh/network-topology-mode`` (hard unless
  ``soft``) and ``volcano.sh/network-topology-highest-tier``.

Owner annotations are read only for ReplicaSets, DaemonSets, StatefulSets and Jobs, as
Volcano does. A pod with no owner is left alone here: caldera's session already treats it
as a one-pod job, which is what the PodGroup Volcano would make for it amounts to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import msgspec

from cluster.model.core import ObjectMeta, Pod
from cluster.model.labels import (
    COOLDOWN_TIME_KEY,
    GROUP_NAME_ANNOTATION,
    INHERITED_PREFIX,
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    MIN_MEMBER_ANNOTATION,
    NETWORK_TOPOLOGY_MODE_ANNOTATION,
    NETWORK_TOPOLOGY_TIER_ANNOTATION,
    PREEMPTABLE_KEY,
    QUEUE_NAME_ANNOTATION,
    REVOCABLE_ZONE_KEY,
)
from cluster.model.pod_template import template_request
from cluster.model.topology import NetworkTopologySpec
from cluster.model.volcano import PodGroup, PodGroupSpec

VOLCANO_SCHEDULERS = ("volcano",)  # the controller's --scheduler-name default
PODGROUP_PREFIX = "podgroup-"
_COPIED_ANNOTATIONS = (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY, REVOCABLE_ZONE_KEY)
_COPIED_LABELS = (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY)
_JDB = (JDB_MIN_AVAILABLE_KEY, JDB_MAX_UNAVAILABLE_KEY)
_ANNOTATED_OWNERS = ("apps/ReplicaSet", "apps/DaemonSet", "apps/StatefulSet", "batch/Job")


class Owner(msgspec.Struct, frozen=True, kw_only=True):
    """The controller of a set of pods: its kind (``group/Kind``) and metadata, uid filled in."""

    kind: str
    meta: ObjectMeta

    @property
    def uid(self) -> str:
        return self.meta.uid


def group_pods(
    owner: Owner, pods: Sequence[Pod], *, schedulers: Sequence[str] = VOLCANO_SCHEDULERS
) -> tuple[PodGroup | None, list[Pod]]:
    """The PodGroup the podgroup controller makes for ``owner``'s pods, and the pods annotated
    with it; ``(None, pods)`` when no pod needs one."""
    needing = {i for i, pod in enumerate(pods) if pod.scheduler_name in schedulers and not pod.group_name}
    if not needing:
        return None, list(pods)
    name = PODGROUP_PREFIX + owner.uid
    group = podgroup_for(owner, pods[min(needing)], name)
    out = []
    for i, pod in enumerate(pods):
        if i in needing:
            meta = msgspec.structs.replace(
                pod.metadata, annotations={**pod.metadata.annotations, GROUP_NAME_ANNOTATION: name}
            )
            pod = msgspec.structs.replace(pod, metadata=meta)
        out.append(pod)
    return group, out


def podgroup_for(owner: Owner, pod: Pod, name: str) -> PodGroup:
    """``buildPodGroupFromPod``: the PodGroup for ``pod`` (one of ``owner``'s), named ``name``."""
    inherited = owner.meta.annotations if owner.kind in _ANNOTATED_OWNERS else {}
    min_member = _min_member(inherited.get(MIN_MEMBER_ANNOTATION))
    pod_annotations, pod_labels = pod.metadata.annotations, pod.metadata.labels
    annotations = {k: v for k, v in inherited.items() if k.startswith(INHERITED_PREFIX)}
    annotations.update({k: pod_annotations[k] for k in _COPIED_ANNOTATIONS if k in pod_annotations})
    for key in _JDB:  # the first found only
        if key in pod_annotations:
            annotations[key] = pod_annotations[key]
            break
    request = template_request(pod.spec, "spec.template.spec")
    return PodGroup(
        metadata=ObjectMeta(
            name=name,
            namespace=pod.namespace,
            annotations=annotations,
            labels={k: pod_labels[k] for k in _COPIED_LABELS if k in pod_labels},
            creation_timestamp=owner.meta.creation_timestamp,
        ),
        spec=PodGroupSpec(
            min_member=min_member,
            min_resources=dict(request.scaled(min_member).within_int64(field="minResources").to_quantities()),
            queue=pod_annotations.get(QUEUE_NAME_ANNOTATION) or "default",
            priority_class_name=pod.spec.priority_class_name,
            network_topology=_network_topology(pod_annotations),
        ),
    )


def _min_member(value: str | None) -> int:
    """The owner's group-min-member annotation; 1 when absent, not a number, or negative."""
    try:
        number = int(value) if value is not None else 1
    except ValueError:
        return 1
    return number if number >= 0 else 1


def _network_topology(annotations: dict[str, str]) -> NetworkTopologySpec | None:
    mode, tier = annotations.get(NETWORK_TOPOLOGY_MODE_ANNOTATION), annotations.get(NETWORK_TOPOLOGY_TIER_ANNOTATION)
    if mode is None and tier is None:
        return None
    highest = None
    if tier is not None:
        with contextlib.suppress(ValueError):  # Volcano logs it and leaves the tier unset
            highest = int(tier)
    return NetworkTopologySpec(
        mode=mode.lower() if mode is not None and mode.lower() in ("hard", "soft") else "hard",
        highest_tier_allowed=highest,
    )
