"""Ported from Volcano release-1.14 ``pkg/scheduler/actions/preempt/preempt_test.go``.

``TestPreempt`` and ``preempt_shard_test.go`` ``TestPreemptWithShard``: every case, with Volcano's tiers (conformance, gang, priority, proportion
with the switches the Go test turns on) and ``enableTopologyAwarePreemption: false``.
``TestTopologyAwarePreempt`` (kube-scheduler style candidate selection) is listed as not
portable in the README: caldera runs Volcano's normal preemption only.
"""

from __future__ import annotations

import pytest

from tests.volcano.builders import (
    PENDING,
    PREEMPTABLE,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group,
    build_pod_group_with_prio,
    build_pod_with_preemption_policy,
    build_pod_with_priority,
    build_priority_class,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

HIGH_PRIO = build_priority_class("high-priority", 100000)
LOW_PRIO = build_priority_class("low-priority", 10)

TIERS = [
    [
        Plugin("conformance", ("enablePreemptable",)),
        Plugin("gang", ("enablePreemptable", "enableJobPipelined", "enableJobStarving")),
        Plugin(
            "priority",
            ("enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        ),
        Plugin("proportion", ("enabledOverused", "enabledAllocatable", "enableQueueOrder")),
    ]
]
CONFIGURATIONS = [{"name": "preempt", "arguments": {"enableTopologyAwarePreemption": False}}]

CASES = [
    Case(
        name="do not preempt if there are enough idle resources",
        podgroups=[
            build_pod_group("pg1", "c1", "q1", 3, {"": 3}, "Inqueue"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg1", {}, {}),
        ],
        # If there are enough idle resources on the node, then there is no need to preempt anything.
        nodes=[
            build_node("n1", rl("10", "10G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        expect_evict_num=0,
    ),
    Case(
        name="do not preempt if job is pipelined",
        podgroups=[
            build_pod_group("pg1", "c1", "q1", 1, {"": 2}, "Inqueue"),
            build_pod_group("pg2", "c1", "q1", 1, {"": 2}, "Inqueue"),
        ],
        # Both pg1 and pg2 jobs are pipelined, because enough pods are already running.
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "preemptee3", "n1", RUNNING, rl("1", "1G"), "pg2", {}, {}),
            build_pod("c1", "preemptor2", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        # All resources on the node will be in use.
        nodes=[
            build_node("n1", rl("3", "3G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        expect_evict_num=0,
    ),
    Case(
        name="preempt one task of different job to fit both jobs on one node",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, {"": 2}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 2}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
            build_pod("c1", "preemptor2", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("2", "2G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        expect_evicted=["c1/preemptee1"],
        expect_evict_num=1,
    ),
    Case(
        name="preempt enough tasks to fit large task of different job",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, {"": 3}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        # There are 3 cpus and 3G of memory idle and 3 tasks running each consuming 1 cpu and 1G of memory.
        # Big task requiring 5 cpus and 5G of memory should preempt 2 of 3 running tasks to fit into the node.
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee3", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("5", "5G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("6", "6G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        expect_evicted=["c1/preemptee2", "c1/preemptee1"],
        expect_evict_num=2,
    ),
    Case(
        # case about #3161
        name="preempt low priority job in same queue",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 0, {}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("3", "3G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("3", "3G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("12", "12G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, rl("4", "4G")),
        ],
        expect_evicted=["c1/preemptee1"],
        expect_evict_num=1,
    ),
    Case(
        # case about #3161
        name="preempt low priority job in same queue: allocatable and has enough resource, don't preempt",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, {}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("3", "3G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("3", "3G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("12", "12G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, rl("6", "6G")),
        ],
        expect_evict_num=0,
    ),
    Case(
        # case about issue #2232
        name="preempt low priority job in same queue but not pod with preemptable=false or higher priority",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, {}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "false"}, {}),
            build_pod("c1", "preemptee2", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod_with_priority(
                "c1", "preemptee3", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}, HIGH_PRIO.value
            ),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("12", "12G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, rl("3", "3G")),
        ],
        expect_evicted=["c1/preemptee2"],
        expect_evict_num=1,
    ),
    Case(
        # case about #3335
        name="unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 0, {}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, {}, "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("3", "3G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("12", "12G", scalar("pods", "1")), {}),
        ],
        queues=[
            build_queue("q1", 1, rl("6", "6G")),
        ],
        expect_evicted=["c1/preemptee1"],
        expect_evict_num=1,
    ),
    Case(
        # case about #3335
        name="BestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 0, {}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, {}, "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, {}, "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("12", "12G", scalar("pods", "1")), {}),
        ],
        queues=[
            build_queue("q1", 1, rl("6", "6G")),
        ],
        expect_evicted=["c1/preemptee1"],
        expect_evict_num=1,
    ),
    Case(
        # case about #3642
        name="can not preempt resources when task preemption policy is never",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 0, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod_with_preemption_policy("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}, "Never"),
        ],
        nodes=[
            build_node("n1", rl("1", "1Gi", scalar("pods", "1")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        expect_evict_num=0,
        expect_evicted=[],  # no victims should be reclaimed
    ),
    Case(
        # Regression test for the preemptorTasks overwrite issue in multi-queue preemption.
        #
        # Instead of:
        #    intraJobPreemptors := util.NewPriorityQueue(ssn.TaskOrderFn)
        # We have used:
        #    preemptorTasks[job.UID] = util.NewPriorityQueue(ssn.TaskOrderFn)
        # in the "Preemption between Task within Job" loop, which caused preemptorTasks to be overwritten/drained across queues.
        # This test verifies that the preemptorTasks for pg3 (high-priority preemptor in q2) is not overwritten/drained when processing q1, so that pg3 can successfully preempt pg2.
        #
        # Scenario:
        # - q1 has a running non-starving job (pg1) and no preemptor.
        # - q2 has a low-priority running victim (pg2) and a high-priority starving
        #   preemptor job (pg3).
        # - underRequest is shared across queues.
        #
        # Buggy behavior:
        # - While processing q1, the intra-job pass overwrites/drains
        #   preemptorTasks[pg3], so q2 later sees no preemptor and skips eviction.
        #
        # Why this was flaky:
        # - Queue iteration order came from a Go map, so the run usually passed when
        #   q2 was visited first, but failed when q1 was visited first.
        name="multi-queue: preemptorTasks must not be overwritten by intra-job preemption of another queue",
        podgroups=[
            build_pod_group("pg1", "c1", "q1", 1, {"": 1}, "Inqueue"),
            build_pod_group_with_prio("pg2", "c1", "q2", 0, {}, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg3", "c1", "q2", 1, {"": 1}, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "q1-runner1", "n1", RUNNING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "q2-preemptee1", "n1", RUNNING, rl("1", "1G"), "pg2", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "q2-preemptor1", "", PENDING, rl("1", "1G"), "pg3", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("2", "2G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
            build_queue("q2", 1, rl("4", "4G")),
        ],
        expect_evicted=["c1/q2-preemptee1"],
        expect_evict_num=1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preempt(case: Case) -> None:
    """preempt_test.go TestPreempt."""
    case.priority_classes = [HIGH_PRIO, LOW_PRIO]
    run_case(case, TIERS, ["preempt"], CONFIGURATIONS)


SHARD_TIERS = [
    [
        Plugin("conformance", ("enablePreemptable",)),
        Plugin("gang", ("enablePreemptable", "enableJobStarving")),
        Plugin("priority", ("enablePreemptable", "enableJobStarving")),
        Plugin("predicates", ("enablePredicate",)),
    ]
]

SHARD_CASES = [
    Case(
        name="hard sharding mode - preempt from node in shard",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2", "n2", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("1", "1G", scalar("pods", "10")), {}),
            build_node("n2", rl("1", "1G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        priority_classes=[HIGH_PRIO, LOW_PRIO],
        expect_evict_num=1,
        expect_evicted=["c1/preemptee1"],
        sharding_mode="hard",
        nodes_in_shard=["n1"],
    ),
    Case(
        name="soft sharding mode - prefer preempting from node in shard",
        podgroups=[
            build_pod_group_with_prio("pg1", "c1", "q1", 1, None, "Inqueue", "low-priority"),
            build_pod_group_with_prio("pg2", "c1", "q1", 1, None, "Inqueue", "high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptee2", "n2", RUNNING, rl("1", "1G"), "pg1", {PREEMPTABLE: "true"}, {}),
            build_pod("c1", "preemptor1", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        nodes=[
            build_node("n1", rl("1", "1G", scalar("pods", "10")), {}),
            build_node("n2", rl("1", "1G", scalar("pods", "10")), {}),
        ],
        queues=[
            build_queue("q1", 1, None),
        ],
        priority_classes=[HIGH_PRIO, LOW_PRIO],
        expect_evict_num=1,
        expect_evicted=["c1/preemptee1"],
        sharding_mode="soft",
        nodes_in_shard=["n1"],
    ),
]


@pytest.mark.parametrize("case", SHARD_CASES, ids=lambda c: c.name)
def test_preempt_with_shard(case: Case) -> None:
    """preempt_shard_test.go TestPreemptWithShard."""
    run_case(case, SHARD_TIERS, ["preempt"])
