"""predicates: the nodes a task may go to — resources (pod count included), nodeSelector,
taints and tolerations, required node affinity, unschedulable — as one mask over all nodes.

``predicate.NodeAffinityEnable`` and ``predicate.TaintTolerationEnable`` (default true)
turn those checks off. Volcano's other ``predicate.*`` switches (pod affinity, ports,
volumes, GPU sharing, caches) are accepted so existing confs load; caldera does not model
those features, so they have no effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from batch_scheduler.framework import check_arguments
from batch_scheduler.info import TaskInfo
from cluster.model.core import Pod, Toleration
from cluster.nodeview.predicates import Filtered, filter_nodes
from cluster.nodeview.table import Mask

if TYPE_CHECKING:
    from batch_scheduler.session import Session

NODE_AFFINITY = "predicate.NodeAffinityEnable"
TAINTS = "predicate.TaintTolerationEnable"
ACCEPTED = {NODE_AFFINITY, TAINTS, "predicate.GPUSharingEnable", "predicate.CacheEnable", "predicate.ProportionalEnable",
            "predicate.PodAffinityEnable", "predicate.NodePortsEnable", "predicate.NodeVolumeLimitsEnable",
            "predicate.VolumeZoneEnable", "predicate.PodTopologySpreadEnable", "predicate.GPUNumberEnable",
            "predicate.resources"}
_TOLERATE_ALL = [Toleration(operator="Exists")]


def _flag(arguments: Mapping[str, str], name: str) -> bool:
    value = arguments.get(name, "true").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name}: {arguments[name]!r} (expected true or false)")
    return value == "true"


class PredicatesPlugin:
    name = "predicates"

    def __init__(self, node_affinity: bool, taints: bool) -> None:
        self.node_affinity = node_affinity
        self.taints = taints

    @classmethod
    def create(cls, arguments: Mapping[str, str]) -> PredicatesPlugin:
        check_arguments(cls.name, arguments, ACCEPTED, ["predicate.resources."])
        return cls(_flag(arguments, NODE_AFFINITY), _flag(arguments, TAINTS))

    def open(self, ssn: Session) -> None:
        pass

    def _pod(self, pod: Pod) -> Pod:
        if self.node_affinity and self.taints:
            return pod
        spec = pod.spec
        if not self.node_affinity:
            spec = msgspec.structs.replace(spec, node_selector={}, affinity=None)
        if not self.taints:
            spec = msgspec.structs.replace(spec, tolerations=_TOLERATE_ALL)
        return msgspec.structs.replace(pod, spec=spec)

    def predicate(self, ssn: Session, task: TaskInfo, allowed: Mask, *, resources: bool) -> Filtered:
        return filter_nodes(ssn.columns, self._pod(task.pod), task.request if resources else {}, allowed=allowed)
