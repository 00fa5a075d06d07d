"""Each plugin through a real Session built from a SessionInput: table-driven, no Redis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
import pytest

from batch_scheduler.conf import load_conf
from batch_scheduler.framework import ABSTAIN, PERMIT, Refusal, VoteKind
from batch_scheduler.info import JobInfo, TaskInfo
from batch_scheduler.plugins.binpack import BinpackPlugin
from batch_scheduler.plugins.capacity import CapacityPlugin
from batch_scheduler.plugins.conformance import ConformancePlugin
from batch_scheduler.plugins.drf import DrfPlugin, dominant_share
from batch_scheduler.plugins.gang import TASK_SPEC_LABEL, GangPlugin
from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from batch_scheduler.plugins.overcommit import OvercommitPlugin
from batch_scheduler.plugins.predicates import PredicatesPlugin
from batch_scheduler.plugins.priority import PriorityPlugin
from batch_scheduler.plugins.proportion import ProportionPlugin, water_fill
from batch_scheduler.session import IMPLICIT_PREFIX, Session
from cluster.model import Node
from cluster.records import PodRecord
from cluster.sim.pools import TaintSpec
from tests.batch_scheduler.inputs import conf, podgroup, priority_class, queue, session, task
from tests.builders import node

P = TypeVar("P")
GI = 2**30


def plugin(ssn: Session, kind: type[P]) -> P:
    found = [p for tier in ssn.tiers.tiers for p in tier if isinstance(p, kind)]
    assert len(found) == 1, f"{kind.__name__} not in the session's conf"
    return found[0]


def lone(ssn: Session, pod_name: str) -> JobInfo:
    """The implicit one-pod job of a pod without a PodGroup."""
    return ssn.jobs[f"default/{IMPLICIT_PREFIX}uid-{pod_name}"]


def by_name(ssn: Session, *names: str) -> list[TaskInfo]:
    return [ssn.tasks[f"uid-{n}"] for n in names]


def names(tasks: list[TaskInfo] | None) -> list[str]:
    assert tasks is not None
    return [t.name for t in tasks]


def stamp(i: int) -> str:
    return f"2024-01-01T00:00:{i:02d}Z"


# -- priority -----------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "first"), [(10, 1, "a"), (1, 10, "b"), (5, 5, "a"), (-3, 0, "b")])
def test_priority_orders_jobs_and_tasks_higher_first(a: int, b: int, first: str) -> None:
    ssn = session(conf(["priority"]), [node("n1")], [
        task("a", priority=a, created=stamp(1)), task("b", priority=b, created=stamp(2)),
        task("ga", group="g", priority=a, created=stamp(3)), task("gb", group="g", priority=b, created=stamp(4)),
    ], podgroups=[podgroup("g", min_member=2)])
    jobs = sorted([lone(ssn, "a"), lone(ssn, "b")], key=ssn.tiers.job_key())
    assert jobs[0] is lone(ssn, first)  # equal priority: creation order
    tasks = sorted(ssn.jobs["default/g"].tasks.values(), key=ssn.tiers.task_key())
    assert tasks[0].name == "g" + first


def test_job_priority_from_its_podgroup_class_else_its_highest_task() -> None:
    ssn = session(conf(["priority"]), [node("n1")], [
        task("x1", group="classed", priority=1000), task("y1", group="plain", priority=3),
        task("y2", group="plain", priority=7), task("z", priority_class="mid"), task("w"),
    ], podgroups=[podgroup("classed", priority_class="low"), podgroup("plain")],
        priority_classes=[priority_class("low", 1), priority_class("mid", 50), priority_class("base", 5, global_default=True)])
    assert ssn.jobs["default/classed"].priority == 1  # the PodGroup's class wins over its pods'
    assert ssn.jobs["default/plain"].priority == 7
    assert lone(ssn, "z").priority == 50
    assert lone(ssn, "w").priority == 5  # the global default class
    order = [j.name for j in sorted(ssn.jobs.values(), key=ssn.tiers.job_key())]
    assert order[:2] == [lone(ssn, "z").name, "plain"] and order[-1] == "classed"


def test_priority_preempts_lower_jobs_and_lower_tasks_of_its_own_job() -> None:
    ssn = session(conf(["priority"]), [node("n1", cpu=32)], [
        task("me", group="mine", priority=10), task("mine-low", group="mine", priority=5, node="n1"),
        task("mine-same", group="mine", priority=10, node="n1"),
        task("low", priority=5, node="n1"), task("equal", priority=10, node="n1"), task("high", priority=20, node="n1"),
    ], podgroups=[podgroup("mine", min_member=1)])
    me = ssn.tasks["uid-me"]
    candidates = by_name(ssn, "mine-low", "mine-same", "low", "equal", "high")
    assert names(plugin(ssn, PriorityPlugin).preemptable(me, candidates)) == ["mine-low", "low"]
    assert names(ssn.tiers.preemptable(me, candidates)) == ["mine-low", "low"]


# -- gang ---------------------------------------------------------------------------------


def gang_pods(bound: int, pending: int, succeeded: int = 0, role: str = "") -> list[PodRecord]:
    labels = {TASK_SPEC_LABEL: role} if role else {}
    pods = [task(f"b{role}{i}", group="g", node="n1", labels=labels) for i in range(bound)]
    pods += [task(f"p{role}{i}", group="g", labels=labels) for i in range(pending)]
    pods += [task(f"s{role}{i}", group="g", node="n1", phase="Succeeded", labels=labels) for i in range(succeeded)]
    return pods


@pytest.mark.parametrize(("min_member", "bound", "pending", "succeeded", "ready", "starving", "invalid"), [
    (3, 0, 3, 0, False, True, None),
    (3, 0, 2, 0, False, True, "gang: 2/3 pods exist (minMember 3); waiting for the rest to be created"),
    (3, 1, 1, 0, False, True, "gang: 2/3 pods exist (minMember 3)"),
    (3, 3, 0, 0, True, False, None),
    (2, 1, 1, 0, False, True, None),
    (2, 1, 0, 1, True, False, None),  # a finished member still counts
    (1, 0, 0, 0, False, True, "gang: 0/1 pods exist"),
    (2, 4, 2, 0, True, False, None),
])
def test_gang_ready_valid_starving(min_member: int, bound: int, pending: int, succeeded: int, ready: bool,
                                   starving: bool, invalid: str | None) -> None:
    ssn = session(conf(["gang"]), [node("n1", cpu=64)], gang_pods(bound, pending, succeeded),
                  podgroups=[podgroup("g", min_member=min_member)])
    job = ssn.jobs["default/g"]
    assert ssn.tiers.job_ready(job) is ready
    assert ssn.tiers.job_starving(job) is starving
    reason = ssn.tiers.job_invalid(job)
    if invalid is None:
        assert reason is None and ssn.schedulable(job)
    else:
        assert reason is not None and reason.startswith(invalid)
        assert not ssn.schedulable(job) and job.reason_kind == "NotEnoughPods"


def test_gang_min_task_member_needs_every_role() -> None:
    pods = gang_pods(3, 0, role="worker") + gang_pods(0, 1, role="ps")
    ssn = session(conf(["gang"]), [node("n1", cpu=64)], pods,
                  podgroups=[podgroup("g", min_member=3, min_task_member={"ps": 1, "worker": 2})])
    job = ssn.jobs["default/g"]
    assert job.ready_count == 3 and not ssn.tiers.job_ready(job)  # ps 0/1
    ps = next(t for t in job.tasks.values() if t.name.startswith("pps"))
    ps.status = type(ps.status).ALLOCATED
    assert ssn.tiers.job_ready(job)


def test_gang_lone_pods_are_always_valid_and_unready_gangs_go_first() -> None:
    ssn = session(conf(["gang"]), [node("n1", cpu=64)],
                  [task("solo"), *gang_pods(2, 0), task("w1", group="wait"), task("w2", group="wait")],
                  podgroups=[podgroup("g", min_member=2, created=stamp(0)), podgroup("wait", min_member=2, created=stamp(1))])
    assert ssn.tiers.job_invalid(lone(ssn, "solo")) is None
    first = sorted([ssn.jobs["default/g"], ssn.jobs["default/wait"]], key=ssn.tiers.job_key())[0]
    assert first.name == "wait"  # not ready before ready, whatever the creation order


@pytest.mark.parametrize(("min_member", "running", "victims"), [
    (1, 3, 3),  # minMember 1: every task may go
    (2, 3, 1),  # one may go, two must stay
    (3, 3, 0),  # at minMember: none
    (2, 2, 0),
    (4, 3, 0),  # already below: none
])
def test_gang_keeps_running_jobs_at_min_member(min_member: int, running: int, victims: int) -> None:
    gang = {"name": "gang"}
    ssn = session(conf([gang]), [node("n1", cpu=64)], [task("me"), *gang_pods(running, 0)],
                  podgroups=[podgroup("g", min_member=min_member)])
    candidates = ssn.jobs["default/g"].running()
    me = ssn.tasks["uid-me"]
    assert len(plugin(ssn, GangPlugin).preemptable(me, candidates) or []) == victims
    assert len(plugin(ssn, GangPlugin).reclaimable(me, candidates) or []) == victims
    assert len(ssn.tiers.preemptable(me, candidates)) == victims


def test_gang_protection_counts_each_job_separately() -> None:
    pods = gang_pods(3, 0) + [task(f"h{i}", group="h", node="n1") for i in range(3)]
    ssn = session(conf(["gang"]), [node("n1", cpu=64)], [task("me"), *pods],
                  podgroups=[podgroup("g", min_member=2), podgroup("h", min_member=1)])
    candidates = ssn.jobs["default/g"].running() + ssn.jobs["default/h"].running()
    out = plugin(ssn, GangPlugin).preemptable(ssn.tasks["uid-me"], candidates)
    assert sorted(names(out)) == ["b0", "h0", "h1", "h2"]


def test_gang_switched_off_as_a_voter_leaves_the_decision_to_others() -> None:
    ssn = session(conf([{"name": "gang", "enablePreemptable": False}, "priority"]), [node("n1", cpu=64)],
                  [task("me", priority=10), *gang_pods(2, 0)], podgroups=[podgroup("g", min_member=2)])
    candidates = ssn.jobs["default/g"].running()
    assert len(ssn.tiers.preemptable(ssn.tasks["uid-me"], candidates)) == 2  # priority alone decides
    assert ssn.tiers.job_ready(ssn.jobs["default/g"])  # gang still answers its other points


# -- conformance --------------------------------------------------------------------------


@pytest.mark.parametrize(("namespace", "priority_class_name", "offered"), [
    ("default", "", True),
    ("team-a", "high", True),
    ("kube-system", "", False),
    ("default", "system-cluster-critical", False),
    ("default", "system-node-critical", False),
    ("kube-system", "system-node-critical", False),
])
def test_conformance_never_offers_system_pods(namespace: str, priority_class_name: str, offered: bool) -> None:
    ssn = session(conf(["conformance"]), [node("n1")],
                  [task("me"), task("v", namespace=namespace, priority_class=priority_class_name, node="n1")])
    me, [victim] = ssn.tasks["uid-me"], by_name(ssn, "v")
    c = plugin(ssn, ConformancePlugin)
    assert names(c.preemptable(me, [victim])) == (["v"] if offered else [])
    assert names(c.reclaimable(me, [victim])) == (["v"] if offered else [])


def test_conformance_vetoes_what_priority_would_allow_in_its_tier() -> None:
    ssn = session(load_conf(None), [node("n1", cpu=64)], [
        task("me", priority=100), task("sys", namespace="kube-system", priority=0, node="n1"),
        task("crit", priority_class="system-cluster-critical", priority=0, node="n1"),
        task("user", priority=0, node="n1"),
    ])
    victims = ssn.tiers.preemptable(ssn.tasks["uid-me"], by_name(ssn, "sys", "crit", "user"))
    assert names(victims) == ["user"]


# -- drf ----------------------------------------------------------------------------------

DRF_NODES = [node("n1", cpu=10, memory="100Gi")]


@pytest.mark.parametrize(("a", "b", "first"), [
    (("4", "10Gi"), ("1", "50Gi"), "a"),  # 0.4 < 0.5 (memory dominates b)
    (("6", "1Gi"), ("1", "50Gi"), "b"),  # 0.6 > 0.5
    (("2", "20Gi"), ("2", "20Gi"), "a"),  # equal: creation order
])
def test_drf_smaller_dominant_share_goes_first(a: tuple[str, str], b: tuple[str, str], first: str) -> None:
    ssn = session(conf(["drf"]), DRF_NODES, [
        task("a", node="n1", created=stamp(1), cpu=a[0], memory=a[1]),
        task("b", node="n1", created=stamp(2), cpu=b[0], memory=b[1]),
    ])
    assert sorted([lone(ssn, "a"), lone(ssn, "b")], key=ssn.tiers.job_key())[0] is lone(ssn, first)


def test_drf_share_is_the_largest_fraction_held() -> None:
    ssn = session(conf(["drf"]), DRF_NODES, [task("a", cpu="4", memory="10Gi", node="n1"), task("idle")])
    drf = plugin(ssn, DrfPlugin)
    assert drf.share(lone(ssn, "a")) == pytest.approx(0.4)
    assert drf.share(lone(ssn, "idle")) == 0.0
    assert sorted(ssn.jobs.values(), key=ssn.tiers.job_key())[0] is lone(ssn, "idle")
    assert dominant_share({"nvidia.com/gpu": 1}, {"cpu": 10}) == 1.0  # held but none in the cluster


def test_drf_lets_a_victim_go_only_while_its_job_keeps_the_preemptors_share() -> None:
    pods = [task("me", cpu="1", memory="1Gi"),
            task("a1", group="a", cpu="2", memory="1Gi", node="n1"), task("a2", group="a", cpu="2", memory="1Gi", node="n1")]
    ssn = session(conf(["drf"]), DRF_NODES, pods, podgroups=[podgroup("a", min_member=1)])
    # me would hold 0.1; a holds 0.4, 0.2 after one eviction, 0 after two
    assert names(plugin(ssn, DrfPlugin).preemptable(ssn.tasks["uid-me"], by_name(ssn, "a1", "a2"))) == ["a1"]


# -- proportion ---------------------------------------------------------------------------

BIG = 1e12


def fill(total: Mapping[str, int], weights: Mapping[str, int], *, request: Mapping[str, Mapping[str, float]] | None = None,
         capability: Mapping[str, Mapping[str, float]] | None = None,
         guarantee: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, dict[str, float]]:
    request = request or {}
    capability = capability or {}
    guarantee = guarantee or {}
    return water_fill(
        total, weights,
        {q: {r: float(request.get(q, {}).get(r, BIG)) for r in total} for q in weights},
        {q: {r: float(capability.get(q, {}).get(r, total[r])) for r in total} for q in weights},
        {q: dict(guarantee.get(q, {})) for q in weights})


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, {"a": 20000, "b": 10000}),  # weights 2:1
    ({"request": {"a": {"cpu": 6000}}}, {"a": 6000, "b": 24000}),  # a satisfied: the rest goes round again
    ({"request": {"a": {"cpu": 0}, "b": {"cpu": 0}}}, {"a": 0, "b": 0}),  # nobody asks: nobody gets
    ({"request": {"a": {"cpu": 1000}, "b": {"cpu": 2000}}}, {"a": 1000, "b": 2000}),
    ({"guarantee": {"b": {"cpu": 15000}}, "capability": {"a": {"cpu": 15000}}}, {"a": 15000, "b": 15000}),
    ({"guarantee": {"b": {"cpu": 15000}}, "capability": {"a": {"cpu": 15000}}, "request": {"b": {"cpu": 1000}}},
     {"a": 15000, "b": 15000}),  # the guarantee is a floor, even above the request
    # a capped at its capability: what it cannot take goes to b
    ({"capability": {"a": {"cpu": 5000}}}, {"a": 5000, "b": 25000}),
])
def test_water_fill(kwargs: dict[str, Any], expected: dict[str, float]) -> None:
    deserved = fill({"cpu": 30000}, {"a": 2, "b": 1}, **kwargs)
    assert {q: d["cpu"] for q, d in deserved.items()} == pytest.approx(expected, abs=1e-3)


def test_water_fill_hands_out_everything_a_capped_queue_leaves() -> None:
    deserved = fill({"cpu": 100000}, {"a": 1, "b": 1, "c": 1},
                    capability={"a": {"cpu": 1000}, "b": {"cpu": 1000}})
    assert {q: d["cpu"] for q, d in deserved.items()} == pytest.approx({"a": 1000, "b": 1000, "c": 98000}, abs=1e-3)


def test_water_fill_a_queue_is_satisfied_only_when_it_has_all_it_asks_for() -> None:
    # Both queues want far more cpu than there is and little memory. The queue that asks for
    # nothing drops out, and its share of cpu goes round again to those that still want it.
    total = {"cpu": 30000, "memory": 96 * GI}
    deserved = fill(total, {"a": 2, "b": 1, "idle": 1},
                    request={"a": {"cpu": 40000, "memory": 4 * GI}, "b": {"cpu": 20000, "memory": 2 * GI},
                             "idle": {"cpu": 0, "memory": 0}})
    assert {q: d["cpu"] for q, d in deserved.items()} == pytest.approx({"a": 20000, "b": 10000, "idle": 0}, abs=1e-3)
    assert {q: d["memory"] for q, d in deserved.items()} == pytest.approx({"a": 4 * GI, "b": 2 * GI, "idle": 0})


def test_water_fill_works_per_resource() -> None:
    deserved = fill({"cpu": 30000, "nvidia.com/gpu": 8}, {"a": 1, "b": 1},
                    request={"a": {"cpu": BIG, "nvidia.com/gpu": 2}, "b": {"cpu": BIG, "nvidia.com/gpu": BIG}})
    assert deserved["a"] == pytest.approx({"cpu": 15000, "nvidia.com/gpu": 2})
    assert deserved["b"] == pytest.approx({"cpu": 15000, "nvidia.com/gpu": 6})


THREE_NODES = [node(f"n{i}", cpu=10, memory="64Gi") for i in range(3)]


def proportion_session(*queues_: Any, pods: list[PodRecord], podgroups: list[Any] | None = None,
                       default_queue: str = "") -> Session:
    """``default_queue``: '' names the first queue, so no implicit empty queue takes part."""
    groups = podgroups if podgroups is not None else [podgroup(q.name, queue=q.name) for q in queues_]
    return session(conf(["proportion"]), THREE_NODES, pods, podgroups=groups, queues=queues_,
                   default_queue=default_queue or queues_[0].name)


def cpu_tasks(group: str, *, bound: int = 0, pending: int = 0, cpu: str = "10") -> list[PodRecord]:
    """Tasks requesting cpu only (no memory), so a queue's share is its cpu share."""
    return ([task(f"{group}-b{i}", group=group, cpu=cpu, memory=0, node=f"n{i}") for i in range(bound)]
            + [task(f"{group}-p{i}", group=group, cpu=cpu, memory=0) for i in range(pending)])


