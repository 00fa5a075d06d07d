"""predicates: the nodes a task may go to — resources (pod count included), nodeSelector,
taints and tolerations, required node affinity, unschedulable — as one mask over all nodes.

The plugin is the placement framework's :class:`~cluster.nodeview.plugins.NodePredicates`
filter, the one the agent scheduler runs, built from the conf's arguments.
``predicate.NodeAffinityEnable`` and ``predicate.TaintTolerationEnable`` (default true)
turn those checks off. Volcano's other ``predicate.*`` switches (pod affinity, ports,
volumes, GPU sharing, caches) are accepted so existing confs load; caldera does not model
those features, so they have no effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from batch_scheduler.arguments import Arguments, flag
from batch_scheduler.framework import PluginBase
from cluster.nodeview.plugins import NodePredicates
from cluster.nodeview.predicates import Filtered
from cluster.nodeview.profile import Placing
from cluster.nodeview.table import Mask, NodeTable

NODE_AFFINITY = "predicate.NodeAffinityEnable"
TAINTS = "predicate.TaintTolerationEnable"


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
    def __init__(self, name: str, args: PredicatesArguments) -> None:
        super().__init__(name, args)
        self.predicates = NodePredicates(node_affinity=args.node_affinity, taints=args.taints)

    def filter(self, table: NodeTable, placing: Placing, allowed: Mask | None) -> Filtered:
        return self.predicates.filter(table, placing, allowed)
