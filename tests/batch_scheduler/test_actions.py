"""Actions end to end through a real session: what gets admitted, placed, kept or undone."""

from __future__ import annotations

import yaml

from batch_scheduler.status import job_phase
from tests.batch_scheduler.inputs import (
    conf,
    parse,
    podgroup,
    priority_class,
    session,
    task,
)
from tests.builders import node

PLUGINS = (["priority", "gang"], ["predicates", "proportion", "nodeorder"])


def placed(ssn) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {t.name: t.node for batch in ssn.commits for t in batch}


def test_without_an_enqueue_action_pending_jobs_are_allocated_directly() -> None:
    pods = [task("a-0", group="a"), task("a-1", group="a")]
    ssn = session(
        conf(*PLUGINS, actions="allocate"), [node("n1", cpu="4")], pods, podgroups=[podgroup("a", min_member=2)]
    )
    ssn.run()
    assert placed(ssn) == {"a-0": "n1", "a-1": "n1"}


def test_with_an_enqueue_action_a_pending_job_is_admitted_before_it_is_placed() -> None:
    pods = [task("a-0", group="a")]
    ssn = session(conf(*PLUGINS, actions="allocate, enqueue"), [node("n1", cpu="4")], pods, podgroups=[podgroup("a")])
    ssn.run()  # allocate runs first: the job is still Pending then
    assert placed(ssn) == {}
    assert ssn.jobs["default/a"].phase == "Inqueue"


def test_a_gang_that_cannot_be_whole_leaves_no_placement_and_says_how_far_it_got() -> None:
    pods = [task(f"a-{i}", cpu="3", group="a") for i in range(3)]
    ssn = session(
        conf(*PLUGINS), [node("n1", cpu="5"), node("n2", cpu="5")], pods, podgroups=[podgroup("a", min_member=3)]
    )
    ssn.run()
    job = ssn.jobs["default/a"]
    assert placed(ssn) == {}
    assert ssn.columns.allocated[ssn.columns.resource_index["cpu"], :2].tolist() == [0, 0]  # undone
    assert job.reason.startswith(
        "gang: 2/3 tasks placeable, 1 short: task a-2: 0/2 nodes are available: 2 Insufficient cpu"
    )
    assert job_phase(job) == "Inqueue"


def test_an_elastic_job_beyond_min_member_commits_its_gang_then_adds_tasks_one_by_one() -> None:
    pods = [task(f"a-{i}", group="a") for i in range(4)]
    ssn = session(conf(*PLUGINS), [node("n1", cpu="8")], pods, podgroups=[podgroup("a", min_member=2)])
    ssn.run()
    assert [len(batch) for batch in ssn.commits] == [2, 1, 1]
    # As in Volcano, the PodGroup turns Running once its pods are bound (the next session sees them so).
    assert job_phase(ssn.jobs["default/a"]) == "Inqueue" and ssn.jobs["default/a"].is_ready()


def test_backfill_places_best_effort_pods_the_allocate_action_leaves() -> None:
    pods = [task("be", cpu=0, memory=0)]
    ssn = session(conf(*PLUGINS, actions="enqueue, allocate"), [node("n1", cpu="1")], pods)
    ssn.run()
    assert placed(ssn) == {}
    ssn = session(conf(*PLUGINS, actions="enqueue, allocate, backfill"), [node("n1", cpu="1")], pods)
    ssn.run()
    assert placed(ssn) == {"be": "n1"}


def test_enqueue_admits_a_podgroup_before_its_pods_exist() -> None:
    # Volcano's job controller creates a Job's pods only once its PodGroup is Inqueue: a
    # scheduler that waited for the pods first would never start a Volcano Job.
    ssn = session(
        conf(*PLUGINS), [node("n1", cpu="4")], [], podgroups=[podgroup("j", min_member=2, min_resources={"cpu": "2"})]
    )
    ssn.run()
    job = ssn.jobs["default/j"]
    assert job.phase == "Inqueue" and job_phase(job) == "Inqueue"
    assert "0/2 pods exist" in job.reason  # allocate says what it waits for


