"""The drf plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

import pytest

from batch_scheduler.plugins.drf import DrfPlugin, dominant_share
from batch_scheduler.vector import Vector
from tests.batch_scheduler.inputs import conf, podgroup, session, task
from tests.batch_scheduler.plugins.common import by_name, lone, names, plugin, stamp
from tests.builders import node

# -- drf ----------------------------------------------------------------------------------

DRF_NODES = [node("n1", cpu=10, memory="100Gi")]


@pytest.mark.parametrize(
    ("a", "b", "first"),
    [
        (("4", "10Gi"), ("1", "50Gi"), "a"),  # 0.4 < 0.5 (memory dominates b)
        (("6", "1Gi"), ("1", "50Gi"), "b"),  # 0.6 > 0.5
        (("2", "20Gi"), ("2", "20Gi"), "a"),  # equal: creation order
    ],
)
def test_drf_smaller_dominant_share_goes_first(a: tuple[str, str], b: tuple[str, str], first: str) -> None:
    ssn = session(
        conf(["drf"]),
        DRF_NODES,
        [
            task("a", node="n1", created=stamp(1), cpu=a[0], memory=a[1]),
            task("b", node="n1", created=stamp(2), cpu=b[0], memory=b[1]),
        ],
    )
    assert sorted([lone(ssn, "a"), lone(ssn, "b")], key=ssn.tiers.job_key())[0] is lone(ssn, first)


def test_drf_share_is_the_largest_fraction_held() -> None:
    ssn = session(conf(["drf"]), DRF_NODES, [task("a", cpu="4", memory="10Gi", node="n1"), task("idle")])
    drf = plugin(ssn, DrfPlugin)
    assert drf.share(lone(ssn, "a")) == pytest.approx(0.4)
    assert drf.share(lone(ssn, "idle")) == 0.0
    assert sorted(ssn.jobs.values(), key=ssn.tiers.job_key())[0] is lone(ssn, "idle")
    # only the resources the cluster has count (Volcano's calculateShare walks the total's names)
    assert dominant_share(Vector(1000, scalars={"nvidia.com/gpu": 1000}), Vector(10000)) == pytest.approx(0.1)


def test_drf_share_counts_pod_slots() -> None:
    # Every task holds one of its node's pods, as in Volcano: on a node of 4 pod slots a job of two
    # small tasks holds half the cluster's pods, more than its cpu share.
    ssn = session(
        conf(["drf"]),
        [node("n1", cpu=10, memory="100Gi", pods=4)],
        [
            task("a1", group="a", cpu="1", memory="1Gi", node="n1"),
            task("a2", group="a", cpu="1", memory="1Gi", node="n1"),
            task("b", cpu="4", memory="1Gi", node="n1"),
        ],
        podgroups=[podgroup("a", min_member=1)],
    )
    drf = plugin(ssn, DrfPlugin)
    assert drf.share(ssn.jobs["default/a"]) == pytest.approx(0.5)  # 2 of 4 pods (cpu 0.2)
    assert drf.share(lone(ssn, "b")) == pytest.approx(0.4)  # cpu (1 of 4 pods)
    assert sorted([ssn.jobs["default/a"], lone(ssn, "b")], key=ssn.tiers.job_key())[0] is lone(ssn, "b")


def test_drf_lets_a_victim_go_only_while_its_job_keeps_the_preemptors_share() -> None:
    pods = [
        task("me", cpu="1", memory="1Gi"),
        task("a1", group="a", cpu="2", memory="1Gi", node="n1"),
        task("a2", group="a", cpu="2", memory="1Gi", node="n1"),
    ]
    ssn = session(conf(["drf"]), DRF_NODES, pods, podgroups=[podgroup("a", min_member=1)])
    # me would hold 0.1; a holds 0.4, 0.2 after one eviction, 0 after two
    assert names(plugin(ssn, DrfPlugin).preemptable(ssn.tasks["uid-me"], by_name(ssn, "a1", "a2"))) == ["a1"]