def test_proportion_refuses_a_task_past_the_deserved_share_and_orders_queues() -> None:
    ssn = proportion_session(queue("qa", weight=2), queue("qb", weight=1),
                             pods=cpu_tasks("qa", bound=2, pending=2) + cpu_tasks("qb", pending=2))
    prop = plugin(ssn, ProportionPlugin)
    assert prop.deserved["qa"]["cpu"] == pytest.approx(20000)
    assert prop.deserved["qb"]["cpu"] == pytest.approx(10000)
    qa, qb = ssn.queues["qa"], ssn.queues["qb"]
    assert sorted([qa, qb], key=ssn.tiers.queue_key())[0] is qb  # 0/10 before 20/20

    refusal = ssn.tiers.allocatable(qa, ssn.tasks["uid-qa-p0"])
    assert refusal is not None and refusal.condition == "QueueShareExceeded"
    assert refusal.message.startswith("queue qa: deserved share cpu 20 would be exceeded (allocated 20, task needs 10)")
    assert ssn.tiers.allocatable(qb, ssn.tasks["uid-qb-p0"]) is None
    over = ssn.tiers.overused(qa)
    assert over is not None and over.condition == "QueueShareExceeded"
    assert "queue qa" in over.message and "cpu 20" in over.message and "deserved share" in over.message
    assert ssn.tiers.overused(qb) is None


