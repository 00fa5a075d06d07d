"""The conformance plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

import pytest

from batch_scheduler.plugins.conformance import ConformancePlugin
from tests.batch_scheduler.inputs import conf, load, priority_class, session, task
from tests.batch_scheduler.plugins.common import by_name, names, plugin
from tests.builders import node

# -- conformance --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "priority_class_name", "offered"),
    [
        ("default", "", True),
        ("team-a", "high", True),
        ("kube-system", "", False),
        ("default", "system-cluster-critical", False),
        ("default", "system-node-critical", False),
        ("kube-system", "system-node-critical", False),
    ],
)
def test_conformance_never_offers_system_pods(namespace: str, priority_class_name: str, offered: bool) -> None:
    ssn = session(
        conf(["conformance"]),
        [node("n1")],
        [task("me"), task("v", namespace=namespace, priority_class=priority_class_name, node="n1")],
    )
    me, [victim] = ssn.tasks["uid-me"], by_name(ssn, "v")
    c = plugin(ssn, ConformancePlugin)
    assert names(c.preemptable(me, [victim])) == (["v"] if offered else [])
    assert names(c.reclaimable(me, [victim])) == (["v"] if offered else [])


def test_conformance_vetoes_what_priority_would_allow_in_its_tier() -> None:
    ssn = session(
        load(None),
        [node("n1", cpu=64)],
        [
            task("me", priority_class="high"),
            task("sys", namespace="kube-system", priority_class="low", node="n1"),
            task("crit", priority_class="system-cluster-critical", node="n1"),
            task("user", priority_class="low", node="n1"),
        ],
        priority_classes=[priority_class("high", 100), priority_class("low", 0)],
    )
    # priority would let all three go (their jobs' classes are lower than the preemptor's; the
    # critical class is not defined here, so it counts 0); conformance, in the same tier, keeps
    # the system pods
    victims = ssn.tiers.preemptable(ssn.tasks["uid-me"], by_name(ssn, "sys", "crit", "user"))
    assert names(victims) == ["user"]
