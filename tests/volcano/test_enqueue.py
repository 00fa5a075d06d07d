"""Ported from Volcano release-1.14 ``pkg/scheduler/actions/enqueue/enqueue_test.go``.

``TestEnqueue``: every case. The Go tier also holds the sla plugin (``sla-waiting-time:
3m``), which caldera does not implement; here it would only abstain (no job has waited
3 minutes), so it is left out.
"""

from __future__ import annotations

import pytest

from tests.volcano.builders import (
    PENDING,
    RUNNING,
    build_pod,
    build_pod_group,
    build_pod_group_with_min_resources,
    build_queue,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, run_case

TIERS = [
    [
        Plugin("drf", ("enableJobOrder", "enableJobEnqueued")),
        Plugin("proportion", ("enableQueueOrder", "enableJobEnqueued")),
        Plugin("gang", ("enableJobOrder",)),
    ]
]

CASES = [
    Case(
        name="when podgroup status is inqueue",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 2, None, "Inqueue"),
        ],
        pods=[
            build_pod("c1", "p1", "", PENDING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg1", {}, {}),
        ],
        queues=[
            build_queue("c1", 1, rl("4", "4G")),
            build_queue("c2", 1, rl("4", "4G")),
        ],
        expect_status={
            "c1/pg1": "Inqueue",
        },
    ),
    Case(
        name="when podgroup status is pending",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 1, None, "Pending"),
            build_pod_group("pg2", "c1", "c2", 1, None, "Pending"),
        ],
        pods=[
            # pending pod with owner1, under ns:c1/q:c1
            build_pod("c1", "p1", "", PENDING, rl("3", "1G"), "pg1", {}, {}),
            # pending pod with owner2, under ns:c1/q:c2
            build_pod("c1", "p2", "", PENDING, rl("1", "1G"), "pg2", {}, {}),
        ],
        queues=[
            build_queue("c1", 1, rl("4", "4G")),
            build_queue("c2", 1, rl("4", "4G")),
        ],
        expect_status={
            "c1/pg1": "Inqueue",
            "c1/pg2": "Inqueue",
        },
    ),
    Case(
        name="when podgroup status is running",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 2, None, "Running"),
        ],
        pods=[
            build_pod("c1", "p1", "", RUNNING, rl("1", "1G"), "pg1", {}, {}),
            build_pod("c1", "p2", "", RUNNING, rl("1", "1G"), "pg1", {}, {}),
        ],
        queues=[
            build_queue("c1", 1, rl("4", "4G")),
        ],
        expect_status={
            "c1/pg1": "Running",
        },
    ),
    Case(
        name="pggroup cannot enqueue because the specified queue is c1, but there is only c2",
        podgroups=[
            build_pod_group("pg1", "c1", "c1", 0, None, "Pending"),
        ],
        queues=[
            build_queue("c2", 1, rl("4", "4G")),
        ],
        expect_status={},
    ),
    Case(
        name="pggroup cannot enqueue because queue resources are less than podgroup MinResources",
        podgroups=[
            build_pod_group_with_min_resources("pg1", "c1", "c1", 1, None, rl("8", "8G"), "Pending"),
        ],
        queues=[
            build_queue("c1", 1, rl("1", "1G")),
        ],
        expect_status={
            "c1/pg1": "Pending",
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_enqueue(case: Case) -> None:
    """enqueue_test.go TestEnqueue."""
    run_case(case, TIERS, ["enqueue"])
