"""The plugins and actions a conf may name: plain values handed to the conf loader, not filled on import.

Beside caldera's own, the names Volcano's scheduler has (release-1.14 and master: its
plugin and action factories, its ``PluginOption`` switches, the arguments its plugins
and actions read), so that a Volcano conf naming a plugin caldera does not implement yet
still loads (that plugin has no effect), while a name neither knows is a typo.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import msgspec

from batch_scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
from batch_scheduler.plugins import (
    binpack,
    capacity,
    conformance,
    drf,
    gang,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
)

if TYPE_CHECKING:
    from batch_scheduler.framework import Plugin
    from batch_scheduler.session import Session


class PluginSpec(msgspec.Struct, frozen=True):
    """``create(arguments)`` checks the arguments (ValueError naming the bad one) and returns a fresh plugin.

    ``reads`` (and names starting with one of ``prefixes``): the arguments caldera's plugin
    takes; the conf loader hands it only those, and accepts any other with no effect.
    """

    create: Callable[[Mapping[str, str]], Plugin]
    reads: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()


class ActionSpec(msgspec.Struct, frozen=True):
    run: Callable[[Session], None]
    arguments: frozenset[str] = frozenset()


PLUGINS: Mapping[str, PluginSpec] = MappingProxyType({
    "priority": PluginSpec(priority.PriorityPlugin.create),
    "gang": PluginSpec(gang.GangPlugin.create),
    "conformance": PluginSpec(conformance.ConformancePlugin.create),
    "drf": PluginSpec(drf.DrfPlugin.create),
    "proportion": PluginSpec(proportion.ProportionPlugin.create),
    "capacity": PluginSpec(capacity.CapacityPlugin.create, frozenset({capacity.ANCESTOR_RECLAIM_LEVEL})),
    "predicates": PluginSpec(predicates.PredicatesPlugin.create, frozenset(predicates.ACCEPTED),
                             ("predicate.resources.",)),
    "nodeorder": PluginSpec(nodeorder.NodeOrderPlugin.create, frozenset(nodeorder.DEFAULTS) | frozenset(nodeorder.NO_EFFECT)),
    "binpack": PluginSpec(binpack.BinpackPlugin.create,
                          frozenset({"binpack.weight", "binpack.cpu", "binpack.memory", binpack.RESOURCES}),
                          (binpack.RESOURCES + ".",)),
    "overcommit": PluginSpec(overcommit.OvercommitPlugin.create, frozenset({overcommit.FACTOR})),
})

ACTIONS: Mapping[str, ActionSpec] = MappingProxyType({
    "enqueue": ActionSpec(enqueue.run, frozenset({"overcommit-factor"})),
    "allocate": ActionSpec(allocate.run, frozenset({"enablePredicateErrorCache", "predicateErrorCacheEnable"})),
    "backfill": ActionSpec(backfill.run),
    "preempt": ActionSpec(preempt.run, frozenset({"enableTopologyAwarePreemption", "topologyAwarePreemptWorkerNum",
                                                  "minCandidateNodesPercentage", "minCandidateNodesAbsolute",
                                                  "maxCandidateNodesAbsolute"})),
    "reclaim": ActionSpec(reclaim.run),
})
"""Action arguments other than enqueue's ``overcommit-factor`` are Volcano tuning knobs
for its own search; they are accepted so existing confs load, and have no effect here."""


# -- Volcano's names ----------------------------------------------------------------------

VOLCANO_PLUGINS = frozenset({
    "binpack", "capacity", "cdp", "conformance", "deviceshare", "drf", "extender", "gang", "network-topology-aware",
    "nodegroup", "nodeorder", "numa-aware", "overcommit", "pdb", "predicates", "priority", "proportion",
    "rescheduling", "resource-strategy-fit", "resourcequota", "sla", "task-topology", "tdm", "usage",
    "capacity-card",  # proposed upstream (accelerator-card quotas), named by confs that use it
})
"""Every plugin Volcano's scheduler registers (pkg/scheduler/plugins/factory.go)."""

VOLCANO_ACTIONS = frozenset({"enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim",
                             "shuffle"})
"""Every action Volcano's scheduler registers (pkg/scheduler/actions/factory.go)."""

REMOVED = {"elect": "action", "reserve": "action", "reservation": "plugin"}
"""Names Volcano had in v1.2–v1.5 and removed in v1.6; today's Volcano refuses them too."""

VOLCANO_CONFIGURATIONS = frozenset({"init-params"})
"""``configurations`` entries Volcano reads that are not actions (Ascend vNPU's start-up parameters)."""

VOLCANO_SWITCHES = frozenset({
    "enableJobOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined", "enableTaskOrder", "enablePreemptable",
    "enableReclaimable", "enablePreemptive", "enableQueueOrder", "EnabledClusterOrder", "enabledClusterOrder",
    "enablePredicate", "enableBestNode", "enableNodeOrder", "enableTargetJob", "enableReservedNodes",
    "enableJobEnqueued", "enabledVictim", "enableJobStarving", "enabledOverused", "enabledAllocatable",
    "enabledHyperNodeOrder", "enabledSubJobReady", "enabledSubJobPipelined", "enabledSubJobOrder",
    "enabledHyperNodeGradient",
})
"""Every switch of Volcano's ``PluginOption`` (pkg/scheduler/conf/scheduler_conf.go; master spells
the cluster-order one ``enabledClusterOrder``). Those caldera has a point for turn it off
(framework.SWITCHES); the others are accepted and have no effect."""

VOLCANO_PLUGIN_ARGUMENTS: Mapping[str, frozenset[str]] = MappingProxyType({
    "predicates": frozenset({
        "predicate.CacheEnable", "predicate.DynamicResourceAllocationEnable", "predicate.NodeAffinityEnable",
        "predicate.NodePortsEnable", "predicate.NodeVolumeLimitsEnable", "predicate.PodAffinityEnable",
        "predicate.PodTopologySpreadEnable", "predicate.TaintTolerationEnable", "predicate.VolumeBindingEnable",
        "predicate.VolumeZoneEnable", "dynamicresources.filterTimeoutSeconds", "volumebinding.bindTimeoutSeconds",
        "volumebinding.shape", "volumebinding.weight"}),
    "nodeorder": frozenset({
        "balancedresource.weight", "imagelocality.weight", "leastrequested.weight", "mostrequested.weight",
        "nodeaffinity.weight", "podaffinity.weight", "podtopologyspread.weight", "tainttoleration.weight"}),
    "binpack": frozenset({"binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources"}),
    "capacity": frozenset({"ancestorReclaimLevel", "capacity.DynamicResourceAllocationEnable",
                           "capacity.DRAConsumableCapacityEnable"}),
    "overcommit": frozenset({"overcommit-factor"}),
})
"""The arguments Volcano's versions of caldera's plugins read (the others read none). One
that caldera's plugin does not take is accepted and has no effect; one that neither reads
is accepted with a warning (it is most likely a typo)."""

VOLCANO_ACTION_ARGUMENTS: Mapping[str, frozenset[str]] = MappingProxyType({
    "allocate": frozenset({"predicateErrorCacheEnable"}),
    "backfill": frozenset({"predicateErrorCacheEnable"}),
    "reclaim": frozenset({"predicateErrorCacheEnable"}),
    "preempt": frozenset({"predicateErrorCacheEnable", "enableTopologyAwarePreemption", "topologyAwarePreemptWorkerNum",
                          "minCandidateNodesPercentage", "minCandidateNodesAbsolute", "maxCandidateNodesAbsolute"}),
})
"""The arguments Volcano's versions of caldera's actions read (enqueue reads none)."""
