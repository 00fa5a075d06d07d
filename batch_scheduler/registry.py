"""caldera's plugins and actions by the names a conf gives them: a value built here and handed to the conf loader.

Nothing registers itself on import: :func:`default_registry` builds the value, and each
process's ``main`` (or a test) passes it to :func:`batch_scheduler.conf.load_conf`, which
keeps it on the conf it returns.
"""

from __future__ import annotations

from types import MappingProxyType

from batch_scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
from batch_scheduler.arguments import Arguments
from batch_scheduler.framework import ActionSpec, Registry, plugin_spec
from batch_scheduler.plugins.binpack import BinpackArguments, BinpackPlugin
from batch_scheduler.plugins.capacity import CapacityArguments, CapacityPlugin
from batch_scheduler.plugins.conformance import ConformancePlugin
from batch_scheduler.plugins.deviceshare import DeviceShareArguments, DeviceSharePlugin
from batch_scheduler.plugins.drf import DrfPlugin
from batch_scheduler.plugins.gang import GangPlugin
from batch_scheduler.plugins.network_topology import NetworkTopologyArguments, NetworkTopologyPlugin
from batch_scheduler.plugins.nodeorder import NodeOrderArguments, NodeOrderPlugin
from batch_scheduler.plugins.overcommit import OvercommitArguments, OvercommitPlugin
from batch_scheduler.plugins.predicates import PredicatesArguments, PredicatesPlugin
from batch_scheduler.plugins.priority import PriorityPlugin
from batch_scheduler.plugins.proportion import ProportionPlugin
from batch_scheduler.plugins.task_topology import TaskTopologyArguments, TaskTopologyPlugin


def default_registry() -> Registry:
    """Every plugin and action caldera implements.

    Action arguments other than enqueue's ``overcommit-factor`` are Volcano tuning knobs for
    its own search; they are accepted so existing confs load, and have no effect here.
    """
    return Registry(
        plugins=MappingProxyType(
            {
                "priority": plugin_spec(PriorityPlugin, Arguments),
                "gang": plugin_spec(GangPlugin, Arguments),
                "conformance": plugin_spec(ConformancePlugin, Arguments),
                "drf": plugin_spec(DrfPlugin, Arguments),
                "proportion": plugin_spec(ProportionPlugin, Arguments),
                "capacity": plugin_spec(CapacityPlugin, CapacityArguments),
                "predicates": plugin_spec(PredicatesPlugin, PredicatesArguments),
                "nodeorder": plugin_spec(NodeOrderPlugin, NodeOrderArguments),
                "binpack": plugin_spec(BinpackPlugin, BinpackArguments),
                "deviceshare": plugin_spec(DeviceSharePlugin, DeviceShareArguments),
                "overcommit": plugin_spec(OvercommitPlugin, OvercommitArguments),
                "network-topology-aware": plugin_spec(NetworkTopologyPlugin, NetworkTopologyArguments),
                "task-topology": plugin_spec(TaskTopologyPlugin, TaskTopologyArguments),
            }
        ),
        actions=MappingProxyType(
            {
                "enqueue": ActionSpec(enqueue.run, frozenset({"overcommit-factor"})),
                "allocate": ActionSpec(
                    allocate.run, frozenset({"enablePredicateErrorCache", "predicateErrorCacheEnable"})
                ),
                "backfill": ActionSpec(backfill.run),
                "preempt": ActionSpec(
                    preempt.run,
                    frozenset(
                        {
                            "enableTopologyAwarePreemption",
                            "topologyAwarePreemptWorkerNum",
                            "minCandidateNodesPercentage",
                            "minCandidateNodesAbsolute",
                            "maxCandidateNodesAbsolute",
                        }
                    ),
                ),
                "reclaim": ActionSpec(reclaim.run),
            }
        ),
    )
