"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/predicates/predicates_test.go``.

``TestNodeNum``: a node's ``pods`` allocatable caps how many pods it takes.
``TestPodAntiAffinity``: preempt does not evict for a pod the node's other pods' anti-affinity
keeps out anyway. ``TestEventHandler`` checks a kube-scheduler plugin instance's cached state,
not placement; the DRA, volume-binding
and plugin-wiring tests (``TestSetUpDynamicResourcesArgs_*``, ``TestInitPlugin``,
``TestPredicateFailureReasonAggregationOrderStable``, ``TestReserveRollbackOrderStable``)
exercise kube-scheduler plugin instances and volume/DRA reservations caldera does not have.
"""

from __future__ import annotations

from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    PG_RUNNING,
    RUNNING,
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


WORKER_APART = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}]},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _anti_affinity_case(name: str, w1_group: str, w2_group: str, evicted: list[str], pipelined: list[str]) -> Case:
    high, low = build_priority_class("high-priority", 100000), build_priority_class("low-priority", 10)
    w1 = build_pod(
        "ns1",
        "worker-1",
        "n1",
        RUNNING,
        rl("3", "3G"),
        w1_group,
        {"role": "worker"},
        {},
        priority=high.value,
        affinity=WORKER_APART,
    )
    w2 = build_pod("ns1", "worker-2", "n1", RUNNING, rl("3", "3G"), w2_group, {}, {}, priority=low.value)
    w3 = build_pod(
        "ns1",
        "worker-3",
        "",
        PENDING,
        rl("3", "3G"),
        "pg2",
        {"role": "worker"},
        {},
        priority=high.value,
        affinity=WORKER_APART,
    )
    return Case(
        name=name,
        pods=[w1, w2, w3],
        nodes=[build_node("n1", rl("12", "12G", scalar("pods", "2")), {"kubernetes.io/hostname": "node1"})],
        priority_classes=[low, high],
        podgroups=[
            build_pod_group_with_prio("pg0", "ns1", "q1", 0, None, PG_RUNNING, "low-priority"),
            build_pod_group_with_prio("pg1", "ns1", "q1", 0, None, PG_RUNNING, "low-priority"),
            build_pod_group_with_prio("pg3", "ns1", "q1", 0, None, PG_RUNNING, "high-priority"),
            build_pod_group_with_prio("pg2", "ns1", "q1", 1, None, PG_INQUEUE, "high-priority"),
        ],
        queues=[build_queue("q1", 0, rl("9", "9G"))],
        expect_pipelined={"ns1/pg2": ["n1"]} if pipelined else {},
        expect_evicted=evicted,
        expect_evict_num=len(evicted),
    )


TIERS = [[Plugin("predicates", ("enablePredicate",)), Plugin("priority", ("enablePreemptable", "enableJobStarving"))]]


def test_pod_anti_affinity() -> None:
    """predicates_test.go TestPodAntiAffinity "pod-anti-affinity", where caldera differs: the node is
    full (2 pods) and worker-1 there keeps worker-3 out by anti-affinity. The Go test runs with
    ``enableTopologyAwarePreemption`` (not implemented by caldera, and named so), which compares pod
    priorities: worker-1's equals worker-3's, so it is no victim and nothing is evicted. caldera's
    preemption compares job priorities, as Volcano's normal preemption does — worker-1's job is
    low-priority, so it is a victim — and, unlike it (which evicts worker-2 for room and leaves
    worker-3 where worker-1's rule still keeps it out), evicts what the rule needs: worker-1 alone."""
    run_case(
        _anti_affinity_case("pod-anti-affinity", "pg1", "pg1", ["ns1/worker-1"], ["n1"]), TIERS, ["allocate", "preempt"]
    )


def test_pod_anti_affinity_of_a_pod_that_stays() -> None:
    """The Go case's expectation, with worker-1 no victim (its job is high-priority): evicting
    worker-2 would make room, but worker-1 stays and keeps worker-3 out, so nothing is evicted and
    nothing pipelined (Volcano's normal preemption would evict worker-2 in vain)."""
    run_case(_anti_affinity_case("anti-affinity-stays", "pg3", "pg0", [], []), TIERS, ["allocate", "preempt"])
