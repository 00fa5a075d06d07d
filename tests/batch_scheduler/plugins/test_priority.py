"""The priority plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

import pytest

from batch_scheduler.plugins.priority import PriorityPlugin
from tests.batch_scheduler.inputs import conf, podgroup, priority_class, session, task
from tests.batch_scheduler.plugins.common import by_name, lone, names, plugin, stamp
from tests.builders import node

# -- priority -----------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "first"), [(10, 1, "a"), (1, 10, "b"), (5, 5, "a"), (-3, 0, "b")])
def test_priority_orders_jobs_and_tasks_higher_first(a: int, b: int, first: str) -> None:
    # A lone pod's job takes its PriorityClass (Volcano's podgroup controller copies it to the
    # PodGroup); a task takes its pod's priority.
    classes = [priority_class("pa", a), priority_class("pb", b)]
    ssn = session(
        conf(["priority"]),
        [node("n1")],
        [
            task("a", priority_class="pa", created=stamp(1)),
            task("b", priority_class="pb", created=stamp(2)),
            task("ga", group="g", priority=a, created=stamp(3)),
            task("gb", group="g", priority=b, created=stamp(4)),
        ],
        podgroups=[podgroup("g", min_member=2)],
        priority_classes=classes,
    )
    jobs = sorted([lone(ssn, "a"), lone(ssn, "b")], key=ssn.tiers.job_key())
    assert jobs[0] is lone(ssn, first)  # equal priority: creation order
    tasks = sorted(ssn.jobs["default/g"].tasks.values(), key=ssn.tiers.task_key())
    assert tasks[0].name == "g" + first


def test_job_priority_from_its_podgroup_class_else_the_default_class() -> None:
    ssn = session(
        conf(["priority"]),
        [node("n1")],
        [
            task("x1", group="classed", priority=1000),
            task("y1", group="plain", priority=3),
            task("y2", group="plain", priority=7),
            task("z", priority_class="mid"),
            task("w"),
        ],
        podgroups=[podgroup("classed", priority_class="low"), podgroup("plain")],
        priority_classes=[
            priority_class("low", 1),
            priority_class("mid", 50),
            priority_class("base", 5, global_default=True),
        ],
    )
    assert ssn.jobs["default/classed"].priority == 1  # the PodGroup's class wins over its pods'
    assert ssn.jobs["default/plain"].priority == 5  # no class: the global default, not its pods' (Volcano)
    assert lone(ssn, "z").priority == 50
    assert lone(ssn, "w").priority == 5  # the global default class
    order = [j.name for j in sorted(ssn.jobs.values(), key=ssn.tiers.job_key())]
    assert order == [lone(ssn, "z").name, "plain", lone(ssn, "w").name, "classed"]  # ties: by key


def test_priority_preempts_lower_jobs_and_lower_tasks_of_its_own_job() -> None:
    classes = [priority_class("five", 5), priority_class("ten", 10), priority_class("twenty", 20)]
    ssn = session(
        conf(["priority"]),
        [node("n1", cpu=32)],
        [
            task("me", group="mine", priority=10),
            task("mine-low", group="mine", priority=5, node="n1"),
            task("mine-same", group="mine", priority=10, node="n1"),
            task("low", priority_class="five", node="n1"),
            task("equal", priority_class="ten", node="n1"),
            task("high", priority_class="twenty", node="n1"),
        ],
        podgroups=[podgroup("mine", min_member=1, priority_class="ten")],
        priority_classes=classes,
    )
    me = ssn.tasks["uid-me"]
    candidates = by_name(ssn, "mine-low", "mine-same", "low", "equal", "high")
    # other jobs by job priority, the preemptor's own job by task priority
    assert names(plugin(ssn, PriorityPlugin).preemptable(me, candidates)) == ["mine-low", "low"]
    assert names(ssn.tiers.preemptable(me, candidates)) == ["mine-low", "low"]


def test_priority_a_pods_own_priority_does_not_make_its_lone_job_preempt() -> None:
    # spec.priority orders tasks, not jobs: two lone pods without a class have the same (default)
    # job priority, so neither may preempt the other (Volcano).
    ssn = session(conf(["priority"]), [node("n1")], [task("me", priority=100), task("them", priority=0, node="n1")])
    assert ssn.tiers.preemptable(ssn.tasks["uid-me"], by_name(ssn, "them")) == []
