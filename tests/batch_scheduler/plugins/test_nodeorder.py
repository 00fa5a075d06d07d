"""The nodeorder plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

import numpy as np
import pytest

from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from cluster.sim.pools import TaintSpec
from tests.batch_scheduler.inputs import conf, session, task
from tests.batch_scheduler.plugins.common import GI, scores
from tests.builders import node

# -- nodeorder ----------------------------------------------------------------------------

SCORE_NODES = [node("empty"), node("half"), node("full")]
SCORE_USED = {"half": {"cpu": 4000, "memory": 16 * GI}, "full": {"cpu": 7000, "memory": 31 * GI}}
ONLY = {"leastrequested.weight": 0, "mostrequested.weight": 0, "balancedresource.weight": 0,
        "nodeaffinity.weight": 0, "tainttoleration.weight": 0}




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
