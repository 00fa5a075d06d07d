"""Volcano's names, from its scheduler's source: plugins, actions, switches and the arguments they read.

The conf loader checks a conf against these beside caldera's registry, so that a Volcano
conf naming a plugin caldera does not implement yet still loads (that plugin has no
effect), while a name neither knows is a typo.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

VOLCANO_PLUGINS = frozenset(
    {
        "binpack",
        "capacity",
        "cdp",
        "conformance",
        "deviceshare",
        "drf",
        "extender",
        "gang",
        "network-topology-aware",
        "nodegroup",
        "nodeorder",
        "numa-aware",
        "overcommit",
        "pdb",
        "predicates",
        "priority",
        "proportion",
        "rescheduling",
        "resource-strategy-fit",
        "resourcequota",
        "sla",
        "task-topology",
        "tdm",
        "usage",
        "capacity-card",  # proposed upstream (accelerator-card quotas), named by confs that use it
    }
)
"""Every plugin Volcano's scheduler registers (pkg/scheduler/plugins/factory.go)."""

VOLCANO_ACTIONS = frozenset(
    {"enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim", "shuffle"}
)
"""Every action Volcano's scheduler registers (pkg/scheduler/actions/factory.go)."""

REMOVED = {"elect": "action", "reserve": "action", "reservation": "plugin"}
"""Names Volcano had in v1.2–v1.5 and removed in v1.6; today's Volcano refuses them too."""

VOLCANO_CONFIGURATIONS = frozenset({"init-params"})
"""``configurations`` entries Volcano reads that are not actions (Ascend vNPU's start-up parameters)."""

VOLCANO_SWITCHES = frozenset(
    {
        "enableJobOrder",
        "enableHierarchy",
        "enableJobReady",
        "enableJobPipelined",
        "enableTaskOrder",
        "enablePreemptable",
        "enableReclaimable",
        "enablePreemptive",
        "enableQueueOrder",
        "EnabledClusterOrder",
        "enabledClusterOrder",
        "enablePredicate",
        "enableBestNode",
        "enableNodeOrder",
        "enableTargetJob",
        "enableReservedNodes",
        "enableJobEnqueued",
        "enabledVictim",
        "enableJobStarving",
        "enabledOverused",
        "enabledAllocatable",
        "enabledHyperNodeOrder",
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledHyperNodeGradient",
    }
)
"""Every switch of Volcano's ``PluginOption`` (pkg/scheduler/conf/scheduler_conf.go; master spells
the cluster-order one ``enabledClusterOrder``). Those caldera has a point for turn it off
(:data:`batch_scheduler.framework.SWITCHES`); the others are accepted and have no effect."""

VOLCANO_PLUGIN_ARGUMENTS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "predicates": frozenset(
            {
                "predicate.CacheEnable",
                "predicate.DynamicResourceAllocationEnable",
                "predicate.NodeAffinityEnable",
                "predicate.NodePortsEnable",
                "predicate.NodeVolumeLimitsEnable",
                "predicate.PodAffinityEnable",
                "predicate.PodTopologySpreadEnable",
                "predicate.TaintTolerationEnable",
                "predicate.VolumeBindingEnable",
                "predicate.VolumeZoneEnable",
                "dynamicresources.filterTimeoutSeconds",
                "volumebinding.bindTimeoutSeconds",
                "volumebinding.shape",
                "volumebinding.weight",
            }
        ),
        "nodeorder": frozenset(
            {
                "balancedresource.weight",
                "imagelocality.weight",
                "leastrequested.weight",
                "mostrequested.weight",
                "nodeaffinity.weight",
                "podaffinity.weight",
                "podtopologyspread.weight",
                "tainttoleration.weight",
            }
        ),
        "binpack": frozenset({"binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources"}),
        "capacity": frozenset(
            {"ancestorReclaimLevel", "capacity.DynamicResourceAllocationEnable", "capacity.DRAConsumableCapacityEnable"}
        ),
        "overcommit": frozenset({"overcommit-factor"}),
    }
)
"""The arguments Volcano's versions of caldera's plugins read (the others read none). One
that caldera's plugin does not take is accepted and has no effect; one that neither reads
is accepted with a warning (it is most likely a typo)."""

VOLCANO_ACTION_ARGUMENTS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "allocate": frozenset({"predicateErrorCacheEnable"}),
        "backfill": frozenset({"predicateErrorCacheEnable"}),
        "reclaim": frozenset({"predicateErrorCacheEnable"}),
        "preempt": frozenset(
            {
                "predicateErrorCacheEnable",
                "enableTopologyAwarePreemption",
                "topologyAwarePreemptWorkerNum",
                "minCandidateNodesPercentage",
                "minCandidateNodesAbsolute",
                "maxCandidateNodesAbsolute",
            }
        ),
    }
)
"""The arguments Volcano's versions of caldera's actions read (enqueue reads none)."""
