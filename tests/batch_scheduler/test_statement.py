"""Statements: allocate, pipeline and evict are tentative; discard leaves no trace, commit hands them on."""

from __future__ import annotations

from typing import Any

import numpy as np

from batch_scheduler.session import Session
from batch_scheduler.statement import Statement
from batch_scheduler.tasks import TaskStatus
from cluster.model.resources import Resources
from tests.batch_scheduler.inputs import conf, podgroup, queue, session, task
from tests.builders import node


def gang_session() -> Session:
    pods = [
        task("p0", group="g", cpu="2", memory="2Gi"),
        task("p1", group="g", cpu="3", memory="1Gi"),
        task("run", group="old", cpu="1", memory="1Gi", node="n2"),
    ]
    return session(
        conf(["gang", "predicates", "binpack"]),
        [node("n1"), node("n2")],
        pods,
        podgroups=[podgroup("g", min_member=2, queue="q"), podgroup("old", queue="q", phase="Running")],
        queues=[queue("q")],
    )


State = tuple[Any, dict[str, Resources], dict[str, Resources], dict[str, tuple[TaskStatus, str]], dict[str, Resources]]


def state(ssn: Session) -> State:
    return (
        ssn.columns.allocated.copy(),
        {k: j.allocated.to_amounts() for k, j in ssn.jobs.items()},
        {k: q.allocated.to_amounts() for k, q in ssn.queues.items()},
        {u: (t.status, t.node) for u, t in ssn.tasks.items()},
        {n: r for n, r in ssn.releasing.items() if not r.is_empty},
    )  # an emptied entry frees nothing


def same(a: State, b: State) -> bool:
    return bool(np.array_equal(a[0], b[0])) and a[1:] == b[1:]


def test_allocate_then_discard_restores_everything_exactly() -> None:
    ssn = gang_session()
    before = state(ssn)
    p0, p1 = ssn.tasks["uid-p0"], ssn.tasks["uid-p1"]
    stmt = Statement(ssn)
    stmt.allocate(p0, "n1")
    stmt.allocate(p1, "n1")
    n1 = ssn.columns.index["n1"]
    cpu = ssn.columns.resource_index["cpu"]
    assert ssn.columns.allocated[cpu, n1] == 5000
    assert ssn.jobs["default/g"].allocated.to_amounts() == Resources(
        {"cpu": 5000, "memory": 3 * 2**30, "pods": 2}
    )  # a pod slot each
    assert ssn.queues["q"].allocated.to_amounts() == Resources({"cpu": 6000, "memory": 4 * 2**30, "pods": 3})
    assert (p0.status, p0.node) == (TaskStatus.ALLOCATED, "n1")
    assert ssn.tiers.job_ready(ssn.jobs["default/g"])
    assert not stmt.empty

    stmt.discard()
    assert same(state(ssn), before)
    assert (p0.status, p0.node) == (TaskStatus.PENDING, "")
    assert ssn.jobs["default/g"].allocated.to_amounts() == Resources()
    assert ssn.queues["q"].allocated.to_amounts() == Resources({"cpu": 1000, "memory": 2**30, "pods": 1})
    assert stmt.empty and ssn.commits == [] and ssn.evictions == []


def test_commit_hands_the_batch_to_the_session() -> None:
    ssn = gang_session()
    p0, p1 = ssn.tasks["uid-p0"], ssn.tasks["uid-p1"]
    stmt = Statement(ssn)
    stmt.allocate(p0, "n1")
    stmt.allocate(p1, "n2")
    stmt.commit()
    assert ssn.commits == [[p0, p1]]
    assert stmt.empty and ssn.evictions == []
    assert (p1.status, p1.node) == (TaskStatus.BINDING, "n2")  # handed to the binder
    assert ssn.jobs["default/g"].allocated.to_amounts() == Resources({"cpu": 5000, "memory": 3 * 2**30, "pods": 2})
    stmt.discard()  # nothing left to undo once committed
    assert p0.status is TaskStatus.BINDING and ssn.commits == [[p0, p1]]


def test_each_commit_is_its_own_batch_and_an_empty_one_adds_nothing() -> None:
    ssn = gang_session()
    p0, p1 = ssn.tasks["uid-p0"], ssn.tasks["uid-p1"]
    Statement(ssn).commit()
    assert ssn.commits == []
    for t in (p0, p1):
        stmt = Statement(ssn)
        stmt.allocate(t, "n1")
        stmt.commit()
    assert ssn.commits == [[p0], [p1]]


def test_evict_then_discard_restores_the_running_task() -> None:
    ssn = gang_session()
    before = state(ssn)
    run = ssn.tasks["uid-run"]
    stmt = Statement(ssn)
    stmt.evict(run)
    assert run.status is TaskStatus.RELEASING
    assert ssn.queues["q"].allocated.to_amounts() == Resources()
    assert ssn.releasing["n2"] == run.request
    assert ssn.future_idle("n2")["cpu"] == 8000
    stmt.discard()
    assert same(state(ssn), before)  # the task runs again


def test_evict_and_pipeline_then_commit() -> None:
    ssn = gang_session()
    run, p0 = ssn.tasks["uid-run"], ssn.tasks["uid-p0"]
    stmt = Statement(ssn)
    stmt.evict(run)
    stmt.pipeline(p0, "n2")
    assert (p0.status, p0.node) == (TaskStatus.PIPELINED, "n2")
    assert ssn.releasing["n2"] == run.request - p0.request
    stmt.commit()
    assert ssn.evictions == [run] and ssn.commits == []  # a pipelined task waits: nothing to bind yet


def test_pipeline_then_discard_gives_the_room_back() -> None:
    ssn = gang_session()
    before = state(ssn)
    run, p0 = ssn.tasks["uid-run"], ssn.tasks["uid-p0"]
    stmt = Statement(ssn)
    stmt.evict(run)
    stmt.pipeline(p0, "n2")
    stmt.discard()
    assert same(state(ssn), before)
    assert (p0.status, p0.node) == (TaskStatus.PENDING, "") and run.status is TaskStatus.RUNNING


def test_discard_lets_the_session_place_on_the_freed_node_again() -> None:
    # binpack prefers the fuller node; after a discard the scores must see the node as it is again.
    ssn = session(
        conf(["predicates", "binpack"]),
        [node("a", cpu=4), node("b", cpu=8)],
        [task("x", cpu="3", memory="0"), task("y", cpu="3", memory="0")],
    )
    x, y = ssn.tasks["uid-x"], ssn.tasks["uid-y"]
    first = ssn.best_node(x)
    assert first == (ssn.columns.index["a"], False)  # 3/4 beats 3/8; room now, not pipelined
    stmt = Statement(ssn)
    stmt.allocate(x, "a")
    assert ssn.best_node(y) == (ssn.columns.index["b"], False)  # a is full now
    stmt.discard()
    assert ssn.best_node(y) == first
