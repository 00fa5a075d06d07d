"""The scheduler conf: Volcano's format loads unchanged, and every bad entry is one line naming it.

Every conf Volcano takes loads: a Volcano plugin or action caldera does not implement yet
is a warning, not a refusal (tests/corpus loads the confs of Volcano's installer and docs).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import IO

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from batch_scheduler.conf import (
    DEFAULT_CONF,
    ConfError,
    PluginOption,
    Unimplemented,
)
from batch_scheduler.framework import (
    Allocatable,
    Enqueueable,
    JobOrder,
    Preemptable,
)
from batch_scheduler.metrics import BatchMetrics
from batch_scheduler.plugins.binpack import BinpackPlugin
from batch_scheduler.plugins.drf import DrfPlugin
from batch_scheduler.plugins.gang import GangPlugin
from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from batch_scheduler.plugins.overcommit import OvercommitPlugin
from batch_scheduler.plugins.predicates import PredicatesPlugin
from batch_scheduler.plugins.priority import PriorityPlugin
from batch_scheduler.volcano_names import VOLCANO_PLUGINS
from cluster.nodeview.profile import Score
from cluster.runtime.redis_server import RedisServer
from cluster.sim.pods import make_pod
from cluster.store.store import Store
from tests.batch_scheduler.inputs import REGISTRY, load, parse
from tests.builders import node

PLUGINS = REGISTRY.plugins


def names(tier: tuple[PluginOption, ...]) -> list[str]:
    return [o.name for o in tier]


# -- the default conf ---------------------------------------------------------------------


def test_default_conf_is_volcanos_chart() -> None:
    c = load(None)
    assert c == parse(DEFAULT_CONF)
    assert c.actions == ("enqueue", "allocate", "backfill")
    assert [names(t) for t in c.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    switches = {o.name: (o.disabled, o.enabled) for t in c.tiers for o in t}
    assert switches["gang"] == (frozenset({"enablePreemptable"}), frozenset())
    assert switches["drf"] == (frozenset({"enablePreemptable"}), frozenset())
    assert all(off == frozenset() for name, (off, _) in switches.items() if name not in ("gang", "drf"))
    assert all(o.arguments == {} for t in c.tiers for o in t)
    assert c.action_arguments == {}


def test_default_conf_build_leaves_gang_and_drf_out_of_preemptable_only() -> None:
    tiers = load(None).build()
    preemptors = [type(p) for tier in tiers.preempt_voters for p in tier]
    assert GangPlugin not in preemptors and DrfPlugin not in preemptors
    assert [type(p).__name__ for p in tiers.preempt_voters[0]] == ["PriorityPlugin", "ConformancePlugin"]
    orders = [type(p) for tier in tiers.job_orders for p in tier]
    assert GangPlugin in orders and DrfPlugin in orders  # the switch turns off one point only
    assert all(isinstance(p, JobOrder) for tier in tiers.job_orders for p in tier)


def test_build_gives_fresh_instances_each_session() -> None:
    c = load(None)
    a, b = c.build(), c.build()
    assert all(x is not y for x, y in zip(a.tiers[1], b.tiers[1], strict=True))


# -- a full Volcano conf ------------------------------------------------------------------

FULL = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
    enableJobStarving: true
  - name: conformance
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 1.5
  - name: drf
    enableHierarchy: true
  - name: predicates
    arguments:
      predicate.NodeAffinityEnable: false
      predicate.TaintTolerationEnable: "true"
      predicate.GPUSharingEnable: true
  - name: capacity
  - name: nodeorder
    arguments:
      leastrequested.weight: 0
      mostrequested.weight: 2
      balancedresource.weight: "0.5"
      nodeaffinity.weight: 3
      tainttoleration.weight: 1
      podaffinity.weight: 4
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.cpu: 2
      binpack.memory: 1
      binpack.resources: nvidia.com/gpu, example.com/fpga
      binpack.resources.nvidia.com/gpu: 8
configurations:
- name: enqueue
  arguments:
    overcommit-factor: 1.2
- name: allocate
  arguments:
    enablePredicateErrorCache: true
- name: preempt
  arguments:
    minCandidateNodesPercentage: 10
"""


def test_full_volcano_conf_loads_with_its_arguments() -> None:
    c = parse(FULL)
    assert c.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
    options = {o.name: o for t in c.tiers for o in t}
    assert options["gang"].disabled == {"enablePreemptable"} and options["gang"].enabled == {"enableJobStarving"}
    assert options["drf"].enabled == {"enableHierarchy"}  # fine: proportion is not in this conf
    assert options["binpack"].arguments == {
        "binpack.weight": "10",
        "binpack.cpu": "2",
        "binpack.memory": "1",
        "binpack.resources": "nvidia.com/gpu, example.com/fpga",
        "binpack.resources.nvidia.com/gpu": "8",
    }
    assert options["predicates"].arguments["predicate.NodeAffinityEnable"] == "false"  # YAML bools read as text
    assert c.argument("enqueue", "overcommit-factor") == "1.2"
    assert c.argument("allocate", "enablePredicateErrorCache") == "true"
    assert c.argument("preempt", "minCandidateNodesPercentage") == "10"
    assert c.argument("backfill", "anything") is None
    assert c.has_plugin("capacity") and not c.has_plugin("proportion")

    plugins = {type(p): p for tier in c.build().tiers for p in tier}
    binpack = plugins[BinpackPlugin]
    assert isinstance(binpack, BinpackPlugin)
    assert binpack.args.weight == 10.0
    assert binpack.args.resource_weights == {"cpu": 2.0, "memory": 1.0, "nvidia.com/gpu": 8.0, "example.com/fpga": 1.0}
    nodeorder = plugins[NodeOrderPlugin]
    assert isinstance(nodeorder, NodeOrderPlugin)
    # "0.5" is no integer: Volcano's Arguments.GetInt keeps the default (1)
    assert nodeorder.args.weights == {
        "leastrequested.weight": 0,
        "mostrequested.weight": 2,
        "balancedresource.weight": 1,
        "nodeaffinity.weight": 3,
        "tainttoleration.weight": 1,
    }
    overcommit = plugins[OvercommitPlugin]
    assert isinstance(overcommit, OvercommitPlugin) and overcommit.args.factor == 1.5
    predicates = plugins[PredicatesPlugin]
    assert isinstance(predicates, PredicatesPlugin)
    assert (predicates.args.node_affinity, predicates.args.taints) == (False, True)


