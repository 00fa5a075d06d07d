"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/priority/priority_test.go``.

``TestPreempt``: a high-priority job preempts a low-priority one's task (allocate, then
preempt) only while priority's ``enablePreemptable`` is on.
"""

from __future__ import annotations

import pytest

from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    PREEMPTABLE,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group_with_prio,
    build_pod_with_priority,
    build_priority_class,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

PODS10 = scalar("pods", "10")
ENABLE_EVICT = Plugin(
    "priority", ("enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableReclaimable", "enableJobStarving")
)
DISABLE_EVICT = Plugin(
    "priority",
    ("enableTaskOrder", "enableJobOrder", "enableJobStarving"),
    off=("enablePreemptable", "enableReclaimable"),
)
CLASSES = [build_priority_class("low-priority", 100), build_priority_class("high-priority", 1000)]
PODGROUPS = [
    build_pod_group_with_prio("pg1", "ns1", "q1", 1, {}, PG_INQUEUE, "low-priority"),
    build_pod_group_with_prio("pg2", "ns2", "q1", 1, {}, PG_INQUEUE, "high-priority"),
]
QUEUES = [build_queue("q1", 1, rl("6", "6G"))]

CASES = [
    (
        Case(
            name="enable preempt low priority: enablePreemptable:true",
            priority_classes=CLASSES,
            podgroups=PODGROUPS,
            queues=QUEUES,
            pods=[  # as preemptee victims are searched by node, priority can not be guaranteed cross nodes
                build_pod("ns1", "preemptee1", "node1", RUNNING, rl("3", "3G"), "pg1", {PREEMPTABLE: "true"}, {}),
                build_pod_with_priority(
                    "ns1", "preemptee2", "node1", RUNNING, rl("3", "3G"), "pg1", {PREEMPTABLE: "true"}, {}, 1000
                ),
                build_pod("ns2", "preemptor1", "", PENDING, rl("3", "3G"), "pg2", {}, {}),
            ],
            nodes=[build_node("node1", rl("6", "6G", PODS10)), build_node("node2", rl("2", "2G", PODS10))],
            expect_evicted=["ns1/preemptee1"],
            expect_evict_num=1,
            expect_pipelined={"ns2/pg2": ["node1"]},
        ),
        ENABLE_EVICT,
    ),
    (
        Case(
            name="disable preempt low priority: enablePreemptable:false",
            priority_classes=CLASSES,
            podgroups=PODGROUPS,
            queues=QUEUES,
            pods=[
                build_pod("ns1", "preemptee1", "node1", RUNNING, rl("3", "3G"), "pg1", {PREEMPTABLE: "true"}, {}),
                build_pod("ns1", "preemptee2", "node2", RUNNING, rl("3", "3G"), "pg1", {PREEMPTABLE: "false"}, {}),
                build_pod("ns2", "preemptor1", "", PENDING, rl("3", "3G"), "pg2", {}, {}),
            ],
            nodes=[build_node("node1", rl("3", "3G", PODS10)), build_node("node2", rl("3", "3G", PODS10))],
        ),
        DISABLE_EVICT,
    ),
]


@pytest.mark.parametrize(("case", "plugin"), CASES, ids=[c[0].name for c in CASES])
def test_preempt(case: Case, plugin: Plugin) -> None:
    """priority_test.go TestPreempt."""
    run_case(case, [[plugin]], ["allocate", "preempt"])