def test_proportion_capability_caps_the_queue_and_says_so() -> None:
    ssn = proportion_session(queue("qc", capability={"cpu": "5"}), queue("qd"),
                             pods=cpu_tasks("qc", bound=1, pending=3, cpu="4") + cpu_tasks("qd", pending=3, cpu="4"))
    prop = plugin(ssn, ProportionPlugin)
    assert prop.deserved["qc"]["cpu"] == pytest.approx(5000)
    refusal = ssn.tiers.allocatable(ssn.queues["qc"], ssn.tasks["uid-qc-p0"])
    assert refusal == Refusal("queue qc: capability cpu 5 would be exceeded (allocated 4, task needs 4)",
                              "QueueCapabilityExceeded")
    assert prop.deserved["qd"]["cpu"] == pytest.approx(12000)  # all it asks for


def test_proportion_deserved_hands_on_what_satisfied_queues_leave() -> None:
    # Realistic pods (cpu and some memory) and the implicit default queue, which asks for nothing:
    # qa and qb still want cpu, so the default queue's weight share must go round to them.
    pods = ([task(f"a{i}", group="ga", cpu="10", node=f"n{i}") for i in range(2)]
            + [task(f"a-p{i}", group="ga", cpu="10") for i in range(2)]
            + [task(f"b-p{i}", group="gb", cpu="10") for i in range(2)])
    ssn = session(conf(["proportion"]), THREE_NODES, pods, podgroups=[podgroup("ga", queue="qa"), podgroup("gb", queue="qb")],
                  queues=[queue("qa", weight=2), queue("qb", weight=1)])
    prop = plugin(ssn, ProportionPlugin)
    assert prop.deserved["default"]["cpu"] == 0.0
    assert prop.deserved["qa"]["cpu"] == pytest.approx(20000)
    assert prop.deserved["qb"]["cpu"] == pytest.approx(10000)
    assert ssn.tiers.allocatable(ssn.queues["qb"], ssn.tasks["uid-b-p0"]) is None  # 10 cpu idle, qb's share


