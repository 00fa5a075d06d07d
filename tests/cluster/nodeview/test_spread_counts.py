"""Which placed pods topology spread counts, in both schedulers: not those being deleted (which
inter-pod anti-affinity still counts), and only those on nodes with every constraint's label."""

from __future__ import annotations

import numpy as np
import pytest

from agent_scheduler.pod_context import PodContext, placed_on
from cluster.nodeview.pod_affinity import ANTI_AFFINITY, SPREAD, PlacedPods
from cluster.nodeview.pod_scores import spread_score
from tests.batch_scheduler.inputs import columns
from tests.cluster.nodeview.rule_cases import PASS, RUNNERS, Case, check, exists, node, pod

TWO = [node("node-a", node="node-a"), node("node-b", node="node-b")]
FOO = exists("foo")

CASES = [
    Case(
        "a pod being deleted still keeps a pod with anti-affinity to it off its node",
        pod().anti_exists("foo", "node"),
        TWO,
        {"node-a": ANTI_AFFINITY, "node-b": PASS},
        [pod().on("node-a").label("foo").terminating()],
    ),
    Case(
        "a pod being deleted does not count for spread",
        pod().label("foo").spread(1, "node", FOO),
        TWO,
        {"node-a": PASS, "node-b": SPREAD},
        [pod().on("node-a").label("foo").terminating(), pod().on("node-a").label("foo").terminating()]
        + [pod().on("node-b").label("foo")],
    ),
    Case(
        "the pods of a node without another constraint's label do not count",
        pod().label("foo").spread(1, "zone", FOO).spread(1, "node", FOO),
        [
            node("node-a", zone="zone1", node="node-a"),
            node("node-b", zone="zone1", node="node-b"),
            node("node-x", zone="zone2"),
            node("node-y", zone="zone2", node="node-y"),
        ],
        # zone2 counts 0, not node-x's 2: zone1 (1 + 1 - 0) is too many
        {"node-a": SPREAD, "node-b": SPREAD, "node-x": SPREAD, "node-y": PASS},
        [pod().on("node-a").label("foo"), pod().on("node-x").label("foo"), pod().on("node-x").label("foo")],
    ),
]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_what_the_rules_count(case: Case, runner: str) -> None:
    check(runner, case)


def _indexes() -> list[PlacedPods]:
    """node-a holds a deleting ``foo`` pod, node-b a running one: as the batch session indexes
    them, and as the agent loop hands them to a worker."""
    table = columns(TWO)
    existing = [pod().label("foo").terminating().obj("gone"), pod().label("foo").obj("live")]
    session = PlacedPods()
    context = PodContext()
    for p, row in zip(existing, (0, 1), strict=True):
        session.add(p.metadata.uid, p, row)
        context.bound(p.metadata.uid, p, TWO[row].name)
    soft = pod().label("foo").spread(1, "node", FOO, when="ScheduleAnyway").obj()
    return [session, placed_on(table, context.for_batch([soft]))]


@pytest.mark.parametrize("index", _indexes(), ids=["batch", "agent"])
def test_a_pod_being_deleted_does_not_count_for_the_spread_score(index: PlacedPods) -> None:
    table = columns(TWO)
    soft = pod().label("foo").spread(1, "node", FOO, when="ScheduleAnyway").obj()
    scores = spread_score(table, soft, index, np.ones(2, dtype=np.bool_))
    assert scores is not None and scores.tolist() == [100, 0]  # node-a's only pod is going away


def test_the_agent_loop_notes_a_pod_once_it_is_being_deleted() -> None:
    context = PodContext()
    running = pod().label("foo").obj("p1")
    context.bound("p1", running, "node-a")
    context.bound("p1", pod().label("foo").terminating().obj("p1"), "node-a")
    [ref] = context.for_batch([pod().label("foo").spread(1, "node", FOO).obj()])
    assert ref.terminating
