"""The predicates plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from batch_scheduler.plugins.predicates import PredicatesPlugin
from cluster.sim.pools import TaintSpec
from tests.batch_scheduler.inputs import conf, session, task
from tests.batch_scheduler.plugins.common import plugin
from tests.builders import node

# -- predicates ---------------------------------------------------------------------------

PRED_NODES = [
    node("plain-a", labels={"zone": "a"}),
    node("plain-b", labels={"zone": "b"}),
    node("tainted-a", labels={"zone": "a"}, taints=[TaintSpec(key="gpu", value="true")]),
    node("cordoned-a", labels={"zone": "a"}, unschedulable=True),
]
TOLERATE_GPU = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
ZONE_B = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
        }
    }
}


@pytest.mark.parametrize(
    ("arguments", "spec", "expected"),
    [
        ({}, {}, ["plain-a", "plain-b"]),
        ({}, {"tolerations": TOLERATE_GPU}, ["plain-a", "plain-b", "tainted-a"]),
        ({}, {"nodeSelector": {"zone": "a"}}, ["plain-a"]),
        ({}, {"nodeSelector": {"zone": "a"}, "tolerations": TOLERATE_GPU}, ["plain-a", "tainted-a"]),
        ({}, {"affinity": ZONE_B}, ["plain-b"]),
        ({"predicate.NodeAffinityEnable": "false"}, {"nodeSelector": {"zone": "c"}}, ["plain-a", "plain-b"]),
        ({"predicate.NodeAffinityEnable": "false"}, {"affinity": ZONE_B}, ["plain-a", "plain-b"]),
        ({"predicate.TaintTolerationEnable": "false"}, {}, ["plain-a", "plain-b", "tainted-a"]),
        ({"predicate.TaintTolerationEnable": "false"}, {"nodeSelector": {"zone": "a"}}, ["plain-a", "tainted-a"]),
        (
            {"predicate.NodeAffinityEnable": "false", "predicate.TaintTolerationEnable": "false"},
            {"nodeSelector": {"zone": "z"}},
            ["plain-a", "plain-b", "tainted-a"],
        ),  # never a cordoned node
    ],
)
def test_predicates_mask(arguments: dict[str, str], spec: dict[str, Any], expected: list[str]) -> None:
    ssn = session(conf([{"name": "predicates", "arguments": arguments}]), PRED_NODES, [task("p", **spec)])
    t = ssn.tasks["uid-p"]
    f = plugin(ssn, PredicatesPlugin).filter(ssn.columns, ssn.placing(t), ssn.allowed)
    assert [ssn.columns.names[i] for i in np.flatnonzero(f.mask)] == expected
    assert f.total == 4 and sum(f.failed.values()) == 4 - len(expected)
    assert np.array_equal(ssn.feasible(t).mask, f.mask)


def test_predicates_resources_count_unless_told_otherwise() -> None:
    ssn = session(conf(["predicates"]), PRED_NODES, [task("big", cpu="9")])
    t = ssn.tasks["uid-big"]
    p = plugin(ssn, PredicatesPlugin)
    with_resources = p.filter(ssn.columns, ssn.placing(t), ssn.allowed)
    assert not with_resources.mask.any() and with_resources.failed["Insufficient cpu"] == 2
    assert "Insufficient cpu" in with_resources.reason()
    without = p.filter(ssn.columns, ssn.placing(t).without_resources(), ssn.allowed)
    assert [ssn.columns.names[i] for i in np.flatnonzero(without.mask)] == ["plain-a", "plain-b"]
    assert np.array_equal(ssn.feasible(t, ignore_resources=True).mask, without.mask)
