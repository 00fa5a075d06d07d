"""The HyperNode model: what Volcano's CRD rules and its webhook refuse, and the label selector's reading."""

from __future__ import annotations

import msgspec

from cluster.model.topology import HyperNode, LabelMatch, NetworkTopologySpec, hypernode_problems


def hn(spec: dict[str, object]) -> HyperNode:
    return msgspec.convert({"metadata": {"name": "h"}, "spec": spec}, HyperNode)


def test_a_well_formed_hypernode_has_no_problem() -> None:
    good = hn({"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}}]})
    assert hypernode_problems(good) == []


def test_each_refusal_names_the_field() -> None:
    bad = hn(
        {
            "tier": -1,
            "members": [
                {"type": "Switch", "selector": {"exactMatch": {"name": "n1"}}},
                {"type": "Node", "selector": {}},
                {"type": "Node", "selector": {"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "n"}}},
                {"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-("}}},
                {"type": "Node", "selector": {"labelMatch": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}},
            ],
        }
    )
    assert [str(p).split(":")[0] for p in hypernode_problems(bad)] == [
        "spec.tier",
        "spec.members[0].type",
        "spec.members[1].selector",
        "spec.members[2].selector",
        "spec.members[3].selector.regexMatch.pattern",
        "spec.members[4].selector.labelMatch.matchExpressions[0].operator",
    ]
    assert hypernode_problems(hn({"tier": 1}))[0].path == "spec.members"


def test_an_empty_label_selector_selects_nothing() -> None:
    assert not LabelMatch().matches({"rack": "r1"})
    assert LabelMatch(match_labels={"rack": "r1"}).matches({"rack": "r1", "x": "y"})


def test_a_network_topology_as_the_api_holds_it() -> None:
    assert NetworkTopologySpec(highest_tier_allowed=1).raw() == {"mode": "hard", "highestTierAllowed": 1}
    assert NetworkTopologySpec(mode="soft", highest_tier_name="rack").raw() == {
        "mode": "soft",
        "highestTierName": "rack",
    }


def test_regex_members_match_as_go_does_in_linear_time() -> None:
    """Volcano compiles regexMatch with Go's regexp (RE2). A backtracking engine takes time
    exponential in the name on ``(a|a)*b`` — a HyperNode could stall the scheduler — and accepts
    Perl's lookarounds, which Go's webhook refuses."""
    from cluster.nodeview.topology import build
    from tests.builders import hypernode, node, node_table

    names = ["a" * 60, "a" * 59 + "b", "gpu-1"]
    table = node_table([node(n) for n in names])
    topology = build(table, [hypernode("slow", 1, regex="(a|a)*b"), hypernode("g", 1, regex="^gpu-[0-9]+$")])
    picked = {d.name: [names[i] for i in d.rows.tolist()] for d in topology.domains.values()}
    assert (picked["slow"], picked["g"]) == (["a" * 59 + "b"], ["gpu-1"])
    perl = hn({"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-(?=1)"}}}]})
    [problem] = hypernode_problems(perl)
    assert problem.path == "spec.members[0].selector.regexMatch.pattern" and "does not compile" in problem.problem
