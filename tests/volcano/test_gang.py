"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/gang/gang_test.go``.

``TestShouldSkipUnschedulableForReleasing``: whether gang leaves an unready job's PodGroup
without the Unschedulable condition at session close because releasing pods still on
their nodes make up its minMember. caldera asks this in ``status.gang_unschedulable``
(not ready, and not skipped); each case's tasks are pods of a real session (a releasing
pod is one being deleted; a pipelined task is set so after the session opens, as only a
statement can make one).
"""

from __future__ import annotations

import msgspec
import pytest

from batch_scheduler.status import gang_unschedulable
from batch_scheduler.tasks import TaskStatus
from cluster.model.core import Pod
from tests.volcano.builders import (
    PENDING,
    PG_RUNNING,
    RUNNING,
    build_pod,
    build_pod_group,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session

Task = tuple[str, TaskStatus, str]  # uid, status, node


def _pod(uid: str, status: TaskStatus, node: str) -> Pod:
    phase = PENDING if status in (TaskStatus.PENDING, TaskStatus.PIPELINED) else RUNNING
    pod = build_pod("ns", uid, "" if status is TaskStatus.PIPELINED else node, phase, rl("1", "1Gi"), "job-1")
    if status is TaskStatus.RELEASING:
        pod = msgspec.structs.replace(
            pod, metadata=msgspec.structs.replace(pod.metadata, deletion_timestamp="2024-01-01T00:00:00Z")
        )
    return pod


CASES: list[tuple[str, int, list[Task], bool]] = [
    (
        "partial termination",
        2,
        [("running", TaskStatus.RUNNING, "node-1"), ("releasing", TaskStatus.RELEASING, "node-2")],
        True,
    ),
    (
        "pending replacement still needs condition",
        2,
        [
            ("running", TaskStatus.RUNNING, "node-1"),
            ("releasing", TaskStatus.RELEASING, "node-2"),
            ("replacement", TaskStatus.PENDING, ""),
        ],
        False,
    ),
    (
        "pipelined replacement still needs condition",
        2,
        [
            ("running", TaskStatus.RUNNING, "node-1"),
            ("releasing", TaskStatus.RELEASING, "node-2"),
            ("replacement", TaskStatus.PIPELINED, "node-3"),
        ],
        False,
    ),
    ("never scheduled releasing task is not counted", 1, [("releasing", TaskStatus.RELEASING, "")], False),
    (
        "scheduled tasks below minAvailable",
        3,
        [("running", TaskStatus.RUNNING, "node-1"), ("releasing", TaskStatus.RELEASING, "node-2")],
        False,
    ),
]


@pytest.mark.parametrize(("name", "min_member", "tasks", "skipped"), CASES, ids=[c[0] for c in CASES])
def test_should_skip_unschedulable_for_releasing(name: str, min_member: int, tasks: list[Task], skipped: bool) -> None:
    """gang_test.go TestShouldSkipUnschedulableForReleasing."""
    case = Case(
        name=name,
        pods=[_pod(*t) for t in tasks],
        podgroups=[build_pod_group("job-1", "ns", "default", min_member, None, PG_RUNNING)],
    )
    ssn = open_session(case, [[Plugin("gang", ("enableJobReady",))]], ["allocate"])
    job = ssn.jobs["ns/job-1"]
    for uid, status, node in tasks:
        task = ssn.tasks[f"ns-{uid}"]
        if status is TaskStatus.PIPELINED:
            task.status, task.node = TaskStatus.PIPELINED, node
        assert (task.status, task.node) == (status, node)
    assert not job.is_ready()  # every case is an unready job: the skip is all that decides
    assert gang_unschedulable(job) is not skipped
