"""task-topology through a real Session: a TensorFlow-like job's ps and worker tasks placed
together or apart, in the order its annotations give (caldera's own cases; Volcano's are in
tests/volcano).

Each job is what a vcjob becomes: a PodGroup carrying the vcjob's annotations, and pods whose
``volcano.sh/task-spec`` annotation names their vcjob task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest

from batch_scheduler.conf import SchedulerConf
from batch_scheduler.plugins.task_topology import (
    AFFINITY,
    ANTI_AFFINITY,
    TASK_ORDER,
    TaskTopologyArguments,
    TaskTopologyPlugin,
)
from batch_scheduler.session import Session
from cluster.model.core import Node
from cluster.model.labels import TASK_SPEC_KEY
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, podgroup, session, task
from tests.batch_scheduler.plugins.common import plugin
from tests.builders import node

JOB = "default/tf"


def tf_job(
    roles: Mapping[str, int],
    annotations: Mapping[str, str] | None = None,
    *,
    min_member: int | None = None,
    cpu: str = "1",
) -> tuple[Any, list[PodRecord]]:
    """A PodGroup ``tf`` with ``annotations`` and ``roles[r]`` pending pods ``tf-<r>-<i>`` of task ``r``."""
    pg = podgroup("tf", min_member=sum(roles.values()) if min_member is None else min_member, phase="Inqueue")
    pg = msgspec.structs.replace(pg, metadata=msgspec.structs.replace(pg.metadata, annotations=dict(annotations or {})))
    pods = [
        task(f"tf-{role}-{i}", cpu=cpu, memory="1Gi", group="tf", annotations={TASK_SPEC_KEY: role})
        for role, count in roles.items()
        for i in range(count)
    ]
    return pg, pods


def topology_conf(*others: str | Mapping[str, Any], weight: int | None = 10, **switches: bool) -> SchedulerConf:
    entry: dict[str, Any] = {"name": "task-topology", **switches}
    if weight is not None:
        entry["arguments"] = {"task-topology.weight": weight}
    return conf(["gang", "predicates", *others, entry], actions="allocate")


def run(
    scheduler_conf: SchedulerConf,
    nodes: Sequence[Node],
    roles: Mapping[str, int],
    annotations: Mapping[str, str] | None = None,
    **job: Any,
) -> Session:
    pg, pods = tf_job(roles, annotations, **job)
    ssn = session(scheduler_conf, nodes, pods, podgroups=[pg])
    ssn.run()
    return ssn


def placements(ssn: Session) -> dict[str, str]:
    return {t.name: t.node for batch in ssn.commits for t in batch}


def placed_order(ssn: Session) -> list[str]:
    return [t.name for batch in ssn.commits for t in batch]


# The design document's example (docs/design/task-topology-plugin.md): two ps with anti-affinity,
# four workers with affinity to the ps, 1 cpu each; nodes of 2, 1 and 4 cpu.
DOC_NODES = [node("node1", cpu="2"), node("node2", cpu="1"), node("node3", cpu="4")]
DOC_ROLES = {"ps": 2, "worker": 4}
DOC_ANNOTATIONS = {AFFINITY: "ps,worker", ANTI_AFFINITY: "ps"}


def test_the_design_documents_example_places_each_bucket_together() -> None:
    ssn = run(topology_conf(), DOC_NODES, DOC_ROLES, DOC_ANNOTATIONS)
    got = placements(ssn)
    # Buckets {ps-0, worker-0, worker-2} and {ps-1, worker-1, worker-3}, placed in that order.
    assert placed_order(ssn) == ["tf-ps-0", "tf-worker-0", "tf-worker-2", "tf-ps-1", "tf-worker-1", "tf-worker-3"]
    assert {n: got[n] for n in ("tf-ps-0", "tf-worker-0", "tf-worker-2")} == dict.fromkeys(
        ("tf-ps-0", "tf-worker-0", "tf-worker-2"), "node3"
    )
    assert (got["tf-ps-1"], got["tf-worker-1"]) == ("node1", "node1")
    assert got["tf-worker-3"] in ("node2", "node3")  # a tie the document leaves to other plugins


def test_preempt_and_backfill_order_tasks_as_allocate_does() -> None:
    # allocate sorts by the plugin's key; preempt, reclaim and backfill compare with its task order.
    pg, pods = tf_job(DOC_ROLES, DOC_ANNOTATIONS)
    ssn = session(topology_conf(), DOC_NODES, pods, podgroups=[pg])
    pending = ssn.jobs[JOB].pending()
    expected = ["tf-ps-0", "tf-worker-0", "tf-worker-2", "tf-ps-1", "tf-worker-1", "tf-worker-3"]
    assert [t.name for t in ssn.tiers.sort_tasks(pending)] == expected
    assert [t.name for t in sorted(pending, key=ssn.tiers.task_key())] == expected


@pytest.mark.parametrize(("weight", "factor"), [(None, 1), (10, 10)])
def test_the_node_score_is_volcanos_bucket_score_times_weight_over_the_biggest_bucket(
    weight: int | None, factor: int
) -> None:
    pg, pods = tf_job(DOC_ROLES, DOC_ANNOTATIONS)
    ssn = session(topology_conf(weight=weight), DOC_NODES, pods, podgroups=[pg])
    topology = plugin(ssn, TaskTopologyPlugin)
    # The document's scores for ps-0: its bucket of 3 fits node3, loses one pod on node1, two on node2.
    score = topology.placed_score(ssn.tasks["uid-tf-ps-0"], np.ones(ssn.n, dtype=np.bool_))
    assert score is not None
    assert list(score) == pytest.approx([f * factor * 100 / 3 for f in (2, 1, 3)])


def test_a_weight_that_is_not_an_integer_leaves_the_default_and_a_negative_one_is_refused() -> None:
    assert TaskTopologyArguments.load("task-topology", {"task-topology.weight": "1.5"}).weight == 1
    with pytest.raises(ValueError, match="task-topology.weight"):
        TaskTopologyArguments.load("task-topology", {"task-topology.weight": "-2"})


# Four roomy nodes: nodeorder's least-requested score alone spreads a job's pods one per node.
ROOMY = [node(f"n{i}", cpu="8", memory="32Gi") for i in range(4)]
SPREAD = "nodeorder"


def test_affinity_puts_ps_and_workers_on_the_same_node() -> None:
    apart = placements(run(topology_conf(SPREAD), ROOMY, {"ps": 1, "worker": 3}))
    assert len(set(apart.values())) == 4  # without the annotation, least requested spreads them
    together = placements(run(topology_conf(SPREAD), ROOMY, {"ps": 1, "worker": 3}, {AFFINITY: "ps,worker"}))
    assert len(together) == 4 and len(set(together.values())) == 1


def test_anti_affinity_spreads_the_workers_over_nodes() -> None:
    packed = placements(run(topology_conf("binpack"), ROOMY, {"worker": 3}))
    assert len(set(packed.values())) == 1  # binpack alone fills one node
    spread = placements(run(topology_conf("binpack"), ROOMY, {"worker": 3}, {ANTI_AFFINITY: "worker"}))
    assert len(spread) == 3 and len(set(spread.values())) == 3


def test_ps_anti_affinity_gives_each_ps_its_workers_on_its_own_node() -> None:
    got = placements(run(topology_conf("binpack"), ROOMY, {"ps": 2, "worker": 4}, DOC_ANNOTATIONS))
    assert got["tf-ps-0"] != got["tf-ps-1"]
    assert sorted(got[f"tf-worker-{i}"] for i in range(4)) == sorted([got["tf-ps-0"]] * 2 + [got["tf-ps-1"]] * 2)


@pytest.mark.parametrize(
    ("order", "placed"),
    [("worker,ps", ["tf-worker-0", "tf-worker-1"]), ("ps,worker", ["tf-ps-0", "tf-ps-1"])],
)
def test_the_task_order_decides_which_tasks_get_scarce_room(order: str, placed: list[str]) -> None:
    # Room for two pods; the job may start with one, so the first two in task order are placed.
    nodes = [node("n0", cpu="2")]
    ssn = run(topology_conf(), nodes, {"ps": 2, "worker": 2}, {AFFINITY: "ps,worker", TASK_ORDER: order}, min_member=1)
    assert placed_order(ssn) == placed


def test_the_task_order_alone_changes_nothing_as_in_volcano() -> None:
    # Only tasks an affinity or anti-affinity names are in buckets; the order ranks within them.
    nodes = [node("n0", cpu="2")]
    ssn = run(topology_conf(), nodes, {"ps": 2, "worker": 2}, {TASK_ORDER: "worker,ps"}, min_member=1)
    assert placed_order(ssn) == ["tf-ps-0", "tf-worker-0"]  # pod index, then uid: the default order


@pytest.mark.parametrize(
    ("annotations", "why"),
    [
        ({AFFINITY: "ps,worker,chief"}, f"{AFFINITY}: task chief do not exist in job <default/tf>"),
        ({AFFINITY: "ps,worker", ANTI_AFFINITY: "ps,ps"}, f"{ANTI_AFFINITY}: task ps is duplicate in job <default/tf>"),
    ],
)
def test_a_malformed_annotation_is_ignored_and_the_reason_kept(annotations: dict[str, str], why: str) -> None:
    pg, pods = tf_job({"ps": 1, "worker": 3}, annotations)
    ssn = session(topology_conf(SPREAD), ROOMY, pods, podgroups=[pg])
    topology = plugin(ssn, TaskTopologyPlugin)
    assert topology.ignored == {JOB: f"{why}; the job's task topology is ignored"}
    assert topology.placed_score(ssn.tasks["uid-tf-ps-0"], np.ones(ssn.n, dtype=np.bool_)) is None
    ssn.run()
    assert len(set(placements(ssn).values())) == 4  # placed as if the job had no topology


def test_node_order_switched_off_leaves_placements_to_the_other_scores() -> None:
    ssn = run(topology_conf(SPREAD, enableNodeOrder=False), ROOMY, {"ps": 1, "worker": 3}, {AFFINITY: "ps,worker"})
    assert len(set(placements(ssn).values())) == 4


def test_a_gang_that_cannot_start_leaves_its_buckets_as_they_were() -> None:
    # Room for three of the four: allocate places three, then takes them back.
    nodes = [node("n0", cpu="3")]
    pg, pods = tf_job({"ps": 1, "worker": 3}, {AFFINITY: "ps,worker"})
    ssn = session(topology_conf(), nodes, pods, podgroups=[pg])
    topology = plugin(ssn, TaskTopologyPlugin)
    worker = ssn.tasks["uid-tf-worker-2"]
    everywhere = np.ones(ssn.n, dtype=np.bool_)
    before = topology.placed_score(worker, everywhere)
    ssn.run()
    assert not ssn.commits
    assert worker.status.value == "Pending"
    after = topology.placed_score(worker, everywhere)
    assert before is not None and after is not None
    assert list(after) == list(before)
    assert [len(b.tasks) for b in topology.jobs[JOB].buckets] == [4]


def test_room_an_eviction_is_freeing_counts_toward_the_bucket() -> None:
    # n0's 2 cpu are held by a pod being evicted: the bucket of three (3 cpu) loses one pod there,
    # as Volcano adds a node's releasing resources to its idle ones.
    other = task("old", cpu="2", memory="1Gi", node="n0")
    other = msgspec.structs.replace(
        other,
        pod=msgspec.structs.replace(
            other.pod, metadata=msgspec.structs.replace(other.pod.metadata, deletion_timestamp="2024-01-01T00:00:00Z")
        ),
    )
    pg, pods = tf_job({"ps": 1, "worker": 2}, {AFFINITY: "ps,worker"})
    ssn = session(topology_conf(weight=None), [node("n0", cpu="2")], [other, *pods], podgroups=[pg])
    topology = plugin(ssn, TaskTopologyPlugin)
    score = topology.placed_score(ssn.tasks["uid-tf-ps-0"], np.ones(ssn.n, dtype=np.bool_))
    assert score is not None
    assert list(score) == pytest.approx([(3 - 1) * 100 / 3])
