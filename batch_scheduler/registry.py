"""The plugins and actions a conf may name: plain values handed to the conf loader, not filled on import."""

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
    """``create(arguments)`` checks the arguments (ValueError naming the bad one) and returns a fresh plugin."""

    create: Callable[[Mapping[str, str]], Plugin]


class ActionSpec(msgspec.Struct, frozen=True):
    run: Callable[[Session], None]
    arguments: frozenset[str] = frozenset()


PLUGINS: Mapping[str, PluginSpec] = MappingProxyType({
    "priority": PluginSpec(priority.PriorityPlugin.create),
    "gang": PluginSpec(gang.GangPlugin.create),
    "conformance": PluginSpec(conformance.ConformancePlugin.create),
    "drf": PluginSpec(drf.DrfPlugin.create),
    "proportion": PluginSpec(proportion.ProportionPlugin.create),
    "capacity": PluginSpec(capacity.CapacityPlugin.create),
    "predicates": PluginSpec(predicates.PredicatesPlugin.create),
    "nodeorder": PluginSpec(nodeorder.NodeOrderPlugin.create),
    "binpack": PluginSpec(binpack.BinpackPlugin.create),
    "overcommit": PluginSpec(overcommit.OvercommitPlugin.create),
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
