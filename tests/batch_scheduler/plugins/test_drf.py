"""The drf plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

import pytest

from batch_scheduler.plugins.drf import DrfPlugin, dominant_share
from tests.batch_scheduler.inputs import conf, podgroup, session, task
from tests.batch_scheduler.plugins.common import by_name, lone, names, plugin, stamp
from tests.builders import node

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