def test_proportion_a_task_reaching_exactly_the_deserved_share_fits() -> None:
    # qa is capped at 5 of 30 cpu, so qb deserves exactly the other 25; a task taking qb from
    # 24 to 25 must fit, not be refused against a share a fraction of a millicore short.
    pods = ([task(f"b{i}", group="gb", cpu="8", memory=0, node=f"n{i}") for i in range(3)]
            + [task("b-new", group="gb", cpu="1", memory=0)]
            + [task(f"a{i}", group="ga", cpu="4", memory=0) for i in range(3)])
    ssn = session(conf(["proportion"]), THREE_NODES, pods, podgroups=[podgroup("ga", queue="qa"), podgroup("gb", queue="qb")],
                  queues=[queue("qa", weight=2, capability={"cpu": "5"}), queue("qb")], default_queue="qa")
    assert ssn.tiers.allocatable(ssn.queues["qb"], ssn.tasks["uid-b-new"]) is None


def test_proportion_guarantee_is_kept_from_the_others() -> None:
    ssn = proportion_session(queue("qa", weight=2), queue("qg", guarantee={"cpu": "20"}),
                             pods=cpu_tasks("qa", pending=3) + cpu_tasks("qg", pending=3))
    prop = plugin(ssn, ProportionPlugin)
    assert prop.capability["qa"]["cpu"] == pytest.approx(10000)  # 30 − qg's guarantee
    assert prop.deserved["qa"]["cpu"] == pytest.approx(10000)
    assert prop.deserved["qg"]["cpu"] == pytest.approx(20000)


