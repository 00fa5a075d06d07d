"""The capacity plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

from typing import Any

from batch_scheduler.framework import PERMIT, VoteKind
from batch_scheduler.plugins.capacity import CapacityPlugin
from batch_scheduler.session import Session
from cluster.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, queue, session, task
from tests.batch_scheduler.plugins.common import THREE_NODES, plugin

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
