"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/binpack/binpack_test.go``.

``TestArguments``: the weights the plugin reads from its arguments. ``TestNode``: the
binpack score of every task of the job on every node, through a real session, to Volcano's
numbers (within its ``eps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from batch_scheduler.plugins.binpack import BinpackPlugin
from tests.batch_scheduler.inputs import parse
from tests.volcano.builders import (
    PENDING,
    build_node,
    build_pod,
    build_pod_group,
    build_queue,
    scalar,
)
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, conf_text, open_session

EPS = 1e-8
GPU, FOO = "nvidia.com/gpu", "example.com/foo"
PODS10 = scalar("pods", "10")


def test_arguments() -> None:
    """binpack_test.go TestArguments."""
    arguments = {
        "binpack.weight": 10,
        "binpack.cpu": 5,
        "binpack.memory": 2,
        "binpack.resources": "nvidia.com/gpu, example.com/foo",
        "binpack.resources.nvidia.com/gpu": 7,
        "binpack.resources.example.com/foo": -3,
    }
    conf = parse(conf_text([[Plugin("binpack", ("enableNodeOrder",), arguments)]], ["allocate"]))
    [binpack] = [p for tier in conf.build().tiers for p in tier]
    assert isinstance(binpack, BinpackPlugin)
    assert binpack.args.weight == 10
    assert binpack.args.resource_weights == {"cpu": 5, "memory": 2, GPU: 7, FOO: 1}  # a negative weight is 1


def _case() -> Case:
    p1 = build_pod("c1", "p1", "n1", PENDING, rl("1", "1Gi"), "pg1")
    p2 = build_pod("c1", "p2", "n3", PENDING, rl("1.5", "0Gi"), "pg1")
    p3 = build_pod("c1", "p3", "", PENDING, rl("2", "10Gi", (GPU, "2")), "pg1")
    p4 = build_pod("c1", "p4", "", PENDING, rl("3", "4Gi", (FOO, "3")), "pg1")
    return Case(
        name="single job",
        podgroups=[build_pod_group("pg1", "c1", "c1", 0, None, "")],
        queues=[build_queue("c1", 1, None)],
        pods=[p1, p2, p3, p4],
        nodes=[
            build_node("n1", rl("2", "4Gi", PODS10)),
            build_node("n2", rl("4", "16Gi", PODS10, (GPU, "4"))),
            build_node("n3", rl("2", "4Gi", PODS10, (FOO, "16"))),
        ],
    )


NODE_CASES: list[tuple[str, Mapping[str, Any], dict[str, dict[str, float]]]] = [
    (
        "single job",
        {
            "binpack.weight": 10,
            "binpack.cpu": 2,
            "binpack.memory": 3,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": 8,
        },
        {
            "c1/p1": {"n1": 700, "n2": 137.5, "n3": 0},  # n3 has used 1.5c by pod p2, idle cpu not enough for p1
            "c1/p2": {"n1": 0, "n2": 375, "n3": 0},
            "c1/p3": {"n1": 0, "n2": 531.25, "n3": 0},
            "c1/p4": {"n1": 0, "n2": 173.076923076, "n3": 0},  # required 3c, but node only has 2c
        },
    ),
    (
        "single job (second arguments)",
        {
            "binpack.weight": 1,
            "binpack.cpu": 1,
            "binpack.memory": 1,
            "binpack.resources": "nvidia.com/gpu",
            "binpack.resources.nvidia.com/gpu": 23,
        },
        {
            "c1/p1": {"n1": 75, "n2": 15.625, "n3": 0},
            "c1/p2": {"n1": 0, "n2": 37.5, "n3": 0},
            "c1/p3": {"n1": 0, "n2": 50.5, "n3": 0},
            "c1/p4": {"n1": 0, "n2": 50, "n3": 0},
        },
    ),
]


@pytest.mark.parametrize(("name", "arguments", "expected"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_node(name: str, arguments: Mapping[str, Any], expected: dict[str, dict[str, float]]) -> None:
    """binpack_test.go TestNode (both cases are named "single job" there)."""
    ssn = open_session(_case(), [[Plugin("binpack", ("enableNodeOrder",), arguments)]], ["allocate"])
    got: dict[str, dict[str, float]] = {}
    for task in ssn.jobs["c1/pg1"].tasks.values():
        scores = ssn.tiers.scores(ssn, task)
        got[f"{task.namespace}/{task.name}"] = {ssn.columns.names[i]: float(s) for i, s in enumerate(scores)}
    assert got.keys() == expected.keys()
    for key, per_node in expected.items():
        assert got[key] == pytest.approx(per_node, abs=EPS), key
