"""Ported from Volcano release-1.14 ``pkg/scheduler/actions/allocate/allocate_test.go``.

``TestAllocate``: every case, with Volcano's tiers (gang, drf, proportion, predicates,
nodeorder with the switches the Go test turns on). The network-topology, SubGroup, DRA and
PVC tests of that file are listed as not portable in the README.
"""

from __future__ import annotations

import pytest

from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    build_node,
    build_pod,
    build_pod_group,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

PODS10 = scalar("pods", "10")

TIERS = [[
    Plugin("gang", ("enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving")),
    Plugin("drf", ("enablePreemptable", "enableJobOrder")),
    Plugin("proportion", ("enableQueueOrder", "enableReclaimable", "enabledAllocatable")),
    Plugin("predicates", ("enablePredicate",)),
    Plugin("nodeorder", ("enableNodeOrder",)),
]]

CASES = [
    Case(
        name="prepredicate failed: node selector does not match",
        podgroups=[build_pod_group("pg1", "c1", "c1", 1, None, PG_INQUEUE)],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "master"}, {"nodeRole": "master"}),
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "worker"}, {"nodeRole": "worker"}),
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
            build_pod("c1", "p0", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "master"}, {"nodeRole": "master"}),
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "master"}, {"nodeRole": "master"}),
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "worker"}, {"nodeRole": "worker"}),
            build_pod("c1", "p3", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "worker"}, {"nodeRole": "worker"}),
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
            build_pod("c1", "p0", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "master"}, {"nodeRole": "master"}),
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "master"}, {"nodeRole": "master"}),
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "worker"}, {"nodeRole": "worker"}),
            build_pod("c1", "p3", "", PENDING, rl("1", "1G"), "pg1", {"volcano.sh/task-spec": "worker"}, {"nodeRole": "worker"}),
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
