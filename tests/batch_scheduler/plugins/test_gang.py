"""The gang plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

import pytest

from batch_scheduler.plugins.gang import GangPlugin
from cluster.model.labels import TASK_SPEC_KEY as TASK_SPEC_LABEL
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, priority_class, session, task
from tests.batch_scheduler.plugins.common import lone, names, plugin, stamp
from tests.builders import node

# -- gang ---------------------------------------------------------------------------------


def gang_pods(bound: int, pending: int, succeeded: int = 0, role: str = "") -> list[PodRecord]:
    labels = {TASK_SPEC_LABEL: role} if role else {}
    pods = [task(f"b{role}{i}", group="g", node="n1", labels=labels) for i in range(bound)]
    pods += [task(f"p{role}{i}", group="g", labels=labels) for i in range(pending)]
    pods += [task(f"s{role}{i}", group="g", node="n1", phase="Succeeded", labels=labels) for i in range(succeeded)]
    return pods


@pytest.mark.parametrize(
    ("min_member", "bound", "pending", "succeeded", "ready", "starving", "invalid"),
    [
        (3, 0, 3, 0, False, True, None),
        (3, 0, 2, 0, False, True, "gang: 2/3 pods exist (minMember 3); waiting for the rest to be created"),
        (3, 1, 1, 0, False, True, "gang: 2/3 pods exist (minMember 3)"),
        (3, 3, 0, 0, True, False, None),
        (2, 1, 1, 0, False, True, None),
        (2, 1, 0, 1, True, False, None),  # a finished member still counts
        (1, 0, 0, 0, False, True, "gang: 0/1 pods exist"),
        (2, 4, 2, 0, True, False, None),
    ],
)
def test_gang_ready_valid_starving(
    min_member: int, bound: int, pending: int, succeeded: int, ready: bool, starving: bool, invalid: str | None
) -> None:
    ssn = session(
        conf(["gang"]),
        [node("n1", cpu=64)],
        gang_pods(bound, pending, succeeded),
        podgroups=[podgroup("g", min_member=min_member)],
    )
    job = ssn.jobs["default/g"]
    assert ssn.tiers.job_ready(job) is ready
    assert ssn.tiers.job_starving(job) is starving
    refusal = ssn.tiers.why_not_schedulable(job)
    if invalid is None:
        assert refusal is None and ssn.schedulable(job)
    else:
        assert refusal is not None and refusal.message.startswith(invalid)
        assert not ssn.schedulable(job) and job.reason_kind == "NotEnoughPods"


def test_gang_min_task_member_needs_every_role() -> None:
    pods = gang_pods(3, 0, role="worker") + gang_pods(0, 1, role="ps")
    ssn = session(
        conf(["gang"]),
        [node("n1", cpu=64)],
        pods,
        podgroups=[podgroup("g", min_member=3, min_task_member={"ps": 1, "worker": 2})],
    )
    job = ssn.jobs["default/g"]
    assert job.ready_count == 3 and not ssn.tiers.job_ready(job)  # ps 0/1
    ps = next(t for t in job.tasks.values() if t.name.startswith("pps"))
    ps.status = type(ps.status).ALLOCATED
    assert ssn.tiers.job_ready(job)


def test_gang_lone_pods_are_always_valid_and_unready_gangs_go_first() -> None:
    ssn = session(
        conf(["gang"]),
        [node("n1", cpu=64)],
        [task("solo"), *gang_pods(2, 0), task("w1", group="wait"), task("w2", group="wait")],
        podgroups=[podgroup("g", min_member=2, created=stamp(0)), podgroup("wait", min_member=2, created=stamp(1))],
    )
    assert ssn.tiers.why_not_schedulable(lone(ssn, "solo")) is None
    first = sorted([ssn.jobs["default/g"], ssn.jobs["default/wait"]], key=ssn.tiers.job_key())[0]
    assert first.name == "wait"  # not ready before ready, whatever the creation order


@pytest.mark.parametrize(
    ("min_member", "running", "victims"),
    [
        (1, 3, 2),  # minMember 1: all but the last (Volcano: a job keeps minMember ready tasks)
        (1, 1, 0),  # a lone running task is never a victim of gang
        (2, 3, 1),  # one may go, two must stay
        (3, 3, 0),  # at minMember: none
        (2, 2, 0),
        (4, 3, 0),  # already below: none
    ],
)
def test_gang_keeps_running_jobs_at_min_member(min_member: int, running: int, victims: int) -> None:
    gang = {"name": "gang"}
    ssn = session(
        conf([gang]),
        [node("n1", cpu=64)],
        [task("me"), *gang_pods(running, 0)],
        podgroups=[podgroup("g", min_member=min_member)],
    )
    candidates = ssn.jobs["default/g"].running()
    me = ssn.tasks["uid-me"]
    assert len(plugin(ssn, GangPlugin).preemptable(me, candidates) or []) == victims
    assert len(plugin(ssn, GangPlugin).reclaimable(me, candidates) or []) == victims
    assert len(ssn.tiers.preemptable(me, candidates)) == victims


def test_gang_protection_counts_each_job_separately() -> None:
    pods = gang_pods(3, 0) + [task(f"h{i}", group="h", node="n1") for i in range(3)]
    ssn = session(
        conf(["gang"]),
        [node("n1", cpu=64)],
        [task("me"), *pods],
        podgroups=[podgroup("g", min_member=2), podgroup("h", min_member=1)],
    )
    candidates = ssn.jobs["default/g"].running() + ssn.jobs["default/h"].running()
    out = plugin(ssn, GangPlugin).preemptable(ssn.tasks["uid-me"], candidates)
    assert sorted(names(out)) == ["b0", "h0", "h1"]  # g keeps 2, h keeps 1


def test_gang_switched_off_as_a_voter_leaves_the_decision_to_others() -> None:
    ssn = session(
        conf([{"name": "gang", "enablePreemptable": False}, "priority"]),
        [node("n1", cpu=64)],
        [task("me", priority_class="high"), *gang_pods(2, 0)],
        podgroups=[podgroup("g", min_member=2, priority_class="low")],
        priority_classes=[priority_class("high", 10), priority_class("low", 0)],
    )
    candidates = ssn.jobs["default/g"].running()
    assert len(ssn.tiers.preemptable(ssn.tasks["uid-me"], candidates)) == 2  # priority alone decides
    assert ssn.tiers.job_ready(ssn.jobs["default/g"])  # gang still answers its other points
