"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/nodeorder/nodeorder_test.go``.

``TestNodeOrderPlugin``: the cases caldera can express, with Volcano's tiers (gang's job
ready, nodeorder with every weight written out, as the Go test does) — all seven, the
inter-pod affinity and topology spread preferences included.
``TestInitPlugin``: which scores the weights turn on, read from the plugin's weights and
checked through a session (caldera scores with plain functions, not kube-scheduler
plugin instances; image locality is not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from cluster.model.core import Node, Pod
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group,
    build_pod_with_affinity,
    build_pod_with_tolerations,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session, run_case

PODS10 = scalar("pods", "10")
WEIGHTS = (
    "leastrequested.weight",
    "mostrequested.weight",
    "balancedresource.weight",
    "nodeaffinity.weight",
    "tainttoleration.weight",
    "podaffinity.weight",
    "podtopologyspread.weight",
    "imagelocality.weight",
)


@dataclass
class NodeOrderCase:
    """``nodeOrderTestCase``: the common case and the weights (every one written out, 0 unless set)."""

    case: Case
    weights: dict[str, int] = field(default_factory=dict)

    def tiers(self) -> list[list[Plugin]]:
        arguments = {w: self.weights.get(w, 0) for w in WEIGHTS}
        return [[Plugin("gang", ("enableJobReady",)), Plugin("nodeorder", ("enableNodeOrder",), arguments)]]


def _one_pod(name: str, pod: Pod, nodes: list[Node], expect: str) -> Case:
    return Case(
        name=name,
        podgroups=[build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE)],
        pods=[pod],
        nodes=nodes,
        queues=[build_queue("c1", 1, None)],
        expect_bind_map={"c1/p1": expect},
        expect_binds_num=1,
    )


PREFER_ZONE1 = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone1"]}]},
            }
        ]
    }
}

CASES = [
    NodeOrderCase(
        _one_pod(
            "leastAllocated strategy",
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1"),
            [build_node("n1", rl("2", "4Gi", PODS10)), build_node("n2", rl("4", "8Gi", PODS10))],
            "n2",
        ),
        {"leastrequested.weight": 1, "mostrequested.weight": 0},
    ),
    NodeOrderCase(
        _one_pod(
            "mostAllocated strategy",
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1"),
            [build_node("n1", rl("2", "4Gi", PODS10)), build_node("n2", rl("4", "8Gi", PODS10))],
            "n1",
        ),
        {"leastrequested.weight": 0, "mostrequested.weight": 1},
    ),
    NodeOrderCase(
        _one_pod(
            "balanced allocation prefers balanced node",
            build_pod("c1", "p1", "", PENDING, rl("1", "1Gi"), "pg1"),
            [build_node("n1", rl("2", "2Gi", PODS10)), build_node("n2", rl("4", "2Gi", PODS10))],
            "n1",
        ),
        {"balancedresource.weight": 10},
    ),
    NodeOrderCase(
        _one_pod(
            "node affinity prefers labeled node",
            build_pod_with_affinity("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}, PREFER_ZONE1),
            [
                build_node("n1", rl("2", "4Gi", PODS10), {"zone": "zone1"}),
                build_node("n2", rl("2", "4Gi", PODS10), {"zone": "zone2"}),
            ],
            "n1",
        ),
        {"nodeaffinity.weight": 10},
    ),
    NodeOrderCase(
        _one_pod(
            "taint toleration prefers non-tainted node",
            build_pod_with_tolerations("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}, []),
            [
                build_node("n1", rl("2", "4Gi", PODS10)),
                build_node(
                    "n2",
                    rl("2", "4Gi", PODS10),
                    taints=[{"key": "key1", "value": "value1", "effect": "PreferNoSchedule"}],
                ),
            ],
            "n1",
        ),
        {"tainttoleration.weight": 10},
    ),
]


HOSTS = [build_node(f"n{i}", rl("2", "4Gi", PODS10), {"kubernetes.io/hostname": f"n{i}"}) for i in (1, 2, 3)]
NEAR_S1 = {
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"service": "s1"}},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}
SPREAD_FOO = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "foo"}},
    }
]
CASES += [
    NodeOrderCase(
        Case(
            name="inter-pod affinity prefers node with matching pod",
            podgroups=[build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE)],
            pods=[
                build_pod("c1", "p1", "n1", RUNNING, rl("1", "1G"), "pg1", {"service": "s1"}),
                build_pod("c1", "p-noise", "n3", RUNNING, rl("1", "1G"), "pg1", {"service": "s2"}),
                build_pod_with_affinity("c1", "p2", "", PENDING, rl("1", "1G"), "pg1", {}, {}, NEAR_S1),
            ],
            nodes=HOSTS,
            queues=[build_queue("c1", 1, None)],
            expect_bind_map={"c1/p2": "n1"},
            expect_binds_num=1,
        ),
        {"podaffinity.weight": 10},
    ),
    NodeOrderCase(
        Case(
            name="pod topology spread prefers node to reduce skew",
            podgroups=[build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE)],
            pods=[
                build_pod("c1", "p1", "n1", RUNNING, rl("1", "1G"), "pg1", {"app": "foo"}),
                build_pod("c1", "p2", "n1", RUNNING, rl("1", "1G"), "pg1", {"app": "foo"}),
                build_pod("c1", "p3", "n2", RUNNING, rl("1", "1G"), "pg1", {"app": "foo"}),
                build_pod(
                    "c1", "p4", "", PENDING, rl("1", "1G"), "pg1", {"app": "foo"}, topologySpreadConstraints=SPREAD_FOO
                ),
            ],
            nodes=[build_node(f"n{i}", rl("4", "4Gi", PODS10), {"zone": f"zone{i}"}) for i in (1, 2, 3)],
            queues=[build_queue("c1", 1, None)],
            expect_bind_map={"c1/p4": "n3"},  # zone3 is empty, zone2 holds one, zone1 two
            expect_binds_num=1,
        ),
        {"podtopologyspread.weight": 10},
    ),
]


