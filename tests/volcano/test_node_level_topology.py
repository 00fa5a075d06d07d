"""allocate_test.go's node-level network topology tests, ported (Volcano master, ed72c7c):
TestNodeLevelScoreWithNetWorkTopologies and TestHyperNodeBinpackWithNetWorkTopologies, one case
each, through the real session with the Go tests' plugins, switches and the allocate action.

HyperNodes as the Go cases' ``HyperNodesMap`` gives them (members: nodes by exact name, child
HyperNodes by name — the Go helper sets each child's parent from its parent's members). The
``JobAllocatedHyperNode`` annotation is not read, as in ``test_network_topology.py``; no case
here sets one.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from cluster.model.topology import NetworkTopologySpec
from cluster.model.volcano import PodGroup
from tests.builders import hypernode
from tests.volcano.builders import (
    PENDING,
    PG_INQUEUE,
    PG_RUNNING,
    RUNNING,
    TASK_SPEC,
    build_node,
    build_pod,
    build_pod_group,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, binds, open_session, run_case

PODS10 = scalar("pods", "10")
GANG = Plugin("gang", ("enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving"))
PREDICATES = Plugin("predicates", ("enablePredicate",))
NTA = Plugin("network-topology-aware", ("enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient"))


def _with_topology(group: PodGroup, mode: str, tier: int) -> PodGroup:
    """``util.BuildPodGroupWithNetWorkTopologies`` (its JobAllocatedHyperNode annotation aside)."""
    spec = NetworkTopologySpec(mode=mode, highest_tier_allowed=tier)
    return msgspec.structs.replace(group, spec=msgspec.structs.replace(group.spec, network_topology=spec))


def test_node_level_score_with_network_topologies() -> None:
    """TestNodeLevelScoreWithNetWorkTopologies "hard network topology constrain, allocate job to
    highest score hypeNode with node level binpack": pg2's running pods half fill s0's nodes, so
    the HyperNode binpack puts pg1 in s0, and the node binpack puts each pod where it fills a node."""
    tiers = [[GANG, PREDICATES, Plugin("binpack", ("enableNodeOrder",)), NTA]]
    # should use different role, because allocate actions default to enable the role caches when predicate
    pods = [
        build_pod("c1", "p1", "", PENDING, rl("2", "4Gi"), "pg1", {TASK_SPEC: "master"}),
        build_pod("c1", "p2", "", PENDING, rl("4", "8Gi"), "pg1", {TASK_SPEC: "worker"}),
        build_pod("c1", "p3", "s0-n1", RUNNING, rl("2", "4Gi"), "pg2", {TASK_SPEC: "master"}),
        build_pod("c1", "p4", "s0-n2", RUNNING, rl("4", "8Gi"), "pg2", {TASK_SPEC: "worker"}),
    ]
    case = Case(
        name="hard network topology constrain, allocate job to highest score hypeNode with node level binpack",
        nodes=[
            build_node("s0-n1", rl("4", "8Gi", PODS10)),
            build_node("s0-n2", rl("8", "16Gi", PODS10)),
            build_node("s1-n3", rl("4", "8Gi", PODS10)),
            build_node("s1-n4", rl("8", "16Gi", PODS10)),
        ],
        pods=pods,
        podgroups=[
            _with_topology(build_pod_group("pg1", "c1", "q1", 2, None, PG_INQUEUE), "hard", 1),
            _with_topology(build_pod_group("pg2", "c1", "q1", 2, None, PG_RUNNING), "", 1),
        ],
        queues=[build_queue("q1", 1, None)],
        hypernodes=[
            hypernode("s0", 1, nodes=["s0-n1", "s0-n2"]),
            hypernode("s1", 1, nodes=["s1-n3", "s1-n4"]),
            hypernode("s2", 2, children=["s0", "s1"]),
        ],
        # "s0-n1" and "s0-n2" nodes have running pods, so get higher score when enable binpack.
        expect_bind_map={"c1/p1": "s0-n1", "c1/p2": "s0-n2"},
        expect_binds_num=2,
    )
    run_case(case, tiers, ["allocate"])


NAMES = ["s0-n1", "s0-n2", "s1-n3", "s1-n4", "s2-n5", "s2-n6"]


@pytest.mark.parametrize(
    "order",
    [NAMES, ["s0-n1", "s1-n3", "s2-n5", "s0-n2", "s1-n4", "s2-n6"]],
    ids=["nodes as listed", "nodes interleaved"],
)
def test_hypernode_binpack_with_network_topologies(order: list[str]) -> None:
    """TestHyperNodeBinpackWithNetWorkTopologies "hard network topology constrain, allocate task
    to node under LCAHyperNode": a gang of four one-node pods needs tier 2 (s3); the node score
    keeps the second pod in the first one's leaf, and the fourth in the third one's (the tie
    among s3's free nodes goes to the leaf already holding a task of the job) — two pods in
    each of two leaves (Volcano's ExpectBindNumsInHyperNode, sorted counts per lowest HyperNode).
    Volcano's nodes come in map order; here in two orders, so that caldera's tie-break (the
    first node) cannot give the answer without the node score."""
    tiers = [[GANG, PREDICATES, NTA]]
    names = NAMES
    roles = ["master", "worker", "worker", "worker"]
    case = Case(
        name="hard network topology constrain, allocate task to node under LCAHyperNode",
        nodes=[build_node(n, rl("4", "8Gi", PODS10)) for n in order],
        pods=[
            build_pod("c1", f"p{i}", "", PENDING, rl("4", "8Gi"), "pg1", {TASK_SPEC: role})
            for i, role in enumerate(roles, start=1)
        ],
        podgroups=[_with_topology(build_pod_group("pg1", "c1", "q1", 4, None, PG_INQUEUE), "hard", 2)],
        queues=[build_queue("q1", 1, None)],
        hypernodes=[
            hypernode("s0", 1, nodes=names[0:2]),
            hypernode("s1", 1, nodes=names[2:4]),
            hypernode("s2", 1, nodes=names[4:6]),
            hypernode("s3", 2, children=["s0", "s1", "s2"]),
        ],
    )
    ssn = open_session(case, tiers, ["allocate"])
    ssn.run()
    got = binds(ssn)
    assert len(got) == 4, got
    topology = ssn.topology
    per_leaf = Counter(topology.order[int(topology.leaf[ssn.columns.index[node]])] for node in got.values())
    assert sorted(per_leaf.values()) == [2, 2], got
