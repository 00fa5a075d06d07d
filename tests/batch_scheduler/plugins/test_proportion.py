"""The proportion plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from batch_scheduler.plugins.proportion import ProportionPlugin
from batch_scheduler.session import Session
from batch_scheduler.votes import PERMIT, Refusal, VoteKind
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, queue, session, task
from tests.batch_scheduler.plugins.common import THREE_NODES, plugin
from tests.builders import node

# -- proportion ---------------------------------------------------------------------------


def deserved_cpu(*queues_: Any, demand: Mapping[str, list[str]], nodes: list[Any] | None = None) -> dict[str, float]:
    """Each queue's deserved cpu (millicores) when it asks for ``demand``: one pending cpu-only task per entry."""
    pods = [task(f"{q}-{i}", group=q, cpu=c, memory=0) for q, cpus in demand.items() for i, c in enumerate(cpus)]
    ssn = session(
        conf(["proportion"]),
        nodes or THREE_NODES,
        pods,
        podgroups=[podgroup(q.name, queue=q.name) for q in queues_],
        queues=queues_,
        default_queue=queues_[0].name,
    )
    return {q: d.get("cpu", 0.0) for q, d in plugin(ssn, ProportionPlugin).deserved.items()}


MANY = ["10"] * 4  # 40 cpu: more than the 30 there are


@pytest.mark.parametrize(
    ("queues_", "demand", "expected"),
    [
        ((queue("a", weight=2), queue("b")), {"a": MANY, "b": MANY}, {"a": 20000, "b": 10000}),  # weights 2:1
        ((queue("a", weight=2), queue("b")), {"a": ["6"], "b": MANY}, {"a": 6000, "b": 24000}),  # the rest goes round
        ((queue("a", weight=2), queue("b")), {}, {"a": 0, "b": 0}),  # nobody asks: nobody gets
        ((queue("a", weight=2), queue("b")), {"a": ["1"], "b": ["2"]}, {"a": 1000, "b": 2000}),
        (
            (queue("a", weight=2, capability={"cpu": "15"}), queue("b", guarantee={"cpu": "15"})),
            {"a": MANY, "b": MANY},
            {"a": 15000, "b": 15000},
        ),
        # the guarantee is a floor, even above the request
        (
            (queue("a", weight=2, capability={"cpu": "15"}), queue("b", guarantee={"cpu": "15"})),
            {"a": MANY, "b": ["1"]},
            {"a": 15000, "b": 15000},
        ),
        # a capped at its capability: what it cannot take goes to b
        ((queue("a", weight=2, capability={"cpu": "5"}), queue("b")), {"a": MANY, "b": MANY}, {"a": 5000, "b": 25000}),
        # two capped queues leave everything else to the third
        (
            (queue("a", capability={"cpu": "1"}), queue("b", capability={"cpu": "1"}), queue("c")),
            {"a": MANY, "b": MANY, "c": MANY},
            {"a": 1000, "b": 1000, "c": 28000},
        ),
    ],
)
def test_water_fill(queues_: tuple[Any, ...], demand: dict[str, list[str]], expected: dict[str, float]) -> None:
    assert deserved_cpu(*queues_, demand=demand) == pytest.approx(expected, abs=1e-3)


def test_water_fill_works_per_resource() -> None:
    pods = [task(f"a{i}", group="a", cpu="10", memory=0, gpu=1) for i in range(2)] + [
        task(f"b{i}", group="b", cpu="10", memory=0, gpu=1) for i in range(8)
    ]
    ssn = session(
        conf(["proportion"]),
        [node(f"g{i}", cpu=10, memory="64Gi", gpu=4) for i in range(3)],
        pods,
        podgroups=[podgroup("a", queue="a"), podgroup("b", queue="b")],
        queues=[queue("a"), queue("b")],
        default_queue="a",
    )
    deserved = plugin(ssn, ProportionPlugin).deserved
    assert deserved["a"] == pytest.approx({"cpu": 15000, "nvidia.com/gpu": 2})  # all the GPUs it asks for
    assert deserved["b"] == pytest.approx({"cpu": 15000, "nvidia.com/gpu": 8})  # and b the rest it asks for


def test_water_fill_counts_pods_like_volcano() -> None:
    # Every task is one pod: a queue deserves as many pods as it asks for, so with tasks waiting
    # it is never overused — the allocatable check stops it at its cpu share instead.
    pods = cpu_tasks("qa", bound=2, pending=2) + cpu_tasks("qb", pending=2)
    ssn = proportion_session(queue("qa", weight=2), queue("qb", weight=1), pods=pods)
    attr = plugin(ssn, ProportionPlugin).attrs["qa"]
    assert attr.deserved.get("pods") == 4 and attr.allocated.get("pods") == 2
    assert ssn.tiers.overused(ssn.queues["qa"]) is None
    assert ssn.tiers.allocatable(ssn.queues["qa"], ssn.tasks["uid-qa-p0"]) is not None


