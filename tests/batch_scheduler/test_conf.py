"""The scheduler conf: Volcano's format loads unchanged, and every bad entry is one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch_scheduler.conf import DEFAULT_CONF, ConfError, PluginOption, load_conf, parse_conf
from batch_scheduler.framework import Allocatable, Enqueueable, JobOrder, NodeOrder, Preemptable
from batch_scheduler.plugins.binpack import BinpackPlugin
from batch_scheduler.plugins.drf import DrfPlugin
from batch_scheduler.plugins.gang import GangPlugin
from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from batch_scheduler.plugins.overcommit import OvercommitPlugin
from batch_scheduler.plugins.predicates import PredicatesPlugin
from batch_scheduler.registry import PLUGINS


def names(tier: tuple[PluginOption, ...]) -> list[str]:
    return [o.name for o in tier]


# -- the default conf ---------------------------------------------------------------------


def test_default_conf_is_volcanos_chart() -> None:
    c = load_conf(None)
    assert c == parse_conf(DEFAULT_CONF)
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
    tiers = load_conf(None).build()
    preemptors = [type(p) for tier in tiers.preemptables for p in tier]
    assert GangPlugin not in preemptors and DrfPlugin not in preemptors
    assert [type(p).__name__ for p in tiers.preemptables[0]] == ["PriorityPlugin", "ConformancePlugin"]
    orders = [type(p) for tier in tiers.job_orders for p in tier]
    assert GangPlugin in orders and DrfPlugin in orders  # the switch turns off one point only
    assert all(isinstance(p, JobOrder) for tier in tiers.job_orders for p in tier)


def test_build_gives_fresh_instances_each_session() -> None:
    c = load_conf(None)
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
    c = parse_conf(FULL)
    assert c.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
    options = {o.name: o for t in c.tiers for o in t}
    assert options["gang"].disabled == {"enablePreemptable"} and options["gang"].enabled == {"enableJobStarving"}
    assert options["drf"].enabled == {"enableHierarchy"}  # fine: proportion is not in this conf
    assert options["binpack"].arguments == {
        "binpack.weight": "10", "binpack.cpu": "2", "binpack.memory": "1",
        "binpack.resources": "nvidia.com/gpu, example.com/fpga", "binpack.resources.nvidia.com/gpu": "8",
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
    assert binpack.weight == 10.0
    assert binpack.resource_weights == {"cpu": 2.0, "memory": 1.0, "nvidia.com/gpu": 8.0, "example.com/fpga": 1.0}
    nodeorder = plugins[NodeOrderPlugin]
    assert isinstance(nodeorder, NodeOrderPlugin)
    assert nodeorder.weights == {"leastrequested.weight": 0.0, "mostrequested.weight": 2.0,
                                 "balancedresource.weight": 0.5, "nodeaffinity.weight": 3.0,
                                 "tainttoleration.weight": 1.0}
    overcommit = plugins[OvercommitPlugin]
    assert isinstance(overcommit, OvercommitPlugin) and overcommit.factor == 1.5
    predicates = plugins[PredicatesPlugin]
    assert isinstance(predicates, PredicatesPlugin)
    assert (predicates.node_affinity, predicates.taints) == (False, True)


def test_full_conf_sorts_plugins_into_points() -> None:
    tiers = parse_conf(FULL).build()
    assert [type(p).__name__ for p in tiers.node_orders] == ["NodeOrderPlugin", "BinpackPlugin"]
    assert all(isinstance(p, NodeOrder) for p in tiers.node_orders)
    assert [type(p).__name__ for p in tiers.allocatables] == ["CapacityPlugin"]
    assert all(isinstance(p, Allocatable) for p in tiers.allocatables)
    assert [[type(p).__name__ for p in t] for t in tiers.enqueueables] == [[], ["OvercommitPlugin", "CapacityPlugin"]]
    assert all(isinstance(p, Enqueueable) for t in tiers.enqueueables for p in t)
    # gang's enablePreemptable: false; drf has no switch off here and votes in tier 2
    assert [[type(p).__name__ for p in t] for t in tiers.preemptables] == [
        ["PriorityPlugin", "ConformancePlugin"], ["DrfPlugin"]]
    assert all(isinstance(p, Preemptable) for t in tiers.preemptables for p in t)


def test_actions_may_be_spaced_and_trailing_commas_ignored() -> None:
    c = parse_conf('actions: " enqueue ,allocate,, "\ntiers:\n- plugins:\n  - name: gang\n')
    assert c.actions == ("enqueue", "allocate")


def test_drf_hierarchy_beside_proportion_in_another_tier_is_fine() -> None:
    c = parse_conf("""\
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
    c = parse_conf("""\
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
    ("unknown-top-level", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\nplugins: []\n',
     ["unknown field 'plugins'", "expected actions, tiers, configurations"]),
    ("missing-actions", "tiers:\n- plugins:\n  - name: gang\n", ["actions:", "comma-separated string"]),
    ("empty-actions", 'actions: "  "\ntiers:\n- plugins:\n  - name: gang\n', ["actions:", "comma-separated string"]),
    ("actions-as-list", "actions: [enqueue, allocate]\ntiers:\n- plugins:\n  - name: gang\n",
     ["actions:", "comma-separated string"]),
    ("unknown-action", 'actions: "enqueue, shuffle"\ntiers:\n- plugins:\n  - name: gang\n',
     ["actions: unknown action 'shuffle'", "known: allocate, backfill, enqueue, preempt, reclaim"]),
    ("missing-tiers", 'actions: "allocate"\n', ["tiers:", "expected a list of tiers"]),
    ("empty-tiers", 'actions: "allocate"\ntiers: []\n', ["tiers:", "expected a list of tiers"]),
    ("tier-without-plugins", 'actions: "allocate"\ntiers:\n- name: gang\n', ["tiers[0]:", "list of plugins"]),
    ("plugin-without-name", 'actions: "allocate"\ntiers:\n- plugins:\n  - enablePreemptable: false\n',
     ["tiers[0].plugins[0]:", "with a name"]),
    ("unknown-plugin", one_plugin("  - name: tdm\n"),
     ["tiers[0].plugins[1]: unknown plugin 'tdm'",
      "known: binpack, capacity, conformance, drf, gang, nodeorder, overcommit, predicates, priority, proportion"]),
    ("unknown-switch", one_plugin("  - name: gang\n    enablePreemption: false\n"),
     ["tiers[0].plugins[1] (gang): unknown field 'enablePreemption'", "enable switch"]),
    ("non-bool-switch", one_plugin("  - name: gang\n    enablePreemptable: no-thanks\n"),
     ["tiers[0].plugins[1] (gang).enablePreemptable: 'no-thanks' is not true or false"]),
    ("quoted-bool-switch", one_plugin('  - name: drf\n    enableJobOrder: "false"\n'),
     ["tiers[0].plugins[1] (drf).enableJobOrder: 'false' is not true or false"]),
    ("arguments-not-a-mapping", one_plugin("  - name: binpack\n    arguments: [binpack.weight]\n"),
     ["tiers[0].plugins[1] (binpack).arguments:", "expected a mapping"]),
    ("argument-not-a-scalar", one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: [1, 2]\n"),
     ["tiers[0].plugins[1] (binpack).arguments.binpack.weight:", "not a scalar"]),
    ("unknown-binpack-argument", one_plugin("  - name: binpack\n    arguments:\n      binpack.wieght: 2\n"),
     ["tiers[0].plugins[1] (binpack).arguments:", "unknown argument 'binpack.wieght' for plugin binpack",
      "binpack.weight", "binpack.resources.<name>"]),
    ("unknown-nodeorder-argument", one_plugin("  - name: nodeorder\n    arguments:\n      leastrequested: 2\n"),
     ["(nodeorder).arguments:", "unknown argument 'leastrequested' for plugin nodeorder",
      "leastrequested.weight"]),
    ("unknown-predicates-argument", one_plugin("  - name: predicates\n    arguments:\n      predicate.Foo: true\n"),
     ["(predicates).arguments:", "unknown argument 'predicate.Foo' for plugin predicates",
      "predicate.NodeAffinityEnable"]),
    ("unknown-overcommit-argument", one_plugin("  - name: overcommit\n    arguments:\n      factor: 2\n"),
     ["(overcommit).arguments:", "unknown argument 'factor' for plugin overcommit", "overcommit-factor"]),
    ("argument-for-plugin-taking-none", one_plugin("  - name: gang\n    arguments:\n      minMember: 2\n"),
     ["tiers[0].plugins[1] (gang).arguments:", "unknown argument 'minMember' for plugin gang", "accepted: none"]),
    ("argument-for-drf", one_plugin("  - name: drf\n    arguments:\n      drf.weight: 2\n"),
     ["(drf).arguments:", "unknown argument 'drf.weight' for plugin drf", "accepted: none"]),
    ("negative-binpack-weight", one_plugin("  - name: binpack\n    arguments:\n      binpack.weight: -1\n"),
     ["(binpack).arguments: binpack.weight: '-1'", "expected a number >= 0"]),
    ("nan-binpack-cpu", one_plugin("  - name: binpack\n    arguments:\n      binpack.cpu: .nan\n"),
     ["(binpack).arguments: binpack.cpu:", "expected a number >= 0"]),
    ("infinite-binpack-memory", one_plugin("  - name: binpack\n    arguments:\n      binpack.memory: .inf\n"),
     ["(binpack).arguments: binpack.memory:", "expected a number >= 0"]),
    ("text-nodeorder-weight", one_plugin("  - name: nodeorder\n    arguments:\n      mostrequested.weight: lots\n"),
     ["(nodeorder).arguments: mostrequested.weight: 'lots'", "expected a number >= 0"]),
    ("negative-no-effect-weight", one_plugin("  - name: nodeorder\n    arguments:\n      podaffinity.weight: -2\n"),
     ["(nodeorder).arguments: podaffinity.weight: '-2'", "expected a number >= 0"]),
    ("text-overcommit-factor", one_plugin("  - name: overcommit\n    arguments:\n      overcommit-factor: abc\n"),
     ["(overcommit).arguments: overcommit-factor: 'abc'", "expected a number >= 1"]),
    ("overcommit-factor-below-one", one_plugin("  - name: overcommit\n    arguments:\n      overcommit-factor: 0.5\n"),
     ["(overcommit).arguments: overcommit-factor: '0.5'", "expected a number >= 1"]),
    ("maybe-node-affinity", one_plugin(
        "  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: maybe\n"),
     ["(predicates).arguments: predicate.NodeAffinityEnable: 'maybe'", "expected true or false"]),
    ("numeric-taint-switch", one_plugin(
        "  - name: predicates\n    arguments:\n      predicate.TaintTolerationEnable: 1\n"),
     ["(predicates).arguments: predicate.TaintTolerationEnable: '1'", "expected true or false"]),
    ("binpack-resource-not-listed", one_plugin(
        "  - name: binpack\n    arguments:\n      binpack.resources: nvidia.com/gpu\n"
        "      binpack.resources.example.com/fpga: 2\n"),
     ["(binpack).arguments: binpack.resources.example.com/fpga:", "'example.com/fpga' is not listed",
      "binpack.resources (nvidia.com/gpu)"]),
    ("binpack-resource-without-list", one_plugin(
        "  - name: binpack\n    arguments:\n      binpack.resources.nvidia.com/gpu: 2\n"),
     ["binpack.resources.nvidia.com/gpu:", "'nvidia.com/gpu' is not listed", "(empty)"]),
    ("binpack-resource-bad-weight", one_plugin(
        "  - name: binpack\n    arguments:\n      binpack.resources: nvidia.com/gpu\n"
        "      binpack.resources.nvidia.com/gpu: heavy\n"),
     ["(binpack).arguments: binpack.resources.nvidia.com/gpu: 'heavy'", "expected a number >= 0"]),
    ("plugin-twice-in-a-tier", one_plugin("  - name: gang\n  - name: gang\n"),
     ["tiers[0]: plugin 'gang' appears twice"]),
    ("plugin-twice-across-tiers", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
     "- plugins:\n  - name: drf\n  - name: gang\n", ["tiers[1]: plugin 'gang' appears twice"]),
    ("drf-hierarchy-beside-proportion", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n'
     "  - name: drf\n    enableHierarchy: true\n",
     ["tiers[0]: drf with enableHierarchy: true cannot share a tier with proportion", "another tier"]),
    ("configurations-unknown-action", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
     "configurations:\n- name: shuffle\n  arguments: {x: 1}\n",
     ["configurations[0]: unknown action 'shuffle'", "known: allocate, backfill, enqueue, preempt, reclaim"]),
    ("configurations-unknown-argument", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
     "configurations:\n- name: enqueue\n  arguments: {overcommit-factor: 1.2}\n"
     "- name: allocate\n  arguments: {overcommitFactor: 2}\n",
     ["configurations[1] (allocate).arguments: unknown argument 'overcommitFactor'",
      "accepted: enablePredicateErrorCache, predicateErrorCacheEnable"]),
    ("configurations-argument-for-action-taking-none", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
     "configurations:\n- name: backfill\n  arguments: {speed: 2}\n",
     ["configurations[0] (backfill).arguments: unknown argument 'speed'", "accepted: none"]),
    ("configurations-entry-without-name", 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
     "configurations:\n- arguments: {overcommit-factor: 1.2}\n",
     ["configurations[0]:", "with a name"]),
    # Action arguments are checked when the conf is loaded (module docstring), values included:
    # a factor that is not a number must not load silently.
    ("configurations-text-overcommit-factor", 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'
     "configurations:\n- name: enqueue\n  arguments: {overcommit-factor: abc}\n",
     ["configurations[0] (enqueue).arguments", "overcommit-factor", "'abc'"]),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[i for i, _, _ in BAD])
def test_malformed_conf_is_one_line_naming_the_entry(text: str, expected: list[str]) -> None:
    with pytest.raises(ConfError) as info:
        parse_conf(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("scheduler conf: ")
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_every_plugin_refuses_an_unknown_argument(plugin: str) -> None:
    text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n    arguments:\n      no-such-thing: 1\n'
    with pytest.raises(ConfError, match=rf"\({plugin}\)\.arguments: unknown argument 'no-such-thing' for plugin {plugin}"):
        parse_conf(text)


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_every_plugin_loads_with_no_arguments(plugin: str) -> None:
    c = parse_conf(f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n')
    assert names(c.tiers[0]) == [plugin] and c.build().tiers[0][0].name == plugin


def test_conf_error_is_a_value_error() -> None:
    assert issubclass(ConfError, ValueError)


# -- load_conf ----------------------------------------------------------------------------


def test_load_conf_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(FULL, encoding="utf-8")
    assert load_conf(str(path)) == parse_conf(FULL)


def test_load_conf_with_a_missing_file_names_the_flag_and_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.conf"
    with pytest.raises(ConfError) as info:
        load_conf(str(path))
    message = str(info.value)
    assert message.startswith("--scheduler-conf: ") and str(path) in message and "No such file" in message


def test_load_conf_reports_a_bad_file_by_entry(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text('actions: "enqueue, dance"\ntiers:\n- plugins:\n  - name: gang\n', encoding="utf-8")
    with pytest.raises(ConfError, match="unknown action 'dance'"):
        load_conf(str(path))