@pytest.mark.parametrize(("capability", "need", "admitted", "words"), [
    ({"cpu": "5"}, "1", True, []),
    ({"cpu": "5"}, "2", False, ["queue qc:", "capability cpu 5 would be exceeded", "allocated 4", "job needs 2"]),
    ({}, "26", True, []),
    ({}, "27", False, ["queue qc:", "share of the cluster (after guarantees) cpu 30", "job needs 27"]),
])
def test_proportion_enqueue_within_the_real_capability(capability: dict[str, str], need: str, admitted: bool,
                                                        words: list[str]) -> None:
    ssn = proportion_session(queue("qc", capability=capability), pods=cpu_tasks("run", bound=1, cpu="4"),
                             podgroups=[podgroup("run", queue="qc", phase="Running", min_resources={"cpu": "4"}),
                                        podgroup("new", queue="qc", min_resources={"cpu": need})])
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
    ssn = proportion_session(queue("qc", capability={"cpu": "10"}), pods=cpu_tasks("run", bound=3, cpu="3"),
                             podgroups=[podgroup("run", queue="qc", phase="Running", min_resources={"cpu": "3"}),
                                        podgroup("new", queue="qc", min_resources={"cpu": "7"}),
                                        podgroup("more", queue="qc", min_resources={"cpu": "1"})])
    assert ssn.tiers.enqueueable(ssn.jobs["default/new"]) == PERMIT  # 3 (6 elastic) + 7 <= 10
    ssn.tiers.enqueued(ssn.jobs["default/new"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/more"])  # 3 + 7 admitted + 1 > 10
    assert vote.kind is VoteKind.REJECT and "capability cpu 10" in vote.reason


def test_proportion_enqueue_counts_admitted_jobs() -> None:
    ssn = proportion_session(queue("qc", capability={"cpu": "10"}), pods=[], podgroups=[
        podgroup("old", queue="qc", phase="Inqueue", min_resources={"cpu": "4"}),
        podgroup("a", queue="qc", min_resources={"cpu": "4"}), podgroup("b", queue="qc", min_resources={"cpu": "4"}),
        podgroup("none", queue="qc")])
    assert ssn.tiers.enqueueable(ssn.jobs["default/none"]) == PERMIT  # no minResources: abstains
    ssn.tiers.enqueued(ssn.jobs["default/none"])  # admitted: only now reserved
    assert plugin(ssn, ProportionPlugin).enqueueable(ssn.jobs["default/none"]) == ABSTAIN
    assert ssn.tiers.enqueueable(ssn.jobs["default/a"]) == PERMIT  # 4 admitted + 4
    ssn.tiers.enqueued(ssn.jobs["default/a"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/b"])  # 8 admitted + 4 > 10
    assert vote.kind is VoteKind.REJECT and "allocated 8" in vote.reason


# -- capacity -----------------------------------------------------------------------------


def capacity_session(pods: list[PodRecord], podgroups: list[Any]) -> Session:
    queues = [queue("p", capability={"cpu": "4"}), queue("c1", parent="p"), queue("c2", parent="p"), queue("other")]
    return session(conf(["capacity"]), THREE_NODES, pods, podgroups=podgroups, queues=queues)


def test_capacity_parent_capability_limits_the_children_together() -> None:
    ssn = capacity_session(
        [task("c1-run", group="j1", cpu="1", memory=0, node="n0"), task("c2-run", group="j2", cpu="3", memory=0, node="n1"),
         task("c1-new", group="j1", cpu="1", memory=0), task("o-new", group="jo", cpu="8", memory=0)],
        [podgroup("j1", queue="c1"), podgroup("j2", queue="c2"), podgroup("jo", queue="other")])
    refusal = ssn.tiers.allocatable(ssn.queues["c1"], ssn.tasks["uid-c1-new"])
    assert refusal is not None and refusal.condition == "QueueCapabilityExceeded"
    assert refusal.message.startswith("queue p (parent of c1): capability cpu 4 would be exceeded")
    assert "allocated 4" in refusal.message and "task needs 1" in refusal.message
    assert ssn.tiers.allocatable(ssn.queues["other"], ssn.tasks["uid-o-new"]) is None  # no limit outside p


def test_capacity_names_the_parent_when_one_child_alone_would_exceed_it() -> None:
    # c1 states no capability of its own: the limit it meets is p's, and the reason says so.
    ssn = capacity_session([task("run", group="j1", cpu="3", memory=0, node="n0"), task("new", group="j1", cpu="2", memory=0)],
                           [podgroup("j1", queue="c1")])
    refusal = ssn.tiers.allocatable(ssn.queues["c1"], ssn.tasks["uid-new"])
    assert refusal is not None and refusal.condition == "QueueCapabilityExceeded"
    assert "p (parent of c1)" in refusal.message and "cpu 4" in refusal.message


def test_capacity_enqueue_checks_the_parent() -> None:
    ssn = capacity_session([task("run", group="j1", cpu="3", memory=0, node="n0")], [
        podgroup("j1", queue="c1", phase="Running", min_resources={"cpu": "3"}), podgroup("small", queue="c2", min_resources={"cpu": "1"}),
        podgroup("big", queue="c2", min_resources={"cpu": "2"})])
    vote = ssn.tiers.enqueueable(ssn.jobs["default/big"])  # 3 + 2 > 4
    assert vote.kind is VoteKind.REJECT and vote.condition == "QueueCapabilityExceeded"
    assert vote.reason.startswith("queue p (parent of c2): capability cpu 4 would be exceeded")
    assert ssn.tiers.enqueueable(ssn.jobs["default/small"]) == PERMIT  # 3 + 1 <= 4
    ssn.tiers.enqueued(ssn.jobs["default/small"])  # admitted: only now reserved


def test_capacity_enqueue_counts_admitted_jobs_at_every_level() -> None:
    # A job admitted to c2 reserves room in p too: the next one must not fit past p's capability.
    ssn = capacity_session([task("run", group="j1", cpu="3", memory=0, node="n0")], [
        podgroup("j1", queue="c1", phase="Running", min_resources={"cpu": "3"}), podgroup("first", queue="c2", min_resources={"cpu": "1"}),
        podgroup("second", queue="c2", min_resources={"cpu": "1"})])
    assert ssn.tiers.enqueueable(ssn.jobs["default/first"]) == PERMIT  # 3 + 1 <= 4
    ssn.tiers.enqueued(ssn.jobs["default/first"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/second"])  # 3 + 1 admitted + 1 > 4
    assert vote.kind is VoteKind.REJECT and vote.condition == "QueueCapabilityExceeded"
    assert "p (parent of c2)" in vote.reason and "cpu 4" in vote.reason


def test_capacity_jobs_go_to_leaf_queues() -> None:
    ssn = capacity_session([], [podgroup("at-parent", queue="p"), podgroup("at-leaf", queue="c2")])
    assert ssn.tiers.job_invalid(ssn.jobs["default/at-parent"]) == "queue p has child queues; jobs go to leaf queues"
    assert ssn.tiers.job_invalid(ssn.jobs["default/at-leaf"]) is None


def test_capacity_queue_order_by_held_over_deserved() -> None:
    queues = [queue("a", deserved={"cpu": "10"}), queue("b", deserved={"cpu": "4"})]
    ssn = session(conf(["capacity"]), THREE_NODES,
                  [task("ra", group="ja", cpu="3", memory=0, node="n0"), task("rb", group="jb", cpu="2", memory=0, node="n1")],
                  podgroups=[podgroup("ja", queue="a"), podgroup("jb", queue="b")], queues=queues)
    assert sorted([ssn.queues["b"], ssn.queues["a"]], key=ssn.tiers.queue_key())[0].name == "a"  # 0.3 < 0.5
    cap = plugin(ssn, CapacityPlugin)
    assert cap.held("a") == {"cpu": 3000} and cap.capability["a"]["cpu"] == 30000.0  # no capability: the cluster


# -- predicates ---------------------------------------------------------------------------

PRED_NODES = [
    node("plain-a", labels={"zone": "a"}),
    node("plain-b", labels={"zone": "b"}),
    node("tainted-a", labels={"zone": "a"}, taints=[TaintSpec(key="gpu", value="true")]),
    node("cordoned-a", labels={"zone": "a"}, unschedulable=True),
]
TOLERATE_GPU = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
ZONE_B = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}


@pytest.mark.parametrize(("arguments", "spec", "expected"), [
    ({}, {}, ["plain-a", "plain-b"]),
    ({}, {"tolerations": TOLERATE_GPU}, ["plain-a", "plain-b", "tainted-a"]),
    ({}, {"nodeSelector": {"zone": "a"}}, ["plain-a"]),
    ({}, {"nodeSelector": {"zone": "a"}, "tolerations": TOLERATE_GPU}, ["plain-a", "tainted-a"]),
    ({}, {"affinity": ZONE_B}, ["plain-b"]),
    ({"predicate.NodeAffinityEnable": "false"}, {"nodeSelector": {"zone": "c"}}, ["plain-a", "plain-b"]),
    ({"predicate.NodeAffinityEnable": "false"}, {"affinity": ZONE_B}, ["plain-a", "plain-b"]),
    ({"predicate.TaintTolerationEnable": "false"}, {}, ["plain-a", "plain-b", "tainted-a"]),
    ({"predicate.TaintTolerationEnable": "false"}, {"nodeSelector": {"zone": "a"}}, ["plain-a", "tainted-a"]),
    ({"predicate.NodeAffinityEnable": "false", "predicate.TaintTolerationEnable": "false"},
     {"nodeSelector": {"zone": "z"}}, ["plain-a", "plain-b", "tainted-a"]),  # never a cordoned node
])
def test_predicates_mask(arguments: dict[str, str], spec: dict[str, Any], expected: list[str]) -> None:
    ssn = session(conf([{"name": "predicates", "arguments": arguments}]), PRED_NODES, [task("p", **spec)])
    t = ssn.tasks["uid-p"]
    f = plugin(ssn, PredicatesPlugin).predicate(ssn, t, ssn.allowed, resources=True)
    assert [ssn.columns.names[i] for i in np.flatnonzero(f.mask)] == expected
    assert f.total == 4 and sum(f.failed.values()) == 4 - len(expected)
    assert np.array_equal(ssn.feasible(t).mask, f.mask)


def test_predicates_resources_count_unless_told_otherwise() -> None:
    ssn = session(conf(["predicates"]), PRED_NODES, [task("big", cpu="9")])
    t = ssn.tasks["uid-big"]
    p = plugin(ssn, PredicatesPlugin)
    with_resources = p.predicate(ssn, t, ssn.allowed, resources=True)
    assert not with_resources.mask.any() and with_resources.failed["Insufficient cpu"] == 2
    assert "Insufficient cpu" in with_resources.reason()
    without = p.predicate(ssn, t, ssn.allowed, resources=False)
    assert [ssn.columns.names[i] for i in np.flatnonzero(without.mask)] == ["plain-a", "plain-b"]
    assert np.array_equal(ssn.feasible(t, ignore_resources=True).mask, without.mask)


# -- nodeorder ----------------------------------------------------------------------------

SCORE_NODES = [node("empty"), node("half"), node("full")]
SCORE_USED = {"half": {"cpu": 4000, "memory": 16 * GI}, "full": {"cpu": 7000, "memory": 31 * GI}}
ONLY = {"leastrequested.weight": 0, "mostrequested.weight": 0, "balancedresource.weight": 0,
        "nodeaffinity.weight": 0, "tainttoleration.weight": 0}


def scores(ssn: Session, kind: type[Any], pod_name: str = "p") -> list[float]:
    return [float(x) for x in plugin(ssn, kind).node_scores(ssn, ssn.tasks[f"uid-{pod_name}"])]


@pytest.mark.parametrize(("weights", "order"), [
    ({"leastrequested.weight": 1}, ["empty", "half", "full"]),
    ({"leastrequested.weight": 5}, ["empty", "half", "full"]),
    ({"mostrequested.weight": 1}, ["full", "half", "empty"]),
    ({"mostrequested.weight": 3}, ["full", "half", "empty"]),
])
def test_nodeorder_least_and_most_requested(weights: dict[str, int], order: list[str]) -> None:
    ssn = session(conf([{"name": "nodeorder", "arguments": {**ONLY, **weights}}]), SCORE_NODES, [task("p")],
                  used=SCORE_USED)
    s = scores(ssn, NodeOrderPlugin)
    ranked = [ssn.columns.names[i] for i in np.argsort(s)[::-1]]
    assert ranked == order
    weight = sum(weights.values())
    assert all(0.0 <= x <= weight for x in s)
    # after placing the pod (1 cpu, 1Gi): cpu 1/8, 5/8, 8/8 and memory 1/32, 17/32, 32/32 used
    used = np.array([(1 / 8 + 1 / 32) / 2, (5 / 8 + 17 / 32) / 2, 1.0])
    expected = 1 - used if "leastrequested.weight" in weights else used
    assert s == pytest.approx(list(weight * expected))


def test_nodeorder_all_weights_zero_scores_nothing() -> None:
    ssn = session(conf([{"name": "nodeorder", "arguments": ONLY}]), SCORE_NODES, [task("p")], used=SCORE_USED)
    assert scores(ssn, NodeOrderPlugin) == [0.0, 0.0, 0.0]


def test_nodeorder_prefers_nodes_without_untolerated_prefer_no_schedule_taints() -> None:
    nodes = [node("clean"), node("soft", taints=[TaintSpec(key="spot", effect="PreferNoSchedule")])]
    args = {**ONLY, "tainttoleration.weight": 2}
    ssn = session(conf([{"name": "nodeorder", "arguments": args}]), nodes,
                  [task("p"), task("t", tolerations=[{"key": "spot", "operator": "Exists"}])])
    assert scores(ssn, NodeOrderPlugin, "p") == [2.0, 0.0]
    assert scores(ssn, NodeOrderPlugin, "t") == [2.0, 2.0]


def test_nodeorder_preferred_node_affinity() -> None:
    nodes = [node("a", labels={"zone": "a"}), node("b", labels={"zone": "b"})]
    prefer_b = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}
    ssn = session(conf([{"name": "nodeorder", "arguments": {**ONLY, "nodeaffinity.weight": 1}}]), nodes,
                  [task("p", affinity=prefer_b)])
    s = scores(ssn, NodeOrderPlugin)
    assert s[1] > s[0] and 0.0 <= min(s) and max(s) <= 1.0


# -- binpack ------------------------------------------------------------------------------

GPU_NODES = [node("gpu-busy", gpu=8), node("gpu-idle", gpu=8)]
GPU_USED = {"gpu-busy": {"nvidia.com/gpu": 7}}
GPU_ARGS = {"binpack.weight": 10, "binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 5}


def binpack_session(arguments: Mapping[str, Any], nodes: list[Node], pods: list[PodRecord],
                    used: Mapping[str, Mapping[str, int]] | None = None) -> Session:
    return session(conf([{"name": "binpack", "arguments": dict(arguments)}]), nodes, pods, used=used)


def test_binpack_counts_only_requested_resources_with_a_weight() -> None:
    ssn = binpack_session(GPU_ARGS, GPU_NODES, [task("cpu-only"), task("gpu", gpu=1)], GPU_USED)
    cpu_only = scores(ssn, BinpackPlugin, "cpu-only")
    assert cpu_only[0] == pytest.approx(cpu_only[1])  # the GPUs in use do not matter to a CPU task
    gpu = scores(ssn, BinpackPlugin, "gpu")
    assert gpu[0] > gpu[1]  # fill the busy GPU node first


@pytest.mark.parametrize(("arguments", "better"), [
    ({}, "cpu-heavy"),  # cpu 6/8 + memory 1/32 beats cpu 1/8 + memory 16/32 with equal weights
    ({"binpack.cpu": 0}, "memory-heavy"),  # cpu weight 0: only memory counts
    ({"binpack.memory": 0}, "cpu-heavy"),
])
def test_binpack_resource_weights(arguments: dict[str, Any], better: str) -> None:
    nodes = [node("cpu-heavy"), node("memory-heavy")]
    used = {"cpu-heavy": {"cpu": 5000}, "memory-heavy": {"memory": 15 * GI}}
    ssn = binpack_session(arguments, nodes, [task("p")], used)
    s = scores(ssn, BinpackPlugin)
    assert ssn.columns.names[int(np.argmax(s))] == better


@pytest.mark.parametrize("weight", [0.5, 1, 3, 10])
def test_binpack_score_between_zero_and_weight(weight: float) -> None:
    nodes = [node("empty", gpu=8), node("mid", gpu=8), node("will-be-full", gpu=8)]
    used = {"mid": {"cpu": 3000, "memory": 9 * GI, "nvidia.com/gpu": 2},
            "will-be-full": {"cpu": 7000, "memory": 31 * GI, "nvidia.com/gpu": 7}}
    args = {**GPU_ARGS, "binpack.weight": weight}
    ssn = binpack_session(args, nodes, [task("p", cpu="1", memory="1Gi", gpu=1)], used)
    s = scores(ssn, BinpackPlugin)
    assert all(0.0 <= x <= weight for x in s)
    assert s[2] == pytest.approx(weight)  # full after placing, in every weighted resource
    assert s[0] < s[1] < s[2]


def test_binpack_weight_zero_or_nothing_weighted_scores_zero() -> None:
    ssn = binpack_session({"binpack.weight": 0}, [node("a")], [task("p")], {"a": {"cpu": 4000}})
    assert scores(ssn, BinpackPlugin) == [0.0]
    ssn = binpack_session({"binpack.cpu": 0, "binpack.memory": 0}, [node("a")], [task("p")], {"a": {"cpu": 4000}})
    assert scores(ssn, BinpackPlugin) == [0.0]


# -- overcommit ---------------------------------------------------------------------------


def overcommit_session(factor: str | None, used_cpu: int, podgroups: list[Any], scheduler_conf: Any = None) -> Session:
    args = {} if factor is None else {"overcommit-factor": factor}
    c = scheduler_conf or conf([{"name": "overcommit", "arguments": args}])
    return session(c, [node("n1", cpu=10, memory="100Gi")], [], podgroups=podgroups, used={"n1": {"cpu": used_cpu}})


@pytest.mark.parametrize(("factor", "used", "need", "admitted"), [
    ("1.5", 4000, "11", True),  # 10 × 1.5 − 4 = 11
    ("1.5", 4000, "12", False),
    (None, 0, "12", True),  # default factor 1.2
    (None, 0, "12100m", False),
    ("1", 0, "10", True),
    ("1", 1, "10", False),
    ("2", 10000, "10", True),
])
def test_overcommit_admits_up_to_total_times_factor_minus_used(factor: str | None, used: int, need: str,
                                                               admitted: bool) -> None:
    ssn = overcommit_session(factor, used, [podgroup("j", min_resources={"cpu": need})])
    vote = ssn.tiers.enqueueable(ssn.jobs["default/j"])
    assert (vote == PERMIT) is admitted
    if not admitted:
        assert vote.kind is VoteKind.REJECT and vote.condition == "NotEnoughResources"


def test_overcommit_reason_text() -> None:
    ssn = overcommit_session("1.5", 4000, [podgroup("j", min_resources={"cpu": "12"})])
    vote = ssn.tiers.enqueueable(ssn.jobs["default/j"])
    assert vote.reason == ("cluster: job needs cpu 12 to start, only 11 can be admitted (10 allocatable × "
                           "overcommit-factor 1.5, 4 allocated, 0 reserved by admitted jobs)")


def test_overcommit_counts_admitted_jobs_and_abstains_without_min_resources() -> None:
    ssn = overcommit_session("1.5", 4000, [
        podgroup("old", phase="Inqueue", min_resources={"cpu": "3"}), podgroup("a", min_resources={"cpu": "6"}),
        podgroup("b", min_resources={"cpu": "6"}), podgroup("free")])
    oc = plugin(ssn, OvercommitPlugin)
    assert oc.enqueueable(ssn.jobs["default/free"]) == ABSTAIN
    assert ssn.tiers.enqueueable(ssn.jobs["default/a"]) == PERMIT  # 11 − 3 reserved ≥ 6
    ssn.tiers.enqueued(ssn.jobs["default/a"])  # admitted: only now reserved
    vote = ssn.tiers.enqueueable(ssn.jobs["default/b"])  # 11 − 9 < 6
    assert vote.kind is VoteKind.REJECT
    assert "only 2 can be admitted" in vote.reason and "9 reserved by admitted jobs" in vote.reason


def test_a_job_refused_by_its_queue_reserves_nothing_in_overcommit() -> None:
    # As in the default conf, overcommit votes before proportion in one tier. A job that
    # proportion refuses is not admitted, so it must not hold cluster room other jobs need.
    c = conf([{"name": "overcommit", "arguments": {"overcommit-factor": "1"}}, "proportion"], actions="enqueue")
    ssn = session(c, [node("n1", cpu=10, memory="100Gi")], [],
                  podgroups=[podgroup("capped", queue="qa", min_resources={"cpu": "6"}, created=stamp(1)),
                             podgroup("fits", queue="qb", min_resources={"cpu": "6"}, created=stamp(2))],
                  queues=[queue("qa", capability={"cpu": "4"}), queue("qb")])
    capped, fits = ssn.jobs["default/capped"], ssn.jobs["default/fits"]
    assert ssn.tiers.enqueueable(capped).kind is VoteKind.REJECT
    assert ssn.tiers.enqueueable(fits) == PERMIT  # 10 cpu idle, nothing admitted
    ssn.tiers.enqueued(fits)  # admitted: only now reserved


def test_enqueue_action_admits_what_the_cluster_can_take_after_a_queue_refusal() -> None:
    c = conf([{"name": "overcommit", "arguments": {"overcommit-factor": "1"}}, "proportion"], actions="enqueue")
    ssn = session(c, [node("n1", cpu=10, memory="100Gi")], [],
                  podgroups=[podgroup("capped", queue="qa", min_resources={"cpu": "6"}, created=stamp(1)),
                             podgroup("fits", queue="qb", min_resources={"cpu": "6"}, created=stamp(2))],
                  queues=[queue("qa", capability={"cpu": "4"}), queue("qb")])
    ssn.run()
    assert ssn.jobs["default/capped"].phase == "Pending"
    assert "capability cpu 4" in ssn.jobs["default/capped"].reason
    assert ssn.jobs["default/fits"].phase == "Inqueue", ssn.jobs["default/fits"].reason
