"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/predicates/predicates_test.go``.

``TestNodeNum``: a node's ``pods`` allocatable caps how many pods it takes. The file's
other tests are not portable (README): ``TestEventHandler`` and ``TestPodAntiAffinity``
turn on required pod anti-affinity, which caldera does not model; the DRA, volume-binding
and plugin-wiring tests (``TestSetUpDynamicResourcesArgs_*``, ``TestInitPlugin``,
``TestPredicateFailureReasonAggregationOrderStable``, ``TestReserveRollbackOrderStable``)
exercise kube-scheduler plugin instances and volume/DRA reservations caldera does not have.
"""

from __future__ import annotations

from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    build_node,
    build_pod,
    build_pod_group_with_prio,
    build_priority_class,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case


def test_node_num() -> None:
    """predicates_test.go TestNodeNum "pod-predicate"."""
    worker = {"role": "worker"}
    case = Case(
        name="pod-predicate",
        pods=[
            build_pod("ns1", "worker-1", "", PENDING, {}, "pg1", worker, {"selector": "worker"}),
            build_pod("ns1", "worker-2", "", PENDING, {}, "pg1", worker, {}),
            build_pod("ns1", "worker-3", "", PENDING, {}, "pg2", worker, {}),
        ],
        nodes=[build_node("node1", rl("4", "4k", scalar("pods", "2")), {"selector": "worker"})],
        priority_classes=[build_priority_class("p1", 1), build_priority_class("p2", 2)],
        podgroups=[
            build_pod_group_with_prio("pg1", "ns1", "q1", 2, None, PG_INQUEUE, "p2"),
            build_pod_group_with_prio("pg2", "ns1", "q1", 1, None, PG_INQUEUE, "p1"),
        ],
        queues=[build_queue("q1", 0, None)],
        expect_bind_map={"ns1/worker-1": "node1", "ns1/worker-2": "node1"},
        expect_binds_num=2,
    )
    run_case(case, [[Plugin("predicates", ("enablePredicate",))]], ["allocate", "backfill"])