@pytest.mark.parametrize("test", CASES, ids=lambda c: c.case.name)
def test_node_order_plugin(test: NodeOrderCase) -> None:
    """nodeorder_test.go TestNodeOrderPlugin."""
    run_case(test.case, test.tiers(), ["allocate"])


def _init_session(arguments: dict[str, int] | None) -> tuple[NodeOrderPlugin, list[float]]:
    case = Case(
        name="init",
        podgroups=[build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE)],
        pods=[build_pod_with_affinity("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}, PREFER_ZONE1)],
        nodes=[
            build_node("n1", rl("2", "4Gi", PODS10), {"zone": "zone1"}),
            build_node("n2", rl("4", "4Gi", PODS10), taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
        ],
        queues=[build_queue("c1", 1, None)],
    )
    ssn = open_session(case, [[Plugin("nodeorder", ("enableNodeOrder",), arguments or {})]], ["allocate"])
    [plugin] = [p for tier in ssn.tiers.tiers for p in tier]
    assert isinstance(plugin, NodeOrderPlugin)
    return plugin, [float(s) for s in plugin.score(ssn.columns, ssn.placing(ssn.tasks["c1-p1"]), None)]


def test_init_plugin_default_weights() -> None:
    """nodeorder_test.go TestInitPlugin "default weights": least requested, balanced allocation,
    node affinity and taint toleration score, most requested does not."""
    plugin, scores = _init_session(None)
    assert plugin.args.weights == {
        "leastrequested.weight": 1,
        "mostrequested.weight": 0,
        "balancedresource.weight": 1,
        "nodeaffinity.weight": 2,
        "tainttoleration.weight": 3,
    }
    # n1 (2 cpu, 4Gi, zone1, clean): least (50·50 + 76·50) // 100 = 63, balanced int((1 − |0.5 − 0.2328|/2)·100) = 86,
    # affinity 100·2, taint 100·3; n2 (4 cpu, 4Gi, tainted): least (75 + 76) // 2 = 75, balanced 99, 0, 0.
    assert scores == [63 + 86 + 200 + 300, 75 + 99]


def test_init_plugin_all_weights_zero() -> None:
    """nodeorder_test.go TestInitPlugin "all weights zero": no score at all."""
    plugin, scores = _init_session({w: 0 for w in WEIGHTS})
    assert not any(plugin.args.weights.values())
    assert scores == [0.0, 0.0]