def proportion_session(
    *queues_: Any, pods: list[PodRecord], podgroups: list[Any] | None = None, default_queue: str = ""
) -> Session:
    """``default_queue``: '' names the first queue, so no implicit empty queue takes part."""
    groups = podgroups if podgroups is not None else [podgroup(q.name, queue=q.name) for q in queues_]
    return session(
        conf(["proportion"]),
        THREE_NODES,
        pods,
        podgroups=groups,
        queues=queues_,
        default_queue=default_queue or queues_[0].name,
    )


def cpu_tasks(group: str, *, bound: int = 0, pending: int = 0, cpu: str = "10") -> list[PodRecord]:
    """Tasks requesting cpu only (no memory), so a queue's share is its cpu share."""
    return [task(f"{group}-b{i}", group=group, cpu=cpu, memory=0, node=f"n{i}") for i in range(bound)] + [
        task(f"{group}-p{i}", group=group, cpu=cpu, memory=0) for i in range(pending)
    ]


def test_proportion_refuses_a_task_past_the_deserved_share_and_orders_queues() -> None:
    ssn = proportion_session(
        queue("qa", weight=2),
        queue("qb", weight=1),
        pods=cpu_tasks("qa", bound=2, pending=2) + cpu_tasks("qb", pending=2),
    )
    prop = plugin(ssn, ProportionPlugin)
    assert prop.deserved["qa"]["cpu"] == pytest.approx(20000)
    assert prop.deserved["qb"]["cpu"] == pytest.approx(10000)
    qa, qb = ssn.queues["qa"], ssn.queues["qb"]
    assert sorted([qa, qb], key=ssn.tiers.queue_key())[0] is qb  # 0/10 before 20/20

    refusal = ssn.tiers.allocatable(qa, ssn.tasks["uid-qa-p0"])
    assert refusal is not None and refusal.condition == "QueueShareExceeded"
    assert refusal.message.startswith("queue qa: deserved share cpu 20 would be exceeded (allocated 20, task needs 10)")
    assert ssn.tiers.allocatable(qb, ssn.tasks["uid-qb-p0"]) is None
    assert ssn.tiers.overused(qa) is None  # qa's pending pods: below its deserved pod count (Volcano)


def test_proportion_overused_once_a_queue_holds_all_it_deserves() -> None:
    ssn = proportion_session(
        queue("qa", weight=2), queue("qb", weight=1), pods=cpu_tasks("qa", bound=2) + cpu_tasks("qb", pending=2)
    )
    over = ssn.tiers.overused(ssn.queues["qa"])
    assert over is not None and over.condition == "QueueShareExceeded"
    assert over.message == "queue qa: at its deserved share (cpu 20); waits for its running jobs to finish"
    assert ssn.tiers.overused(ssn.queues["qb"]) is None


def test_proportion_capability_caps_the_queue_and_says_so() -> None:
    ssn = proportion_session(
        queue("qc", capability={"cpu": "5"}),
        queue("qd"),
        pods=cpu_tasks("qc", bound=1, pending=3, cpu="4") + cpu_tasks("qd", pending=3, cpu="4"),
    )
    prop = plugin(ssn, ProportionPlugin)
    assert prop.deserved["qc"]["cpu"] == pytest.approx(5000)
    refusal = ssn.tiers.allocatable(ssn.queues["qc"], ssn.tasks["uid-qc-p0"])
    assert refusal == Refusal(
        "queue qc: capability cpu 5 would be exceeded (allocated 4, task needs 4)", "QueueCapabilityExceeded"
    )
    assert prop.deserved["qd"]["cpu"] == pytest.approx(12000)  # all it asks for


def test_proportion_deserved_hands_on_what_satisfied_queues_leave() -> None:
    # Realistic pods (cpu and some memory) and the implicit default queue, which asks for nothing:
    # qa and qb still want cpu, so the default queue's weight share must go round to them.
    pods = (
        [task(f"a{i}", group="ga", cpu="10", node=f"n{i}") for i in range(2)]
        + [task(f"a-p{i}", group="ga", cpu="10") for i in range(2)]
        + [task(f"b-p{i}", group="gb", cpu="10") for i in range(2)]
    )
    ssn = session(
        conf(["proportion"]),
        THREE_NODES,
        pods,
        podgroups=[podgroup("ga", queue="qa"), podgroup("gb", queue="qb")],
        queues=[queue("qa", weight=2), queue("qb", weight=1)],
    )
    prop = plugin(ssn, ProportionPlugin)
    assert "default" not in prop.deserved  # a queue without jobs takes no part (Volcano)
    assert prop.deserved["qa"]["cpu"] == pytest.approx(20000)
    assert prop.deserved["qb"]["cpu"] == pytest.approx(10000)
    assert ssn.tiers.allocatable(ssn.queues["qb"], ssn.tasks["uid-b-p0"]) is None  # 10 cpu idle, qb's share


