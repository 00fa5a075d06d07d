"""The nodeorder plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano).

Scores are kube-scheduler's integers (0–100) times Volcano's weights, as Volcano's plugin
adds them up.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from cluster.sim.pools import TaintSpec
from tests.batch_scheduler.inputs import conf, session, task
from tests.batch_scheduler.plugins.common import GI, plugin, scores
from tests.builders import node

# -- nodeorder ----------------------------------------------------------------------------

SCORE_NODES = [node("empty"), node("half"), node("full")]  # 8 cpu, 32Gi each
SCORE_USED = {"half": {"cpu": 4000, "memory": 16 * GI}, "full": {"cpu": 7000, "memory": 31 * GI}}
ONLY = {
    "leastrequested.weight": 0,
    "mostrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "tainttoleration.weight": 0,
}
# After placing the pod (1 cpu, 1Gi), cpu 1/8, 5/8, 8/8 and memory 1/32, 17/32, 32/32 used:
# least requested per resource (free × 100 // capacity) cpu 87, 37, 0 and memory 96, 46, 0,
# averaged 50/50 with integer division; most requested cpu 12, 62, 100 and memory 3, 53, 100.
LEAST = [(87 + 96) * 50 // 100, (37 + 46) * 50 // 100, 0]
MOST = [(12 + 3) // 2, (62 + 53) // 2, 100]


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ({"leastrequested.weight": 1}, LEAST),
        ({"leastrequested.weight": 5}, [5 * x for x in LEAST]),
        ({"mostrequested.weight": 1}, MOST),
        ({"mostrequested.weight": 3}, [3 * x for x in MOST]),
    ],
)
def test_nodeorder_least_and_most_requested(weights: dict[str, int], expected: list[int]) -> None:
    ssn = session(
        conf([{"name": "nodeorder", "arguments": {**ONLY, **weights}}]), SCORE_NODES, [task("p")], used=SCORE_USED
    )
    assert scores(ssn, NodeOrderPlugin) == expected
    order = ["empty", "half", "full"] if "leastrequested.weight" in weights else ["full", "half", "empty"]
    assert [ssn.columns.names[i] for i in np.argsort(scores(ssn, NodeOrderPlugin))[::-1]] == order


def test_nodeorder_a_container_without_requests_counts_kube_schedulers_defaults() -> None:
    # No cpu and no memory request: least requested counts 100m and 200Mi (kube-scheduler's
    # non-zero defaults), so the node's figures still move the score; balanced allocation
    # gives a best-effort pod 0.
    args = {**ONLY, "leastrequested.weight": 1, "balancedresource.weight": 1}
    ssn = session(
        conf([{"name": "nodeorder", "arguments": args}]),
        [node("a", cpu=1, memory="1Gi")],
        [task("p", cpu=0, memory=0, containers=[{"name": "main"}])],
        used={"a": {"cpu": 500}},
    )
    # cpu (1000 − 600) × 100 // 1000 = 40, memory (1Gi − 200Mi) × 100 // 1Gi = 80: (40·50 + 80·50) // 100
    assert scores(ssn, NodeOrderPlugin) == [60]


def test_nodeorder_balanced_allocation_counts_gpus_the_pod_asks_for() -> None:
    nodes = [node("g", cpu=8, memory="32Gi", gpu=8)]
    args = {**ONLY, "balancedresource.weight": 1}
    ssn = session(
        conf([{"name": "nodeorder", "arguments": args}]),
        nodes,
        [task("cpu", cpu="4", memory="16Gi"), task("gpu", cpu="4", memory="16Gi", gpu=1)],
    )
    assert scores(ssn, NodeOrderPlugin, "cpu") == [100]  # 1/2, 1/2: no spread
    # 1/2, 1/2, 1/8: mean 3/8, std sqrt((2·(1/8)² + (1/4)²)/3) ≈ 0.1768
    assert scores(ssn, NodeOrderPlugin, "gpu") == [82]


def test_nodeorder_default_weights_are_volcanos() -> None:
    ssn = session(conf(["nodeorder"]), [node("a")], [task("p")])
    assert plugin(ssn, NodeOrderPlugin).args.weights == {
        "leastrequested.weight": 1,
        "mostrequested.weight": 0,
        "balancedresource.weight": 1,
        "nodeaffinity.weight": 2,
        "tainttoleration.weight": 3,
    }


@pytest.mark.parametrize(("value", "weight"), [("4", 4), ("0", 0), ("1.5", 2), ("3.0", 2)])
def test_nodeorder_a_weight_that_is_not_an_integer_keeps_the_default(value: str, weight: int) -> None:
    # Volcano's Arguments.GetInt keeps the default (with a warning) for a value that is no integer.
    ssn = session(conf([{"name": "nodeorder", "arguments": {"nodeaffinity.weight": value}}]), [node("a")], [task("p")])
    assert plugin(ssn, NodeOrderPlugin).args.weights["nodeaffinity.weight"] == weight


def test_nodeorder_all_weights_zero_scores_nothing() -> None:
    ssn = session(conf([{"name": "nodeorder", "arguments": ONLY}]), SCORE_NODES, [task("p")], used=SCORE_USED)
    assert scores(ssn, NodeOrderPlugin) == [0.0, 0.0, 0.0]


def test_nodeorder_prefers_nodes_without_untolerated_prefer_no_schedule_taints() -> None:
    # kube-scheduler's TaintToleration: untolerated PreferNoSchedule taints, normalised so the
    # node with the most scores 0 and one with none 100 (all 100 when no node has any).
    nodes = [
        node("clean"),
        node("soft", taints=[TaintSpec(key="spot", effect="PreferNoSchedule")]),
        node(
            "softer",
            taints=[TaintSpec(key="spot", effect="PreferNoSchedule"), TaintSpec(key="old", effect="PreferNoSchedule")],
        ),
    ]
    args = {**ONLY, "tainttoleration.weight": 2}
    ssn = session(
        conf([{"name": "nodeorder", "arguments": args}]),
        nodes,
        [task("p"), task("t", tolerations=[{"key": "spot", "operator": "Exists"}])],
    )
    assert scores(ssn, NodeOrderPlugin, "p") == [200, 100, 0]
    assert scores(ssn, NodeOrderPlugin, "t") == [200, 200, 0]


def test_nodeorder_taint_scores_are_normalised_over_the_nodes_the_task_may_go_to() -> None:
    # The node with two soft taints is ruled out by its selector: the one with one is the worst left.
    nodes = [
        node("clean", labels={"pool": "a"}),
        node("soft", labels={"pool": "a"}, taints=[TaintSpec(key="spot", effect="PreferNoSchedule")]),
        node(
            "softer",
            labels={"pool": "b"},
            taints=[TaintSpec(key="spot", effect="PreferNoSchedule"), TaintSpec(key="old", effect="PreferNoSchedule")],
        ),
    ]
    args: dict[str, Any] = {**ONLY, "tainttoleration.weight": 1}
    ssn = session(
        conf([{"name": "nodeorder", "arguments": args}, "predicates"]), nodes, [task("p", nodeSelector={"pool": "a"})]
    )
    assert scores(ssn, NodeOrderPlugin)[:2] == [100, 0]


def test_nodeorder_preferred_node_affinity_adds_the_matching_terms_weights() -> None:
    nodes = [node("a", labels={"zone": "a"}), node("b", labels={"zone": "b", "disk": "ssd"})]
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                },
                {"weight": 30, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
            ]
        }
    }
    ssn = session(
        conf([{"name": "nodeorder", "arguments": {**ONLY, "nodeaffinity.weight": 2}}]),
        nodes,
        [task("p", affinity=prefer)],
    )
    assert scores(ssn, NodeOrderPlugin) == [0, 2 * (10 + 30)]  # not normalised, as Volcano scores it
