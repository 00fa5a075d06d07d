"""The HyperNode tree over the node table: members by name, pattern and labels; the root; a bad
tree left out only where it is bad; HyperNodes from node labels."""

from __future__ import annotations

import numpy as np

from cluster.nodeview.table import NodeTable
from cluster.nodeview.topology import ROOT, build, from_labels
from tests.builders import hypernode, labelled_table


def table(*names: str, labels: dict[str, dict[str, str]] | None = None) -> NodeTable:
    return labelled_table({n: (labels or {}).get(n, {}) for n in names})


def names(t: NodeTable, mask: np.ndarray) -> list[str]:  # type: ignore[type-arg]
    return [t.names[i] for i in np.flatnonzero(mask)]


# Topology A of the spec: hn0 = {n0..n3}, hn1 = {n4..n7}, hn2 = {hn0, hn1}.
NODES = [f"n{i}" for i in range(8)]
TOPOLOGY_A = [
    hypernode("hn0", 1, nodes=NODES[:4]),
    hypernode("hn1", 1, nodes=NODES[4:]),
    hypernode("hn2", 2, children=["hn0", "hn1"]),
]


def test_a_tree_of_two_tiers_under_the_virtual_root() -> None:
    t = table(*NODES, "loose")
    topo = build(t, TOPOLOGY_A)
    assert topo.tiers == [1, 2, 3] and topo.root.tier == 3
    assert names(t, topo.domains["hn2"].mask) == NODES
    assert names(t, topo.root.mask) == [*NODES, "loose"]  # a node in no HyperNode: only under the root
    assert topo.domains["hn0"].parent == "hn2" and topo.domains["hn2"].parent == ROOT
    assert topo.lca("hn0", "hn1").name == "hn2"
    assert topo.lowest_holding([t.index["n1"], t.index["n2"]]).name == "hn0"
    assert topo.lowest_holding([t.index["n1"], t.index["n6"]]).name == "hn2"
    assert topo.lowest_holding([t.index["n1"], t.index["loose"]]).name == ROOT
    assert [[d.name for d in tier] for tier in topo.within(ROOT, 2)] == [["hn0", "hn1"], ["hn2"]]
    assert [[d.name for d in tier] for tier in topo.within("hn2", 1)] == [["hn0", "hn1"]]


def test_no_hypernodes_is_one_root_of_tier_one() -> None:
    topo = build(table("a", "b"), [])
    assert topo.tiers == [1] and list(topo.domains) == [ROOT]


def test_members_by_pattern_and_labels_and_missing_names() -> None:
    t = table("gpu-a-1", "gpu-a-2", "gpu-b-1", "cpu-1", labels={"cpu-1": {"rack": "r1"}, "gpu-b-1": {"rack": "r1"}})
    topo = build(
        t,
        [
            hypernode("a", 1, regex="^gpu-a-[0-9]+$"),
            hypernode("r1", 1, labels={"rack": "r1"}),
            hypernode("ghost", 1, nodes=["no-such-node"]),
            hypernode("searched", 1, regex="b-"),  # Go's MatchString: anywhere in the name
            hypernode("nothing", 1, labels={}),  # an empty label selector selects no node
        ],
    )
    assert names(t, topo.domains["a"].mask) == ["gpu-a-1", "gpu-a-2"]
    assert names(t, topo.domains["r1"].mask) == ["gpu-b-1", "cpu-1"]
    assert names(t, topo.domains["ghost"].mask) == []
    assert names(t, topo.domains["searched"].mask) == ["gpu-b-1"]
    assert names(t, topo.domains["nothing"].mask) == []


def test_a_cycle_is_left_out_and_the_rest_stays() -> None:
    t = table(*NODES)
    topo = build(
        t,
        [
            *TOPOLOGY_A,
            hypernode("x", 2, children=["y"], nodes=["n0"]),
            hypernode("y", 3, children=["x"]),
        ],
    )
    assert {p.hypernode: p.reason for p in topo.problems} == {"x": "Cycle", "y": "Cycle"}
    assert "x" not in topo.domains and "y" not in topo.domains
    assert set(topo.domains) == {"hn0", "hn1", "hn2", ROOT}
    assert topo.blocking(1) == [] and topo.blocking(2) == ["HyperNodes x -> y -> x form a cycle: left out"]


def test_a_hypernode_with_two_parents_leaves_out_the_parents_and_their_ancestors_only() -> None:
    t = table(*NODES)
    topo = build(
        t,
        [
            *TOPOLOGY_A,
            hypernode("hn3", 2, children=["hn1"]),  # hn1 now has two parents: hn2 and hn3
            hypernode("top", 3, children=["hn2"]),
        ],
    )
    assert [(p.hypernode, p.reason) for p in topo.problems] == [("hn1", "TwoParents")]
    assert set(topo.left_out) == {"hn2", "hn3", "top"}
    assert topo.domains["hn1"].parent == ROOT and topo.domains["hn0"].parent == ROOT  # leaves stay usable
    assert topo.blocking(1) == [] and len(topo.blocking(2)) == 1


def test_hypernodes_from_labels_lowest_tier_first() -> None:
    labels = {n: {"example.com/leaf": f"l{i // 2}", "example.com/spine": f"s{i // 4}"} for i, n in enumerate(NODES)}
    t = table(*NODES, labels=labels)
    made = from_labels(t, ["example.com/leaf", "example.com/spine"])
    topo = build(t, made)
    assert topo.problems == []
    assert [[d.name for d in tier] for tier in topo.within(ROOT, 2)] == [
        ["leaf-l0", "leaf-l1", "leaf-l2", "leaf-l3"],
        ["spine-s0", "spine-s1"],
    ]
    assert names(t, topo.domains["spine-s1"].mask) == NODES[4:]
    assert topo.tier_names == {"leaf": 1, "spine": 2}


def test_a_leaf_under_two_spines_by_labels_is_a_problem_not_a_guess() -> None:
    labels = {"n0": {"leaf": "l0", "spine": "s0"}, "n1": {"leaf": "l0", "spine": "s1"}}
    t = table("n0", "n1", labels=labels)
    topo = build(t, from_labels(t, ["leaf", "spine"]))
    assert [p.reason for p in topo.problems] == ["TwoParents"]
    assert "leaf-l0" in topo.domains
