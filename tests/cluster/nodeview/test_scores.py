"""Scores: binpack and least-allocated pull opposite ways, balanced allocation, preferred
affinity and the label bonus; every score stays in [0, 1]."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.model.core import Node, ObjectMeta, PreferredSchedulingTerm
from cluster.model.devices import node_allocatable
from cluster.model.resources import Resources
from cluster.nodeview.scores import (
    balanced_allocation,
    balanced_resource_score,
    default_normalize,
    label_bonus,
    least_allocated,
    most_allocated,
    preferred_affinity,
    requested_score,
)
from cluster.nodeview.table import NodeTable
from cluster.store.records import NodeRecord
from tests.builders import node

GI = 2**30
CPU_MEM = {"cpu": 1.0, "memory": 1.0}


def record(
    name: str,
    allocatable: Mapping[str, int],
    used: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> NodeRecord:
    return NodeRecord(
        name=name,
        allocatable=Resources(allocatable),
        allocated=Resources(used or {}),
        version=1,
        owner="",
        unschedulable=False,
        node=Node(metadata=ObjectMeta(name=name, labels=dict(labels or {}))),
    )


def columns(*records: NodeRecord) -> NodeTable:
    return NodeTable(records)


def terms(*items: tuple[int, dict[str, Any]]) -> list[PreferredSchedulingTerm]:
    return msgspec.convert([{"weight": w, "preference": p} for w, p in items], list[PreferredSchedulingTerm])


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# -- binpack and least-allocated ----------------------------------------------------------

SAME_SIZE = columns(
    record("empty", {"cpu": 8000, "memory": 32 * GI}),
    record("half", {"cpu": 8000, "memory": 32 * GI}, {"cpu": 4000, "memory": 16 * GI}),
    record("nearly-full", {"cpu": 8000, "memory": 32 * GI}, {"cpu": 7000, "memory": 30 * GI}),
)
SMALL = Resources({"cpu": 500, "memory": GI})


def test_binpack_prefers_the_fuller_node_and_least_allocated_the_emptier() -> None:
    most = most_allocated(SAME_SIZE, SMALL, CPU_MEM)
    least = least_allocated(SAME_SIZE, SMALL, CPU_MEM)
    assert list(np.argsort(-most)) == [2, 1, 0]
    assert list(np.argsort(-least)) == [0, 1, 2]


@pytest.mark.parametrize(
    ("weights", "most", "least"),
    [
        # cpu: (2000 used + 2000 asked) / 8000 = 0.5; memory: (0 + 8Gi) / 32Gi = 0.25
        (CPU_MEM, (0.5 + 0.25) / 2, (0.5 + 0.75) / 2),
        ({"cpu": 3.0, "memory": 1.0}, (3 * 0.5 + 0.25) / 4, (3 * 0.5 + 0.75) / 4),
        ({"cpu": 1.0}, 0.5, 0.5),
        ({"cpu": 1.0, "memory": 0.0}, 0.5, 0.5),
        ({"cpu": 1.0, "nvidia.com/gpu": 1.0}, 0.25, 0.25),  # no GPUs here: the GPU term contributes 0
        ({"cpu": 1.0, "example.com/fpga": 1.0}, 0.25, 0.25),  # a resource no node has
        ({}, 0.0, 0.0),
    ],
)
def test_weighted_means_count_the_request(weights: dict[str, float], most: float, least: float) -> None:
    cols = columns(record("n", {"cpu": 8000, "memory": 32 * GI, "pods": 110}, {"cpu": 2000}))
    request = Resources({"cpu": 2000, "memory": 8 * GI})
    assert most_allocated(cols, request, weights)[0] == pytest.approx(most)
    assert least_allocated(cols, request, weights)[0] == pytest.approx(least)


def test_an_overcommitted_node_is_clipped_to_full() -> None:
    cols = columns(record("over", {"cpu": 1000, "memory": GI}, {"cpu": 3000, "memory": 2 * GI}))
    assert most_allocated(cols, SMALL, CPU_MEM)[0] == 1.0
    assert least_allocated(cols, SMALL, CPU_MEM)[0] == 0.0


def test_scoring_an_unknown_resource_leaves_the_columns_alone() -> None:
    cols = columns(record("n", {"cpu": 1000}))
    rows = list(cols.resources)
    most_allocated(cols, {"example.com/fpga": 1}, {"example.com/fpga": 1.0})
    assert cols.resources == rows


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf")])
def test_a_bad_weight_is_refused_with_its_name(weight: float) -> None:
    with pytest.raises(ValueError, match=r"weights\[cpu\]"):
        most_allocated(SAME_SIZE, SMALL, {"cpu": weight})


# -- balanced allocation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allocatable", "used", "expected"),
    [
        ({"cpu": 4000, "memory": 4 * GI}, {"cpu": 1000, "memory": GI}, 1.0),  # 50% and 50% after placing
        ({"cpu": 4000, "memory": 4 * GI}, {"cpu": 3000}, 1 - (1.0 - 0.25) / 2),  # 100% and 25%
        ({"cpu": 4000, "memory": 4 * GI}, {"cpu": 9000}, 1 - (1.0 - 0.25) / 2),  # cpu capped at 100%
        ({"cpu": 4000}, {"cpu": 3000}, 1.0),  # no memory: left out, nothing to be unbalanced with
    ],
)
def test_balanced_allocation(allocatable: dict[str, int], used: dict[str, int], expected: float) -> None:
    cols = columns(record("n", allocatable, used))
    request = Resources({"cpu": 1000, "memory": GI})
    assert balanced_allocation(cols, request)[0] == pytest.approx(expected)


def test_balanced_allocation_over_three_resources_uses_the_population_std() -> None:
    cols = columns(record("n", {"cpu": 1000, "memory": 1000, "nvidia.com/gpu": 4}, {"cpu": 1000, "nvidia.com/gpu": 2}))
    fractions = np.array([1.0, 0.0, 0.5])
    expected = 1 - float(np.std(fractions))
    assert balanced_allocation(cols, {}, ("cpu", "memory", "nvidia.com/gpu"))[0] == pytest.approx(expected)


# -- preferred affinity and label bonus ---------------------------------------------------

LABELLED = columns(
    record("a-gpu", {"cpu": 1}, labels={"zone": "a", "gpu": "h100"}),
    record("a", {"cpu": 1}, labels={"zone": "a"}),
    record("b-gpu", {"cpu": 1}, labels={"zone": "b", "gpu": "a100", "node.volcano.sh/warmup": "true"}),
    record("bare", {"cpu": 1}, labels={"node.volcano.sh/warmup": "false"}),
)


@pytest.mark.parametrize(
    ("preferred", "expected"),
    [
        ([], [0, 0, 0, 0]),
        (
            [(3, {"matchExpressions": [expr("zone", "In", "a")]}), (1, {"matchExpressions": [expr("gpu", "Exists")]})],
            [1.0, 0.75, 0.25, 0.0],
        ),
        ([(1, {"matchExpressions": [expr("zone", "In", "a")]}), (1, {})], [0.5, 0.5, 0.0, 0.0]),  # empty term: no match
        ([(2, {"matchFields": [expr("metadata.name", "In", "bare")]})], [0.0, 0.0, 0.0, 1.0]),
        (
            [
                (0, {"matchExpressions": [expr("zone", "Exists")]}),
                (4, {"matchExpressions": [expr("gpu", "In", "a100")]}),
            ],
            [0.0, 0.0, 1.0, 0.0],
        ),  # weight 0 ignored
    ],
)
def test_preferred_affinity_is_the_matched_share_of_the_weight(
    preferred: list[tuple[int, dict[str, Any]]], expected: list[float]
) -> None:
    assert list(preferred_affinity(LABELLED, terms(*preferred))) == pytest.approx(expected)


def test_label_bonus_marks_nodes_with_the_label_value() -> None:
    assert list(label_bonus(LABELLED, "node.volcano.sh/warmup", "true")) == [0.0, 0.0, 1.0, 0.0]
    assert list(label_bonus(LABELLED, "node.volcano.sh/warmup", "maybe")) == [0.0] * 4
    assert list(label_bonus(LABELLED, "absent", "true")) == [0.0] * 4


def test_scores_work_on_builder_nodes_and_an_empty_cluster() -> None:
    n = node("g", cpu="8", gpu=8)
    cols = NodeTable(
        [
            NodeRecord(
                name="g",
                allocatable=node_allocatable(n),
                allocated=Resources(),
                version=1,
                owner="",
                unschedulable=False,
                node=n,
            )
        ]
    )
    assert most_allocated(cols, {"nvidia.com/gpu": 4}, {"nvidia.com/gpu": 1.0})[0] == 0.5
    empty = NodeTable()
    for score in (
        most_allocated(empty, SMALL, CPU_MEM),
        least_allocated(empty, SMALL, CPU_MEM),
        balanced_allocation(empty, SMALL),
        preferred_affinity(empty, terms()),
        label_bonus(empty, "k", "v"),
    ):
        assert score.shape == (0,)


# -- property: every score in [0, 1] ------------------------------------------------------

RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "example.com/fpga")
amounts = st.integers(min_value=0, max_value=2**40)
node_figures = st.tuples(
    st.dictionaries(st.sampled_from(RESOURCES), st.one_of(st.just(0), st.integers(1, 2**40))),
    st.dictionaries(st.sampled_from(RESOURCES), amounts),
    st.sampled_from(["a", "b", "c"]),
)
weights_st = st.dictionaries(
    st.sampled_from(RESOURCES + ("pods",)),
    st.one_of(st.just(0.0), st.floats(1e-6, 1e6), st.integers(1, 100).map(float)),
)
preferred_st = st.lists(st.tuples(st.integers(1, 100), st.sampled_from(["a", "b", "z"])), max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(node_figures, max_size=12), st.dictionaries(st.sampled_from(RESOURCES), amounts), weights_st, preferred_st
)
def test_every_score_stays_in_the_unit_interval(
    figures: list[tuple[dict[str, int], dict[str, int], str]],
    request: dict[str, int],
    weights: dict[str, float],
    preferred: list[tuple[int, str]],
) -> None:
    cols = columns(*(record(f"n{i}", alloc, used, {"zone": zone}) for i, (alloc, used, zone) in enumerate(figures)))
    pref = terms(*((w, {"matchExpressions": [expr("zone", "In", zone)]}) for w, zone in preferred))
    for score in (
        most_allocated(cols, request, weights),
        least_allocated(cols, request, weights),
        balanced_allocation(cols, request),
        balanced_allocation(cols, request, RESOURCES),
        preferred_affinity(cols, pref),
        label_bonus(cols, "zone", "a"),
    ):
        assert score.shape == (len(figures),) and score.dtype == np.float64
        assert np.all((score >= 0.0) & (score <= 1.0)), score


# -- kube-scheduler's integer scores (Volcano's nodeorder) --------------------------------


def test_kube_requested_scores_use_go_integer_arithmetic() -> None:
    cols = columns(record("n", {"cpu": 3000, "memory": 3 * GI}, {"cpu": 1000}))
    request = Resources({"cpu": 1000, "memory": GI})
    # free after placing: cpu 1000/3000 → 33, memory 2Gi/3Gi → 66; (33·50 + 66·50) // 100 = 49
    assert requested_score(cols, request, {"cpu": 50, "memory": 50}, most=False)[0] == 49
    # used: cpu 66, memory 33; (66 + 33) // 2 = 49
    assert requested_score(cols, request, {"cpu": 1, "memory": 1}, most=True)[0] == 49


def test_kube_balanced_score_leaves_out_gpus_the_pod_does_not_ask_for() -> None:
    cols = columns(record("g", {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 8}))
    assert balanced_resource_score(cols, Resources({"cpu": 4000, "memory": 8 * GI}))[0] == 87  # |1/2 − 1/4| / 2
    assert balanced_resource_score(cols, Resources({})).tolist() == [0.0]  # best effort


def test_kube_normalize_scales_to_the_largest_count() -> None:
    assert default_normalize(np.array([0.0, 1.0, 3.0]), reverse=True).tolist() == [100, 67, 0]
    assert default_normalize(np.array([0.0, 0.0]), reverse=True).tolist() == [100, 100]
    assert default_normalize(np.array([2.0, 3.0]), reverse=False).tolist() == [66, 100]


@settings(max_examples=200, deadline=None)
@given(st.lists(node_figures, max_size=12), st.dictionaries(st.sampled_from(RESOURCES), amounts))
def test_kube_scores_are_integers_in_0_to_100(
    figures: list[tuple[dict[str, int], dict[str, int], str]], request: dict[str, int]
) -> None:
    cols = columns(*(record(f"n{i}", alloc, used, {"zone": zone}) for i, (alloc, used, zone) in enumerate(figures)))
    for score in (
        requested_score(cols, request, {"cpu": 50, "memory": 50}, most=False),
        requested_score(cols, request, {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}, most=True),
        balanced_resource_score(cols, request),
    ):
        assert score.shape == (len(figures),) and score.dtype == np.float64
        assert np.all((score >= 0) & (score <= 100) & (score == np.floor(score))), score
