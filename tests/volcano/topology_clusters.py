"""The clusters Volcano's topology allocate tests run on (TestAllocateWithNetWorkTopologies and
TestAllocateWithPartitionPolicyNetworkTopology): each case names one. Per cluster: its nodes
(name, cpu, memory, pods, labels); its HyperNodes as ``HyperNodesMap`` gives them (tier, tier
name, members: nodes by exact name, child HyperNodes by name), or, without one, as ``HyperNodes``
(node sets) with the tiers of ``HyperNodesSetByTier`` — HyperNodes holding those nodes by name,
without parents, which is what the Go session builds from them.
"""

from __future__ import annotations

from typing import Any

from cluster.model.core import Node, ObjectMeta
from cluster.model.topology import ExactMatch, HyperNode, HyperNodeSpec, Member, MemberSelector
from tests.volcano.builders import build_node

NODES_1: Any = [
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n2", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s1-n3", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s1-n4", "pods": "10"},
]
TIERS_1: Any = {"s0": 0, "s1": 0, "s2": 1}
SETS_1: Any = {"s0": ["s0-n1", "s0-n2"], "s1": ["s1-n3", "s1-n4"], "s2": ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]}
TIERS_2: Any = {"s0": 1, "s1": 1, "s2": 2}
HMAP_1: Any = {
    "s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s1": {"members": [["s1-n3", "Node"], ["s1-n4", "Node"]], "tier": 1, "tier_name": ""},
    "s2": {"members": [["s0", "HyperNode"], ["s1", "HyperNode"]], "tier": 2, "tier_name": ""},
}
NODES_2: Any = [
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "2", "labels": {"nodeRole": "master"}, "mem": "4Gi", "name": "s1-n2", "pods": "10"},
]
TIERS_3: Any = {"s0": 0, "s1": 0}
SETS_2: Any = {"s0": ["s0-n1"], "s1": ["s1-n2"]}
NODES_3: Any = [
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s3-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s3-n2", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s4-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s4-n2", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s5-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s5-n2", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s6-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s6-n2", "pods": "10"},
]
TIERS_4: Any = {"s0": 3, "s1": 2, "s2": 2, "s3": 1, "s4": 1, "s5": 1, "s6": 1}
HMAP_2: Any = {
    "s0": {"members": [["s1", "HyperNode"], ["s2", "HyperNode"]], "tier": 3, "tier_name": ""},
    "s1": {"members": [["s3", "HyperNode"], ["s4", "HyperNode"]], "tier": 2, "tier_name": ""},
    "s2": {"members": [["s5", "HyperNode"], ["s6", "HyperNode"]], "tier": 2, "tier_name": ""},
    "s3": {"members": [["s3-n1", "Node"], ["s3-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s4": {"members": [["s4-n1", "Node"], ["s4-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s5": {"members": [["s5-n1", "Node"], ["s5-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s6": {"members": [["s6-n1", "Node"], ["s6-n2", "Node"]], "tier": 1, "tier_name": ""},
}
SETS_3: Any = {
    "s0": ["s3-n1", "s3-n2", "s4-n1", "s4-n2", "s5-n1", "s5-n2", "s6-n1", "s6-n2"],
    "s1": ["s3-n1", "s3-n2", "s4-n1", "s4-n2"],
    "s2": ["s5-n1", "s5-n2", "s6-n1", "s6-n2"],
    "s3": ["s3-n1", "s3-n2"],
    "s4": ["s4-n1", "s4-n2"],
    "s5": ["s5-n1", "s5-n2"],
    "s6": ["s6-n1", "s6-n2"],
}
TIERS_5: Any = {"s0": 1, "s1": 1}
HMAP_3: Any = {
    "s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s1": {"members": [["s1-n3", "Node"], ["s1-n4", "Node"]], "tier": 1, "tier_name": ""},
}
SETS_4: Any = {"s0": ["s0-n1", "s0-n2"], "s1": ["s1-n3", "s1-n4"]}
HMAP_4: Any = {
    "s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
    "s1": {"members": [["s1-n3", "Node"], ["s1-n4", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
    "s2": {"members": [["s0", "HyperNode"], ["s1", "HyperNode"]], "tier": 2, "tier_name": "volcano.sh/job-spec"},
}
HMAP_5: Any = {
    "s0": {"members": [["s1", "HyperNode"], ["s2", "HyperNode"]], "tier": 3, "tier_name": "volcano.sh/hypernode-spec"},
    "s1": {"members": [["s3", "HyperNode"], ["s4", "HyperNode"]], "tier": 2, "tier_name": "volcano.sh/job-spec"},
    "s2": {"members": [["s5", "HyperNode"], ["s6", "HyperNode"]], "tier": 2, "tier_name": "volcano.sh/job-spec"},
    "s3": {"members": [["s3-n1", "Node"], ["s3-n2", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
    "s4": {"members": [["s4-n1", "Node"], ["s4-n2", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
    "s5": {"members": [["s5-n1", "Node"], ["s5-n2", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
    "s6": {"members": [["s6-n1", "Node"], ["s6-n2", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
}
HMAP_6: Any = {
    "s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
    "s1": {"members": [["s1-n3", "Node"], ["s1-n4", "Node"]], "tier": 1, "tier_name": "volcano.sh/task-spec"},
}
NODES_4: Any = [
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n2", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s1-n3", "pods": "10"},
]
HMAP_7: Any = {
    "s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s1": {"members": [["s1-n3", "Node"]], "tier": 1, "tier_name": ""},
    "s2": {"members": [["s0", "HyperNode"], ["s1", "HyperNode"]], "tier": 2, "tier_name": ""},
}
SETS_5: Any = {"s0": ["s0-n1", "s0-n2"], "s1": ["s1-n3"], "s2": ["s0-n1", "s0-n2", "s1-n3"]}
NODES_5: Any = [
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s0-n2", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s1-n3", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s1-n4", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "s2-n5", "pods": "10"},
]
TIERS_6: Any = {"s0": 1, "s1": 1, "s2": 1, "s3": 2}
HMAP_8: Any = {
    "s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": ""},
    "s1": {"members": [["s1-n3", "Node"], ["s1-n4", "Node"]], "tier": 1, "tier_name": ""},
    "s2": {"members": [["s2-n5", "Node"]], "tier": 1, "tier_name": ""},
    "s3": {"members": [["s0", "HyperNode"], ["s1", "HyperNode"], ["s2", "HyperNode"]], "tier": 2, "tier_name": ""},
}
SETS_6: Any = {
    "s0": ["s0-n1", "s0-n2"],
    "s1": ["s1-n3", "s1-n4"],
    "s2": ["s2-n5"],
    "s3": ["s0-n1", "s0-n2", "s1-n3", "s1-n4", "s2-n5"],
}
NODES_6: Any = [
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s0-n2", "pods": "10"},
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s1-n3", "pods": "10"},
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s1-n4", "pods": "10"},
]
NODES_7: Any = [
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s0-n2", "pods": "10"},
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s1-n3", "pods": "10"},
]
NODES_8: Any = [
    {"cpu": "10", "labels": None, "mem": "20Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "10", "labels": None, "mem": "20Gi", "name": "s0-n2", "pods": "10"},
]
TIERS_7: Any = {"s0": 1}
HMAP_9: Any = {"s0": {"members": [["s0-n1", "Node"], ["s0-n2", "Node"]], "tier": 1, "tier_name": ""}}
SETS_7: Any = {"s0": ["s0-n1", "s0-n2"]}
NODES_9: Any = [
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s0-n1", "pods": "10"},
    {"cpu": "4", "labels": None, "mem": "8Gi", "name": "s0-n2", "pods": "10"},
]
NODES_10: Any = [
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "n1", "pods": "10"},
    {"cpu": "2", "labels": None, "mem": "4Gi", "name": "n2", "pods": "10"},
]

CLUSTERS: dict[str, dict[str, Any]] = {
    "C1": {"nodes": NODES_1, "tiers": TIERS_1, "hmap": {}, "sets": SETS_1},
    "C2": {"nodes": NODES_1, "tiers": TIERS_2, "hmap": HMAP_1, "sets": SETS_1},
    "C3": {"nodes": NODES_2, "tiers": TIERS_3, "hmap": {}, "sets": SETS_2},
    "C4": {"nodes": NODES_3, "tiers": TIERS_4, "hmap": HMAP_2, "sets": SETS_3},
    "C5": {"nodes": NODES_1, "tiers": TIERS_5, "hmap": HMAP_3, "sets": SETS_4},
    "C6": {"nodes": NODES_1, "tiers": TIERS_2, "hmap": HMAP_4, "sets": SETS_1},
    "C7": {"nodes": NODES_3, "tiers": TIERS_4, "hmap": HMAP_5, "sets": SETS_3},
    "C8": {"nodes": NODES_1, "tiers": TIERS_5, "hmap": HMAP_6, "sets": SETS_4},
    "C9": {"nodes": NODES_4, "tiers": TIERS_2, "hmap": HMAP_7, "sets": SETS_5},
    "C10": {"nodes": NODES_1, "tiers": TIERS_2, "hmap": {}, "sets": SETS_1},
    "C11": {"nodes": NODES_5, "tiers": TIERS_6, "hmap": HMAP_8, "sets": SETS_6},
    "C12": {"nodes": NODES_6, "tiers": TIERS_2, "hmap": HMAP_1, "sets": SETS_1},
    "C13": {"nodes": NODES_7, "tiers": TIERS_2, "hmap": HMAP_7, "sets": SETS_5},
    "C14": {"nodes": NODES_8, "tiers": TIERS_7, "hmap": HMAP_9, "sets": SETS_7},
    "C15": {"nodes": NODES_9, "tiers": TIERS_7, "hmap": HMAP_9, "sets": SETS_7},
    "C16": {"nodes": NODES_10, "tiers": {}, "hmap": {}, "sets": {}},
}


def nodes(cluster: str) -> list[Node]:
    c = CLUSTERS[cluster]
    return [
        build_node(n["name"], {"cpu": n["cpu"], "memory": n["mem"], "pods": n["pods"]}, n["labels"]) for n in c["nodes"]
    ]


def hypernodes(cluster: str) -> list[HyperNode]:
    c = CLUSTERS[cluster]

    def member(name: str, kind: str) -> Member:
        return Member(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=name)))

    if c["hmap"]:
        return [
            HyperNode(
                metadata=ObjectMeta(name=name),
                spec=HyperNodeSpec(
                    tier=h["tier"], tier_name=h["tier_name"], members=[member(m, kind) for m, kind in h["members"]]
                ),
            )
            for name, h in c["hmap"].items()
        ]
    return [
        HyperNode(
            metadata=ObjectMeta(name=name),
            spec=HyperNodeSpec(tier=c["tiers"][name], members=[member(n, "Node") for n in members]),
        )
        for name, members in c["sets"].items()
    ]
