"""Ported from Volcano release-1.14 ``pkg/scheduler/actions/backfill/backfill_test.go`` and ``backfill_shard_test.go``.

``TestPickUpPendingTasks`` (the order backfill takes best-effort tasks in) and
``TestBackfillWithShard``: every case.
"""

from __future__ import annotations

import pytest

from batch_scheduler.actions.backfill import pending_tasks
from tests.volcano.builders import (
    PENDING,
    build_node,
    build_pod,
    build_pod_group,
    build_pod_group_with_prio,
    build_pod_with_priority,
    build_priority_class,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session, run_case

PICK_UP_TIERS = [
    [
        Plugin("priority", ("enablePreemptable", "enableTaskOrder", "enableJobOrder")),
        Plugin("drf", ("enableQueueOrder",)),
    ]
]


def test_pick_up_pending_tasks() -> None:
    """backfill_test.go TestPickUpPendingTasks "test".

    The Go test then pipelines its second set of pods, but it looks them up by namespace/name
    where Volcano keys tasks by uid, finds none, and so leaves every pod pending: here too.
    """
    p1, p2, p3, p4 = 1, 2, 3, 4
    pods = []
    for pg in ("pg1", "pg2"):
        for i, prio in ((1, p1), (3, p3), (2, p2), (4, p4)):
            pods.append(
                build_pod_with_priority("default", f"{pg}-besteffort-task-{i}", "", PENDING, {}, pg, {}, {}, prio)
            )
            pods.append(
                build_pod_with_priority(
                    "default", f"{pg}-unbesteffort-task-{i}", "", PENDING, {"cpu": "500m"}, pg, {}, {}, prio
                )
            )
    case = Case(
        name="test",
        pods=pods,
        queues=[build_queue("q1", 1, None)],
        podgroups=[
            build_pod_group_with_prio("pg1", "default", "q1", 1, {"": 3}, "Inqueue", "job-priority-1"),
            build_pod_group_with_prio("pg2", "default", "q1", 1, {"": 3}, "Inqueue", "job-priority-2"),
        ],
        priority_classes=[build_priority_class("job-priority-1", 1), build_priority_class("job-priority-2", 2)],
    )
    ssn = open_session(case, PICK_UP_TIERS, ["backfill"])
    assert [t.name for t in pending_tasks(ssn)] == [
        "pg2-besteffort-task-4",
        "pg2-besteffort-task-3",
        "pg2-besteffort-task-2",
        "pg2-besteffort-task-1",
        "pg1-besteffort-task-4",
        "pg1-besteffort-task-3",
        "pg1-besteffort-task-2",
        "pg1-besteffort-task-1",
    ]


SHARD_TIERS = [
    [
        Plugin("gang", ("enableJobReady",)),
        Plugin("predicates", ("enablePredicate",)),
    ]
]

SHARD_CASES = [
    Case(
        name="hard sharding mode - backfill to node in shard",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Inqueue"),
        ],
        pods=[
            # BestEffort pod for backfill
            build_pod("c1", "p1", "", PENDING, rl("0", "0"), "pg1", {}, {}),
        ],
        # n1 in shard, n2/n3/n4 are out of shard. n3 has more resources but is out of shard.
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
        nodes_in_shard=["n1"],
    ),
    Case(
        name="soft sharding mode - prefer node in shard",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Inqueue"),
        ],
        pods=[
            # BestEffort pod for backfill
            build_pod("c1", "p1", "", PENDING, rl("0", "0"), "pg1", {}, {}),
        ],
        # n1 in shard, n2/n3/n4 are out of shard. Soft mode still prefers shard nodes,
        # even though n3 (out of shard) has the most resources.
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
        nodes_in_shard=["n1"],
    ),
    Case(
        # Identical nodes, only one is in shard: soft sharding should still prefer the shard node.
        name="soft sharding mode - identical nodes prefer shard node",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Inqueue"),
        ],
        pods=[
            # BestEffort pod for backfill
            build_pod("c1", "p1", "", PENDING, rl("0", "0"), "pg1", {}, {}),
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
def test_backfill_with_shard(case: Case) -> None:
    """backfill_shard_test.go TestBackfillWithShard."""
    run_case(case, SHARD_TIERS, ["backfill"])
