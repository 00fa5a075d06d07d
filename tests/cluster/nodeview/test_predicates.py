"""Predicates: nodeSelector, taints/tolerations, required node affinity, resource fit, and
filter_nodes' first-failing-predicate counting and kube-scheduler style reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np
import pytest

from cluster.model.core import (
    Node,
    NodeSelector,
    NodeSelectorTerm,
    ObjectMeta,
    Pod,
    Toleration,
)
from cluster.model.devices import node_allocatable
from cluster.model.resources import Resources
from cluster.nodeview.fit import resources_fit
from cluster.nodeview.predicates import (
    Filtered,
    Predicate,
    affinity_mask,
    filter_nodes,
    selector_mask,
    taint_mask,
    term_mask,
)
from cluster.nodeview.table import NodeTable
from cluster.sim.pools import TaintSpec
from cluster.store.records import NodeRecord
from tests.builders import node


def record(n: Node, *, used: Mapping[str, int] | None = None, owner: str = "") -> NodeRecord:
    return NodeRecord(
        name=n.name,
        allocatable=node_allocatable(n),
        allocated=Resources(used or {}),
        version=1,
        owner=owner,
        unschedulable=n.unschedulable,
        node=n,
    )


def columns_of(*nodes: Node) -> NodeTable:
    return NodeTable([record(n) for n in nodes])


def names(cols: NodeTable, mask: np.ndarray[Any, Any]) -> list[str]:
    assert mask.dtype == np.bool_ and mask.shape == (len(cols),)
    return [cols.names[i] for i in np.flatnonzero(mask)]


def pod_with(**spec: Any) -> Pod:
    """A pod from a camelCase spec fragment, e.g. ``pod_with(tolerations=[...])``."""
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec}, Pod)


def tolerations(*items: dict[str, str]) -> list[Toleration]:
    return msgspec.convert(list(items), list[Toleration])


def required(*terms: dict[str, Any]) -> NodeSelector:
    return msgspec.convert({"nodeSelectorTerms": list(terms)}, NodeSelector)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# -- nodeSelector -------------------------------------------------------------------------

SELECTOR_NODES = columns_of(
    node("a1", labels={"zone": "a", "gpu": "h100"}),
    node("a2", labels={"zone": "a", "gpu": "a100"}),
    node("b1", labels={"zone": "b", "gpu": "h100"}),
    node("bare"),
)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, ["a1", "a2", "b1", "bare"]),
        ({"zone": "a"}, ["a1", "a2"]),
        ({"zone": "a", "gpu": "h100"}, ["a1"]),
        ({"gpu": "h100"}, ["a1", "b1"]),
        ({"zone": "c"}, []),
        ({"rack": "r1"}, []),
        ({"zone": "a", "rack": "r1"}, []),
    ],
)
def test_selector_requires_every_label(selector: dict[str, str], expected: list[str]) -> None:
    assert names(SELECTOR_NODES, selector_mask(SELECTOR_NODES, selector)) == expected


# -- taints and tolerations ---------------------------------------------------------------

TAINTED = columns_of(
    node("clean"),
    node("gpu", taints=[TaintSpec(key="gpu", value="present", effect="NoSchedule")]),
    node("maint", taints=[TaintSpec(key="maint", effect="NoExecute")]),
    node("soft", taints=[TaintSpec(key="soft", value="x", effect="PreferNoSchedule")]),
    node("gpu-absent", taints=[TaintSpec(key="gpu", value="absent", effect="NoSchedule")]),
    node(
        "both",
        taints=[TaintSpec(key="gpu", value="present", effect="NoSchedule"), TaintSpec(key="maint", effect="NoExecute")],
    ),
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param([], ["clean", "soft"], id="no tolerations: PreferNoSchedule never filters"),
        pytest.param(
            [{"operator": "Exists"}],
            ["clean", "gpu", "maint", "soft", "gpu-absent", "both"],
            id="Exists with empty key tolerates everything",
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Exists"}],
            ["clean", "gpu", "soft", "gpu-absent"],
            id="Exists matches the key, any value",
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Equal", "value": "present"}],
            ["clean", "gpu", "soft"],
            id="Equal matches key and value",
        ),
        pytest.param(
            [{"key": "gpu", "value": "present"}], ["clean", "gpu", "soft"], id="Equal is the default operator"
        ),
        pytest.param(
            [{"key": "gpu", "operator": "", "value": "present"}],
            ["clean", "gpu", "soft"],
            id="empty operator means Equal",
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Equal", "value": "nope"}], ["clean", "soft"], id="Equal, wrong value"
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
            ["clean", "gpu", "soft"],
            id="matching effect",
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Equal", "value": "present", "effect": "NoExecute"}],
            ["clean", "soft"],
            id="other effect does not tolerate",
        ),
        pytest.param(
            [{"operator": "Exists", "effect": "NoSchedule"}],
            ["clean", "gpu", "soft", "gpu-absent"],
            id="empty key, one effect: every taint of that effect",
        ),
        pytest.param(
            [{"key": "maint", "operator": "Exists", "effect": "NoExecute"}],
            ["clean", "maint", "soft"],
            id="NoExecute tolerated",
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Exists"}, {"key": "maint", "operator": "Exists"}],
            ["clean", "gpu", "maint", "soft", "gpu-absent", "both"],
            id="every taint needs a toleration",
        ),
        pytest.param(
            [{"key": "gpu", "operator": "Sometimes"}], ["clean", "soft"], id="unknown operator tolerates nothing"
        ),
    ],
)
def test_taints_need_tolerations(given: list[dict[str, str]], expected: list[str]) -> None:
    assert names(TAINTED, taint_mask(TAINTED, tolerations(*given))) == expected


def test_taint_masks_are_fresh_arrays_despite_memoisation() -> None:
    first = taint_mask(TAINTED, [])
    first[:] = True
    assert names(TAINTED, taint_mask(TAINTED, [])) == ["clean", "soft"]


# -- required node affinity ---------------------------------------------------------------

AFFINITY_NODES = columns_of(
    node("n0", labels={"zone": "a", "gpus": "8"}),
    node("n1", labels={"zone": "b", "gpus": "4"}),
    node("n2", labels={"zone": "c", "gpus": "many"}),
    node("n3", labels={"gpus": "-2"}),
)
ALL = ["n0", "n1", "n2", "n3"]


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ([{"matchExpressions": [expr("zone", "In", "a", "b")]}], ["n0", "n1"]),
        ([{"matchExpressions": [expr("zone", "In", "a")]}], ["n0"]),
        ([{"matchExpressions": [expr("zone", "In", "q", "a", "r", "s", "b")]}], ["n0", "n1"]),
        ([{"matchExpressions": [expr("zone", "In", "zz")]}], []),
        ([{"matchExpressions": [expr("zone", "NotIn", "a")]}], ["n1", "n2", "n3"]),  # absent label matches NotIn
        ([{"matchExpressions": [expr("zone", "NotIn", "a", "b", "x", "y")]}], ["n2", "n3"]),
        ([{"matchExpressions": [expr("zone", "Exists")]}], ["n0", "n1", "n2"]),
        ([{"matchExpressions": [expr("zone", "DoesNotExist")]}], ["n3"]),
        ([{"matchExpressions": [expr("gpus", "Gt", "4")]}], ["n0"]),  # "many" is no integer: fails
        ([{"matchExpressions": [expr("gpus", "Lt", "8")]}], ["n1", "n3"]),
        ([{"matchExpressions": [expr("gpus", "Gt", "-3")]}], ["n0", "n1", "n3"]),
        ([{"matchExpressions": [expr("rack", "Lt", "100")]}], []),  # absent label fails Gt/Lt
        ([{"matchFields": [expr("metadata.name", "In", "n2")]}], ["n2"]),
        ([{"matchFields": [expr("metadata.name", "NotIn", "n2")]}], ["n0", "n1", "n3"]),
        ([{"matchFields": [expr("metadata.name", "In", "elsewhere")]}], []),
        # expressions within a term are ANDed, with fields too
        ([{"matchExpressions": [expr("zone", "In", "a", "b"), expr("gpus", "Gt", "5")]}], ["n0"]),
        (
            [{"matchExpressions": [expr("zone", "Exists")], "matchFields": [expr("metadata.name", "NotIn", "n0")]}],
            ["n1", "n2"],
        ),
        # terms are ORed
        (
            [{"matchExpressions": [expr("zone", "In", "a")]}, {"matchExpressions": [expr("zone", "DoesNotExist")]}],
            ["n0", "n3"],
        ),
    ],
)
def test_affinity_operators(terms: list[dict[str, Any]], expected: list[str]) -> None:
    assert names(AFFINITY_NODES, affinity_mask(AFFINITY_NODES, required(*terms))) == expected


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"matchExpressions": [expr("gpus", "Gt", "four")]}, id="non-integer bound"),
        pytest.param({"matchExpressions": [expr("gpus", "Gt", "1", "2")]}, id="Gt with two values"),
        pytest.param({"matchExpressions": [expr("gpus", "Lt")]}, id="Lt without a value"),
        pytest.param({"matchExpressions": [expr("zone", "In")]}, id="In without values"),
        pytest.param({"matchExpressions": [expr("zone", "NotIn")]}, id="NotIn without values"),
        pytest.param({"matchExpressions": [expr("zone", "Exists", "a")]}, id="Exists with values"),
        pytest.param({"matchExpressions": [expr("zone", "DoesNotExist", "a")]}, id="DoesNotExist with values"),
        pytest.param({"matchExpressions": [expr("zone", "Like", "a")]}, id="unknown operator"),
        pytest.param({"matchFields": [expr("metadata.labels", "In", "n0")]}, id="field other than metadata.name"),
        pytest.param({"matchFields": [expr("metadata.name", "In", "n0", "n1")]}, id="field In with two names"),
        pytest.param({"matchFields": [expr("metadata.name", "Exists")]}, id="field Exists"),
        pytest.param({}, id="empty term"),
        pytest.param({"matchExpressions": [], "matchFields": []}, id="term with empty lists"),
    ],
)
def test_an_empty_or_invalid_term_matches_nothing_but_other_terms_still_count(bad: dict[str, Any]) -> None:
    assert names(AFFINITY_NODES, affinity_mask(AFFINITY_NODES, required(bad))) == []
    valid = {"matchExpressions": [expr("zone", "In", "b")]}
    assert names(AFFINITY_NODES, affinity_mask(AFFINITY_NODES, required(bad, valid))) == ["n1"]
    assert names(AFFINITY_NODES, term_mask(AFFINITY_NODES, msgspec.convert(bad, NodeSelectorTerm))) == []


def test_nil_selector_matches_all_and_empty_terms_match_none() -> None:
    assert names(AFFINITY_NODES, affinity_mask(AFFINITY_NODES, None)) == ALL
    assert names(AFFINITY_NODES, affinity_mask(AFFINITY_NODES, required())) == []


def test_integer_labels_follow_go_parse_int() -> None:
    cols = columns_of(*(node(f"v{i}", labels={"n": v}) for i, v in enumerate(["+7", "007", "1_0", " 9", "9e1", "2"])))
    assert names(cols, affinity_mask(cols, required({"matchExpressions": [expr("n", "Gt", "5")]}))) == ["v0", "v1"]
    assert names(cols, affinity_mask(cols, required({"matchExpressions": [expr("n", "Lt", "5")]}))) == ["v5"]


def test_memoised_label_masks_are_not_handed_out() -> None:
    terms = {"matchExpressions": [expr("zone", "In", "a")]}
    mask = affinity_mask(AFFINITY_NODES, required(terms))
    mask[:] = True
    assert names(AFFINITY_NODES, affinity_mask(AFFINITY_NODES, required(terms))) == ["n0"]
    sel = selector_mask(AFFINITY_NODES, {"zone": "a"})
    sel[:] = True
    assert names(AFFINITY_NODES, selector_mask(AFFINITY_NODES, {"zone": "a"})) == ["n0"]


# -- label and taint caches follow changes ------------------------------------------------


def test_masks_follow_label_and_taint_changes_and_copies_stay_independent() -> None:
    cols = columns_of(node("x", labels={"zone": "a"}), node("y", labels={"zone": "b"}))
    assert names(cols, selector_mask(cols, {"zone": "a"})) == ["x"]
    assert names(cols, taint_mask(cols, [])) == ["x", "y"]
    snap = cols.snapshot()
    cols.upsert(record(node("y", labels={"zone": "a"}, taints=[TaintSpec(key="k")])))
    assert names(cols, selector_mask(cols, {"zone": "a"})) == ["x", "y"]
    assert names(cols, taint_mask(cols, [])) == ["x"]
    assert names(snap, selector_mask(snap, {"zone": "a"})) == ["x"]
    assert names(snap, taint_mask(snap, [])) == ["x", "y"]
    cols.remove("x")
    assert names(cols, selector_mask(cols, {"zone": "a"})) == ["y"]
    assert names(cols, taint_mask(cols, [])) == []


def test_a_node_added_without_labels_or_taints_gets_masks_of_the_right_length() -> None:
    bare = Node(metadata=ObjectMeta(name="bare"))
    cols = columns_of(node("x", labels={"zone": "a"}))
    assert names(cols, selector_mask(cols, {"zone": "a"})) == ["x"]
    assert names(cols, taint_mask(cols, [])) == ["x"]
    cols.upsert(
        NodeRecord(
            name="bare",
            allocatable=Resources({"cpu": 1000}),
            allocated=Resources(),
            version=1,
            owner="",
            unschedulable=False,
            node=bare,
        )
    )
    assert names(cols, selector_mask(cols, {"zone": "a"})) == ["x"]
    assert names(cols, taint_mask(cols, [])) == ["x", "bare"]
    assert names(cols, affinity_mask(cols, required({"matchExpressions": [expr("zone", "DoesNotExist")]}))) == ["bare"]


# -- resources ----------------------------------------------------------------------------


def test_resources_fit_and_shortages_per_resource() -> None:
    cols = NodeTable(
        [
            record(node("roomy", cpu="8", gpu=8)),
            record(node("busy", cpu="8", gpu=8), used={"cpu": 7000}),
            record(node("cpu-only", cpu="32")),
            record(node("full", cpu="8", gpu=8), used={"cpu": 8000, "nvidia.com/gpu": 8}),
        ]
    )
    fit, short = resources_fit(cols, Resources({"cpu": 2000, "nvidia.com/gpu": 1, "pods": 1}))
    assert names(cols, fit) == ["roomy"]
    assert {name: names(cols, m) for name, m in short.items()} == {
        "cpu": ["busy", "full"],
        "nvidia.com/gpu": ["cpu-only", "full"],
        "pods": [],
    }


def test_an_exact_fit_fits_and_zero_amounts_are_not_requests() -> None:
    cols = NodeTable([record(node("n", cpu="8"), used={"cpu": 6000})])
    fit, short = resources_fit(cols, {"cpu": 2000, "nvidia.com/gpu": 0})
    assert list(fit) == [True] and list(short) == ["cpu"]


def test_an_unknown_resource_is_short_everywhere_and_leaves_the_columns_alone() -> None:
    cols = columns_of(node("a"), node("b"))
    rows = list(cols.resources)
    fit, short = resources_fit(cols, {"cpu": 1, "example.com/fpga": 1})
    assert names(cols, fit) == [] and names(cols, short["example.com/fpga"]) == ["a", "b"]
    assert cols.resources == rows


# -- filter_nodes -------------------------------------------------------------------------

GPU_TAINT = TaintSpec(key="nvidia.com/gpu", value="present", effect="NoSchedule")
OTHER_TAINT = TaintSpec(key="dedicated", value="infer", effect="NoSchedule")
GOOD = {"zone": "a", "pool": "train"}


def cluster_of_twelve() -> tuple[NodeTable, np.ndarray[Any, np.dtype[np.bool_]]]:
    """Each node fails (first) a known predicate; later failures must not be counted."""
    spec: list[tuple[Node, dict[str, int], bool]] = [  # node, used, in our shard
        (node("unsched", gpu=8, labels={"zone": "b"}, taints=[OTHER_TAINT], unschedulable=True), {}, False),
        (node("theirs-1", gpu=8, labels=GOOD, taints=[GPU_TAINT]), {}, False),
        (node("theirs-2", gpu=8, labels={"zone": "b"}), {}, False),
        (node("tainted-1", gpu=8, labels=GOOD, taints=[OTHER_TAINT]), {}, True),
        (node("tainted-2", gpu=8, labels={"zone": "b"}, taints=[GPU_TAINT, OTHER_TAINT]), {"nvidia.com/gpu": 8}, True),
        (node("zone-b", gpu=8, labels={"zone": "b", "pool": "train"}, taints=[GPU_TAINT]), {}, True),
        (node("no-zone", gpu=8, labels={"pool": "train"}), {"cpu": 8000}, True),
        (node("serving", gpu=8, labels={"zone": "a", "pool": "serve"}), {}, True),
        (node("gpus-used", gpu=8, labels=GOOD, taints=[GPU_TAINT]), {"nvidia.com/gpu": 8}, True),
        (node("all-used", gpu=8, labels=GOOD), {"nvidia.com/gpu": 7, "cpu": 7500}, True),
        (node("ok-1", gpu=8, labels=GOOD, taints=[GPU_TAINT]), {}, True),
        (node("ok-2", gpu=8, labels=GOOD), {"nvidia.com/gpu": 6}, True),
    ]
    cols = NodeTable([record(n, used=used) for n, used, _ in spec])
    return cols, np.array([ours for _, _, ours in spec])


GPU_POD = pod_with(
    nodeSelector={"zone": "a"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    affinity={
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr("pool", "In", "train")]}]
            }
        }
    },
)
GPU_REQUEST = Resources({"cpu": 1000, "nvidia.com/gpu": 2, "pods": 1})


def test_each_node_counts_against_the_first_predicate_that_rules_it_out() -> None:
    cols, ours = cluster_of_twelve()
    result = filter_nodes(cols, GPU_POD, GPU_REQUEST, allowed=ours)
    assert names(cols, result.mask) == ["ok-1", "ok-2"]
    assert result.total == 12 and result.available == 2
    assert result.failed == {
        Predicate.UNSCHEDULABLE: 1,
        Predicate.SHARD: 2,
        Predicate.TAINTS: 2,
        Predicate.NODE_SELECTOR: 2,
        Predicate.NODE_AFFINITY: 1,
        "Insufficient nvidia.com/gpu": 2,
        "Insufficient cpu": 1,
    }
    assert result.reason() == (
        "2/12 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient nvidia.com/gpu, 2 node(s) belong to another scheduler's shard, "
        "2 node(s) had untolerated taint(s), 1 Insufficient cpu, 1 node(s) were unschedulable."
    )


def test_filter_agrees_with_the_single_predicates() -> None:
    cols, ours = cluster_of_twelve()
    fit, _ = resources_fit(cols, GPU_REQUEST)
    affinity = GPU_POD.spec.affinity
    assert affinity is not None and affinity.node_affinity is not None
    expected = (
        ~cols.unschedulable[: len(cols)]
        & ours
        & taint_mask(cols, GPU_POD.spec.tolerations)
        & selector_mask(cols, GPU_POD.spec.node_selector)
        & affinity_mask(cols, affinity.node_affinity.required_during_scheduling_ignored_during_execution)
        & fit
    )
    assert np.array_equal(filter_nodes(cols, GPU_POD, GPU_REQUEST, allowed=ours).mask, expected)


def test_without_a_shard_mask_or_pod_constraints_only_taints_schedulability_and_fit_count() -> None:
    cols, _ = cluster_of_twelve()
    result = filter_nodes(cols, pod_with(), Resources({"cpu": 1000, "pods": 1}))
    assert names(cols, result.mask) == ["theirs-2", "serving", "ok-2"]
    assert result.failed == {Predicate.UNSCHEDULABLE: 1, Predicate.TAINTS: 6, "Insufficient cpu": 2}


def test_a_node_short_of_several_resources_counts_under_each() -> None:
    cols = NodeTable([record(node("n", cpu="1", gpu=1)), record(node("m", cpu="8", gpu=8))])
    result = filter_nodes(cols, pod_with(), Resources({"cpu": 2000, "nvidia.com/gpu": 2}))
    assert result.failed == {"Insufficient cpu": 1, "Insufficient nvidia.com/gpu": 1}
    assert result.reason() == "1/2 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu."


def test_when_no_node_is_left_later_predicates_count_nothing() -> None:
    cols, _ = cluster_of_twelve()
    nobody = np.zeros(len(cols), dtype=np.bool_)
    result = filter_nodes(cols, GPU_POD, Resources({"example.com/fpga": 1}), allowed=nobody)
    assert result.failed == {Predicate.UNSCHEDULABLE: 1, Predicate.SHARD: 11}
    assert result.reason() == (
        "0/12 nodes are available: 11 node(s) belong to another scheduler's shard, 1 node(s) were unschedulable."
    )


@pytest.mark.parametrize(
    ("failed", "available", "total", "expected"),
    [
        (
            {Predicate.NODE_SELECTOR: 5, Predicate.NODE_AFFINITY: 4, "Insufficient nvidia.com/gpu": 3},
            0,
            12,
            "0/12 nodes are available: 9 node(s) didn't match Pod's node affinity/selector, 3 Insufficient nvidia.com/gpu.",
        ),
        (
            {"Insufficient memory": 2, "Insufficient cpu": 2},
            1,
            5,
            "1/5 nodes are available: 2 Insufficient cpu, 2 Insufficient memory.",
        ),
        ({}, 3, 3, "3/3 nodes are available."),
        ({}, 0, 0, "0/0 nodes are available."),
    ],
)
def test_reason_text(failed: dict[str, int], available: int, total: int, expected: str) -> None:
    mask = np.arange(total) < available
    assert Filtered(mask=mask, failed=failed, total=total).reason() == expected


def test_predicates_run_in_the_documented_order() -> None:
    assert list(Predicate) == [
        Predicate.UNSCHEDULABLE,
        Predicate.SHARD,
        Predicate.TAINTS,
        Predicate.NODE_SELECTOR,
        Predicate.NODE_AFFINITY,
        Predicate.RESOURCES,
        Predicate.GPU_CARDS,
    ]
