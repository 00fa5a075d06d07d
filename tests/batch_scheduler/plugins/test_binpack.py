"""The binpack plugin through a real Session (caldera's own cases; Volcano's are in tests/volcano)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from batch_scheduler.plugins.binpack import BinpackPlugin
from batch_scheduler.session import Session
from cluster.model.core import Node
from cluster.store.records import PodRecord
from tests.batch_scheduler.inputs import conf, session, task
from tests.batch_scheduler.plugins.common import GI, plugin, scores
from tests.builders import node

# -- binpack ------------------------------------------------------------------------------

GPU_NODES = [node("gpu-busy", gpu=8), node("gpu-idle", gpu=8)]
GPU_USED = {"gpu-busy": {"nvidia.com/gpu": 7}}
GPU_ARGS = {"binpack.weight": 10, "binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 5}


def binpack_session(
    arguments: Mapping[str, Any],
    nodes: list[Node],
    pods: list[PodRecord],
    used: Mapping[str, Mapping[str, int]] | None = None,
) -> Session:
    return session(conf([{"name": "binpack", "arguments": dict(arguments)}]), nodes, pods, used=used)


def test_binpack_counts_only_requested_resources_with_a_weight() -> None:
    ssn = binpack_session(GPU_ARGS, GPU_NODES, [task("cpu-only"), task("gpu", gpu=1)], GPU_USED)
    cpu_only = scores(ssn, BinpackPlugin, "cpu-only")
    assert cpu_only[0] == pytest.approx(cpu_only[1])  # the GPUs in use do not matter to a CPU task
    gpu = scores(ssn, BinpackPlugin, "gpu")
    assert gpu[0] > gpu[1]  # fill the busy GPU node first


@pytest.mark.parametrize(
    ("arguments", "better"),
    [
        ({}, "cpu-heavy"),  # cpu 6/8 + memory 1/32 beats cpu 1/8 + memory 16/32 with equal weights
        ({"binpack.cpu": 0}, "memory-heavy"),  # cpu weight 0: only memory counts
        ({"binpack.memory": 0}, "cpu-heavy"),
    ],
)
def test_binpack_resource_weights(arguments: dict[str, Any], better: str) -> None:
    nodes = [node("cpu-heavy"), node("memory-heavy")]
    used = {"cpu-heavy": {"cpu": 5000}, "memory-heavy": {"memory": 15 * GI}}
    ssn = binpack_session(arguments, nodes, [task("p")], used)
    s = scores(ssn, BinpackPlugin)
    assert ssn.columns.names[int(np.argmax(s))] == better


@pytest.mark.parametrize("weight", [1, 3, 10])
def test_binpack_score_between_zero_and_100_times_the_weight(weight: int) -> None:
    nodes = [node("empty", gpu=8), node("mid", gpu=8), node("will-be-full", gpu=8)]
    used = {
        "mid": {"cpu": 3000, "memory": 9 * GI, "nvidia.com/gpu": 2},
        "will-be-full": {"cpu": 7000, "memory": 31 * GI, "nvidia.com/gpu": 7},
    }
    args = {**GPU_ARGS, "binpack.weight": weight}
    ssn = binpack_session(args, nodes, [task("p", cpu="1", memory="1Gi", gpu=1)], used)
    s = scores(ssn, BinpackPlugin)
    assert all(0.0 <= x <= 100 * weight for x in s)
    assert s[2] == pytest.approx(100 * weight)  # full after placing, in every weighted resource
    assert s[0] < s[1] < s[2]
    # empty: (cpu 1/8 + memory 1/32 + 5 × gpu 1/8) ÷ 7, as Volcano's BinPackingScore
    assert s[0] == pytest.approx(100 * weight * (1 / 8 + 1 / 32 + 5 / 8) / 7)


def test_binpack_a_node_the_task_does_not_fit_scores_zero() -> None:
    # Volcano's ResourceBinPackingScore fails on a requested, weighted resource the node has too
    # little of; a weighted resource the node has none of adds 0 but keeps its weight.
    nodes = [node("tight", cpu=2), node("no-gpu", cpu=8)]
    ssn = binpack_session(GPU_ARGS, nodes, [task("p", cpu="1", memory="1Gi", gpu=1)], {"tight": {"cpu": 1500}})
    assert scores(ssn, BinpackPlugin)[0] == 0.0
    assert scores(ssn, BinpackPlugin)[1] == pytest.approx(10 * 100 * (1 / 8 + 1 / 32) / 7)


@pytest.mark.parametrize(
    ("arguments", "weight", "cpu"),
    [
        ({"binpack.weight": "0.5"}, 1, 1),  # not an integer: Volcano's GetInt keeps the default
        ({"binpack.weight": "3", "binpack.cpu": "-2"}, 3, 1),  # a negative resource weight is 1
    ],
)
def test_binpack_arguments_as_volcano_reads_them(arguments: dict[str, Any], weight: int, cpu: int) -> None:
    ssn = binpack_session(arguments, [node("a")], [task("p")])
    binpack = plugin(ssn, BinpackPlugin)
    assert (binpack.args.weight, binpack.args.resource_weights["cpu"]) == (weight, cpu)


def test_binpack_weight_zero_or_nothing_weighted_scores_zero() -> None:
    ssn = binpack_session({"binpack.weight": 0}, [node("a")], [task("p")], {"a": {"cpu": 4000}})
    assert scores(ssn, BinpackPlugin) == [0.0]
    ssn = binpack_session({"binpack.cpu": 0, "binpack.memory": 0}, [node("a")], [task("p")], {"a": {"cpu": 4000}})
    assert scores(ssn, BinpackPlugin) == [0.0]
