"""Ported from Volcano release-1.14 ``pkg/scheduler/actions/reclaim/reclaim_test.go``.

``TestReclaim`` and ``reclaim_shard_test.go`` ``TestReclaimWithShard``: every case, with Volcano's tier (conformance, gang, proportion, capacity,
priority with the switches the Go test turns on), each case keeping only the plugins its
Go case registers, as Volcano's session skips the others.
"""

from __future__ import annotations

import pytest

from tests.volcano.builders import (
    PENDING,
    PREEMPTABLE,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group_with_prio,
    build_pod_with_preemption_policy,
    build_priority_class,
    build_priority_class_with_preemption_policy,
    build_queue,
    build_queue_with_priority_and_resources_quantity,
    build_queue_with_state,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

HIGH_PRIO = build_priority_class("high-priority", 100000)
LOW_PRIO = build_priority_class("low-priority", 10)

TIERS = [
    [
        Plugin("conformance", ("enableReclaimable",)),
        Plugin("gang", ("enableReclaimable", "enableJobStarving")),
        Plugin("proportion", ("enableReclaimable", "enableQueueOrder", "enablePreemptive")),
        Plugin("capacity", ("enableReclaimable", "enableQueueOrder", "enablePreemptive")),
        Plugin("priority", ("enableReclaimable", "enableJobOrder", "enableTaskOrder")),
    ]
]

CASES = [
    Case(
        name="Two Queue with one Queue overusing resource, should reclaim",
        plugins=["conformance", "gang", "proportion"],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee3", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("3", "3Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue("q2", 1, None),
        ],
        expect_evict_num=1,
        expect_evicted=["c1/preemptee2"],  # let pod2 in the middle when sort tasks be preemptable and will not disturb
    ),
    Case(
        name="sort reclaimees when reclaiming from overusing queue",
        plugins=["conformance", "gang", "priority", "proportion"],
        priority_classes=[
            build_priority_class("low-priority", 100),
            build_priority_class("mid-priority", 500),
            build_priority_class("high-priority", 1000),
        ],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "mid-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "low-priority"),  # reclaimed first
            build_pod_group_with_prio("pg3", "c1", "q3", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1-1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee1-2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2-1", "n1", RUNNING, rl("1", "1G"), "pg2", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2-2", "n1", RUNNING, rl("1", "1G"), "pg2", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg3", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("4", "4Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue("q2", 1, None),
            build_queue("q3", 1, None),
        ],
        expect_evict_num=1,
        expect_evicted=["c1/preemptee2-1"],  # low priority job's preemptable pod is evicted
    ),
    Case(
        name="sort reclaimees when reclaiming from overusing queues with different queue priority",
        plugins=["conformance", "gang", "proportion"],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "mid-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "mid-priority"),
            build_pod_group_with_prio("pg3", "c1", "q3", 1, None, "Inqueue", "mid-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1-1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee1-2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptee2-1", "n1", RUNNING, rl("1", "1G"), "pg2", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2-2", "n1", RUNNING, rl("1", "1G"), "pg2", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg3", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("4", "4Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue_with_priority_and_resources_quantity("q1", 5, None, None),
            build_queue_with_priority_and_resources_quantity("q2", 10, None, None),  # highest queue priority
            build_queue_with_priority_and_resources_quantity("q3", 1, None, None),
        ],
        expect_evict_num=1,
        expect_evicted=["c1/preemptee1-1"],  # low queue priority job's preemptable pod is evicted
    ),
    Case(
        # case about #3642
        name="can not reclaim resources when task preemption policy is never",
        plugins=["conformance", "gang", "proportion"],
        priority_classes=[
            build_priority_class("low-priority", 100),
            build_priority_class_with_preemption_policy("high-priority", 1000, "Never"),
        ],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 0, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 0, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod_with_preemption_policy("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}, "Never"),
        ],
        nodes=[
            build_node("n1", rl("1", "1Gi", scalar("pods", "1")), {}),
        ],
        queues=[
            build_queue("q1", 5, None),
            build_queue("q2", 10, None),
        ],
        expect_evict_num=0,
        expect_evicted=[],  # no victims should be reclaimed
    ),
    Case(
        name="can not reclaim resources when queue is not open(proportion plugin)",
        plugins=["conformance", "gang", "proportion"],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Running", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee3", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("3", "3Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue_with_state("q2", 1, None, "Closed"),
        ],
        expect_evict_num=0,
        expect_evicted=[],
    ),
    Case(
        name="can not reclaim resources when queue is not open(capacity plugin)",
        plugins=["conformance", "gang", "capacity"],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Running", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee3", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("3", "3Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue_with_state("q2", 1, None, "Closed"),
        ],
        expect_evict_num=0,
        expect_evicted=[],
    ),
    Case(
        name="Node available resources should be included in reclaimed resources",
        plugins=["conformance", "gang", "priority", "proportion"],
        priority_classes=[
            build_priority_class("low-priority", 100),
            build_priority_class("mid-priority", 500),
            build_priority_class("high-priority", 1000),
        ],
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 0, None, "Running", "mid-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 0, None, "Running", "mid-priority"),
            build_pod_group_with_prio("pg3", "c1", "q3", 1, None, "Inqueue", "mid-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1-1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2-1", "n1", RUNNING, rl("1", "1G"), "pg2", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("2", "1G"), "pg3", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("10", "2Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue_with_priority_and_resources_quantity("q1", 1, None, None),
            build_queue_with_priority_and_resources_quantity("q2", 2, None, None),
            build_queue("q3", 3, None),
        ],
        expect_evict_num=1,
        # cpu resource is enough in node, memory resource is not enough, need 1G memory to schedule preemptor1
        expect_evicted=["c1/preemptee1-1"],
    ),
    Case(
        name="Reclaim succeeds for second task when first task has PreemptionPolicy=Never",
        plugins=["conformance", "gang", "proportion", "priority"],
        priority_classes=[
            build_priority_class("low-priority", 100),
            build_priority_class_with_preemption_policy("high-priority-no-preempt", 1000, "Never"),
            build_priority_class("high-priority-can-preempt", 900),
        ],
        podgroups=[
            build_pod_group_with_prio("pg-victim", "c1", "q1", 1, None, "Running", "low-priority"),
            build_pod_group_with_prio("pg-preemptor", "c1", "q2", 2, None, "Inqueue", "high-priority-no-preempt"),
        ],
        pods=[
            build_pod("c1", "victim-pod-no", "n1", RUNNING, rl("1", "1G"), "pg-victim", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "victim-pod", "n1", RUNNING, rl("1", "1G"), "pg-victim", {PREEMPTABLE: "true"}, {}),
            build_pod_with_preemption_policy(
                "c1", "preemptor-task1-non-preemptable", "", PENDING, rl("1", "1G"), "pg-preemptor", {}, {}, "Never"
            ),
            build_pod("c1", "preemptor-task2-preemptable", "", PENDING, rl("1", "1G"), "pg-preemptor", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("2", "2G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue("q2", 1, None),
        ],
        expect_evict_num=1,
        expect_evicted=["c1/victim-pod"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reclaim(case: Case) -> None:
    """reclaim_test.go TestReclaim."""
    run_case(case, TIERS, ["reclaim"])


SHARD_TIERS = [
    [
        Plugin("conformance", ("enableReclaimable",)),
        Plugin("gang", ("enableReclaimable", "enableJobStarving")),
        Plugin("proportion", ("enableReclaimable", "enableQueueOrder", "enablePreemptive")),
        Plugin("priority", ("enableReclaimable", "enableJobOrder", "enableTaskOrder")),
        Plugin("predicates", ("enablePredicate",)),
    ]
]

SHARD_CASES = [
    Case(
        name="hard sharding mode - only reclaim from nodes in shard",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            # Preemptable pod on n1 (in shard) - node is full
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("2", "2Gi"), "pg1", {PREEMPTABLE: "true"}, {}),
            # Preemptable pod on n2 (out of shard) to highlight hard mode only touches shard nodes
            build_pod("c1", "preemptee2", "n2", RUNNING, rl("2", "2Gi"), "pg1", {PREEMPTABLE: "true"}, {}),
            # High-priority pending pod.
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("2", "2Gi", scalar("pods", "10")), {}),
            build_node("n2", rl("2", "2Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue("q2", 1, None),
        ],
        priority_classes=[HIGH_PRIO, LOW_PRIO],
        expect_evict_num=1,
        # In hard mode, reclaim should only evict from nodes in shard (n1),
        # even though there is another preemptable pod on n2 (out of shard).
        expect_evicted=["c1/preemptee1"],
        sharding_mode="hard",
        nodes_in_shard=["n1"],
    ),
    Case(
        name="soft sharding mode - prefer reclaiming from node in shard",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q2", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            # Preemptable pod on n1 (in shard) - node is full
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("2", "2Gi"), "pg1", {PREEMPTABLE: "true"}, {}),
            # Preemptable pod on n2 (out of shard) to highlight soft mode prefers shard nodes
            build_pod("c1", "preemptee2", "n2", RUNNING, rl("2", "2Gi"), "pg1", {PREEMPTABLE: "true"}, {}),
            # High-priority pending pod.
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            # n1 and n2 are identical in capacity and labels.
            build_node("n1", rl("2", "2Gi", scalar("pods", "10")), {}),
            build_node("n2", rl("2", "2Gi", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue("q2", 1, None),
        ],
        priority_classes=[HIGH_PRIO, LOW_PRIO],
        expect_evict_num=1,
        # In soft mode, reclaim should prefer evicting from nodes in shard (n1),
        # even though n1 and n2 are identical and both have preemptable pods.
        expect_evicted=["c1/preemptee1"],
        sharding_mode="soft",
        nodes_in_shard=["n1"],
    ),
]


@pytest.mark.parametrize("case", SHARD_CASES, ids=lambda c: c.name)
def test_reclaim_with_shard(case: Case) -> None:
    """reclaim_shard_test.go TestReclaimWithShard."""
    run_case(case, SHARD_TIERS, ["reclaim"])
