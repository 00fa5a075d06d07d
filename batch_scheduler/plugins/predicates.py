"""predicates: the nodes a task may go to — resources (pod count included), nodeSelector,
taints and tolerations, required node affinity, unschedulable — as one mask over all nodes.

``predicate.NodeAffinityEnable`` and ``predicate.TaintTolerationEnable`` (default true)
turn those checks off. Volcano's other ``predicate.*`` switches (pod affinity, ports,
volumes, GPU sharing, caches) are accepted so existing confs load; caldera does not model
those features, so they have no effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import msgspec

from batch_scheduler.arguments import Arguments, flag
from batch_scheduler.framework import PluginBase, SessionView
from batch_scheduler.tasks import TaskInfo
from cluster.model.core import Pod, Toleration
from cluster.nodeview.predicates import Filtered, filter_nodes
from cluster.nodeview.table import Mask

NODE_AFFINITY = "predicate.NodeAffinityEnable"
TAINTS = "predicate.TaintTolerationEnable"
_TOLERATE_ALL = [Toleration(operator="Exists")]


class PredicatesArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset(
        {
            NODE_AFFINITY,
            TAINTS,
            "predicate.GPUSharingEnable",
            "predicate.CacheEnable",
            "predicate.ProportionalEnable",
            "predicate.PodAffinityEnable",
            "predicate.NodePortsEnable",
            "predicate.NodeVolumeLimitsEnable",
            "predicate.VolumeZoneEnable",
            "predicate.PodTopologySpreadEnable",
            "predicate.GPUNumberEnable",
            "predicate.resources",
        }
    )
    prefixes = ("predicate.resources.",)
    node_affinity: bool = True
    taints: bool = True

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        return cls(node_affinity=flag(arguments, NODE_AFFINITY), taints=flag(arguments, TAINTS))


class PredicatesPlugin(PluginBase[PredicatesArguments]):
    def _pod(self, pod: Pod) -> Pod:
        node_affinity, taints = self.args.node_affinity, self.args.taints
        if node_affinity and taints:
            return pod
        spec = pod.spec
        if not node_affinity:
            spec = msgspec.structs.replace(spec, node_selector={}, affinity=None)
        if not taints:
            spec = msgspec.structs.replace(spec, tolerations=_TOLERATE_ALL)
        return msgspec.structs.replace(pod, spec=spec)

    def predicate(self, ssn: SessionView, task: TaskInfo, allowed: Mask, *, resources: bool) -> Filtered:
        return filter_nodes(ssn.columns, self._pod(task.pod), task.request if resources else {}, allowed=allowed)
