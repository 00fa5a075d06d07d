"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/proportion/proportion_test.go``.

- ``TestProportion``: what a queue holds across sessions as its PodGroups are deleted. The
  Go test reads the queue's ``volcano_queue_allocated_*`` metric over HTTP after each of
  three sessions (only its first case ever runs: the test returns after it; the ``expected``
  binds are never checked); here each session is opened on what is left and the queue's
  allocation (what caldera's metric reports) is read. Its second case ("realcapability-test")
  never runs in Go and is not ported.
- ``TestEnqueueAndAllocable``: every case (enqueue, then allocate, with the switches each
  case turns on).
- ``TestAllocate``: queue priority orders queues before their share.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from cluster.model.core import Pod
from cluster.model.volcano import PodGroup, Queue
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    PG_PENDING,
    PG_RUNNING,
    RUNNING,
    build_node,
    build_pod,
    build_pod_group,
    build_pod_group_with_prio,
    build_priority_class,
    build_queue,
    build_queue_with_priority_and_resources_quantity,
    build_queue_with_state,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session, run_case

PODS10 = scalar("pods", "10")

# -- TestProportion -----------------------------------------------------------------------

WORKER_ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}]},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _worker(name: str, req: dict[str, str], group: str, selector: dict[str, str]) -> Pod:
    return build_pod("ns1", name, "", RUNNING, req, group, {"role": "worker"}, selector, affinity=WORKER_ANTI_AFFINITY)


def _inqueue(pg: PodGroup) -> PodGroup:
    return msgspec.structs.replace(pg, status=msgspec.structs.replace(pg.status, phase=PG_INQUEUE))


def test_proportion_pod_deallocate() -> None:
    """proportion_test.go TestProportion "pod-deallocate": the queue holds 12 cpu, then 4 once pg1
    is deleted, then nothing once pg2 is (the Go test asserts the last: 2000 or 0)."""
    pods = [
        _worker("worker-1", rl("3", "3k"), "pg1", {"selector": "worker"}),
        _worker("worker-2", rl("5", "5k"), "pg1", {}),
        _worker("worker-3", rl("4", "4k"), "pg2", {}),
    ]
    nodes = [
        build_node(
            "node1", rl("4", "4k", scalar("pods", "15")), {"selector": "worker", "kubernetes.io/hostname": "node1"}
        ),
        build_node("node2", rl("3", "3k", scalar("pods", "15")), {"kubernetes.io/hostname": "node2"}),
    ]
    pg1 = _inqueue(build_pod_group_with_prio("pg1", "ns1", "q1", 2, None, "", "p2"))
    pg2 = _inqueue(build_pod_group_with_prio("pg2", "ns1", "q1", 1, None, "", "p1"))
    tiers = [
        [
            Plugin("proportion", ("enablePredicate",)),
            Plugin("gang", ("enableJobReady", "enableJobPipelined")),
            Plugin("priority", ("enableJobOrder",)),
        ]
    ]
    q2 = build_queue("q2", 0, rl("2", "2k", PODS10, ("nvidia.com/gpu", "4")))
    held: list[float] = []
    for podgroups in ([pg1, pg2], [pg2], []):
        case = Case(
            name="pod-deallocate",
            pods=pods,
            nodes=nodes,
            podgroups=podgroups,
            priority_classes=[build_priority_class("p1", 1), build_priority_class("p2", 2)],
            queues=[build_queue("q1", 0, None), q2],
        )
        ssn = open_session(case, tiers, ["allocate"])
        ssn.run()
        held.append(ssn.queues["q1"].allocated.cpu)
    assert held == [12000, 4000, 0]


def test_proportion_pod_deallocate_no_queue_holds_the_orphans() -> None:
    """proportion_test.go TestProportion "pod-deallocate", last session: once both PodGroups are
    deleted, no queue holds anything (the metric the Go test reads is 0 for every queue)."""
    pods = [_worker("worker-1", rl("3", "3k"), "pg1", {}), _worker("worker-3", rl("4", "4k"), "pg2", {})]
    case = Case(
        name="pod-deallocate",
        pods=pods,
        nodes=[build_node("node1", rl("4", "4k", PODS10))],
        queues=[build_queue("q1", 0, None)],
    )
    ssn = open_session(case, [[Plugin("proportion", ("enablePredicate",))]], ["allocate"])
    ssn.run()
    assert {name: q.allocated.cpu for name, q in ssn.queues.items()} == {name: 0 for name in ssn.queues}


# -- TestEnqueueAndAllocable --------------------------------------------------------------

