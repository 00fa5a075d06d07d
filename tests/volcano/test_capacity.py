"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/capacity/capacity_test.go``.

Every case of ``Test_capacityPlugin_OnSessionOpenWithoutHierarchy``,
``TestEnqueueAndAllocatable``, ``Test_capacityPlugin_OnSessionOpenWithHierarchy`` (with
Volcano's tiers and the switches each Go test turns on) and ``Test_updateQueueAttrShare``
(the share function alone, as the Go test calls it); and release-1.15's
``Test_capacityPlugin_AncestorReclaimScenarios`` (the ``ancestorReclaimLevel`` argument).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import pytest

from batch_scheduler.plugins.capacity_tree import queue_share
from batch_scheduler.vector import Vector
from cluster.model.core import Pod
from cluster.model.volcano import Queue
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    PG_PENDING,
    PG_RUNNING,
    PREEMPTABLE,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group,
    build_pod_group_with_min_resources,
    build_pod_with_priority,
    build_queue_with_priority_and_resources_quantity,
    build_queue_with_resources_quantity,
    build_queue_with_state,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

PODS10 = scalar("pods", "10")
GPU = "nvidia.com/gpu"
NOT_PREEMPTABLE = {PREEMPTABLE: "false"}

# -- Test_capacityPlugin_OnSessionOpenWithoutHierarchy ----------------------------------

FLAT_TIERS = [
    [
        Plugin("capacity", ("enabledAllocatable", "enablePreemptive", "enableReclaimable", "enableQueueOrder")),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("gang", ("enableJobStarving",)),
    ]
]

n1 = build_node("n1", rl("2", "4Gi", PODS10), {"selector": "worker"})
n2 = build_node("n2", rl("2", "4Gi", PODS10), {})
n3 = build_node("n3", rl("2", "4Gi", scalar("nvidia.com/A100", "10"), PODS10), {"selector": "worker"})
n4 = build_node("n4", rl("2", "4Gi", scalar("nvidia.com/A100", "10"), PODS10), {})
n5 = build_node("n5", rl("2", "4Gi", PODS10), {})
n6 = build_node("n6", rl("2", "4Gi", PODS10), {})
n7 = build_node("n7", rl("4", "8Gi", scalar(GPU, "4"), PODS10), None)
n8 = build_node("n8", rl("4", "8Gi", scalar(GPU, "1"), PODS10), None)
A100 = scalar("nvidia.com/A100", "10")
q_a100 = rl("2", "4Gi", A100)

FLAT_CASES = [
    Case(
        name="case0: Pod allocatable when queue has not exceed capability",
        pods=[
            build_pod("ns1", "p1", "n1", RUNNING, rl("1", "1Gi"), "pg1", {}, {}),
            build_pod("ns1", "p2", "", PENDING, rl("1", "1Gi"), "pg2", {}, {"selector": "worker"}),
        ],
        nodes=[n1, n2],
        podgroups=[
            build_pod_group("pg1", "ns1", "q1", 1, None, PG_RUNNING),
            build_pod_group("pg2", "ns1", "q1", 1, None, PG_INQUEUE),
        ],
        queues=[build_queue_with_resources_quantity("q1", None, rl("2", "2Gi"))],
        expect_bind_map={"ns1/p2": "n1"},
        expect_binds_num=1,
    ),
    Case(
        name="case1: Pod not allocatable when queue exceed queue capability",
        pods=[
            build_pod("ns1", "p3", "n1", RUNNING, rl("1", "1Gi"), "pg3", {}, {}),
            build_pod("ns1", "p4", "", PENDING, rl("1", "1Gi"), "pg4", {}, {}),
        ],
        nodes=[n1, n2],
        podgroups=[
            build_pod_group("pg3", "ns1", "q2", 1, None, PG_RUNNING),
            build_pod_group("pg4", "ns1", "q2", 1, None, PG_INQUEUE),
        ],
        queues=[build_queue_with_resources_quantity("q2", None, rl("1.5", "1.5Gi"))],
        expect_binds_num=0,
    ),
    Case(
        name="case2: Can reclaim from other queues when allocated < deserved",
        pods=[
            build_pod("ns1", "p5", "n1", RUNNING, rl("2", "4Gi"), "pg5", NOT_PREEMPTABLE, {}),
            build_pod("ns1", "p6", "n2", RUNNING, rl("2", "4Gi"), "pg5", {}, {}),
            build_pod("ns1", "p7", "", PENDING, rl("2", "4Gi"), "pg6", {}, {}),
        ],
        nodes=[n1, n2],
        podgroups=[
            build_pod_group("pg5", "ns1", "q3", 1, None, PG_RUNNING),
            build_pod_group("pg6", "ns1", "q4", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_resources_quantity("q3", rl("2", "4Gi"), None),
            build_queue_with_resources_quantity("q4", rl("2", "4Gi"), None),
        ],
        expect_pipelined={"ns1/pg6": ["n2"]},
        expect_evicted=["ns1/p6"],
        expect_evict_num=1,
    ),
    Case(
        name="case3: CPU & Memory are overused, scalar resource is not overused, but candidate pod has not request "
        "CPU & Memory, reclaim should happen",
        pods=[
            build_pod("ns1", "p8", "n3", RUNNING, rl("0", "0Gi", A100), "pg7", NOT_PREEMPTABLE, {}),
            build_pod("ns1", "p9", "n4", RUNNING, rl("0", "0Gi", A100), "pg7", {}, {}),
            build_pod("ns1", "p10", "n3", RUNNING, rl("2", "4Gi"), "pg8", {}, {}),
            build_pod("ns1", "p11", "n4", RUNNING, rl("2", "4Gi"), "pg8", {}, {}),
            build_pod("ns1", "p12", "", PENDING, rl("0", "0Gi", A100), "pg9", {}, {}),
        ],
        nodes=[n3, n4],
        podgroups=[
            build_pod_group("pg7", "ns1", "q5", 1, None, PG_RUNNING),
            build_pod_group("pg8", "ns1", "q6", 1, None, PG_RUNNING),
            build_pod_group("pg9", "ns1", "q6", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_resources_quantity("q5", q_a100, None),
            build_queue_with_resources_quantity("q6", q_a100, None),
        ],
        expect_pipelined={"ns1/pg9": ["n4"]},
        expect_evicted=["ns1/p9"],
        expect_evict_num=1,
    ),
    Case(
        name="case4: Pods are assigned according to the order of Queue Priority in which PGs are placed",
        pods=[
            build_pod("ns1", "p13", "n5", RUNNING, rl("2", "4Gi"), "pg10", {}, {}),
            build_pod("ns1", "p14", "", PENDING, rl("2", "4Gi"), "pg11", {}, {}),
            build_pod("ns1", "p15", "", PENDING, rl("2", "4Gi"), "pg12", {}, {}),
        ],
        nodes=[n5, n6],
        podgroups=[
            build_pod_group("pg10", "ns1", "q7", 1, None, PG_RUNNING),
            build_pod_group("pg11", "ns1", "q8", 1, None, PG_INQUEUE),
            build_pod_group("pg12", "ns1", "q9", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_priority_and_resources_quantity("q7", 5, None, rl("2", "4Gi")),
            build_queue_with_priority_and_resources_quantity("q8", 1, None, rl("2", "4Gi")),
            build_queue_with_priority_and_resources_quantity("q9", 10, None, rl("2", "4Gi")),
        ],
        expect_bind_map={"ns1/p15": "n6"},
        expect_binds_num=1,
    ),
    Case(
        name="case5: Can reclaim from other queues when allocated + req <= deserved on one dimension",
        pods=[
            build_pod("ns1", "p16", "n1", RUNNING, rl("1", "3Gi"), "pg16", {}, None),
            build_pod("ns1", "p17", "", PENDING, rl("1", "1Gi"), "pg17", {}, None),
            build_pod("ns1", "p18", "n1", RUNNING, rl("1", "1Gi"), "pg18", {}, None),
        ],
        nodes=[n1],
        podgroups=[
            build_pod_group("pg16", "ns1", "q10", 1, None, PG_RUNNING),
            build_pod_group("pg17", "ns1", "q10", 1, None, PG_INQUEUE),
            build_pod_group("pg18", "ns1", "q11", 1, None, PG_RUNNING),
        ],
        queues=[
            build_queue_with_resources_quantity("q10", rl("2", "2Gi"), rl("4", "4Gi")),
            build_queue_with_resources_quantity("q11", rl("0", "0Gi"), rl("2", "2Gi")),
        ],
        expect_pipelined={"ns1/pg17": ["n1"]},
        expect_evicted=["ns1/p18"],
        expect_evict_num=1,
    ),
    Case(
        name="case6: Can not reclaim from other queues when allocated + req > deserved",
        pods=[
            build_pod("ns1", "p19", "n1", RUNNING, rl("1", "1Gi"), "pg19", {}, None),
            build_pod("ns1", "p20", "", PENDING, rl("1", "2Gi"), "pg20", {}, None),
            build_pod("ns1", "p21", "n1", RUNNING, rl("1", "1Gi"), "pg21", {}, None),
        ],
        nodes=[n1],
        podgroups=[
            build_pod_group("pg19", "ns1", "q12", 1, None, PG_RUNNING),
            build_pod_group("pg20", "ns1", "q12", 1, None, PG_INQUEUE),
            build_pod_group("pg21", "ns1", "q13", 1, None, PG_RUNNING),
        ],
        queues=[
            build_queue_with_resources_quantity("q12", rl("1", "2Gi"), rl("4", "4Gi")),
            build_queue_with_resources_quantity("q13", rl("0", "0Gi"), rl("2", "2Gi")),
        ],
        expect_pipelined={},
        expect_evicted=[],
        expect_evict_num=0,
    ),
    Case(
        name="case7: allocated does not contain scalar dimension (GPU), deserved does; should not reclaim",
        pods=[
            build_pod("ns1", "p22", "n7", RUNNING, rl("2", "4Gi"), "pg22", None, None),
            build_pod("ns1", "p23", "n7", RUNNING, rl("0", "0Gi", scalar(GPU, "1")), "pg23", None, None),
            build_pod("ns1", "p24", "n7", RUNNING, rl("2", "1Gi", scalar(GPU, "1")), "pg24", None, None),
            build_pod("ns1", "p25", "", PENDING, rl("2", "3Gi", scalar(GPU, "1")), "pg25", None, None),
        ],
        nodes=[n7],
        podgroups=[
            build_pod_group("pg22", "ns1", "queue14", 1, None, PG_RUNNING),
            build_pod_group("pg23", "ns1", "queue15", 1, None, PG_RUNNING),
            build_pod_group("pg24", "ns1", "queue16", 1, None, PG_RUNNING),
            build_pod_group("pg25", "ns1", "queue16", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_resources_quantity("queue14", rl("2", "4Gi", scalar(GPU, "2")), None),
            build_queue_with_resources_quantity("queue15", None, None),
            build_queue_with_resources_quantity("queue16", rl("2", "4Gi", scalar(GPU, "2")), None),
        ],
        expect_pipelined={},
        expect_evicted=[],
        expect_evict_num=0,
    ),
    Case(
        name="case8: reclaimer dimensions are considered properly while evicting reclaimees",
        pods=[
            build_pod("ns1", "p26", "n8", RUNNING, rl("0", "4Gi"), "pg26", None, None),
            build_pod("ns1", "p27", "n8", RUNNING, rl("1", "0Gi"), "pg27", None, None),
            build_pod("ns1", "p28", "n8", RUNNING, rl("0", "0Gi", scalar(GPU, "1")), "pg28", None, None),
            build_pod("ns1", "p29", "n8", RUNNING, rl("2", "4Gi"), "pg29", None, None),
            build_pod("ns1", "p30", "", PENDING, rl("1", "0Gi", scalar(GPU, "1")), "pg30", None, None),
        ],
        nodes=[n8],
        podgroups=[
            build_pod_group("pg26", "ns1", "queue17", 1, None, PG_RUNNING),
            build_pod_group("pg27", "ns1", "queue17", 1, None, PG_RUNNING),
            build_pod_group("pg28", "ns1", "queue17", 1, None, PG_RUNNING),
            build_pod_group("pg29", "ns1", "queue18", 1, None, PG_RUNNING),
            build_pod_group("pg30", "ns1", "queue18", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_resources_quantity("queue17", rl("2", "2Gi"), None),
            build_queue_with_resources_quantity("queue18", rl("2", "4Gi", scalar(GPU, "1")), None),
        ],
        expect_pipelined={"ns1/pg30": ["n8"]},
        expect_evicted=["ns1/p28"],
        expect_evict_num=1,
    ),
    Case(
        name="case9: reclaimee has intersecting scalar dimensions with deserved shouldn't be reclaimed on cpu/memory",
        pods=[
            build_pod("ns1", "p31", "n8", RUNNING, rl("4", "4Gi", scalar(GPU, "1")), "pg31", None, None),
            build_pod("ns1", "p32", "", PENDING, rl("1", "1Gi"), "pg32", None, None),
        ],
        nodes=[n8],
        podgroups=[
            build_pod_group("pg31", "ns1", "queue19", 1, None, PG_RUNNING),
            build_pod_group("pg32", "ns1", "queue20", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_resources_quantity("queue19", rl("", "", scalar(GPU, "1")), None),
            build_queue_with_resources_quantity("queue20", rl("2", "2Gi"), None),
        ],
        expect_pipelined={},
        expect_evicted=[],
        expect_evict_num=0,
    ),
]


@pytest.mark.parametrize("case", FLAT_CASES, ids=lambda c: c.name)
def test_capacity_plugin_on_session_open_without_hierarchy(case: Case) -> None:
    """capacity_test.go Test_capacityPlugin_OnSessionOpenWithoutHierarchy."""
    run_case(case, FLAT_TIERS, ["allocate", "reclaim"])


# -- TestEnqueueAndAllocatable ----------------------------------------------------------

ENQUEUE_TIERS = [
    [Plugin("capacity", ("enabledAllocatable", "enablePreemptive", "enabledOverused", "enableJobEnqueued"))]
]

e_n1 = build_node("n1", rl("3", "3G", PODS10), None)
e_n2 = build_node("n2", rl("3", "3G", PODS10), None)
res1c3g, res3c1g, res1c0g, res0c1g, res1c1g = rl("1", "3G"), rl("3", "1G"), rl("1", "0G"), rl("0", "1G"), rl("1", "1G")
pod1 = build_pod("ns1", "pod1", "n1", RUNNING, res1c3g, "pg1", None, None)
pod2 = build_pod("ns1", "pod2", "n2", RUNNING, res3c1g, "pg2", None, None)
e_pg1 = build_pod_group_with_min_resources("pg1", "ns1", "q1", 1, None, res1c3g, PG_RUNNING)
e_pg2 = build_pod_group_with_min_resources("pg2", "ns1", "q2", 1, None, res3c1g, PG_RUNNING)
e_q1 = build_queue_with_resources_quantity("q1", rl("2", "2G"), rl("2", "2G"))
e_q2 = build_queue_with_resources_quantity("q2", rl("2", "2G"), rl("3", "3G"))

ENQUEUE_CASES = [
    Case(
        name="case0: memory exceed derserved, job only request cpu can be enqueued and allocated",
        pods=[pod1, pod2, build_pod("ns1", "pod3", "", PENDING, res1c0g, "pg3", None, None)],
        nodes=[e_n1, e_n2],
        podgroups=[e_pg1, e_pg2, build_pod_group_with_min_resources("pg3", "ns1", "q1", 1, None, res1c0g, PG_PENDING)],
        queues=[e_q1, e_q2],
        expect_binds_num=1,
        expect_bind_map={"ns1/pod3": "n1"},
    ),
    Case(
        name="case1: cpu exceed derserved, job only request memory can be enqueued and allocated",
        pods=[pod1, pod2, build_pod("ns1", "pod4", "", PENDING, res0c1g, "pg4", None, None)],
        nodes=[e_n1, e_n2],
        podgroups=[e_pg1, e_pg2, build_pod_group_with_min_resources("pg4", "ns1", "q2", 1, None, res0c1g, PG_PENDING)],
        queues=[e_q1, e_q2],
        expect_binds_num=1,
        expect_bind_map={"ns1/pod4": "n2"},
    ),
    Case(
        name="case2: exceed capacity, can not enqueue",
        pods=[pod1, pod2, build_pod("ns1", "pod5", "", PENDING, res1c1g, "pg5", None, None)],
        nodes=[e_n1, e_n2],
        podgroups=[e_pg1, e_pg2, build_pod_group_with_min_resources("pg5", "ns1", "q1", 1, None, res1c1g, PG_PENDING)],
        queues=[e_q1, e_q2],
        expect_binds_num=0,
    ),
    Case(
        name="case4: queue with non-open state, can not enqueue",
        pods=[build_pod("ns1", "pod6", "", PENDING, res1c1g, "pg6", None, None)],
        nodes=[e_n1, e_n2],
        podgroups=[build_pod_group_with_min_resources("pg6", "ns1", "q3", 1, None, res1c1g, PG_PENDING)],
        queues=[build_queue_with_state("q3", 1, rl("3", "3G"), "Closed")],
        expect_binds_num=0,
    ),
]


@pytest.mark.parametrize("case", ENQUEUE_CASES, ids=lambda c: c.name)
def test_enqueue_and_allocatable(case: Case) -> None:
    """capacity_test.go TestEnqueueAndAllocatable."""
    run_case(case, ENQUEUE_TIERS, ["enqueue", "allocate"])


# -- Test_capacityPlugin_OnSessionOpenWithHierarchy -------------------------------------

TREE_TIERS = [
    [
        Plugin(
            "capacity",
            (
                "enabledAllocatable",
                "enablePreemptive",
                "enableReclaimable",
                "enableQueueOrder",
                "enableHierarchy",
                "enableJobEnqueued",
            ),
        ),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("gang", ("enableJobStarving",)),
    ]
]


def build_queue_with_parents(
    name: str, parent: str, deserved: Mapping[str, str] | None, cap: Mapping[str, str] | None
) -> Queue:
    """capacity_test.go ``buildQueueWithParents``."""
    queue = build_queue_with_resources_quantity(name, deserved, cap)
    return msgspec.structs.replace(queue, spec=msgspec.structs.replace(queue.spec, parent=parent))


def with_guarantee(queue: Queue, guarantee: Mapping[str, str]) -> Queue:
    return msgspec.structs.replace(
        queue,
        spec=msgspec.structs.replace(
            queue.spec, guarantee=msgspec.structs.replace(queue.spec.guarantee, resource=dict(guarantee))
        ),
    )


h_n1 = build_node("n1", rl("8", "8Gi", scalar("pods", "11")), {})
root = build_queue_with_parents("root", "", None, None)
root1 = build_queue_with_parents("root", "", None, rl("16", "16Gi"))
root2 = build_queue_with_parents(
    "root", "", rl("16", "16Gi", scalar("nvidia.com/a100", "4"), scalar("rdma", "1000")), None
)
queue1 = build_queue_with_parents("q1", "root", None, rl("4", "4Gi"))
queue2 = build_queue_with_parents("q2", "root", None, rl("4", "4Gi"))
queue11 = build_queue_with_parents("q11", "q1", None, rl("1", "1Gi"))
queue12 = build_queue_with_parents("q12", "q1", None, rl("3", "3Gi"))
queue3 = build_queue_with_parents(
    "q3", "root", rl("4", "4Gi", scalar("pods", "10")), rl("4", "4Gi", scalar("pods", "10"))
)
queue4 = build_queue_with_parents(
    "q4", "root", rl("2", "2Gi", scalar("pods", "1")), rl("4", "4Gi", scalar("pods", "4"))
)
queue31 = build_queue_with_parents(
    "q31", "q3", rl("2", "2Gi", scalar("pods", "2")), rl("4", "4Gi", scalar("pods", "4"))
)
queue32 = build_queue_with_parents(
    "q32", "q3", rl("2", "2Gi", scalar("pods", "2")), rl("4", "4Gi", scalar("pods", "4"))
)
queue33 = build_queue_with_parents(
    "q33", "q3", rl("0", "0Gi", scalar("pods", "2")), rl("4", "4Gi", scalar("pods", "4"))
)
h_p6 = build_pod("ns1", "p6", "n1", RUNNING, rl("2", "2Gi"), "pg5", NOT_PREEMPTABLE, {})
h_pg5 = build_pod_group("pg5", "ns1", "q31", 1, None, PG_RUNNING)
queue71 = with_guarantee(build_queue_with_parents("q71", "q7", None, rl("6", "4Gi")), {"cpu": "4", "memory": "3Gi"})
queue72 = with_guarantee(build_queue_with_parents("q72", "q7", None, rl("6", "4Gi")), {"cpu": "4", "memory": "3Gi"})
h_n2 = build_node("n2", rl("8", "8Gi", scalar(GPU, "8"), PODS10, scalar("hugepages-1Gi", "0")), {})
a100x2_rdma = rl("1", "1Gi", scalar("nvidia.com/a100", "2"), scalar("rdma/hca", "1"))

TREE_CASES = [
    Case(
        name="case0: Pod allocatable when queue is leaf queue",
        pods=[build_pod("ns1", "p1", "", PENDING, rl("1", "1Gi"), "pg1", {}, {})],
        nodes=[h_n1],
        podgroups=[build_pod_group("pg1", "ns1", "q11", 1, None, PG_INQUEUE)],
        queues=[root, queue1, queue2, queue11, queue12],
        expect_bind_map={"ns1/p1": "n1"},
        expect_binds_num=1,
    ),
    Case(
        name="case1: Pod not allocatable when queue is not leaf queue",
        pods=[build_pod("ns1", "p2", "", PENDING, rl("1", "1Gi"), "pg2", {}, {})],
        nodes=[h_n1],
        podgroups=[build_pod_group("pg2", "ns1", "q1", 1, None, PG_PENDING)],
        queues=[root, queue1, queue2, queue11, queue12],
        expect_binds_num=0,
    ),
    Case(
        name="case2: Pod allocatable when queue has not exceed capability",
        pods=[
            build_pod("ns1", "p3", "", PENDING, rl("2", "2Gi"), "pg3", {}, {}),
            build_pod("ns1", "p4", "", PENDING, rl("2", "2Gi"), "pg3", {}, {}),
        ],
        nodes=[h_n1],
        podgroups=[build_pod_group("pg3", "ns1", "q31", 2, None, PG_INQUEUE)],
        queues=[root, queue3, queue4, queue31, queue32],
        expect_bind_map={"ns1/p3": "n1", "ns1/p4": "n1"},
        expect_binds_num=2,
    ),
    Case(
        name="case3: Can reclaim from other queues when allocated < deserved",
        pods=[
            build_pod("ns1", "p5", "n1", RUNNING, rl("4", "4Gi"), "pg4", {}, {}),
            h_p6,
            build_pod("ns1", "p7", "n1", RUNNING, rl("2", "2Gi"), "pg5", {}, {}),
            build_pod("ns1", "p8", "", PENDING, rl("2", "2Gi"), "pg6", {}, {}),
        ],
        nodes=[h_n1],
        podgroups=[
            build_pod_group("pg4", "ns1", "q4", 1, None, PG_RUNNING),
            h_pg5,
            build_pod_group("pg6", "ns1", "q32", 1, None, PG_INQUEUE),
        ],
        queues=[root, queue3, queue31, queue32, queue4],
        expect_pipelined={"ns1/pg6": ["n1"]},
        expect_evicted=["ns1/p7"],
        expect_evict_num=1,
    ),
    Case(
        name="case4: Pod is not allocatable when ancestor queue's real capability not enough",
        pods=[
            h_p6,
            build_pod("ns1", "p9", "n1", RUNNING, rl("2", "2Gi"), "pg7", {}, {}),
            build_pod("ns1", "p10", "", PENDING, rl("3", "3Gi"), "pg8", {}, {}),
        ],
        nodes=[h_n1],
        podgroups=[
            h_pg5,
            build_pod_group("pg7", "ns1", "q32", 1, None, PG_RUNNING),
            build_pod_group("pg8", "ns1", "q33", 1, None, PG_INQUEUE),
        ],
        queues=[root, queue3, queue31, queue32, queue33],
        expect_binds_num=0,
    ),
    Case(
        name="case5: If the capability cpu or memory is not specified, the value should be inherited from parent queue",
        pods=[build_pod("ns1", "p11", "", PENDING, rl("1", ""), "pg9", {}, {})],
        nodes=[h_n1],
        podgroups=[build_pod_group("pg9", "ns1", "q51", 1, None, PG_RUNNING)],
        queues=[
            root,
            build_queue_with_parents("q5", "root", None, rl("", "4Gi")),
            build_queue_with_parents("q51", "q5", None, rl("", "2Gi")),
        ],
        expect_bind_map={"ns1/p11": "n1"},
        expect_binds_num=1,
    ),
    Case(
        name="case6: podgroup can't be enqueued when any ancestor queue's capability is not enough",
        nodes=[h_n1],
        podgroups=[
            build_pod_group_with_min_resources("pg10", "ns1", "q61", 1, None, rl("2", "4Gi"), PG_PENDING),
            build_pod_group_with_min_resources("pg11", "ns1", "q62", 1, None, rl("2", "4Gi"), PG_PENDING),
        ],
        queues=[
            root,
            build_queue_with_parents("q6", "root", None, rl("2", "4Gi")),
            build_queue_with_parents("q61", "q6", None, None),
            build_queue_with_parents("q62", "q6", None, None),
        ],
        expect_status={"ns1/pg10": PG_INQUEUE, "ns1/pg11": PG_PENDING},
    ),
    Case(
        name="case7: the sum of sub queue 71 and 72's guarantee exceeds the capacity of queue7, but should not panic",
        nodes=[h_n1],
        queues=[root, build_queue_with_parents("q7", "root", None, rl("6", "4Gi")), queue71, queue72],
    ),
    Case(
        name="case8: When the queue's deserved value has a scalar resource set, the check can pass",
        nodes=[build_node("n-gpu", rl("8", "8Gi", scalar(GPU, "8"), PODS10), {})],
        podgroups=[build_pod_group("pg12", "ns1", "q81", 1, None, PG_INQUEUE)],
        pods=[build_pod("ns1", "p12", "", PENDING, rl("2", "2Gi", scalar(GPU, "1")), "pg12", {}, {})],
        queues=[
            root,
            build_queue_with_parents("q8", "root", rl("4", "4Gi", scalar(GPU, "8")), None),
            build_queue_with_parents("q81", "q8", rl("2", "2Gi", scalar(GPU, "4")), None),
            build_queue_with_parents("q82", "q8", rl("2", "2Gi", scalar(GPU, "4")), None),
        ],
        expect_bind_map={"ns1/p12": "n-gpu"},
        expect_binds_num=1,
    ),
    Case(
        name="case9: When some scalar resources are 0 in deserved, the check can still pass",
        nodes=[h_n2],
        podgroups=[build_pod_group("pg13", "ns1", "q91", 1, None, PG_INQUEUE)],
        pods=[build_pod("ns1", "p13", "", PENDING, rl("2", "2Gi", scalar(GPU, "1")), "pg13", {}, {})],
        queues=[
            root,
            build_queue_with_parents(
                "q9", "root", rl("2", "2Gi", scalar(GPU, "8"), scalar("hugepages-1Gi", "0")), None
            ),
            build_queue_with_parents("q91", "q9", rl("2", "2Gi", scalar(GPU, "4"), scalar("hugepages-1Gi", "0")), None),
        ],
        expect_bind_map={"ns1/p13": "n2"},
        expect_binds_num=1,
    ),
    Case(
        name="case10: root queue's capability > cluster total resource, but should not panic",
        nodes=[h_n1],
        queues=[root1, build_queue_with_parents("q10", "root", None, rl("10", "4Gi"))],
    ),
    Case(
        name="case11: If the capability scalar resources is not specified, the value should be inherited from parent queue",
        pods=[
            build_pod("ns1", "p14", "", PENDING, rl("1", "1Gi", scalar(GPU, "4")), "pg14", {}, {}),
            build_pod("ns1", "p15", "", PENDING, rl("1", "1Gi", scalar(GPU, "4")), "pg15", {}, {}),
        ],
        nodes=[h_n2],
        podgroups=[
            build_pod_group("pg14", "ns1", "case11_queue11", 1, None, PG_INQUEUE),
            build_pod_group("pg15", "ns1", "case11_queue12", 1, None, PG_INQUEUE),
        ],
        queues=[
            root,
            build_queue_with_parents("case11_queue1", "root", None, None),
            build_queue_with_parents("case11_queue11", "case11_queue1", None, rl("4", "4Gi", scalar(GPU, "4"))),
            build_queue_with_parents("case11_queue12", "case11_queue1", None, rl("4", "4Gi", scalar(GPU, "4"))),
        ],
        expect_bind_map={"ns1/p14": "n2", "ns1/p15": "n2"},
        expect_binds_num=2,
    ),
    Case(
        name="case12: Can reclaim from other queues when allocated <= deserved on a single scalar dimension",
        pods=[
            build_pod("ns1", "p16", "", PENDING, a100x2_rdma, "pg16", {}, {}),
            build_pod("ns1", "p17", "n3", RUNNING, a100x2_rdma, "pg17", {}, {}),
            build_pod("ns1", "p18", "n3", RUNNING, a100x2_rdma, "pg18", NOT_PREEMPTABLE, {}),
        ],
        nodes=[
            build_node(
                "n3",
                rl("16", "16Gi", scalar("nvidia.com/a100", "5"), scalar("rdma/hca", "1001"), scalar("pods", "11")),
                {},
            )
        ],
        podgroups=[
            build_pod_group("pg16", "ns1", "case12_queue11", 1, None, PG_INQUEUE),
            build_pod_group("pg17", "ns1", "case12_queue12", 1, None, PG_RUNNING),
            build_pod_group("pg18", "ns1", "case12_queue12", 1, None, PG_RUNNING),
        ],
        queues=[
            root2,
            build_queue_with_parents("case12_queue1", "root", rl("", "", scalar("nvidia.com/a100", "2")), None),
            build_queue_with_parents(
                "case12_queue11", "case12_queue1", rl("", "", scalar("nvidia.com/a100", "2")), None
            ),
            build_queue_with_parents("case12_queue12", "case12_queue1", None, None),
        ],
        expect_pipelined={"ns1/pg16": ["n3"]},
        expect_evicted=["ns1/p17"],
        expect_evict_num=1,
    ),
]


@pytest.mark.parametrize("case", TREE_CASES, ids=lambda c: c.name)
def test_capacity_plugin_on_session_open_with_hierarchy(case: Case) -> None:
    """capacity_test.go Test_capacityPlugin_OnSessionOpenWithHierarchy."""
    run_case(case, TREE_TIERS, ["enqueue", "reclaim", "allocate"])


# -- Test_capacityPlugin_AncestorReclaimScenarios (release-1.15) -------------------------


def ancestor_tiers(level: int, include_priority: bool) -> list[list[Plugin]]:
    """The Go test's ``buildTier``."""
    plugins = [
        Plugin(
            "capacity",
            (
                "enabledAllocatable",
                "enablePreemptive",
                "enableReclaimable",
                "enableQueueOrder",
                "enableHierarchy",
                "enableJobEnqueued",
            ),
            {"ancestorReclaimLevel": level},
        ),
        Plugin("predicates", ("enablePredicate",)),
        Plugin("gang", ("enableJobStarving",)),
    ]
    if include_priority:
        plugins.append(Plugin("priority", ("enableJobOrder", "enableTaskOrder")))
    return [plugins]


A100 = "nvidia.com/a100"


def a100(n: str) -> Mapping[str, str]:
    return rl("", "", scalar(A100, n))


a_n1 = build_node("n1", rl("16", "16Gi", scalar(A100, "4"), scalar("rdma/hca", "1001"), scalar("pods", "11")), {})
a_root = build_queue_with_parents("root", "", rl("16", "16Gi", scalar(A100, "4"), scalar("rdma", "1000")), None)
one_a100 = rl("1", "1Gi", scalar(A100, "1"), scalar("rdma/hca", "1"))
small_n1 = build_node("n1", rl("2", "2Gi", scalar("pods", "10")), {})
two = rl("2", "2Gi")


def project_queue_tree() -> list[Queue]:
    """The Go test's ``buildProjectQueueTree``."""
    return [
        a_root,
        build_queue_with_parents("project1_root", "root", a100("1"), a100("2")),
        build_queue_with_parents("project1_non-preemptable", "project1_root", a100("1"), a100("1")),
        build_queue_with_parents("project1_preemptable", "project1_root", None, None),
        build_queue_with_parents("project2_root", "root", a100("3"), a100("4")),
        build_queue_with_parents("project2_non-preemptable", "project2_root", a100("3"), a100("3")),
        build_queue_with_parents("project2_preemptable", "project2_root", None, None),
    ]


def level_semantics_tree() -> list[Queue]:
    """The Go test's ``buildLevelSemanticsTree``."""
    return [
        build_queue_with_parents("root", "", None, None),
        build_queue_with_parents("grand-a", "root", rl("2", "2Gi"), rl("4", "4Gi")),
        build_queue_with_parents("parent-a", "grand-a", rl("2", "2Gi"), rl("2", "2Gi")),
        build_queue_with_parents("queue-a", "parent-a", rl("2", "2Gi"), rl("2", "2Gi")),
        build_queue_with_parents("grand-b", "root", rl("3", "3Gi"), rl("4", "4Gi")),
        build_queue_with_parents("parent-b", "grand-b", rl("1", "1Gi"), rl("2", "2Gi")),
        build_queue_with_parents("queue-b", "parent-b", rl("1", "1Gi"), rl("2", "2Gi")),
    ]


def victim_and_reclaimer(
    victim_queue: str,
    reclaimer_queue: str,
    req: Mapping[str, str] = two,
    reclaimer_req: Mapping[str, str] | None = None,
) -> dict[str, list]:
    """The one running victim and one pending reclaimer of cases 5 to 11."""
    return {
        "pods": [
            build_pod("ns1", "p-victim", "n1", RUNNING, req, "pg-victim", None, None),
            build_pod("ns1", "p-reclaimer", "", PENDING, reclaimer_req or req, "pg-reclaimer", None, None),
        ],
        "podgroups": [
            build_pod_group("pg-victim", "ns1", victim_queue, 1, None, PG_RUNNING),
            build_pod_group("pg-reclaimer", "ns1", reclaimer_queue, 1, None, PG_INQUEUE),
        ],
    }


def running(name: str, group: str, priority: int | None = None) -> Pod:
    if priority is None:
        return build_pod("ns1", name, "n1", RUNNING, one_a100, group, {}, {})
    return build_pod_with_priority("ns1", name, "n1", RUNNING, one_a100, group, {}, {}, priority)


ANCESTOR_CASES = [
    (
        1,
        True,
        Case(
            name="case1: Can reclaim based on parent deserved when ancestorReclaimLevel is 1",
            nodes=[a_n1],
            pods=[
                build_pod(
                    "ns1",
                    "p1",
                    "n1",
                    RUNNING,
                    rl("1", "1Gi", scalar(A100, "4"), scalar("rdma/hca", "1")),
                    "pg1",
                    {},
                    {},
                ),
                build_pod("ns1", "p2", "", PENDING, one_a100, "pg2", {}, {}),
            ],
            podgroups=[
                build_pod_group("pg1", "ns1", "case1_queue2", 1, None, PG_RUNNING),
                build_pod_group("pg2", "ns1", "case1_queue11", 1, None, PG_INQUEUE),
            ],
            queues=[
                a_root,
                build_queue_with_parents("case1_queue1", "root", a100("1"), None),
                build_queue_with_parents("case1_queue11", "case1_queue1", None, None),
                build_queue_with_parents("case1_queue2", "root", None, None),
            ],
            expect_pipelined={"ns1/pg2": ["n1"]},
            expect_evicted=["ns1/p1"],
            expect_evict_num=1,
        ),
    ),
    (
        1,
        True,
        Case(
            name="case2: Cross-parent reclaim pipelines project1 pending job when project2 child and parent are both over deserved",
            nodes=[a_n1],
            pods=[
                running("p1", "pg1", 2),
                running("p2", "pg2", 2),
                running("p3", "pg3", 2),
                running("p4", "pg4", 1),
                build_pod("ns1", "p5", "", PENDING, one_a100, "pg5", {}, {}),
            ],
            podgroups=[
                *(build_pod_group(f"pg{i}", "ns1", "project2_preemptable", 1, None, PG_RUNNING) for i in range(1, 5)),
                build_pod_group("pg5", "ns1", "project1_preemptable", 1, None, PG_PENDING),
            ],
            queues=project_queue_tree(),
            expect_pipelined={"ns1/pg5": ["n1"]},
            expect_evicted=["ns1/p4"],
            expect_evict_num=1,
        ),
    ),
    (
        1,
        True,
        Case(
            name="case3: Cross-parent reclaim can evict sibling-queue victim first",
            nodes=[a_n1],
            pods=[
                running("p1", "pg1", 2),
                running("p2", "pg2", 2),
                running("p3", "pg3", 2),
                build_pod("ns1", "p4", "", PENDING, one_a100, "pg4_reclaimed", {}, {}),
                running("p5", "pg5_pipelined"),
                build_pod("ns1", "p6", "", PENDING, one_a100, "pg6", {}, {}),
            ],
            podgroups=[
                *(build_pod_group(f"pg{i}", "ns1", "project2_preemptable", 1, None, PG_RUNNING) for i in range(1, 4)),
                build_pod_group("pg4_reclaimed", "ns1", "project2_preemptable", 1, None, PG_INQUEUE),
                build_pod_group("pg5_pipelined", "ns1", "project1_preemptable", 1, None, PG_RUNNING),
                build_pod_group("pg6", "ns1", "project2_non-preemptable", 1, None, PG_PENDING),
            ],
            queues=project_queue_tree(),
            expect_pipelined={"ns1/pg6": ["n1"]},
            expect_evicted=["ns1/p3"],
            expect_evict_num=1,
        ),
    ),
    (
        1,
        True,
        Case(
            name="case4: Cross-parent reclaim is blocked when victim child is not over deserved",
            nodes=[
                build_node(
                    "n1", rl("8", "8Gi", scalar(A100, "1"), scalar("rdma/hca", "1001"), scalar("pods", "11")), {}
                )
            ],
            pods=[
                running("p1", "pg1"),
                build_pod("ns1", "p2", "", PENDING, one_a100, "pg2", {}, {}),
                build_pod("ns1", "p3", "n1", RUNNING, one_a100, "pg3", NOT_PREEMPTABLE, {}),
            ],
            podgroups=[
                build_pod_group("pg1", "ns1", "case4_child1", 1, None, PG_RUNNING),
                build_pod_group("pg2", "ns1", "case4_child2", 1, None, PG_PENDING),
                build_pod_group("pg3", "ns1", "case4_child1_sibling", 1, None, PG_RUNNING),
            ],
            queues=[
                a_root,
                build_queue_with_parents("case4_parent1", "root", a100("1"), None),
                build_queue_with_parents("case4_child1", "case4_parent1", a100("1"), None),
                build_queue_with_parents("case4_child1_sibling", "case4_parent1", None, None),
                build_queue_with_parents("case4_parent2", "root", a100("1"), None),
                build_queue_with_parents("case4_child2", "case4_parent2", a100("1"), None),
            ],
        ),
    ),
    (
        0,
        False,
        Case(
            name="case5: level 0 allows reclaim based on leaf-level deserved checks",
            nodes=[small_n1],
            queues=level_semantics_tree(),
            **victim_and_reclaimer("queue-b", "queue-a"),
            expect_pipelined={"ns1/pg-reclaimer": ["n1"]},
            expect_evicted=["ns1/p-victim"],
            expect_evict_num=1,
        ),
    ),
    (
        1,
        False,
        Case(
            name="case6: level 1 allows reclaim when parent-level check passes",
            nodes=[small_n1],
            queues=level_semantics_tree(),
            **victim_and_reclaimer("queue-b", "queue-a"),
            expect_pipelined={"ns1/pg-reclaimer": ["n1"]},
            expect_evicted=["ns1/p-victim"],
            expect_evict_num=1,
        ),
    ),
    (
        2,
        False,
        Case(
            name="case7: level 2 blocks reclaim when grandparent-level check fails",
            nodes=[small_n1],
            queues=level_semantics_tree(),
            **victim_and_reclaimer("queue-b", "queue-a"),
        ),
    ),
    (
        1,
        False,
        Case(
            name="case8: level 1 blocks sibling reclaim when leaf deserved is unset and no ancestor gate applies",
            nodes=[small_n1],
            queues=[
                build_queue_with_parents("root", "", None, None),
                build_queue_with_parents("parent", "root", rl("4", "4Gi"), rl("4", "4Gi")),
                build_queue_with_parents("queue-a", "parent", None, None),
                build_queue_with_parents("queue-b", "parent", None, None),
            ],
            **victim_and_reclaimer("queue-b", "queue-a"),
        ),
    ),
    (
        2,
        False,
        Case(
            name="case9: level 2 blocks reclaim when leaf deserved is unset and queues share grandparent",
            nodes=[small_n1],
            queues=[
                build_queue_with_parents("root", "", None, None),
                build_queue_with_parents("grand", "root", rl("2", "2Gi"), rl("2", "2Gi")),
                build_queue_with_parents("parent-a", "grand", None, None),
                build_queue_with_parents("queue-a", "parent-a", None, None),
                build_queue_with_parents("parent-b", "grand", None, None),
                build_queue_with_parents("queue-b", "parent-b", None, None),
            ],
            **victim_and_reclaimer("queue-b", "queue-a"),
        ),
    ),
    (
        2,
        False,
        Case(
            name="case10: level 2 blocks reclaim in unbalanced shared-grandparent tree when leaf deserved is unset",
            nodes=[small_n1],
            queues=[
                build_queue_with_parents("root", "", None, None),
                build_queue_with_parents("grand", "root", rl("1", "1Gi"), rl("2", "2Gi")),
                build_queue_with_parents("parent-deep", "grand", rl("1", "1Gi"), rl("2", "2Gi")),
                build_queue_with_parents("queue-deep", "parent-deep", None, None),
                build_queue_with_parents("queue-shallow", "grand", None, None),
            ],
            **victim_and_reclaimer("queue-deep", "queue-shallow"),
        ),
    ),
    (
        2,
        False,
        Case(
            name="case11: unbalanced level2 blocks reclaim when depth-2 ancestor is not over deserved",
            nodes=[build_node("n1", rl("4", "4Gi", scalar("pods", "10"), scalar(A100, "2")), {})],
            queues=[
                build_queue_with_parents("root", "", None, None),
                build_queue_with_parents("shallow-parent", "root", a100("1"), None),
                build_queue_with_parents("queue-shallow", "shallow-parent", a100("1"), None),
                build_queue_with_parents("deep-grand", "root", a100("2"), None),
                build_queue_with_parents("deep-parent", "deep-grand", a100("1"), None),
                build_queue_with_parents("queue-deep", "deep-parent", a100("1"), None),
            ],
            **victim_and_reclaimer(
                "queue-deep", "queue-shallow", rl("1", "1Gi", scalar(A100, "2")), rl("1", "1Gi", scalar(A100, "1"))
            ),
        ),
    ),
]


@pytest.mark.parametrize(("level", "include_priority", "case"), ANCESTOR_CASES, ids=[c[2].name for c in ANCESTOR_CASES])
def test_capacity_plugin_ancestor_reclaim_scenarios(level: int, include_priority: bool, case: Case) -> None:
    """capacity_test.go (release-1.15) Test_capacityPlugin_AncestorReclaimScenarios."""
    case.plugins = ("capacity", "predicates", "gang", "priority")
    run_case(case, ancestor_tiers(level, include_priority), ["enqueue", "reclaim", "allocate"])


# -- Test_updateQueueAttrShare ----------------------------------------------------------


def res(cpu: str, memory: str) -> Vector:
    v = Vector.from_quantities(rl(cpu, memory), field="test")
    assert v is not None
    return v


EMPTY = Vector()

SHARE_CASES = [
    ("best-effort queue with allocated resources", EMPTY, res("1", "1Gi"), 1.0),
    ("best-effort queue with pending requests only (no allocated)", EMPTY, EMPTY, 1.0),
    ("best-effort queue with both allocated and request", EMPTY, res("1", "1Gi"), 1.0),
    ("best-effort queue completely idle", EMPTY, EMPTY, 1.0),
    ("queue with deserved but no allocated", res("2", "2Gi"), EMPTY, 0.0),
    ("queue with deserved, allocated < deserved (CPU dimension)", res("2", "2Gi"), res("1", "1Gi"), 0.5),
    ("queue with deserved, allocated = deserved", res("2", "2Gi"), res("2", "2Gi"), 1.0),
    ("queue with deserved, allocated > deserved (CPU dimension)", res("2", "2Gi"), res("3", "2Gi"), 1.5),
    ("queue with deserved, memory is dominant resource", res("2", "4Gi"), res("1", "3Gi"), 0.75),
    ("queue with deserved, CPU is dominant resource", res("2", "4Gi"), res("1.5", "2Gi"), 0.75),
    ("queue with deserved, allocated exceeds on both dimensions", res("2", "2Gi"), res("3", "3Gi"), 1.5),
    ("queue with deserved, request should not affect share calculation", res("2", "2Gi"), res("1", "1Gi"), 0.5),
    ("queue with deserved but zero values", res("0", "0Gi"), res("1", "1Gi"), 1.0),
    ("queue with deserved, allocated is zero", res("2", "2Gi"), res("0", "0Gi"), 0.0),
    ("best-effort queue with only CPU allocated", EMPTY, res("1", "0Gi"), 1.0),
    ("best-effort queue with only memory allocated", EMPTY, res("0", "1Gi"), 1.0),
    ("best-effort queue with only CPU request (no allocated)", EMPTY, EMPTY, 1.0),
]


@pytest.mark.parametrize(("name", "deserved", "allocated", "want"), SHARE_CASES, ids=[c[0] for c in SHARE_CASES])
def test_update_queue_attr_share(name: str, deserved: Vector, allocated: Vector, want: float) -> None:
    """capacity_test.go Test_updateQueueAttrShare (a queue's request plays no part, so the cases pass none)."""
    assert queue_share(allocated, deserved) == want