def test_full_conf_sorts_plugins_into_points() -> None:
    tiers = parse(FULL).build()
    assert [type(p).__name__ for p in tiers.node_orders] == ["NodeOrderPlugin", "BinpackPlugin"]
    assert all(isinstance(p, Score) for p in tiers.node_orders)
    assert [type(p).__name__ for p in tiers.allocatable_checks] == ["CapacityPlugin"]
    assert all(isinstance(p, Allocatable) for p in tiers.allocatable_checks)
    assert [[type(p).__name__ for p in t] for t in tiers.enqueue_voters] == [[], ["OvercommitPlugin", "CapacityPlugin"]]
    assert all(isinstance(p, Enqueueable) for t in tiers.enqueue_voters for p in t)
    # gang's enablePreemptable: false; drf has no switch off here and votes in tier 2
    assert [[type(p).__name__ for p in t] for t in tiers.preempt_voters] == [
        ["PriorityPlugin", "ConformancePlugin"],
        ["DrfPlugin"],
    ]
    assert all(isinstance(p, Preemptable) for t in tiers.preempt_voters for p in t)


def test_actions_may_be_spaced_and_trailing_commas_ignored() -> None:
    c = parse('actions: " enqueue ,allocate,, "\ntiers:\n- plugins:\n  - name: gang\n')
    assert c.actions == ("enqueue", "allocate")


def test_drf_hierarchy_beside_proportion_in_another_tier_is_fine() -> None:
    c = parse("""\
actions: "allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: true
- plugins:
  - name: proportion
""")
    assert [names(t) for t in c.tiers] == [["drf"], ["proportion"]]


def test_drf_without_hierarchy_may_share_a_tier_with_proportion() -> None:
    c = parse("""\
actions: "allocate"
tiers:
- plugins:
  - name: drf
    enableHierarchy: false
  - name: proportion
""")
    assert names(c.tiers[0]) == ["drf", "proportion"]


# -- malformed confs ----------------------------------------------------------------------


def one_plugin(entry: str) -> str:
    """A conf with one tier holding ``entry`` (the lines under ``- name: ...``, indented 4)."""
    return 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n' + entry