def test_allocate_goes_on_after_a_task_fits_nowhere_while_the_gang_can_still_be_ready() -> None:
    # minMember 2 of 3: the big task fits nowhere, the two others still make the gang.
    pods = [task("a-0", group="a", cpu="16"), task("a-1", group="a"), task("a-2", group="a")]
    ssn = session(conf(*PLUGINS), [node("n1", cpu="4")], pods, podgroups=[podgroup("a", min_member=2)])
    ssn.run()
    assert placed(ssn) == {"a-1": "n1", "a-2": "n1"}


def test_a_task_whose_pod_says_preemption_policy_never_preempts_nothing() -> None:
    classes = [priority_class("low", 1), priority_class("high", 100)]
    running = [task(f"low-{i}", group="low", cpu="2", node="n1") for i in range(2)]
    groups = [
        podgroup("low", priority_class="low", phase="Running"),
        podgroup("high", priority_class="high", phase="Inqueue"),
    ]
    scheduler_conf = conf(["priority", "gang", "conformance"], ["proportion"], actions="enqueue, allocate, preempt")
    for policy, evicted in (("Never", 0), ("PreemptLowerPriority", 1)):
        pods = [*running, task("high-0", group="high", cpu="2", priority_class="high", preemptionPolicy=policy)]
        ssn = session(scheduler_conf, [node("n1", cpu="4")], pods, podgroups=groups, priority_classes=classes)
        ssn.run()
        assert len(ssn.evictions) == evicted, policy  # which of the two goes is the gang plugin's choice


def test_gang_keeps_a_running_job_at_its_min_member_even_when_that_is_one_task() -> None:
    classes = [priority_class("low", 1), priority_class("high", 100)]
    pods = [
        task("low-0", group="low", cpu="4", node="n1"),
        task("high-0", group="high", cpu="4", priority_class="high"),
    ]
    groups = [
        podgroup("low", min_member=1, priority_class="low", phase="Running"),
        podgroup("high", priority_class="high", phase="Inqueue"),
    ]
    ssn = session(
        conf(["priority", "gang", "conformance"], ["proportion"], actions="enqueue, allocate, preempt"),
        [node("n1", cpu="4")],
        pods,
        podgroups=groups,
        priority_classes=classes,
    )
    ssn.run()
    assert ssn.evictions == []  # Volcano's gang: a job loses tasks only while it keeps more than minMember


def test_a_gated_pod_waits_for_its_scheduling_gates_and_says_so() -> None:
    pods = [task("g-0", group="g", schedulingGates=[{"name": "quota.example.com/wait"}])]
    ssn = session(conf(*PLUGINS), [node("n1", cpu="4")], pods, podgroups=[podgroup("g", phase="Inqueue")])
    ssn.run()
    assert placed(ssn) == {}
    assert (
        ssn.jobs["default/g"].reason
        == "1 pod(s) wait for their scheduling gates to be removed (quota.example.com/wait)"
    )


def test_allocate_skips_tasks_of_a_role_that_fit_nowhere_unless_the_cache_is_off() -> None:
    # Two "big" tasks ask for a label no node has: the second one is not even tried (Volcano's
    # predicate error cache by task role) unless predicateErrorCacheEnable is false.
    role = {"volcano.sh/task-spec": "big"}
    pods = [task(f"b-{i}", group="a", labels=role, nodeSelector={"pool": "none"}) for i in range(2)]
    pods.append(task("s-0", group="a"))
    for arguments, tried in (({}, 1), ({"predicateErrorCacheEnable": False}, 2)):
        text = yaml.safe_dump(
            {
                "actions": "allocate",
                "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}],
                "configurations": [{"name": "allocate", "arguments": arguments}],
            }
        )
        ssn = session(parse(text), [node("n1", cpu="4")], pods, podgroups=[podgroup("a", phase="Inqueue")])
        ssn.run()
        job = ssn.jobs["default/a"]
        assert placed(ssn) == {"s-0": "n1"}
        assert sum("0/1 nodes are available" in why for why in job.fit_errors.values()) == tried, arguments
