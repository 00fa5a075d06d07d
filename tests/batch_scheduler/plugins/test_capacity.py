"""The capacity plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from batch_scheduler.plugins.capacity import CapacityPlugin
from batch_scheduler.plugins.capacity_tree import MAX_FLOAT, MAX_INT64
from batch_scheduler.session import Session
from batch_scheduler.tasks import TaskStatus
from batch_scheduler.votes import PERMIT, VoteKind
from cluster.model.volcano import Queue
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, queue, session, task
from tests.batch_scheduler.plugins.common import GI, THREE_NODES, by_name, names, plugin
from tests.builders import node

GPU = "nvidia.com/gpu"
TREE: dict[str, Any] = {"name": "capacity", "enableHierarchy": True}


def capacity_session(pods: list[PodRecord], podgroups: list[Any], *, hierarchy: bool = True) -> Session:
    queues = [queue("p", capability={"cpu": "4"}), queue("c1", parent="p"), queue("c2", parent="p"), queue("other")]
    return session(conf([TREE if hierarchy else "capacity"]), THREE_NODES, pods, podgroups=podgroups, queues=queues)


def cap(ssn: Session) -> CapacityPlugin:
    return plugin(ssn, CapacityPlugin)


# -- the tree (enableHierarchy: true) -----------------------------------------------------


def test_capacity_parent_capability_limits_the_children_together() -> None:
    ssn = capacity_session(
        [
            task("c1-run", group="j1", cpu="1", memory=0, node="n0"),
            task("c2-run", group="j2", cpu="3", memory=0, node="n1"),
            task("c1-new", group="j1", cpu="1", memory=0),
            task("o-new", group="jo", cpu="8", memory=0),
        ],
        [podgroup("j1", queue="c1"), podgroup("j2", queue="c2"), podgroup("jo", queue="other")],
    )
    refusal = ssn.tiers.allocatable(ssn.queues["c1"], ssn.tasks["uid-c1-new"])
    assert refusal is not None and refusal.condition == "QueueCapabilityExceeded"
    assert refusal.message.startswith("queue p (parent of c1): capability cpu 4 would be exceeded")
    assert "allocated 4" in refusal.message and "task needs 1" in refusal.message
    assert ssn.tiers.allocatable(ssn.queues["other"], ssn.tasks["uid-o-new"]) is None  # no limit outside p


def test_capacity_a_child_alone_meets_the_capability_it_inherits() -> None:
    # c1 states no capability: it takes p's cpu 4, and is refused at its own level (Volcano
    # checks the queue first, then its ancestors); the reason names where the limit comes from.
    ssn = capacity_session(
        [task("run", group="j1", cpu="3", memory=0, node="n0"), task("new", group="j1", cpu="2", memory=0)],
        [podgroup("j1", queue="c1")],
    )
    refusal = ssn.tiers.allocatable(ssn.queues["c1"], ssn.tasks["uid-new"])
    assert refusal is not None and refusal.condition == "QueueCapabilityExceeded"
    assert refusal.message == (
        "queue c1: capability cpu 4 (inherited from queue p) would be exceeded (allocated 3, task needs 2)"
    )


def test_capacity_without_enable_hierarchy_parents_are_ignored() -> None:
    # As Volcano: spec.parent means nothing unless the capacity plugin's conf says enableHierarchy.
    ssn = capacity_session(
        [
            task("c1-run", group="j1", cpu="1", memory=0, node="n0"),
            task("c2-run", group="j2", cpu="3", memory=0, node="n1"),
            task("c1-new", group="j1", cpu="1", memory=0),
        ],
        [podgroup("j1", queue="c1"), podgroup("j2", queue="c2")],
        hierarchy=False,
    )
    assert ssn.tiers.allocatable(ssn.queues["c1"], ssn.tasks["uid-c1-new"]) is None
    assert set(cap(ssn).attrs) == {"c1", "c2"}  # flat: only queues with jobs have figures


def test_capacity_enqueue_checks_the_parent() -> None:
    ssn = capacity_session(
        [task("run", group="j1", cpu="3", memory=0, node="n0")],
        [
            podgroup("j1", queue="c1", phase="Running", min_resources={"cpu": "3"}),
            podgroup("small", queue="c2", min_resources={"cpu": "1"}),
            podgroup("big", queue="c2", min_resources={"cpu": "2"}),
        ],
    )
    vote = ssn.tiers.enqueueable(ssn.jobs["default/big"])  # 3 + 2 > 4
    assert vote.kind is VoteKind.REJECT and vote.condition == "QueueCapabilityExceeded"
    assert vote.reason == (
        "queue p (parent of c2): capability cpu 4 would be exceeded (allocated and reserved 3, job needs 2)"
    )
    assert ssn.tiers.enqueueable(ssn.jobs["default/small"]) == PERMIT  # 3 + 1 <= 4


def test_capacity_enqueue_counts_admitted_jobs_at_every_level() -> None:
    # A job admitted to c2 reserves room in p too: the next one must not fit past p's capability.
    # As in Volcano, the vote itself reserves (a later plugin's reject does not undo it).
    ssn = capacity_session(
        [task("run", group="j1", cpu="3", memory=0, node="n0")],
        [
            podgroup("j1", queue="c1", phase="Running", min_resources={"cpu": "3"}),
            podgroup("first", queue="c2", min_resources={"cpu": "1"}),
            podgroup("second", queue="c2", min_resources={"cpu": "1"}),
        ],
    )
    assert ssn.tiers.enqueueable(ssn.jobs["default/first"]) == PERMIT  # 3 + 1 <= 4
    assert cap(ssn).attrs["c2"].inqueue.cpu == 1000 and cap(ssn).attrs["p"].inqueue.cpu == 1000
    vote = ssn.tiers.enqueueable(ssn.jobs["default/second"])  # 3 + 1 admitted + 1 > 4
    assert vote.kind is VoteKind.REJECT and vote.condition == "QueueCapabilityExceeded"
    assert "p (parent of c2)" in vote.reason and "cpu 4" in vote.reason


def test_capacity_a_job_in_a_parent_queue_stops_the_plugin() -> None:
    # Volcano's capacity has no job-valid point: a job in a queue with children makes its
    # tree unusable (readyToSchedule false), so it refuses every queue this session.
    ssn = capacity_session(
        [task("leaf", group="at-leaf", cpu="1", memory=0)],
        [podgroup("at-parent", queue="p"), podgroup("at-leaf", queue="c2", min_resources={"cpu": "1"})],
    )
    assert ssn.tiers.why_not_schedulable(ssn.jobs["default/at-parent"]) is None
    why = (
        "job default/at-parent is in queue p, which has child queues (c1, c2): with enableHierarchy jobs go to "
        "leaf queues, and capacity admits and places nothing until it moves"
    )
    vote = ssn.tiers.enqueueable(ssn.jobs["default/at-leaf"])
    assert vote.kind is VoteKind.REJECT and vote.reason == why and vote.condition == "QueueHierarchyInvalid"
    refusal = ssn.tiers.allocatable(ssn.queues["c2"], ssn.tasks["uid-leaf"])
    assert refusal is not None and refusal.message == why
    assert not ssn.tiers.preemptive(ssn.queues["c2"], ssn.tasks["uid-leaf"])
    # Flat, the same job is just a job of queue p.
    flat = capacity_session(
        [task("leaf", group="at-leaf", cpu="1", memory=0)],
        [podgroup("at-parent", queue="p"), podgroup("at-leaf", queue="c2")],
        hierarchy=False,
    )
    assert flat.tiers.allocatable(flat.queues["c2"], flat.tasks["uid-leaf"]) is None


def test_capacity_a_parent_that_does_not_exist_stops_the_plugin() -> None:
    ssn = session(
        conf([TREE]),
        THREE_NODES,
        [task("t", group="j", cpu="1", memory=0)],
        podgroups=[podgroup("j", queue="a")],
        queues=[queue("a", parent="gone")],
    )
    refusal = ssn.tiers.allocatable(ssn.queues["a"], ssn.tasks["uid-t"])
    assert refusal is not None and refusal.condition == "QueueHierarchyInvalid"
    assert refusal.message.startswith("queue a names parent queue gone, which does not exist")


@pytest.mark.timeout(20)
def test_capacity_a_queue_named_root_is_the_top_and_parent_cycles_end() -> None:
    # A user-created root is the tree's top whatever its own spec.parent says (here: its child);
    # a cycle in spec.parent (x <-> y) ends too: its queues are never reached from the root,
    # so a leaf under them has no real capability. Neither loops nor grows.
    queues = [
        queue("root", parent="team", capability={"cpu": "6"}),
        queue("team", parent="root"),
        queue("team-a", parent="team"),
        queue("x", parent="y"),
        queue("y", parent="x"),
        queue("under", parent="x"),
    ]
    ssn = session(
        conf([TREE, "gang", "predicates"], actions="allocate"),
        THREE_NODES,
        [task("a", group="ja", cpu="2", memory=0), task("u", group="ju", cpu="1", memory=0)],
        podgroups=[podgroup("ja", queue="team-a", phase="Inqueue"), podgroup("ju", queue="under", phase="Inqueue")],
        queues=queues,
    )
    attrs = cap(ssn).attrs
    assert attrs["root"].ancestors == [] and attrs["team-a"].ancestors == ["root", "team"]
    assert attrs["team-a"].real_capability.cpu == 6000  # the root's cpu, inherited down
    refusal = ssn.tiers.allocatable(ssn.queues["under"], ssn.tasks["uid-u"])
    assert refusal is not None and "queue under is not under queue root: its spec.parent chain loops" in refusal.message
    ssn.run()
    assert {t.name for batch in ssn.commits for t in batch} == {"a"}


def test_capacity_capabilities_deserved_and_real_capabilities_in_the_tree() -> None:
    # Volcano's checkHierarchicalQueue: a child's capability takes its parent's cpu and memory
    # when it states none or 0, and any scalar it does not state; an empty root is unlimited
    # (scalars at MaxInt64); a child's real capability is its parent's less the children's
    # guarantees plus its own; deserved is at least the guarantee; the root deserves its children's sum.
    nodes = [node("g0", cpu=16, memory="64Gi", gpu=8)]
    queues = [
        queue("p", capability={"cpu": "8", "memory": "32Gi", GPU: "4"}, deserved={"cpu": "6"}),
        queue("c1", parent="p", capability={"cpu": "0", "memory": "8Gi"}, guarantee={"cpu": "2"}),
        queue("c2", parent="p", guarantee={"cpu": "1"}, deserved={"cpu": "1", GPU: "0"}),
    ]
    ssn = session(conf([TREE]), nodes, queues=queues)
    attrs = cap(ssn).attrs
    root, c1, c2 = attrs["root"], attrs["c1"], attrs["c2"]
    assert (
        root.capability is not None
        and root.capability.cpu == MAX_FLOAT
        and root.capability.scalars == {"pods": MAX_INT64, GPU: MAX_INT64}
    )
    assert c1.capability is not None and (c1.capability.cpu, c1.capability.memory) == (8000, 8 * GI)
    assert c1.capability.scalars[GPU] == 4000
    assert (c1.real_capability.cpu, c1.real_capability.memory, c1.real_capability.scalars[GPU]) == (7000, 8 * GI, 4000)
    assert c2.real_capability.cpu == 6000  # 8 - (2 + 1) + 1
    assert (c1.deserved.cpu, c2.deserved.cpu, c2.deserved.scalars) == (2000, 1000, {GPU: 0.0})
    assert root.deserved.cpu == 6000 and root.guarantee.cpu == 0  # p's deserved; p states no guarantee


def test_capacity_queue_order_leaves_first_and_by_the_branches_below_the_shared_ancestor() -> None:
    # Leaves before parents; two leaves compare the queues just below the deepest ancestor
    # they share: here the branches a and b, not the leaves themselves.
    queues = [
        queue("a", deserved={"cpu": "10"}),
        queue("a1", parent="a", deserved={"cpu": "10"}),
        queue("b", deserved={"cpu": "10"}),
        queue("b1", parent="b", deserved={"cpu": "1"}),
    ]
    pods = [task("ra", group="ja", cpu="6", memory=0, node="n0"), task("rb", group="jb", cpu="1", memory=0, node="n1")]
    ssn = session(
        conf([TREE]),
        THREE_NODES,
        pods,
        queues=queues,
        podgroups=[podgroup("ja", queue="a1"), podgroup("jb", queue="b1")],
    )
    key = ssn.tiers.queue_key()
    assert [q.name for q in sorted((ssn.queues[n] for n in ("a", "a1", "b1")), key=key)] == ["b1", "a1", "a"]
    # b1 alone is at share 1 (1 of 1 deserved), a1 at 0.6; but b holds 0.1 of its 10, a 0.6.


def test_capacity_victims_come_first_from_the_closest_queue_in_the_tree() -> None:
    ssn = capacity_session([], [])
    q = ssn.queues
    assert ssn.tiers.victim_queue_compare(q["c1"], q["other"], q["c2"]) < 0  # c1 shares p with the reclaimer
    assert ssn.tiers.victim_queue_compare(q["other"], q["c1"], q["c2"]) > 0
    flat = capacity_session([], [], hierarchy=False)
    assert cap(flat).victim_queue_order(q["c1"], q["other"], q["c2"]) == 0  # flat: Volcano registers none


def reclaim_session(*, hierarchy: bool = True, arguments: Mapping[str, str] | None = None) -> Session:
    # One 4-cpu node, full: c1 holds it all (deserved 2); c2 (deserved 2) waits for 2. Their
    # parent p is at its capability 4.
    capacity: dict[str, Any] = {"name": "capacity", "enableHierarchy": hierarchy}
    if arguments:
        capacity["arguments"] = dict(arguments)
    queues = [
        queue("p", capability={"cpu": "4"}, deserved={"cpu": "4"}),
        queue("c1", parent="p", deserved={"cpu": "2"}),
        queue("c2", parent="p", deserved={"cpu": "2"}),
    ]
    pods = [
        task("r1", group="j1", cpu="2", memory="1Gi", node="n0"),
        task("r2", group="j2", cpu="2", memory="1Gi", node="n0"),
        task("new", group="j3", cpu="2", memory="1Gi"),
    ]
    gang = {"name": "gang", "enableReclaimable": False}  # gang would protect the one-task jobs
    return session(
        conf([gang, capacity, "predicates"], actions="reclaim"),
        [node("n0", cpu=4, memory="16Gi")],
        pods,
        podgroups=[
            podgroup("j1", queue="c1", phase="Running"),
            podgroup("j2", queue="c1", phase="Running"),
            podgroup("j3", queue="c2", phase="Inqueue"),
        ],
        queues=queues,
    )


@pytest.mark.parametrize("arguments", [None, {"ancestorReclaimLevel": "1"}], ids=["plain", "ancestorReclaimLevel"])
def test_capacity_reclaims_from_a_sibling_under_a_full_parent(arguments: Mapping[str, str] | None) -> None:
    # As Volcano: reclaim looks at the leaves' deserved shares only, not at the parent being
    # full; ancestorReclaimLevel 1 changes nothing here, the two leaves sharing their parent.
    ssn = reclaim_session(arguments=arguments)
    ssn.run()
    assert len(ssn.evictions) == 1 and ssn.evictions[0].name in ("r1", "r2")
    assert ssn.tasks["uid-new"].status is TaskStatus.PIPELINED and ssn.tasks["uid-new"].node == "n0"


# -- flat (Volcano's default) -----------------------------------------------------------------


def test_capacity_queue_order_by_held_over_deserved() -> None:
    queues = [queue("a", deserved={"cpu": "10"}), queue("b", deserved={"cpu": "4"})]
    ssn = session(
        conf(["capacity"]),
        THREE_NODES,
        [task("ra", group="ja", cpu="3", memory=0, node="n0"), task("rb", group="jb", cpu="2", memory=0, node="n1")],
        podgroups=[podgroup("ja", queue="a"), podgroup("jb", queue="b")],
        queues=queues,
    )
    assert sorted([ssn.queues["b"], ssn.queues["a"]], key=ssn.tiers.queue_key())[0].name == "a"  # 0.3 < 0.5
    attrs = cap(ssn).attrs
    assert attrs["a"].allocated.cpu == 3000 and attrs["a"].real_capability.cpu == 30000  # no capability: the cluster


def with_priority(q: Queue, priority: int) -> Queue:
    return msgspec.structs.replace(q, spec=msgspec.structs.replace(q.spec, priority=priority))


def test_capacity_queue_priority_comes_before_share_and_deserving_before_best_effort() -> None:
    queues = [
        with_priority(queue("busy", deserved={"cpu": "1"}), 5),
        queue("idle", deserved={"cpu": "10"}),
        queue("best-effort"),
    ]
    pods = [
        task("r", group="jb", cpu="3", memory=0, node="n0"),
        task("e", group="je", cpu="1", memory=0),
        task("i", group="ji", cpu="10", memory=0, node="n1"),
    ]
    ssn = session(
        conf(["capacity"]),
        THREE_NODES,
        pods,
        queues=queues,
        podgroups=[podgroup("jb", queue="busy"), podgroup("je", queue="best-effort"), podgroup("ji", queue="idle")],
    )
    ordered = sorted((ssn.queues[n] for n in ("best-effort", "idle", "busy")), key=ssn.tiers.queue_key())
    # busy: priority 5 though at share 3; idle at share 1 (10 of 10) and best-effort at share 1:
    # the queue that deserves something goes first.
    assert [q.name for q in ordered] == ["busy", "idle", "best-effort"]


def test_capacity_real_capability_and_what_a_capability_of_zero_means() -> None:
    # Flat: real capability = the cluster less every queue's guarantee plus the queue's own,
    # capped by its capability; cpu or memory 0 there is no limit, a scalar 0 is none at all.
    nodes = [node("g0", cpu=10, memory="64Gi", gpu=4)]
    queues = [
        queue("a", capability={"cpu": "0", "memory": "0", GPU: "0"}, guarantee={"cpu": "2"}),
        queue("b", capability={"cpu": "8"}),
        queue("c", guarantee={"cpu": "3"}),
    ]
    pods = [
        task("ta", group="ja", cpu="1", memory="1Gi", gpu=1),
        task("tb", group="jb", cpu="1", memory="1Gi", gpu=1),
        task("tc", group="jc", cpu="1", memory="1Gi"),
    ]
    ssn = session(
        conf(["capacity"]),
        nodes,
        pods,
        queues=queues,
        podgroups=[podgroup("ja", queue="a"), podgroup("jb", queue="b"), podgroup("jc", queue="c")],
    )
    attrs = cap(ssn).attrs
    assert attrs["a"].real_capability.cpu == 7000 and attrs["a"].real_capability.memory == 64 * GI  # 10 - 5 + 2
    assert attrs["b"].real_capability.cpu == 5000 and attrs["b"].real_capability.scalars[GPU] == 4000  # min(10 - 5, 8)
    assert attrs["c"].real_capability.cpu == 8000  # 10 - 5 + 3
    refusal = ssn.tiers.allocatable(ssn.queues["a"], ssn.tasks["uid-ta"])
    assert refusal is not None and refusal.message == (
        "queue a: capability nvidia.com/gpu 0 would be exceeded (allocated 0, task needs 1)"
    )
    assert ssn.tiers.allocatable(ssn.queues["b"], ssn.tasks["uid-tb"]) is None  # no GPU limit stated: the cluster's


def test_capacity_caps_allocation_at_real_capability_not_deserved_and_never_calls_a_queue_overused() -> None:
    conf_ = conf([{"name": "capacity", "enabledOverused": True}, "gang", "predicates"], actions="allocate")
    ssn = session(
        conf_,
        THREE_NODES,
        [task("r", group="j", cpu="2", memory=0, node="n0"), task("n", group="k", cpu="2", memory=0)],
        podgroups=[podgroup("j", queue="q", phase="Running"), podgroup("k", queue="q", phase="Inqueue")],
        queues=[queue("q", deserved={"cpu": "1"}, capability={"cpu": "3"})],
    )
    assert ssn.tiers.overused(ssn.queues["q"]) is None
    refusal = ssn.tiers.allocatable(ssn.queues["q"], ssn.tasks["uid-n"])
    assert (
        refusal is not None
        and refusal.message == "queue q: capability cpu 3 would be exceeded (allocated 2, task needs 2)"
    )


def test_capacity_preemptive_when_some_requested_dimension_stays_within_deserved() -> None:
    queues = [queue("q", deserved={"cpu": "2", "memory": "1Gi"})]
    pods = [
        task("r", group="j", cpu="1", memory="1Gi", node="n0"),
        task("fits-cpu", group="k", cpu="1", memory="1Gi"),
        task("over", group="k", cpu="2", memory="1Gi"),
        task("gpu-only", group="k", cpu=0, memory=0, gpu=1),
    ]
    ssn = session(
        conf(["capacity"]),
        [node("g", cpu=8, memory="16Gi", gpu=2)],
        pods,
        queues=queues,
        podgroups=[podgroup("j", queue="q", phase="Running"), podgroup("k", queue="q", phase="Inqueue")],
    )
    q = ssn.queues["q"]
    assert ssn.tiers.preemptive(q, ssn.tasks["uid-fits-cpu"])  # cpu 2 <= 2, though memory 2Gi > 1Gi
    assert not ssn.tiers.preemptive(q, ssn.tasks["uid-over"])  # cpu 3 > 2 and memory 2Gi > 1Gi
    assert not ssn.tiers.preemptive(q, ssn.tasks["uid-gpu-only"])  # gpu 1 > deserved's 0


@pytest.mark.parametrize(
    ("deserved", "victims"),
    [
        ({"cpu": "4", GPU: "0"}, ["g"]),  # deserved names GPUs (0): holding one is more than deserved
        ({"cpu": "4"}, []),  # GPUs absent from deserved are not judged; cpu is within deserved
        ({GPU: "4"}, []),  # the task's GPU is within deserved; its cpu is not judged
        ({"memory": "1Gi"}, ["g"]),  # nothing the task uses is deserved at all: an immediate victim
    ],
)
def test_capacity_reclaimable_judges_only_the_dimensions_deserved_names(
    deserved: dict[str, str], victims: list[str]
) -> None:
    queues = [queue("victim", deserved=deserved), queue("taker", deserved={"cpu": "4", GPU: "4"})]
    pods = [
        task("g", group="j", cpu="1", memory=0, gpu=1, node="n0"),
        task("want", group="k", cpu="1", memory=0, gpu=1),
    ]
    ssn = session(
        conf(["capacity"]),
        [node("n0", cpu=8, memory="16Gi", gpu=1)],
        pods,
        queues=queues,
        podgroups=[podgroup("j", queue="victim", phase="Running"), podgroup("k", queue="taker", phase="Inqueue")],
    )
    assert names(ssn.tiers.reclaimable(ssn.tasks["uid-want"], by_name(ssn, "g"))) == victims


def test_capacity_reclaimable_keeps_a_queue_at_its_guarantee() -> None:
    queues = [queue("victim", deserved={"cpu": "1"}, guarantee={"cpu": "2"}), queue("taker", deserved={"cpu": "4"})]
    pods = [
        task("v1", group="j", cpu="1", memory=0, node="n0"),
        task("v2", group="j", cpu="1", memory=0, node="n0"),
        task("v3", group="j", cpu="1", memory=0, node="n0"),
        task("want", group="k", cpu="2", memory=0),
    ]
    ssn = session(
        conf(["capacity"]),
        [node("n0", cpu=3, memory="16Gi")],
        pods,
        queues=queues,
        podgroups=[
            podgroup("j", queue="victim", phase="Running", min_member=1),
            podgroup("k", queue="taker", phase="Inqueue"),
        ],
    )
    # 3 -> 2: one victim, the first in victim order (reversed task order: the last created)
    assert names(ssn.tiers.reclaimable(ssn.tasks["uid-want"], by_name(ssn, "v1", "v2", "v3"))) == ["v3"]


def test_capacity_enqueue_reserves_min_resources_less_scheduling_gated_tasks() -> None:
    gated = task("gated", group="j", cpu="1", memory=0, schedulingGates=[{"name": "wait"}])
    ssn = session(
        conf(["capacity"]),
        THREE_NODES,
        [gated, task("open", group="j", cpu="1", memory=0)],
        podgroups=[podgroup("j", queue="q", min_resources={"cpu": "2"})],
        queues=[queue("q", capability={"cpu": "4"})],
    )
    assert ssn.tiers.enqueueable(ssn.jobs["default/j"]) == PERMIT
    assert cap(ssn).attrs["q"].inqueue.cpu == 1000


def test_capacity_enqueue_refuses_a_closed_queue() -> None:
    ssn = session(
        conf(["capacity"]),
        THREE_NODES,
        [task("t", group="j", cpu="1", memory=0)],
        podgroups=[podgroup("j", queue="q", min_resources={"cpu": "1"})],
        queues=[queue("q", state="Closed")],
    )
    vote = ssn.tiers.enqueueable(ssn.jobs["default/j"])
    assert vote.kind is VoteKind.REJECT and vote.condition == "QueueClosed"
    assert vote.reason == "queue q is Closed: only Open queues take new jobs"