BAD: list[tuple[str, str, list[str]]] = [
    ("invalid-yaml", "actions: [enqueue\ntiers:", ["scheduler conf: invalid YAML", "line"]),
    ("not-a-mapping", "- enqueue\n- allocate\n", ["expected a mapping with actions and tiers"]),
    ("scalar", "just text", ["expected a mapping with actions and tiers"]),
    ("empty-file", "", ["expected a mapping with actions and tiers"]),
    (
        "unknown-top-level",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\nplugins: []\n',
        ["unknown field 'plugins'", "expected actions, tiers, configurations"],
    ),
    ("missing-actions", "tiers:\n- plugins:\n  - name: gang\n", ["actions:", "comma-separated string"]),
    ("empty-actions", 'actions: "  "\ntiers:\n- plugins:\n  - name: gang\n', ["actions:", "comma-separated string"]),
    (
        "actions-as-list",
        "actions: [enqueue, allocate]\ntiers:\n- plugins:\n  - name: gang\n",
        ["actions:", "comma-separated string"],
    ),
    (
        "unknown-action",
        'actions: "enqueue, alocate"\ntiers:\n- plugins:\n  - name: gang\n',
        [
            "actions: unknown action 'alocate'",
            "did you mean 'allocate'?",
            "known: allocate, backfill, enqueue, preempt, reclaim",
        ],
    ),
    (
        "unknown-action-nothing-near",
        'actions: "enqueue, teleport"\ntiers:\n- plugins:\n  - name: gang\n',
        ["actions: unknown action 'teleport' (known: allocate, backfill, enqueue, preempt, reclaim)"],
    ),
    (
        "misspelt-volcano-action",
        'actions: "allocate, gangPreempt"\ntiers:\n- plugins:\n  - name: gang\n',
        ["actions: unknown action 'gangPreempt'", "did you mean 'gangpreempt'?"],
    ),
    (
        "removed-action",
        'actions: "enqueue, elect, allocate"\ntiers:\n- plugins:\n  - name: gang\n',
        ["actions: 'elect' was removed from Volcano in v1.6", "take it out of actions"],
    ),
    ("missing-tiers", 'actions: "allocate"\n', ["tiers:", "expected a list of tiers"]),
    ("empty-tiers", 'actions: "allocate"\ntiers: []\n', ["tiers:", "expected a list of tiers"]),
    ("tier-without-plugins", 'actions: "allocate"\ntiers:\n- name: gang\n', ["tiers[0]:", "list of plugins"]),
    (
        "plugin-without-name",
        'actions: "allocate"\ntiers:\n- plugins:\n  - enablePreemptable: false\n',
        ["tiers[0].plugins[0]:", "with a name"],
    ),
    (
        "unknown-plugin",
        one_plugin("  - name: binpak\n"),
        [
            "tiers[0].plugins[1]: unknown plugin 'binpak'",
            "did you mean 'binpack'?",
            "known: binpack, capacity, conformance, deviceshare, drf, gang, network-topology-aware, nodeorder, overcommit, predicates, priority, proportion",
        ],
    ),
    (
        "unknown-plugin-nothing-near",
        one_plugin("  - name: magic\n"),
        ["tiers[0].plugins[1]: unknown plugin 'magic' (known: binpack, capacity,"],
    ),
    (
        "misspelt-volcano-plugin",
        one_plugin("  - name: numaaware\n"),
        ["tiers[0].plugins[1]: unknown plugin 'numaaware'", "did you mean 'numa-aware'?"],
    ),
    (
        "removed-plugin",
        one_plugin("  - name: reservation\n"),
        ["tiers[0].plugins[1]: plugin 'reservation' was removed from Volcano in v1.6", "take it out of the tier"],
    ),
    (
        "unknown-switch",
        one_plugin("  - name: gang\n    enablePreemption: false\n"),
        ["tiers[0].plugins[1] (gang): unknown field 'enablePreemption'", "enable switch"],
    ),
    (
        "misspelt-switch",
        one_plugin("  - name: gang\n    enablePreemptible: false\n"),
        ["tiers[0].plugins[1] (gang): unknown field 'enablePreemptible'", "did you mean 'enablePreemptable'?"],
    ),
    (
        "misspelt-switch-of-an-unimplemented-plugin",
        one_plugin("  - name: sla\n    enabledHyperNodeOrdr: true\n"),
        ["tiers[0].plugins[1] (sla): unknown field 'enabledHyperNodeOrdr'", "did you mean 'enabledHyperNodeOrder'?"],
    ),
    (
        "old-disable-switch",
        one_plugin("  - name: drf\n    disableTaskOrder: true\n"),
        ["tiers[0].plugins[1] (drf): unknown field 'disableTaskOrder'", "write enableTaskOrder: false"],
    ),
    (
        "non-bool-volcano-switch",
        one_plugin("  - name: nodegroup\n    enableHierarchy: yes please\n"),
        ["tiers[0].plugins[1] (nodegroup).enableHierarchy: 'yes please' is not true or false"],
    ),
    (
        "non-bool-switch",
        one_plugin("  - name: gang\n    enablePreemptable: no-thanks\n"),
        ["tiers[0].plugins[1] (gang).enablePreemptable: 'no-thanks' is not true or false"],
    ),
    (
        "quoted-bool-switch",
        one_plugin('  - name: drf\n    enableJobOrder: "false"\n'),
        ["tiers[0].plugins[1] (drf).enableJobOrder: 'false' is not true or false"],
    ),
    (
        "arguments-not-a-mapping",
        one_plugin("  - name: binpack\n    arguments: [binpack.weight]\n"),
        ["tiers[0].plugins[1] (binpack).arguments:", "expected a mapping"],
    ),
    (
        "argument-not-a-scalar",
        one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: [1, 2]\n"),
        ["tiers[0].plugins[1] (binpack).arguments.binpack.weight:", "not a scalar"],
    ),
    (
        "negative-binpack-weight",
        one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: -1\n"),
        ["(binpack).arguments: binpack.weight: '-1'", "expected a number >= 0"],
    ),
    (
        "nan-binpack-cpu",
        one_plugin("  - name: binpack\n    arguments:\n      binpack.cpu: .nan\n"),
        ["(binpack).arguments: binpack.cpu:", "expected a number >= 0"],
    ),
    (
        "infinite-binpack-memory",
        one_plugin("  - name: binpack\n    arguments:\n      binpack.memory: .inf\n"),
        ["(binpack).arguments: binpack.memory:", "expected a number >= 0"],
    ),
    (
        "text-nodeorder-weight",
        one_plugin("  - name: nodeorder\n    arguments:\n      mostrequested.weight: lots\n"),
        ["(nodeorder).arguments: mostrequested.weight: 'lots'", "expected a number >= 0"],
    ),
    (
        "negative-no-effect-weight",
        one_plugin("  - name: nodeorder\n    arguments:\n      podaffinity.weight: -2\n"),
        ["(nodeorder).arguments: podaffinity.weight: '-2'", "expected a number >= 0"],
    ),
    (
        "text-overcommit-factor",
        one_plugin("  - name: overcommit\n    arguments:\n      overcommit-factor: abc\n"),
        ["(overcommit).arguments: overcommit-factor: 'abc'", "expected a number >= 1"],
    ),
    (
        "maybe-node-affinity",
        one_plugin("  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: maybe\n"),
        ["(predicates).arguments: predicate.NodeAffinityEnable: 'maybe'", "expected true or false"],
    ),
    (
        "numeric-taint-switch",
        one_plugin("  - name: predicates\n    arguments:\n      predicate.TaintTolerationEnable: 1\n"),
        ["(predicates).arguments: predicate.TaintTolerationEnable: '1'", "expected true or false"],
    ),
    (
        "binpack-resource-not-listed",
        one_plugin(
            "  - name: binpack\n    arguments:\n      binpack.resources: nvidia.com/gpu\n"
            "      binpack.resources.example.com/fpga: 2\n"
        ),
        [
            "(binpack).arguments: binpack.resources.example.com/fpga:",
            "'example.com/fpga' is not listed",
            "binpack.resources (nvidia.com/gpu)",
        ],
    ),
    (
        "binpack-resource-without-list",
        one_plugin("  - name: binpack\n    arguments:\n      binpack.resources.nvidia.com/gpu: 2\n"),
        ["binpack.resources.nvidia.com/gpu:", "'nvidia.com/gpu' is not listed", "(empty)"],
    ),
    (
        "binpack-resource-bad-weight",
        one_plugin(
            "  - name: binpack\n    arguments:\n      binpack.resources: nvidia.com/gpu\n"
            "      binpack.resources.nvidia.com/gpu: heavy\n"
        ),
        ["(binpack).arguments: binpack.resources.nvidia.com/gpu: 'heavy'", "expected a number >= 0"],
    ),
    (
        "plugin-twice-in-a-tier",
        one_plugin("  - name: gang\n  - name: gang\n"),
        ["tiers[0]: plugin 'gang' appears twice"],
    ),
    (
        "plugin-twice-across-tiers",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: drf\n  - name: gang\n',
        ["tiers[1]: plugin 'gang' appears twice"],
    ),
    (
        "drf-hierarchy-beside-proportion",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n  - name: drf\n    enableHierarchy: true\n',
        ["tiers[0]: drf with enableHierarchy: true cannot share a tier with proportion", "another tier"],
    ),
    (
        "configurations-unknown-action",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: enqeue\n  arguments: {overcommit-factor: 1.5}\n",
        [
            "configurations[0]: unknown action 'enqeue'",
            "did you mean 'enqueue'?",
            "known: allocate, backfill, enqueue, preempt, reclaim",
        ],
    ),
    (
        "configurations-not-a-list",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations: {enqueue: {overcommit-factor: 1.5}}\n",
        ["configurations: expected a list of entries"],
    ),
    (
        "configurations-arguments-not-a-mapping",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: shuffle\n  arguments: [a, b]\n",
        ["configurations[0] (shuffle).arguments: expected a mapping"],
    ),
    (
        "unimplemented-plugin-arguments-not-a-mapping",
        one_plugin("  - name: sla\n    arguments: 30m\n"),
        ["tiers[0].plugins[1] (sla).arguments: expected a mapping"],
    ),
    (
        "metrics-not-a-mapping",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\nmetrics: [prometheus]\n',
        ["metrics: expected a mapping"],
    ),
    (
        "configurations-entry-without-name",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- arguments: {overcommit-factor: 1.2}\n",
        ["configurations[0]:", "with a name"],
    ),
    # Action arguments are checked when the conf is loaded (module docstring), values included:
    # a factor that is not a number must not load silently.
    (
        "configurations-text-overcommit-factor",
        'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: enqueue\n  arguments: {overcommit-factor: abc}\n",
        ["configurations[0] (enqueue).arguments", "overcommit-factor", "'abc'"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[i for i, _, _ in BAD])
def test_malformed_conf_is_one_line_naming_the_entry(text: str, expected: list[str]) -> None:
    with pytest.raises(ConfError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("scheduler conf: ")
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


# -- arguments nobody reads: accepted, no effect, a warning ------------------------------
# (These were refusals until every Volcano conf had to load: Volcano ignores an argument
# its plugin does not read, so caldera accepts it too, and warns, since it is most likely
# a typo.)

WARNED: list[tuple[str, str, str, str]] = [
    # (id, conf, plugin or action whose arguments are checked, the one warning)
    (
        "misspelt-binpack-argument",
        one_plugin("  - name: binpack\n    arguments:\n      binpack.wieght: 2\n"),
        "binpack",
        'conf plugin "binpack": argument "binpack.wieght" is read by neither caldera nor Volcano; it has no effect '
        '(nearest: "binpack.weight")',
    ),
    (
        "nodeorder-argument-without-weight",
        one_plugin("  - name: nodeorder\n    arguments:\n      leastrequested: 2\n"),
        "nodeorder",
        'conf plugin "nodeorder": argument "leastrequested" is read by neither caldera nor Volcano; '
        'it has no effect (nearest: "leastrequested.weight")',
    ),
    (
        "unknown-predicate",
        one_plugin("  - name: predicates\n    arguments:\n      predicate.Foo: true\n"),
        "predicates",
        'conf plugin "predicates": argument "predicate.Foo" is read by neither caldera nor Volcano; it has no effect',
    ),
    (
        "overcommit-factor-without-its-name",
        one_plugin("  - name: overcommit\n    arguments:\n      factor: 2\n"),
        "overcommit",
        'conf plugin "overcommit": argument "factor" is read by neither caldera nor Volcano; it has no effect',
    ),
    (
        "argument-for-plugin-taking-none",
        one_plugin("  - name: gang\n    arguments:\n      minMember: 2\n"),
        "gang",
        'conf plugin "gang": argument "minMember" is read by neither caldera nor Volcano; it has no effect',
    ),
    (
        "argument-for-drf",
        one_plugin("  - name: drf\n    arguments:\n      drf.weight: [1, 2]\n"),
        "drf",
        'conf plugin "drf": argument "drf.weight" is read by neither caldera nor Volcano; it has no effect',
    ),
    (
        "configurations-unknown-argument",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: enqueue\n  arguments: {overcommit-factor: 1.5}\n"
        "- name: allocate\n  arguments: {overcommitFactor: 2}\n",
        "allocate",
        'conf configurations[1] (allocate): argument "overcommitFactor" is read by neither caldera nor Volcano; '
        "it has no effect",
    ),
    (
        "configurations-argument-for-action-taking-none",
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: backfill\n  arguments: {speed: 2}\n",
        "backfill",
        'conf configurations[0] (backfill): argument "speed" is read by neither caldera nor Volcano; it has no effect',
    ),
]


@pytest.mark.parametrize(
    ("text", "owner", "warning"), [(t, o, w) for _, t, o, w in WARNED], ids=[i for i, *_ in WARNED]
)
def test_an_argument_nobody_reads_loads_with_no_effect_and_one_warning(text: str, owner: str, warning: str) -> None:
    c = parse(text)
    assert c.warnings == (warning,)
    assert c.unimplemented == ()
    given = {o.name: o.arguments for t in c.tiers for o in t}.get(owner, c.action_arguments.get(owner, {}))
    assert given == ({"overcommit-factor": "1.5"} if owner == "enqueue" else {})  # the plugin never sees it
    c.build()


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_every_plugin_loads_with_an_argument_nobody_reads(plugin: str) -> None:
    text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n    arguments:\n      no-such-thing: 1\n'
    c = parse(text)
    assert c.tiers[0][0].arguments == {} and c.build().tiers[0][0].name == plugin
    unread = [w for w in c.warnings if "no-such-thing" in w]
    assert len(unread) == 1 and '"no-such-thing" is read by neither caldera nor Volcano' in unread[0]


COMPANIONS = {
    f"deviceshare.{name}": {"deviceshare.SchedulePolicy": "fgd"}
    for name in ("FGDTypicalPods", "FGDWindow", "FGDPopularityThreshold", "FGDIncludeCPUPods")
}


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_every_argument_the_registry_says_a_plugin_reads_is_one_it_takes(plugin: str) -> None:
    """The loader hands a plugin only the arguments the registry lists for it: each must be one
    the plugin's own check accepts (with some value), or the registry has drifted from it."""
    spec = PLUGINS[plugin]
    for name in sorted(spec.arguments.reads):
        refusals = []
        for value in ("1", "true", "nvidia.com/gpu", "binpack", "cpu=1,share=1"):
            try:
                # an argument that takes effect only beside another (deviceshare's FGD ones) is given it
                spec.arguments.load(plugin, {**COMPANIONS.get(name, {}), name: value})
                break
            except ValueError as e:
                refusals.append(str(e))
        else:
            raise AssertionError(f"{plugin} refuses {name} with every value: {refusals}")


VOLCANO_READ = [  # Volcano's plugins and actions read these; caldera's do not: no effect, no warning
    ("predicates", "predicate.VolumeBindingEnable", "true"),
    ("predicates", "predicate.DynamicResourceAllocationEnable", "true"),
    ("predicates", "volumebinding.shape", "[{utilization: 0, score: 0}, {utilization: 100, score: 10}]"),
    ("capacity", "capacity.DynamicResourceAllocationEnable", "true"),
]


@pytest.mark.parametrize(("plugin", "argument", "value"), VOLCANO_READ)
def test_an_argument_only_volcano_reads_loads_silently_with_no_effect(plugin: str, argument: str, value: str) -> None:
    c = parse(one_plugin(f"  - name: {plugin}\n    arguments:\n      {argument}: {value}\n"))
    assert c.warnings == () and c.tiers[0][1].arguments == {}
    c.build()


def test_an_action_argument_only_volcano_reads_loads_silently() -> None:
    c = parse(
        'actions: "allocate, reclaim"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: reclaim\n  arguments: {predicateErrorCacheEnable: true}\n"
    )
    assert c.warnings == () and c.argument("reclaim", "predicateErrorCacheEnable") is None


# -- argument values: any YAML scalar ----------------------------------------------------


def test_argument_values_may_be_any_yaml_scalar() -> None:
    c = parse(
        one_plugin(
            "  - name: binpack\n    arguments:\n"
            "      binpack.weight: 3\n"  # int
            "      binpack.cpu: 1.5\n"  # float
            '      binpack.memory: "2"\n'  # string
            "      binpack.resources: ~\n"  # null: the default
            "  - name: predicates\n    arguments:\n"
            "      predicate.NodeAffinityEnable: no\n"  # YAML 1.1 bool
            "      predicate.TaintTolerationEnable: True\n"
            "  - name: sla\n    arguments:\n"
            "      sla-waiting-time: 1h2m3s\n"
            "      since: 2024-01-31\n"  # a date, for a plugin caldera does not implement
            "      nested: {a: [1, 2]}\n"
        )
    )
    options = {o.name: o for t in c.tiers for o in t}
    assert options["binpack"].arguments == {"binpack.weight": "3", "binpack.cpu": "1.5", "binpack.memory": "2"}
    assert options["predicates"].arguments == {
        "predicate.NodeAffinityEnable": "false",
        "predicate.TaintTolerationEnable": "true",
    }
    assert [type(p) for tier in c.build().tiers for p in tier] == [PriorityPlugin, BinpackPlugin, PredicatesPlugin]
    assert c.unimplemented == (Unimplemented("plugin", "sla"),)


def test_a_date_for_an_argument_caldera_reads_is_refused_by_its_value() -> None:
    with pytest.raises(ConfError, match=r"\(binpack\)\.arguments: binpack\.weight: '2024-01-31' \(expected a number"):
        parse(one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: 2024-01-31\n"))


# -- overcommit-factor below 1: Volcano's default, with a warning -------------------------
# (A refusal until every Volcano conf had to load: Volcano's overcommit plugin takes 1.2
# instead, and says so in its log.)


@pytest.mark.parametrize("factor", ["0.5", "0", "-3", "0.999"])
def test_an_overcommit_factor_below_one_is_volcanos_default_with_a_warning(factor: str) -> None:
    c = parse(one_plugin(f"  - name: overcommit\n    arguments:\n      overcommit-factor: {factor}\n"))
    assert c.warnings == (
        f'conf plugin "overcommit": overcommit-factor {factor} is below 1; using 1.2, as Volcano does',
    )
    assert c.tiers[0][1].arguments == {"overcommit-factor": "1.2"}
    overcommit = {type(p): p for tier in c.build().tiers for p in tier}[OvercommitPlugin]
    assert isinstance(overcommit, OvercommitPlugin) and overcommit.args.factor == 1.2


def test_enqueues_overcommit_factor_below_one_is_volcanos_default_with_a_warning() -> None:
    c = parse(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: overcommit\n'
        "configurations:\n- name: enqueue\n  arguments:\n    overcommit-factor: 0.8\n"
    )
    assert c.warnings == (
        "conf configurations[0] (enqueue): overcommit-factor 0.8 is below 1; using 1.2, as Volcano does",
    )
    assert c.argument("enqueue", "overcommit-factor") == "1.2"
    overcommit = c.build().tiers[0][0]
    assert isinstance(overcommit, OvercommitPlugin) and overcommit.args.factor == 1.2


def test_an_overcommit_factor_of_one_is_taken_as_it_is() -> None:
    c = parse(one_plugin("  - name: overcommit\n    arguments:\n      overcommit-factor: 1\n"))
    assert c.warnings == () and c.tiers[0][1].arguments == {"overcommit-factor": "1"}


# -- Volcano's plugins and actions caldera does not implement yet ------------------------

NOT_YET = sorted(VOLCANO_PLUGINS - PLUGINS.keys())


def test_the_volcano_plugins_caldera_does_not_implement_yet() -> None:
    # Read from Volcano's pkg/scheduler/plugins/factory.go (release-1.14 and master), plus the
    # proposed capacity-card.
    assert NOT_YET == [
        "capacity-card",
        "cdp",
        "extender",
        "nodegroup",
        "numa-aware",
        "pdb",
        "rescheduling",
        "resource-strategy-fit",
        "resourcequota",
        "sla",
        "tdm",
        "usage",
    ]
    assert PLUGINS.keys() <= VOLCANO_PLUGINS  # caldera implements only plugins Volcano has


@pytest.mark.parametrize("plugin", NOT_YET)
def test_a_volcano_plugin_caldera_does_not_implement_loads_with_no_effect(plugin: str) -> None:
    c = parse(
        one_plugin(
            f"  - name: {plugin}\n    enablePredicate: false\n    enabledHyperNodeOrder: true\n"
            "    arguments:\n      weight: 10\n      strategies: [{name: offlineOnly}]\n"
            "      thresholds: {cpu: 80}\n"
        )
    )
    assert names(c.tiers[0]) == ["priority"]
    assert c.unimplemented == (Unimplemented("plugin", plugin),)
    assert c.warnings == (f'conf plugin "{plugin}" is not implemented by caldera yet; it has no effect',)
    assert c.unimplemented_names() == {"plugins": [plugin], "actions": []}
    assert [type(p).__name__ for tier in c.build().tiers for p in tier] == ["PriorityPlugin"]


def test_a_tier_of_only_unimplemented_plugins_is_left_empty() -> None:
    c = parse('actions: "reclaim, preempt, shuffle"\ntiers:\n- plugins:\n  - name: pdb\n- plugins:\n  - name: gang\n')
    assert [names(t) for t in c.tiers] == [[], ["gang"]]
    assert c.actions == ("reclaim", "preempt")
    assert c.unimplemented == (Unimplemented("action", "shuffle"), Unimplemented("plugin", "pdb"))
    assert c.warnings == (
        'conf action "shuffle" is not implemented by caldera yet; it has no effect',
        'conf plugin "pdb" is not implemented by caldera yet; it has no effect',
    )
    assert [[type(p).__name__ for p in t] for t in c.build().tiers] == [[], ["GangPlugin"]]


@pytest.mark.parametrize("action", ["shuffle", "gangpreempt", "gangreclaim"])
def test_a_volcano_action_caldera_does_not_implement_loads_with_no_effect(action: str) -> None:
    c = parse(
        f'actions: "enqueue, {action}, allocate, {action}"\ntiers:\n- plugins:\n  - name: gang\n'
        f"configurations:\n- name: {action}\n  arguments: {{maxDomains: 2, anything: [1]}}\n"
    )
    assert c.actions == ("enqueue", "allocate")
    assert c.unimplemented == (Unimplemented("action", action),)  # named once though listed twice
    assert c.warnings == (f'conf action "{action}" is not implemented by caldera yet; it has no effect',)
    assert action not in c.action_arguments


def test_a_configurations_entry_volcano_reads_that_is_not_an_action_loads() -> None:
    c = parse(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n  - name: pdb\n'
        'configurations:\n- name: init-params\n  arguments: {"grace-over-time": "900"}\n'
    )
    assert c.action_arguments == {} and c.unimplemented == (Unimplemented("plugin", "pdb"),)


# -- every switch Volcano's PluginOption has ----------------------------------------------

VOLCANO_1_14_AND_MASTER_SWITCHES = [  # pkg/scheduler/conf/scheduler_conf.go
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
]


@pytest.mark.parametrize("switch", VOLCANO_1_14_AND_MASTER_SWITCHES)
@pytest.mark.parametrize("plugin", ["gang", "nodegroup"])
def test_every_volcano_switch_loads(plugin: str, switch: str) -> None:
    c = parse(one_plugin(f"  - name: {plugin}\n    {switch}: false\n"))
    off = [o.disabled for t in c.tiers for o in t if o.name == plugin]
    assert off == ([frozenset({switch})] if plugin == "gang" else [])
    with pytest.raises(ConfError, match=rf"\({plugin}\)\.{switch}: 'sometimes' is not true or false"):
        parse(one_plugin(f"  - name: {plugin}\n    {switch}: sometimes\n"))


# -- every section Volcano's SchedulerConfiguration has -----------------------------------


def test_metrics_is_accepted_and_has_no_effect() -> None:
    base = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    c = parse(
        base + "metrics:\n  type: prometheus\n  address: http://192.168.0.10:9090\n  interval: 30s\n"
        '  tls.insecureSkipVerify: "false"\n  elasticsearch: {index: custom, username: ""}\n'
    )
    assert c == parse(base)
    assert parse(base + "metrics:\n") == parse(base)


def test_unknown_top_level_names_the_nearest_section() -> None:
    with pytest.raises(
        ConfError,
        match=r"unknown field 'metric' \(did you mean 'metrics'\? expected actions, tiers, "
        r"configurations, metrics\)",
    ):
        parse('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\nmetric: {type: prometheus}\n')


# -- reloading, and what the process shows -------------------------------------------------


def test_a_reload_warns_only_about_what_is_new() -> None:
    before = parse(one_plugin("  - name: sla\n"))
    after = parse('actions: "enqueue, allocate, shuffle"\ntiers:\n- plugins:\n  - name: sla\n  - name: tdm\n')
    assert after.new_warnings(before) == [
        'conf action "shuffle" is not implemented by caldera yet; it has no effect',
        'conf plugin "tdm" is not implemented by caldera yet; it has no effect',
    ]
    assert before.new_warnings(after) == []
    assert after.unimplemented_names() == {"plugins": ["sla", "tdm"], "actions": ["shuffle"]}


def test_the_gauge_shows_what_the_loaded_conf_names_and_nothing_else() -> None:
    registry = CollectorRegistry()
    metrics = BatchMetrics(registry)

    def value(name: str, kind: str) -> float | None:
        return registry.get_sample_value("caldera_conf_plugins_unimplemented", {"name": name, "kind": kind})

    metrics.conf_loaded(parse('actions: "allocate, shuffle"\ntiers:\n- plugins:\n  - name: sla\n'))
    assert (value("sla", "plugin"), value("shuffle", "action"), value("tdm", "plugin")) == (1.0, 1.0, None)
    metrics.conf_loaded(parse('actions: "allocate"\ntiers:\n- plugins:\n  - name: tdm\n'))
    assert (value("sla", "plugin"), value("shuffle", "action"), value("tdm", "plugin")) == (None, None, 1.0)
    metrics.conf_loaded(parse(DEFAULT_CONF))
    assert value("tdm", "plugin") is None


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_every_plugin_loads_with_no_arguments(plugin: str) -> None:
    c = parse(f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n')
    assert names(c.tiers[0]) == [plugin] and c.build().tiers[0][0].name == plugin


def test_conf_error_is_a_value_error() -> None:
    assert issubclass(ConfError, ValueError)


# -- load_conf ----------------------------------------------------------------------------


def test_load_conf_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(FULL, encoding="utf-8")
    assert load(str(path)) == parse(FULL)


def test_load_conf_with_a_missing_file_names_the_flag_and_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.conf"
    with pytest.raises(ConfError) as info:
        load(str(path))
    message = str(info.value)
    assert message.startswith("--scheduler-conf: ") and str(path) in message and "No such file" in message


def test_load_conf_with_a_file_that_is_not_text_names_the_flag_and_path(tmp_path: Path) -> None:
    path = tmp_path / "binary.conf"
    path.write_bytes(b"actions: \xff\xfe")
    with pytest.raises(ConfError) as info:
        load(str(path))
    assert str(info.value) == f"--scheduler-conf: {path}: not UTF-8 text (byte 9; expected a scheduler conf YAML)"


def test_load_conf_reports_a_bad_file_by_entry(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text('actions: "enqueue, dance"\ntiers:\n- plugins:\n  - name: gang\n', encoding="utf-8")
    with pytest.raises(ConfError, match="unknown action 'dance'"):
        load(str(path))


# -- in a running batch scheduler -----------------------------------------------------------

PROCESS_CONF = """\
actions: "enqueue, allocate, backfill, shuffle"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
    arguments: {sla-waiting-time: 1h}
- plugins:
  - name: predicates
  - name: nodeorder
"""


async def _line(stream: IO[str], needle: str, timeout: float = 30.0) -> str:
    """The next line of ``stream`` holding ``needle`` (lines before it are skipped)."""
    async with asyncio.timeout(timeout):
        while True:
            line = await asyncio.to_thread(stream.readline)
            assert line, f"the stream ended before a line with {needle!r}"
            if needle in line:
                return line.rstrip("\n")


def _gauge(port: int) -> dict[tuple[str, str], float]:
    """caldera_conf_plugins_unimplemented as the process serves it: (kind, name) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        (s.labels["kind"], s.labels["name"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "caldera_conf_plugins_unimplemented"
        for s in family.samples
    }


async def test_a_running_batch_scheduler_names_what_it_does_not_implement(
    store: Store, redis_server: RedisServer, tmp_path: Path
) -> None:
    """On stderr once at start, in caldera_conf_plugins_unimplemented and in caldera status; a
    reload names only what is new, and the gauge follows the conf in use."""
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(PROCESS_CONF)
    await store.upsert_nodes([node("n1", cpu="8")])
    await store.upsert_pods([make_pod("p", requests={"cpu": "1"}, scheduler="volcano")])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "caldera",
            "batch-scheduler",
            "--redis-url",
            redis_server.url,
            "--cluster",
            store.keys.cluster,
            "--metrics-port",
            "0",
            "--schedule-period",
            "200ms",
            "--scheduler-conf",
            str(conf),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    not_yet = "is not implemented by caldera yet; it has no effect"
    try:
        port = int((await _line(proc.stdout, "serving /metrics")).rsplit(" ", 1)[1])
        assert [await _line(proc.stderr, "warning"), await _line(proc.stderr, "warning")] == [
            f'batch-scheduler: warning: conf action "shuffle" {not_yet}',
            f'batch-scheduler: warning: conf plugin "sla" {not_yet}',
        ]
        assert _gauge(port) == {("action", "shuffle"): 1.0, ("plugin", "sla"): 1.0}

        async with asyncio.timeout(30):
            while True:
                r = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "caldera",
                        "status",
                        "--redis-url",
                        redis_server.url,
                        "--cluster",
                        store.keys.cluster,
                        "-o",
                        "json",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                batch = [p for p in json.loads(r.stdout)["processes"] if p["component"] == "batch-scheduler"]
                if batch and batch[0]["stats"].get("sessions", 0) > 0:
                    break
                await asyncio.sleep(0.3)
        assert batch[0]["stats"]["unimplemented"] == {"plugins": ["sla"], "actions": ["shuffle"]}
        table = subprocess.run(
            [
                sys.executable,
                "-m",
                "caldera",
                "status",
                "--redis-url",
                redis_server.url,
                "--cluster",
                store.keys.cluster,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert "not implemented by caldera yet (no effect): plugins sla; actions shuffle" in " ".join(table.split())
        assert (await store.list_pods())[0].node == "n1"  # the rest of the conf schedules

        def rewrite(text: str, stamp: float) -> None:
            conf.write_text(text)
            os.utime(conf, (stamp, stamp))

        rewrite(PROCESS_CONF.replace("  - name: nodeorder\n", "  - name: nodeorder\n  - name: tdm\n"), 1_000_000)
        await _line(proc.stdout, "reloaded")
        assert await _line(proc.stderr, "warning") == f'batch-scheduler: warning: conf plugin "tdm" {not_yet}'
        assert _gauge(port) == {("action", "shuffle"): 1.0, ("plugin", "sla"): 1.0, ("plugin", "tdm"): 1.0}
        rewrite(PROCESS_CONF.replace(", shuffle", "").replace("  - name: sla\n", "  - name: tdm\n"), 2_000_000)
        await _line(proc.stdout, "reloaded")
        assert _gauge(port) == {("plugin", "tdm"): 1.0}
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "warning" not in rest  # the last reload named nothing new
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_topology_aware_preemption_is_named_as_not_honoured() -> None:
    text = (
        'actions: "allocate, preempt"\ntiers:\n- plugins:\n  - name: gang\n'
        "configurations:\n- name: preempt\n  arguments: {enableTopologyAwarePreemption: true}\n"
    )
    conf = parse(text)
    assert conf.warnings == (
        "conf configurations[0] (preempt): enableTopologyAwarePreemption true is not honoured by "
        "caldera yet (Volcano's normal preemption runs instead of kube-scheduler-style candidate "
        "selection)",
    )
    assert parse(text.replace("true", "false")).warnings == ()


def test_capacitys_ancestor_reclaim_level_loads_as_volcano_reads_it() -> None:
    text = (
        'actions: "reclaim"\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n'
        "    arguments: {ancestorReclaimLevel: 2}\n"
    )
    c = parse(text)
    assert c.warnings == () and c.tiers[0][0].arguments == {"ancestorReclaimLevel": "2"}
    # Below 0: 0, as Volcano; without the hierarchy Volcano does nothing with it: both said.
    c = parse(text.replace("2}", "-1}"))
    assert c.tiers[0][0].arguments == {"ancestorReclaimLevel": "0"}
    assert c.warnings == (
        'conf plugin "capacity": ancestorReclaimLevel -1 is below 0; using 0 (only the queues\' own '
        "deserved decide reclaim), as Volcano does",
    )
    assert parse(text.replace("enableHierarchy: true", "enableHierarchy: false")).warnings == (
        'conf plugin "capacity": ancestorReclaimLevel 2 has no effect without enableHierarchy: true (as in Volcano)',
    )
    with pytest.raises(ConfError, match=r"ancestorReclaimLevel: '1\.5' \(expected a whole number of queue levels"):
        parse(text.replace("2}", "1.5}"))
