"""One placement framework for both schedulers: a batch conf's filter and score plugins, run in an
agent profile, place a pod where the batch session places it (and where the agent's own
profile would not)."""

from __future__ import annotations

import random

from agent_scheduler.core import Choice, CoreConfig, Task, decide
from batch_scheduler.plugins.binpack import BinpackPlugin
from batch_scheduler.plugins.nodeorder import NodeOrderPlugin
from batch_scheduler.plugins.predicates import PredicatesPlugin
from cluster.model.sharding import ShardingMode
from cluster.nodeview.plugins import TopK
from cluster.nodeview.profile import Profile, Score
from cluster.sim.pools import TaintSpec
from tests.batch_scheduler.inputs import SCHEDULER, conf, session, task
from tests.batch_scheduler.plugins.common import plugin
from tests.builders import node

GI = 2**30
NODES = [
    node("full", labels={"pool": "a"}),
    node("spot", labels={"pool": "a"}, taints=[TaintSpec(key="spot", effect="PreferNoSchedule")]),
    node("half", labels={"pool": "a"}),
    node("elsewhere", labels={"pool": "b"}),
]
USED = {"full": {"cpu": 6000, "memory": 6 * GI}, "half": {"cpu": 4000, "memory": 4 * GI}}
# Least requested (weight 1) plus untolerated PreferNoSchedule taints (weight 3), over pool a:
# full 55 + 300, spot (empty, tainted) 92 + 0, half 67 + 300 — half wins; binpack would take full.
NODEORDER = {
    "name": "nodeorder",
    "arguments": {
        "leastrequested.weight": 1,
        "mostrequested.weight": 0,
        "balancedresource.weight": 0,
        "nodeaffinity.weight": 0,
        "tainttoleration.weight": 3,
    },
}


def _agent_choice(ssn_conf: list[object], profile_of: str) -> tuple[str, str, str]:
    """(batch session's node, agent with the conf's plugins, agent with its own profile)."""
    ssn = session(conf(ssn_conf), NODES, [task("p", nodeSelector={"pool": "a"})], used=USED)  # type: ignore[arg-type]
    t = ssn.tasks["uid-p"]
    table = ssn.columns.snapshot()  # as the agent's table would hold the same nodes
    scores: tuple[Score, ...] = (
        (plugin(ssn, NodeOrderPlugin),) if profile_of == "nodeorder" else (plugin(ssn, BinpackPlugin),)
    )
    shared = Profile(
        filters=(plugin(ssn, PredicatesPlugin),),
        scores=scores,
        bonuses=(),
        select=TopK(1),
        scheduler=SCHEDULER,
        sharding=ShardingMode.NONE,
    )
    own = CoreConfig(scheduler=SCHEDULER, sharding=ShardingMode.NONE, candidates=1, warmup_bonus=0.0)
    agent_task = Task(uid=t.uid, pod=t.pod, request=t.request)
    with_conf = decide(table, [agent_task], own, random.Random(0), chosen=shared)[0]
    alone = decide(ssn.columns.snapshot(), [agent_task], own, random.Random(0))[0]
    best = ssn.best_node(t)
    assert isinstance(best, tuple) and isinstance(with_conf, Choice) and isinstance(alone, Choice)
    return ssn.columns.names[best[0]], with_conf.node, alone.node


def test_batch_nodeorder_and_predicates_run_in_an_agent_profile_place_as_the_batch_session() -> None:
    batch, agent_with_conf, agent_alone = _agent_choice([NODEORDER, "predicates"], "nodeorder")
    assert (batch, agent_with_conf) == ("half", "half")
    assert agent_alone == "full"  # the agent's own binpack profile: the plugin is what made the difference


def test_batch_binpack_run_in_an_agent_profile_places_as_the_batch_session() -> None:
    batch, agent_with_conf, _ = _agent_choice([{"name": "binpack"}, "predicates"], "binpack")
    assert (batch, agent_with_conf) == ("full", "full")


def test_the_agent_profile_reads_the_conf_plugins_arguments() -> None:
    # predicate.NodeAffinityEnable: false lets the pod onto pool b's empty, untainted node (92 + 300).
    args = {"predicate.NodeAffinityEnable": "false"}
    batch, agent_with_conf, _ = _agent_choice([NODEORDER, {"name": "predicates", "arguments": args}], "nodeorder")
    assert (batch, agent_with_conf) == ("elsewhere", "elsewhere")