RES_1C2G, RES_2C1G, RES_1C0G, RES_0C1G, RES_1C1G = (
    rl("1", "2G"),
    rl("2", "1G"),
    rl("1", "0G"),
    rl("0", "1G"),
    rl("1", "1G"),
)
EA_NODES = [build_node("n1", rl("2", "2G", PODS10)), build_node("n2", rl("2", "2G", PODS10))]
EA_PODS = {
    "p1": build_pod("ns1", "pod1", "n1", RUNNING, RES_1C2G, "pg1"),
    "p2": build_pod("ns1", "pod2", "n2", RUNNING, RES_2C1G, "pg2"),
    "p3": build_pod("ns1", "pod3", "", PENDING, RES_1C0G, "pg3"),
    "p4": build_pod("ns1", "pod4", "", PENDING, RES_0C1G, "pg4"),
    "p5": build_pod("ns1", "pod5", "", PENDING, RES_1C1G, "pg5"),
    "p6": build_pod("ns1", "pod6", "", PENDING, RES_1C1G, "pg6"),
}
EA_PODGROUPS = {
    "pg1": build_pod_group("pg1", "ns1", "q1", 1, None, PG_RUNNING, min_resources=RES_1C2G),
    "pg2": build_pod_group("pg2", "ns1", "q2", 1, None, PG_RUNNING, min_resources=RES_2C1G),
    "pg3": build_pod_group("pg3", "ns1", "q1", 1, None, PG_PENDING, min_resources=RES_1C0G),
    "pg4": build_pod_group("pg4", "ns1", "q2", 1, None, PG_PENDING, min_resources=RES_0C1G),
    "pg5": build_pod_group("pg5", "ns1", "q1", 1, None, PG_PENDING, min_resources=RES_1C1G),
    "pg6": build_pod_group("pg6", "ns1", "q3", 1, None, PG_PENDING, min_resources=RES_1C1G),
}
QUEUE1, QUEUE2 = build_queue("q1", 1, rl("2", "2G")), build_queue("q2", 1, rl("3", "3G"))
CLOSED_QUEUE3 = build_queue_with_state("q3", 1, rl("3", "3G"), "Closed")
ALL_ENABLE = [[Plugin("proportion", ("enabledAllocatable", "enabledOverused", "enableJobEnqueued"))]]
ENQUEUEABLE = [[Plugin("proportion", ("enableJobEnqueued",), off=("enabledAllocatable", "enabledOverused"))]]
ALLOCATABLE = [[Plugin("proportion", ("enabledAllocatable",), off=("enabledOverused", "enableJobEnqueued"))]]


def _ea_case(
    name: str,
    pods: Sequence[str],
    podgroups: Sequence[str],
    binds: dict[str, str],
    queues: Sequence[Queue] = (QUEUE1, QUEUE2),
) -> Case:
    return Case(
        name=name,
        pods=[EA_PODS[p] for p in pods],
        nodes=EA_NODES,
        podgroups=[EA_PODGROUPS[g] for g in podgroups],
        queues=list(queues),
        expect_bind_map=binds,
        expect_binds_num=len(binds),
    )


EA_CASES = [
    (
        _ea_case(
            "case0: memory exceed derserved, job only request cpu can be enqueued and allocated",
            ["p1", "p2", "p3"],
            ["pg1", "pg2", "pg3"],
            {"ns1/pod3": "n1"},
        ),
        ALL_ENABLE,
    ),
    (
        _ea_case(
            "case1: cpu exceed derserved, job only request memory can be enqueued and allocated",
            ["p1", "p2", "p4"],
            ["pg1", "pg2", "pg4"],
            {"ns1/pod4": "n2"},
        ),
        ALL_ENABLE,
    ),
    (_ea_case("case2: exceed capacity, can not enqueue", ["p1", "p2", "p5"], ["pg1", "pg2", "pg5"], {}), ENQUEUEABLE),
    (_ea_case("case3: exceed deserved, can not allocate", ["p1", "p2", "p5"], ["pg1", "pg2", "pg5"], {}), ALLOCATABLE),
    (_ea_case("case4: queue with  non-open state, can not enqueue", ["p6"], ["pg6"], {}, [CLOSED_QUEUE3]), ENQUEUEABLE),
]


@pytest.mark.parametrize(("case", "tiers"), EA_CASES, ids=[c[0].name for c in EA_CASES])
def test_enqueue_and_allocable(case: Case, tiers: list[list[Plugin]]) -> None:
    """proportion_test.go TestEnqueueAndAllocable."""
    run_case(case, tiers, ["enqueue", "allocate"])


# -- TestAllocate -------------------------------------------------------------------------


def test_allocate() -> None:
    """proportion_test.go TestAllocate "case0": pods are assigned in the order of their queues' priority."""
    cap = rl("2", "4Gi")
    case = Case(
        name="case0: Pods are assigned according to the order of Queue Priority in which PGs are placed",
        pods=[
            build_pod("ns1", "p1", "n1", RUNNING, rl("2", "4Gi"), "pg1"),
            build_pod("ns1", "p2", "", PENDING, rl("2", "4Gi"), "pg2"),
            build_pod("ns1", "p3", "", PENDING, rl("2", "4Gi"), "pg3"),
        ],
        nodes=[build_node("n1", rl("2", "4Gi", PODS10)), build_node("n2", rl("2", "4Gi", PODS10))],
        podgroups=[
            build_pod_group("pg1", "ns1", "q1", 1, None, PG_RUNNING),
            build_pod_group("pg2", "ns1", "q2", 1, None, PG_INQUEUE),
            build_pod_group("pg3", "ns1", "q3", 1, None, PG_INQUEUE),
        ],
        queues=[
            build_queue_with_priority_and_resources_quantity("q1", 5, None, cap),
            build_queue_with_priority_and_resources_quantity("q2", 1, None, cap),
            build_queue_with_priority_and_resources_quantity("q3", 10, None, cap),
        ],
        expect_bind_map={"ns1/p3": "n2"},
        expect_binds_num=1,
    )
    run_case(case, [[Plugin("proportion", ("enableQueueOrder",))]], ["allocate", "reclaim"])
