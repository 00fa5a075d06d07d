"""Ported from Volcano release-1.14 ``pkg/scheduler/actions/allocate/allocate_test.go`` and ``allocate_shard_test.go``.

``TestAllocate``, ``TestFareShareAllocate`` and ``TestAllocateWithShard``: every case, with
the Go tests' tiers and switches. The network-topology, SubGroup, DRA and PVC tests of
allocate_test.go are listed as not portable in the README.
"""

from __future__ import annotations

import pytest

from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

PODS10 = scalar("pods", "10")

TIERS = [
    [
        Plugin("gang", ("enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving")),
        Plugin("drf", ("enablePreemptable", "enableJobOrder")),
        Plugin("proportion", ("enableQueueOrder", "enableReclaimable", "enabledAllocatable")),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("nodeorder", ("enableNodeOrder",)),
    ]
]

CASES = [
    Case(
        name="prepredicate failed: node selector does not match",
        podgroups=[build_pod_group("pg1", "c1", "c1", 1, None, PG_INQUEUE)],
        pods=[
            build_pod(
                "c1",
                "p1",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "master"},
                {"nodeRole": "master"},
            ),
            build_pod(
                "c1",
                "p2",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "worker"},
                {"nodeRole": "worker"},
            ),
        ],
        nodes=[build_node("n1", rl("2", "4Gi", PODS10), {"nodeRole": "worker"})],
        queues=[build_queue("c1", 1, None)],
        expect_bind_map={"c1/p2": "n1"},
        expect_binds_num=1,
    ),
    Case(
        name="prepredicate failed and tasks are not used up, continue on until min member meet",
        podgroups=[build_pod_group("pg1", "c1", "c1", 2, {"master": 1, "worker": 1}, PG_INQUEUE)],
        pods=[
            build_pod(
                "c1",
                "p0",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "master"},
                {"nodeRole": "master"},
            ),
            build_pod(
                "c1",
                "p1",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "master"},
                {"nodeRole": "master"},
            ),
            build_pod(
                "c1",
                "p2",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "worker"},
                {"nodeRole": "worker"},
            ),
            build_pod(
                "c1",
                "p3",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "worker"},
                {"nodeRole": "worker"},
            ),
        ],
        nodes=[
            build_node("n1", rl("1", "2Gi", PODS10), {"nodeRole": "master"}),
            build_node("n2", rl("1", "2Gi", PODS10), {"nodeRole": "worker"}),
        ],
        queues=[build_queue("c1", 1, None)],
        expect_bind_map={"c1/p0": "n1", "c1/p2": "n2"},
        expect_binds_num=2,
    ),
    Case(
        name="master's min member can not be allocated, break from allocating",
        podgroups=[build_pod_group("pg1", "c1", "c1", 2, {"master": 2, "worker": 0}, PG_INQUEUE)],
        pods=[
            build_pod(
                "c1",
                "p0",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "master"},
                {"nodeRole": "master"},
            ),
            build_pod(
                "c1",
                "p1",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "master"},
                {"nodeRole": "master"},
            ),
            build_pod(
                "c1",
                "p2",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "worker"},
                {"nodeRole": "worker"},
            ),
            build_pod(
                "c1",
                "p3",
                "",
                PENDING,
                rl("1", "1G"),
                "pg1",
                {"volcano.sh/task-spec": "worker"},
                {"nodeRole": "worker"},
            ),
        ],
        nodes=[
            build_node("n1", rl("1", "2Gi", PODS10), {"nodeRole": "master"}),
            build_node("n2", rl("2", "2Gi", PODS10), {"nodeRole": "worker"}),
        ],
        queues=[build_queue("c1", 1, None)],
        expect_bind_map={},
        expect_binds_num=0,
    ),
    Case(
        name="one Job with two Pods on one node",
        podgroups=[build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE)],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1"),
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg1"),
        ],
        nodes=[build_node("n1", rl("2", "4Gi", PODS10))],
        queues=[build_queue("c1", 1, None)],
        expect_bind_map={"c1/p1": "n1", "c1/p2": "n1"},
        expect_binds_num=2,
    ),
    Case(
        name="two Jobs on one node",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE),
            build_pod_group("pg2", "c2", "c2", 0, None, PG_INQUEUE),
        ],
        pods=[
            build_pod("c1", "pg1-p-1", "", PENDING, rl("1", "1G"), "pg1"),
            build_pod("c1", "pg1-p-2", "", PENDING, rl("1", "1G"), "pg1"),
            build_pod("c2", "pg2-p-1", "", PENDING, rl("1", "1G"), "pg2"),
            build_pod("c2", "pg2-p-2", "", PENDING, rl("1", "1G"), "pg2"),
        ],
        nodes=[build_node("n1", rl("2", "4G", PODS10))],
        queues=[build_queue("c1", 1, None), build_queue("c2", 1, None)],
        expect_bind_map={"c2/pg2-p-1": "n1", "c1/pg1-p-1": "n1"},
        expect_binds_num=2,
    ),
    Case(
        name="high priority queue should not block others",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, PG_INQUEUE),
            build_pod_group("pg2", "c1", "c2", 0, None, PG_INQUEUE),
        ],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("3", "1G"), "pg1"),
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg2"),
        ],
        nodes=[build_node("n1", rl("2", "4G", PODS10))],
        queues=[build_queue("c1", 1, None), build_queue("c2", 1, None)],
        expect_bind_map={"c1/p2": "n1"},
        expect_binds_num=1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_allocate(case: Case) -> None:
    """allocate_test.go TestAllocate."""
    run_case(case, TIERS, ["allocate"])