def test_proportion_a_task_reaching_exactly_the_deserved_share_fits() -> None:
    # qa is capped at 5 of 30 cpu, so qb deserves exactly the other 25; a task taking qb from
    # 24 to 25 must fit, not be refused against a share a fraction of a millicore short.
    pods = (
        [task(f"b{i}", group="gb", cpu="8", memory=0, node=f"n{i}") for i in range(3)]
        + [task("b-new", group="gb", cpu="1", memory=0)]
        + [task(f"a{i}", group="ga", cpu="4", memory=0) for i in range(3)]
    )
    ssn = session(
        conf(["proportion"]),
        THREE_NODES,
        pods,
        podgroups=[podgroup("ga", queue="qa"), podgroup("gb", queue="qb")],
        queues=[queue("qa", weight=2, capability={"cpu": "5"}), queue("qb")],
        default_queue="qa",
    )
    assert ssn.tiers.allocatable(ssn.queues["qb"], ssn.tasks["uid-b-new"]) is None


def test_proportion_guarantee_is_kept_from_the_others() -> None:
    ssn = proportion_session(
        queue("qa", weight=2),
        queue("qg", guarantee={"cpu": "20"}),
        pods=cpu_tasks("qa", pending=3) + cpu_tasks("qg", pending=3),
    )
    prop = plugin(ssn, ProportionPlugin)
    assert prop.real_capability["qa"]["cpu"] == pytest.approx(10000)  # 30 − qg's guarantee
    assert prop.deserved["qa"]["cpu"] == pytest.approx(10000)
    assert prop.deserved["qg"]["cpu"] == pytest.approx(20000)


@pytest.mark.parametrize(
    ("capability", "need", "admitted", "words"),
    [
        ({"cpu": "5"}, "1", True, []),
        ({"cpu": "5"}, "2", False, ["queue qc:", "capability cpu 5 would be exceeded", "allocated 4", "job needs 2"]),
        ({}, "26", True, []),
        ({}, "27", False, ["queue qc:", "share of the cluster (after guarantees) cpu 30", "job needs 27"]),
    ],
)
def test_proportion_enqueue_within_the_real_capability(
    capability: dict[str, str], need: str, admitted: bool, words: list[str]
) -> None:
    ssn = proportion_session(
        queue("qc", capability=capability),
        pods=cpu_tasks("run", bound=1, cpu="4"),
        podgroups=[
            podgroup("run", queue="qc", phase="Running", min_resources={"cpu": "4"}),
            podgroup("new", queue="qc", min_resources={"cpu": need}),
        ],
    )
    vote = ssn.tiers.enqueueable(ssn.jobs["default/new"])
    if admitted:
        assert vote == PERMIT
    else:
        assert vote.kind is VoteKind.REJECT and vote.condition == "QueueCapabilityExceeded"
        for w in words:
            assert w in vote.reason, f"{w!r} not in {vote.reason!r}"


def test_proportion_enqueue_does_not_count_what_running_jobs_hold_beyond_their_min_resources() -> None:
    # Volcano's "elastic" resources: a running job's tasks above its minResources may be taken
    # back, so they do not keep a new job out of the queue.
    ssn = proportion_session(
        queue("qc", capability={"cpu": "10"}),
        pods=cpu_tasks("run", bound=3, cpu="3"),
        podgroups=[
            podgroup("run", queue="qc", phase="Running", min_resources={"cpu": "3"}),
            podgroup("new", queue="qc", min_resources={"cpu": "7"}),
            podgroup("more", queue="qc", min_resources={"cpu": "1"}),
        ],
    )
    assert ssn.tiers.enqueueable(ssn.jobs["default/new"]) == PERMIT  # 3 (6 elastic) + 7 <= 10
    ssn.tiers.enqueued(ssn.jobs["default/new"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/more"])  # 3 + 7 admitted + 1 > 10
    assert vote.kind is VoteKind.REJECT and "capability cpu 10" in vote.reason


def test_proportion_enqueue_counts_admitted_jobs() -> None:
    ssn = proportion_session(
        queue("qc", capability={"cpu": "10"}),
        pods=[],
        podgroups=[
            podgroup("old", queue="qc", phase="Inqueue", min_resources={"cpu": "4"}),
            podgroup("a", queue="qc", min_resources={"cpu": "4"}),
            podgroup("b", queue="qc", min_resources={"cpu": "4"}),
            podgroup("none", queue="qc"),
        ],
    )
    assert ssn.tiers.enqueueable(ssn.jobs["default/none"]) == PERMIT  # no minResources: permitted
    ssn.tiers.enqueued(ssn.jobs["default/none"])  # admitted: only now reserved
    assert plugin(ssn, ProportionPlugin).enqueueable(ssn.jobs["default/none"]) == PERMIT  # as Volcano's
    assert ssn.tiers.enqueueable(ssn.jobs["default/a"]) == PERMIT  # 4 admitted + 4
    ssn.tiers.enqueued(ssn.jobs["default/a"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/b"])  # 8 admitted + 4 > 10
    assert vote.kind is VoteKind.REJECT and "allocated 8" in vote.reason