FAIR_SHARE_TIERS = [
    [
        Plugin("drf", ("enablePreemptable", "enableJobOrder")),
        Plugin("proportion", ("enableQueueOrder", "enableReclaimable"), off=("enabledAllocatable",)),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("nodeorder", ("enableNodeOrder",)),
    ]
]

FAIR_SHARE_CASES = [
    Case(
        name="queue with low DRF share value has high priority, should allocate first",
        podgroups=[
            build_pod_group("pg-small-1", "ns-1", "q-1", 0, None, "Running"),
            build_pod_group("pg-large-1", "ns-1", "q-1", 0, None, "Inqueue"),
            build_pod_group("pg-large-2", "ns-1", "q-2", 0, None, "Inqueue"),
        ],
        pods=[  # allocate order: q-2/pg-large-2, q-1/pg-large-1
            build_pod("ns-1", "pod-small-1", "node-1", RUNNING, rl("1", "1G"), "pg-small-1", {}, {}),
            build_pod("ns-1", "pod-large-1", "", PENDING, rl("2", "2G"), "pg-large-1", {}, {}),
            build_pod("ns-1", "pod-large-2", "", PENDING, rl("3", "2G"), "pg-large-2", {}, {}),
        ],
        nodes=[
            build_node("node-1", rl("5", "5G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q-1", 1, None),
            build_queue("q-2", 1, None),
        ],
        expect_bind_map={
            "ns-1/pod-large-2": "node-1",
        },
        expect_binds_num=1,
    ),
    Case(
        name="queue's DRF share value will be updated and its priority will change before it is put back into the priority queue",
        podgroups=[
            build_pod_group("pg-small-1", "ns-1", "q-1", 0, None, "Running"),
            build_pod_group("pg-large-1", "ns-1", "q-1", 0, None, "Inqueue"),
            build_pod_group("pg-small-2", "ns-1", "q-2", 0, None, "Inqueue"),
            build_pod_group("pg-large-2", "ns-1", "q-2", 0, None, "Inqueue"),
        ],
        pods=[  # allocate order: q-2/pg-large-2, q-1/pg-large-1, q-2/pg-small-2
            build_pod("ns-1", "pod-small-1", "node-1", RUNNING, rl("1", "1G"), "pg-small-1", {}, {}),
            build_pod("ns-1", "pod-large-1", "", PENDING, rl("2", "2G"), "pg-large-1", {}, {}),
            build_pod("ns-1", "pod-large-2", "", PENDING, rl("2", "2G"), "pg-large-2", {}, {}),
            build_pod("ns-1", "pod-small-2", "", PENDING, rl("1", "1G"), "pg-small-2", {}, {}),
        ],
        nodes=[
            build_node("node-1", rl("5", "5G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q-1", 1, None),
            build_queue("q-2", 1, None),
        ],
        expect_bind_map={
            "ns-1/pod-large-1": "node-1",
            "ns-1/pod-large-2": "node-1",
        },
        expect_binds_num=2,
    ),
    Case(
        name="queue's one jobs has no pending tasks, should be put back to queues for next job",
        podgroups=[
            build_pod_group("pg-1", "ns-1", "q-1", 0, None, "Running"),
            build_pod_group("pg-2", "ns-1", "q-1", 0, None, "Inqueue"),
        ],
        pods=[
            build_pod("ns-1", "pod-1", "node-1", RUNNING, rl("1", "1G"), "pg-1", None, None),
            build_pod("ns-1", "pod-2", "", PENDING, rl("2", "2G"), "pg-2", None, None),
        ],
        nodes=[build_node("node-1", rl("5", "5G", scalar("pods", "10")), {})],
        queues=[build_queue("q-1", 1, None)],
        expect_bind_map={
            "ns-1/pod-2": "node-1",
        },
        expect_binds_num=1,
    ),
]


@pytest.mark.parametrize("case", FAIR_SHARE_CASES, ids=lambda c: c.name)
def test_fare_share_allocate(case: Case) -> None:
    """allocate_test.go TestFareShareAllocate."""
    run_case(case, FAIR_SHARE_TIERS, ["allocate"])


SHARD_TIERS = [
    [
        Plugin("gang", ("enableJobReady",)),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("nodeorder", ("enableNodeOrder",), {"leastrequested.weight": 1, "mostrequested.weight": 0}),
    ]
]

SHARD_CASES = [
    Case(
        name="hard sharding mode - allocate to node in shard",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Inqueue"),
        ],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}),
        ],
        # n1/n4 in shard, n3 has the most resources but is out of shard.
        # With leastAllocated scoring, n3 would have the highest score, but shard constraint prevents selection.
        nodes=[
            build_node("n1", rl("10", "20Gi", scalar("pods", "10")), {}),
            build_node("n2", rl("2", "4Gi", scalar("pods", "10")), {}),
            build_node("n3", rl("20", "40Gi", scalar("pods", "10")), {}),
            build_node("n4", rl("5", "10Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("c1", 1, None),
        ],
        expect_binds_num=1,
        expect_bind_map={
            "c1/p1": "n1",
        },
        sharding_mode="hard",
        nodes_in_shard=["n1", "n4"],
    ),
    Case(
        name="soft sharding mode - prefer node in shard",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Inqueue"),
        ],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}),
        ],
        # n1/n4 in shard, n3 has the most resources but is out of shard.
        # Soft mode still prefers shard nodes even though n3 (out of shard) has the highest score.
        nodes=[
            build_node("n1", rl("10", "20Gi", scalar("pods", "10")), {}),
            build_node("n2", rl("2", "4Gi", scalar("pods", "10")), {}),
            build_node("n3", rl("20", "40Gi", scalar("pods", "10")), {}),
            build_node("n4", rl("5", "10Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("c1", 1, None),
        ],
        expect_binds_num=1,
        expect_bind_map={
            "c1/p1": "n1",
        },
        sharding_mode="soft",
        nodes_in_shard=["n1", "n4"],
    ),
    Case(
        # Identical nodes, only one is in shard: soft sharding should still prefer the shard node.
        name="soft sharding mode - identical nodes prefer shard node",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Inqueue"),
        ],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}),
        ],
        nodes=[
            # n1 and n2 are identical in capacity and labels.
            build_node("n1", rl("10", "20Gi", scalar("pods", "10")), {}),
            build_node("n2", rl("10", "20Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("c1", 1, None),
        ],
        expect_binds_num=1,
        expect_bind_map={
            "c1/p1": "n1",
        },
        sharding_mode="soft",
        nodes_in_shard=["n1"],
    ),
]


@pytest.mark.parametrize("case", SHARD_CASES, ids=lambda c: c.name)
def test_allocate_with_shard(case: Case) -> None:
    """allocate_shard_test.go TestAllocateWithShard."""
    run_case(case, SHARD_TIERS, ["allocate"])
